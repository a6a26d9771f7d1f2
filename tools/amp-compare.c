/* amp-compare: two captures -> their summaries, ops and phases side by
 * side, with deltas (formats/compare.md). */
#include <getopt.h>

#include "compare.h"
#include "json.h"
#include "tool.h"
#include "yio.h"

static void help(void)
{
	printf("Usage: amp-compare [OPTION]... A B\n"
	       "Compare two captures written by amp-capture (formats/capture.md), A the\n"
	       "baseline and B the variant: every summary figure with B - A and the\n"
	       "change in percent (the floor's figures among them; ratios are left out);\n"
	       "each op's compute, exchange and total cycles; and the phases side by\n"
	       "side, matched by index (labels, transfers, largest row and cycles over\n"
	       "every run), with a total row equal to each summary's.\n"
	       "Ops are matched by name, A's order first; an op on one side only shows\n"
	       "'-' on the other; a figure that names a tile, phase or step has no\n"
	       "delta. The output is text, or with --json one JSON document\n"
	       "(formats/compare.md).\n"
	       "\n"
	       "      --names A,B       names for the two columns (default: A,B)\n"
	       "      --json            write JSON instead of text\n"
	       "  -o, --output FILE     write to FILE, atomically (default: stdout)\n"
	       "      --help            print this help and exit\n"
	       "      --version         print the version and exit\n"
	       "\n"
	       "Exit status: 0 success, 1 bad input or a write error, 2 usage error.\n"
	       "Long options are whole words: an abbreviation is a usage error.\n");
	exit(EXIT_OK);
}

/* A figure known to be a valid integer (cap_load checked it). */
static int64_t fig(const Val *m, const char *key)
{
	const Val *v = map_get(m, key);
	return v ? strtoll(v->s, NULL, 10) : 0;
}

static const Val *op_named(const Cap *c, const char *name)
{
	for (int i = 0; i < c->ops->n; i++)
		if (!strcmp(map_get(&c->ops->items[i], "op")->s, name))
			return &c->ops->items[i];
	return NULL;
}

static char *labels(const Val *ph)
{
	const Val *l = map_get(ph, "labels");
	size_t n = 1;
	for (int k = 0; k < l->n; k++)
		n += strlen(l->items[k].s) + 1;
	char *s = xcalloc(n, 1);
	for (int k = 0; k < l->n; k++) {
		if (k)
			strcat(s, "+");
		strcat(s, l->items[k].s);
	}
	if (!l->n)
		strcpy(s, "-");
	return s;
}

/* ---- text: tables of cells, columns aligned, two spaces apart ---- */

static Err write_err;
static int write_failed;

/* Text into o; the first failure is kept in write_err. */
#define put(o, ...) (void)(write_failed || (write_failed = output_printf((o), &write_err, __VA_ARGS__) != 0))

#define COLS 10
typedef struct {
	char *(*cell)[COLS];
	int n;
} Table;

static void row(Table *t, const char *fmt, ...)
{
	/* fmt: the cells joined by '\t' */
	char line[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	t->cell = xrealloc(t->cell, (size_t)(t->n + 1) * sizeof *t->cell);
	char *p = line;
	for (int k = 0; k < COLS; k++) {
		char *tab = p ? strchr(p, '\t') : NULL;
		if (tab)
			*tab = 0;
		t->cell[t->n][k] = p ? xstrdup(p) : NULL;
		p = tab ? tab + 1 : NULL;
	}
	t->n++;
}

static void table_print(Output *o, Table *t)
{
	size_t w[COLS] = { 0 };
	for (int i = 0; i < t->n; i++)
		for (int k = 0; k < COLS && t->cell[i][k]; k++)
			w[k] = strlen(t->cell[i][k]) > w[k] ? strlen(t->cell[i][k]) : w[k];
	for (int i = 0; i < t->n; i++) {
		for (int k = 0; k < COLS && t->cell[i][k]; k++) {
			int last = k + 1 == COLS || !t->cell[i][k + 1];
			put(o, "%s%*s", t->cell[i][k], last ? 0 : (int)(w[k] - strlen(t->cell[i][k]) + 2), "");
			free(t->cell[i][k]);
		}
		put(o, "\n");
	}
	free(t->cell);
	t->cell = NULL, t->n = 0;
}

/* A summary key that names a tile, phase or step, not an amount: its
 * two values are shown, with no delta. */
static int is_id(const char *k)
{
	size_t n = strlen(k);
	return (n > 5 && !strcmp(k + n - 5, "_tile")) || (n > 6 && !strcmp(k + n - 6, "_phase")) ||
	       (n > 5 && !strcmp(k + n - 5, "_step"));
}

/* B - A as text, and the change in percent of A ("-" when A is 0). */
static void change(int64_t a, int64_t b, char *d, size_t nd, char *pc, size_t np)
{
	snprintf(d, nd, "%+lld", (long long)(b - a));
	if (a)
		snprintf(pc, np, "%+.1f%%", 100.0 * (double)(b - a) / (double)a);
	else
		snprintf(pc, np, "-");
}

static void write_text(Output *o, const Cap *a, const Cap *b, const char *na, const char *nb)
{
	Table t = { NULL, 0 };
	char d[32], pc[32];

	put(o, "%s: %s (model %s on %s)\n%s: %s (model %s on %s)\n\n", na, a->r.name, a->model,
		      a->machine, nb, b->r.name, b->model, b->machine);
	row(&t, "summary\t%s\t%s\tdelta\tchange", na, nb);
	for (int i = 0; i < a->nfigs; i++) {
		const char *k = a->figs[i].key;
		const CapFig *fb = cap_fig(b, k);
		if (!fb)
			continue;
		int64_t x = a->figs[i].v, y = fb->v;
		change(x, y, d, sizeof d, pc, sizeof pc);
		if (is_id(k))
			snprintf(d, sizeof d, "-"), snprintf(pc, sizeof pc, "-");
		row(&t, "%s\t%lld\t%lld\t%s\t%s", k, (long long)x, (long long)y, d, pc);
	}
	table_print(o, &t);
	put(o, "\n");
	row(&t, "op\t%s compute\t%s compute\t%s exchange\t%s exchange\t%s total\t%s total\tdelta\tchange", na, nb, na, nb,
	    na, nb);
	for (int side = 0; side < 2; side++) {
		const Cap *c = side ? b : a, *other = side ? a : b;
		for (int i = 0; i < c->ops->n; i++) {
			const Val *x = &c->ops->items[i];
			const char *name = map_get(x, "op")->s;
			const Val *y = op_named(other, name);
			if (side && y)
				continue;       /* printed with A's */
			const Val *va = side ? NULL : x, *vb = side ? x : y;
			char f[6][32];
			const char *keys[3] = { "compute_cycles", "exchange_cycles", "total_cycles" };
			for (int k = 0; k < 3; k++) {
				snprintf(f[2 * k], 32, va ? "%lld" : "-", va ? (long long)fig(va, keys[k]) : 0LL);
				snprintf(f[2 * k + 1], 32, vb ? "%lld" : "-", vb ? (long long)fig(vb, keys[k]) : 0LL);
			}
			if (va && vb)
				change(fig(va, "total_cycles"), fig(vb, "total_cycles"), d, sizeof d, pc, sizeof pc);
			else
				snprintf(d, sizeof d, "-"), snprintf(pc, sizeof pc, "-");
			row(&t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", name, f[0], f[1], f[2], f[3], f[4], f[5], d, pc);
		}
	}
	table_print(o, &t);
	put(o, "\n");
	/* phases by index; transfers and cycles over every run, so each
	 * column adds up to its summary's figure */
	row(&t, "phase\t%s labels\ttransfers\tmax_row\tcycles\t%s labels\ttransfers\tmax_row\tcycles", na, nb);
	int n = a->phases->n > b->phases->n ? a->phases->n : b->phases->n;
	for (int i = 0; i < n; i++) {
		char side[2][160];
		for (int s = 0; s < 2; s++) {
			const Cap *c = s ? b : a;
			if (i >= c->phases->n) {
				snprintf(side[s], sizeof side[s], "-\t-\t-\t-");
				continue;
			}
			const Val *p = &c->phases->items[i];
			char *l = labels(p);
			int64_t cnt = fig(p, "count");
			snprintf(side[s], sizeof side[s], "%.100s\t%lld\t%lld\t%lld", l, (long long)(fig(p, "transfers") * cnt),
				 (long long)fig(p, "max_row_bytes"), (long long)(fig(p, "cycles") * cnt));
			free(l);
		}
		row(&t, "%d\t%s\t%s", i, side[0], side[1]);
	}
	row(&t, "total\t\t%lld\t%lld\t%lld\t\t%lld\t%lld\t%lld", (long long)fig(a->summary, "transfers"),
	    (long long)fig(a->summary, "max_row_bytes"), (long long)fig(a->summary, "exchange_cycles"),
	    (long long)fig(b->summary, "transfers"), (long long)fig(b->summary, "max_row_bytes"),
	    (long long)fig(b->summary, "exchange_cycles"));
	table_print(o, &t);
}

static void json_side(Json *j, const char *key, const Cap *c, const char *name)
{
	json_key(j, key);
	json_open(j, '{', 1);
	json_kstr(j, "name", name);
	json_kstr(j, "file", c->r.name);
	json_kstr(j, "model", c->model);
	json_kstr(j, "machine", c->machine);
	json_close(j, '}');
}

static void json_op(Json *j, const char *key, const Val *v)
{
	static const char *keys[] = { "compute_cycles", "exchange_cycles", "sync_cycles", "local_copy_cycles",
				      "total_cycles" };
	if (!v)
		return;
	json_key(j, key);
	json_open(j, '{', 1);
	for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
		json_kint(j, keys[k], fig(v, keys[k]));
	json_close(j, '}');
}

static void json_phase(Json *j, const char *key, const Cap *c, int i)
{
	if (i >= c->phases->n)
		return;
	const Val *p = &c->phases->items[i];
	char *l = labels(p);
	json_key(j, key);
	json_open(j, '{', 1);
	json_kstr(j, "labels", l);
	static const char *keys[] = { "count", "transfers", "bytes", "max_row_bytes", "max_fragments", "cycles" };
	for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
		json_kint(j, keys[k], fig(p, keys[k]));
	json_close(j, '}');
	free(l);
}

static int write_json(Output *o, const Cap *a, const Cap *b, const char *na, const char *nb, Err *e)
{
	Json j;
	json_init(&j, o);
	json_open(&j, '{', 0);
	json_kstr(&j, "format", "amp-compare");
	json_kint(&j, "version", COMPARE_VERSION);
	json_side(&j, "a", a, na);
	json_side(&j, "b", b, nb);
	json_key(&j, "summary");
	json_open(&j, '[', 0);
	for (int i = 0; i < a->nfigs; i++) {
		const char *k = a->figs[i].key;
		const CapFig *fb = cap_fig(b, k);
		if (!fb)
			continue;
		int64_t x = a->figs[i].v, y = fb->v;
		json_open(&j, '{', 1);
		json_kstr(&j, "figure", k);
		json_kint(&j, "a", x);
		json_kint(&j, "b", y);
		if (!is_id(k))
			json_kint(&j, "delta", y - x);
		json_close(&j, '}');
	}
	json_close(&j, ']');
	json_key(&j, "ops");
	json_open(&j, '[', 0);
	for (int side = 0; side < 2; side++) {
		const Cap *c = side ? b : a, *other = side ? a : b;
		for (int i = 0; i < c->ops->n; i++) {
			const Val *x = &c->ops->items[i], *y = op_named(other, map_get(x, "op")->s);
			if (side && y)
				continue;
			const Val *va = side ? NULL : x, *vb = side ? x : y;
			json_open(&j, '{', 1);
			json_kstr(&j, "op", map_get(x, "op")->s);
			json_op(&j, "a", va);
			json_op(&j, "b", vb);
			if (va && vb)
				json_kint(&j, "delta_total_cycles", fig(vb, "total_cycles") - fig(va, "total_cycles"));
			json_close(&j, '}');
		}
	}
	json_close(&j, ']');
	json_key(&j, "phases");
	json_open(&j, '[', 0);
	int n = a->phases->n > b->phases->n ? a->phases->n : b->phases->n;
	for (int i = 0; i < n; i++) {
		json_open(&j, '{', 1);
		json_kint(&j, "id", i);
		json_phase(&j, "a", a, i);
		json_phase(&j, "b", b, i);
		json_close(&j, '}');
	}
	json_close(&j, ']');
	json_close(&j, '}');
	return json_end(&j, e);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "names", required_argument, NULL, 'N' },
		{ "json", no_argument, NULL, 'J' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0, 0, 0, 0 },
	};
	const char *out_path = NULL;
	char na[64] = "A", nb[64] = "B";
	int json = 0, c;
	Cap a, b;
	Err e;

	opterr = 0;
	tool_init("amp-compare");
	while ((c = tool_getopt(argc, argv, ":o:", opts)) != -1) {
		switch (c) {
		case 'N': {
			const char *comma = strchr(optarg, ',');
			if (!comma || comma == optarg || !comma[1] || strchr(comma + 1, ',') ||
			    (size_t)(comma - optarg) >= sizeof na || strlen(comma + 1) >= sizeof nb ||
			    strpbrk(optarg, " \t\n"))
				usage_error("--names takes two names without spaces, 'A,B', not '%s'", optarg);
			snprintf(na, sizeof na, "%.*s", (int)(comma - optarg), optarg);
			snprintf(nb, sizeof nb, "%s", comma + 1);
			break;
		}
		case 'J': json = 1; break;
		case 'o': out_path = optarg; break;
		case 'h': help(); break;
		case 'V': version(); break;
		default: bad_option(c, argv, optind, optopt);
		}
	}
	if (argc - optind != 2)
		usage_error("two captures to compare, A and B; found %d", argc - optind);
	if (!strcmp(argv[optind], "-") && !strcmp(argv[optind + 1], "-"))
		usage_error("only one of A and B can be standard input");
	if (cap_load(&a, argv[optind], &e) || cap_load(&b, argv[optind + 1], &e))
		fail(&e);
	Output *o = output_open(out_path, 0, &e);
	if (!o)
		fail(&e);
	if (json) {
		if (write_json(o, &a, &b, na, nb, &e)) {
			output_abort(o);
			fail(&e);
		}
	} else {
		write_text(o, &a, &b, na, nb);
		if (write_failed) {
			output_abort(o);
			fail(&write_err);
		}
	}
	if (output_commit(o, &e))
		fail(&e);
	cap_free(&a);
	cap_free(&b);
	return EXIT_OK;
}
