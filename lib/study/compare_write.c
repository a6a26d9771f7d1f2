/* compare_write.c: amp-compare's three outputs of a comparison (text
 * tables, JSON, TSV; formats/compare.md). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/yio.h"
#include "study/compare.h"

/* A figure known to be a valid integer (cap_load checked it). */
static int64_t fig(const Val *m, const char *key)
{
	const Val *v = map_get(m, key);
	return v ? strtoll(v->s, NULL, 10) : 0;
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

#define COLS 12
typedef struct {
	char *(*cell)[COLS];
	int n;
} Table;

static void row(Table *t, const char *fmt, ...)
{
	/* fmt: the cells joined by '\t' */
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *line = xmalloc((size_t)len + 1);
	va_start(ap, fmt);
	vsnprintf(line, (size_t)len + 1, fmt, ap);
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
	free(line);
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

static void write_text(Output *o, const Compare *m)
{
	const Cap *a = m->side[0], *b = m->side[1];
	const char *na = m->name[0], *nb = m->name[1];
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
	for (int i = 0; i < m->nops; i++) {
		const Val *va = m->ops[i].v[0], *vb = m->ops[i].v[1];
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
		row(&t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", m->ops[i].op, f[0], f[1], f[2], f[3], f[4], f[5], d, pc);
	}
	table_print(o, &t);
	put(o, "\n");
	/* phases lined up by label; transfers and cycles over every run, so
	 * each column adds up to its summary's figure */
	row(&t, "group\tstatus\t%s\t%s labels\ttransfers\tmax_row\tcycles\t%s\t%s labels\ttransfers\tmax_row\tcycles", na,
	    na, nb, nb);
	for (int i = 0; i < m->nph; i++) {
		const PhaseLine *l = &m->ph[i];
		char *cell[2];
		for (int s = 0; s < 2; s++) {
			int p = (s ? l->b : l->a);
			if (p < 0) {
				cell[s] = xstrdup("-\t-\t-\t-\t-");
				continue;
			}
			int64_t f[PF_N];
			char *lab = labels(&m->side[s]->phases->items[p]);
			cmp_phase_figs(m->side[s], p, f);
			size_t n = strlen(lab) + 100;
			cell[s] = xmalloc(n);
			snprintf(cell[s], n, "%d\t%s\t%lld\t%lld\t%lld", p, lab, (long long)f[PF_TRANSFERS],
				 (long long)f[PF_MAX_ROW], (long long)f[PF_CYCLES]);
			free(lab);
		}
		row(&t, "%d\t%s\t%s\t%s", l->group, line_kind_name(l->kind), cell[0], cell[1]);
		free(cell[0]), free(cell[1]);
	}
	row(&t, "total\t\t\t\t%lld\t%lld\t%lld\t\t\t%lld\t%lld\t%lld", (long long)fig(a->summary, "transfers"),
	    (long long)fig(a->summary, "max_row_bytes"), (long long)fig(a->summary, "exchange_cycles"),
	    (long long)fig(b->summary, "transfers"), (long long)fig(b->summary, "max_row_bytes"),
	    (long long)fig(b->summary, "exchange_cycles"));
	table_print(o, &t);
	put(o, "\n");
	if (!m->classes) {
		put(o, "classes: not compared (%s has no phase_traffic)\n", a->traffic ? b->r.name : a->r.name);
	} else {
		int64_t tot[2][CLS_FIGS] = { { 0 } };
		row(&t, "class\tmovement\t%s sends\t%s sends\t%s bytes\t%s bytes\t%s received\t%s received\tdelta\tchange",
		    na, nb, na, nb, na, nb);
		for (int i = 0; i < m->ncl; i++) {
			const ClassRow *r = &m->cl[i];
			char f[2][CLS_FIGS][32];
			for (int s = 0; s < 2; s++)
				for (int k = 0; k < CLS_FIGS; k++) {
					snprintf(f[s][k], 32, r->in[s] ? "%lld" : "-", (long long)r->v[s][k]);
					tot[s][k] += r->v[s][k];
				}
			if (r->in[0] && r->in[1])
				change(r->v[0][CLS_RECEIVED], r->v[1][CLS_RECEIVED], d, sizeof d, pc, sizeof pc);
			else
				snprintf(d, sizeof d, "-"), snprintf(pc, sizeof pc, "-");
			row(&t, "%s.%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", r->op, r->operand, r->movement, f[0][0], f[1][0],
			    f[0][1], f[1][1], f[0][2], f[1][2], d, pc);
		}
		change(tot[0][CLS_RECEIVED], tot[1][CLS_RECEIVED], d, sizeof d, pc, sizeof pc);
		row(&t, "total\t\t%lld\t%lld\t%lld\t%lld\t%lld\t%lld\t%s\t%s", (long long)tot[0][0], (long long)tot[1][0],
		    (long long)tot[0][1], (long long)tot[1][1], (long long)tot[0][2], (long long)tot[1][2], d, pc);
		table_print(o, &t);
	}
	if (!m->tiles[0])
		return;
	put(o, "\ntiles: %s %s, %s %s\n", na, m->tiles[0]->file, nb, m->tiles[1]->file);
	row(&t, "tile figure\t%s max\ton tile\t%s max\ton tile\t%s median\t%s median\tlargest increase\ton tile", na, nb,
	    na, nb);
	for (int k = 0; k < TF_FIGS; k++) {
		TileStat st;
		tiles_stat(m->tiles[0], m->tiles[1], k, &st);
		row(&t, "%s\t%lld\t%d\t%lld\t%d\t%lld\t%lld\t%+lld\t%d", tile_fig_name[k], (long long)st.max[0],
		    st.max_tile[0], (long long)st.max[1], st.max_tile[1], (long long)st.median[0],
		    (long long)st.median[1], (long long)st.inc, st.inc_tile);
	}
	table_print(o, &t);
}

/* ---- JSON ---- */

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

/* A phase as the capture has it (figures per run, with its count). */
static void json_phase(Json *j, const char *key, const Cap *c, int i)
{
	if (i < 0)
		return;
	const Val *p = &c->phases->items[i];
	char *l = labels(p);
	json_key(j, key);
	json_open(j, '{', 1);
	json_kint(j, "id", i);
	json_kstr(j, "labels", l);
	static const char *keys[] = { "count", "transfers", "bytes", "max_row_bytes", "max_fragments", "cycles" };
	for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
		json_kint(j, keys[k], fig(p, keys[k]));
	json_close(j, '}');
	free(l);
}

static void json_classes(Json *j, const Compare *m)
{
	if (!m->classes)
		return;
	json_key(j, "classes");
	json_open(j, '[', 0);
	for (int i = 0; i < m->ncl; i++) {
		const ClassRow *r = &m->cl[i];
		json_open(j, '{', 1);
		json_kstr(j, "op", r->op);
		json_kstr(j, "operand", r->operand);
		json_kstr(j, "movement", r->movement);
		json_kstr(j, "status", cmp_status(r->in));
		for (int s = 0; s < 2; s++) {
			if (!r->in[s])
				continue;
			json_key(j, s ? "b" : "a");
			json_open(j, '{', 1);
			for (int k = 0; k < CLS_FIGS; k++)
				json_kint(j, cls_fig_name[k], r->v[s][k]);
			json_close(j, '}');
		}
		if (r->in[0] && r->in[1]) {
			json_key(j, "delta");
			json_open(j, '{', 1);
			for (int k = 0; k < CLS_FIGS; k++)
				json_kint(j, cls_fig_name[k], r->v[1][k] - r->v[0][k]);
			json_close(j, '}');
		}
		json_close(j, '}');
	}
	json_close(j, ']');
}

static void json_tiles(Json *j, const Compare *m)
{
	const TileFigs *ta = m->tiles[0], *tb = m->tiles[1];
	if (!ta)
		return;
	json_key(j, "tiles");
	json_open(j, '{', 0);
	for (int s = 0; s < 2; s++) {
		json_key(j, s ? "b" : "a");
		json_open(j, '{', 1);
		json_kstr(j, "file", m->tiles[s]->file);
		json_kint(j, "tiles", m->tiles[s]->ntiles);
		json_close(j, '}');
	}
	json_key(j, "figures");
	json_open(j, '[', 0);
	for (int k = 0; k < TF_FIGS; k++) {
		TileStat st;
		tiles_stat(ta, tb, k, &st);
		json_open(j, '{', 1);
		json_kstr(j, "figure", tile_fig_name[k]);
		for (int s = 0; s < 2; s++) {
			json_key(j, s ? "b" : "a");
			json_open(j, '{', 1);
			json_kint(j, "max", st.max[s]);
			json_kint(j, "max_tile", st.max_tile[s]);
			json_kint(j, "median", st.median[s]);
			json_close(j, '}');
		}
		json_key(j, "largest_increase");
		json_open(j, '{', 1);
		json_kint(j, "tile", st.inc_tile);
		json_kint(j, "a", tile_fig(ta, st.inc_tile, k));
		json_kint(j, "b", tile_fig(tb, st.inc_tile, k));
		json_kint(j, "delta", st.inc);
		json_close(j, '}');
		json_close(j, '}');
	}
	json_close(j, ']');
	/* every tile of the larger machine, B - A */
	json_key(j, "deltas");
	json_open(j, '[', 0);
	int n = ta->ntiles > tb->ntiles ? ta->ntiles : tb->ntiles;
	for (int t = 0; t < n; t++) {
		json_open(j, '{', 1);
		json_kint(j, "tile", t);
		for (int k = 0; k < TF_FIGS; k++)
			json_kint(j, tile_fig_name[k], tile_fig(tb, t, k) - tile_fig(ta, t, k));
		json_close(j, '}');
	}
	json_close(j, ']');
	json_close(j, '}');
}

static int write_json(Output *o, const Compare *m, Err *e)
{
	const Cap *a = m->side[0], *b = m->side[1];
	Json j;
	json_init(&j, o);
	json_open(&j, '{', 0);
	json_kstr(&j, "format", "amp-compare");
	json_kint(&j, "version", COMPARE_VERSION);
	json_side(&j, "a", a, m->name[0]);
	json_side(&j, "b", b, m->name[1]);
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
	for (int i = 0; i < m->nops; i++) {
		const Val *va = m->ops[i].v[0], *vb = m->ops[i].v[1];
		json_open(&j, '{', 1);
		json_kstr(&j, "op", m->ops[i].op);
		json_op(&j, "a", va);
		json_op(&j, "b", vb);
		if (va && vb)
			json_kint(&j, "delta_total_cycles", fig(vb, "total_cycles") - fig(va, "total_cycles"));
		json_close(&j, '}');
	}
	json_close(&j, ']');
	json_key(&j, "phases");
	json_open(&j, '[', 0);
	for (int i = 0; i < m->nph; i++) {
		const PhaseLine *l = &m->ph[i];
		json_open(&j, '{', 1);
		json_kint(&j, "group", l->group);
		json_kstr(&j, "status", line_kind_name(l->kind));
		json_phase(&j, "a", a, l->a);
		json_phase(&j, "b", b, l->b);
		json_close(&j, '}');
	}
	json_close(&j, ']');
	json_classes(&j, m);
	json_tiles(&j, m);
	json_close(&j, '}');
	return json_end(&j, e);
}

/* ---- TSV: a line per compared figure ---- */

/* s as one TSV field: a backslash, tab, newline or carriage return
 * written as \\, \t, \n, \r (formats/compare.md), so a name cannot
 * split a line or a column. Returns a string to free. */
static char *tsv_field(const char *s)
{
	size_t n = 0;
	for (const char *c = s; *c; c++)
		n += strchr("\\\t\n\r", *c) ? 2 : 1;
	char *r = xmalloc(n + 1), *w = r;
	for (const char *c = s; *c; c++) {
		const char *esc = *c == '\\' ? "\\\\" : *c == '\t' ? "\\t" : *c == '\n' ? "\\n" : *c == '\r' ? "\\r" : NULL;
		if (esc)
			*w++ = esc[0], *w++ = esc[1];
		else
			*w++ = *c;
	}
	*w = 0;
	return r;
}

/* One line; a or b NULL is '-', and so is the delta unless both are
 * numbers and delta is set. */
static void tsv(Output *o, const char *section, const char *key, const char *status, const char *figure,
		const int64_t *a, const int64_t *b, int delta)
{
	char x[32] = "-", y[32] = "-", d[32] = "-";
	if (a)
		snprintf(x, sizeof x, "%lld", (long long)*a);
	if (b)
		snprintf(y, sizeof y, "%lld", (long long)*b);
	if (a && b && delta)
		snprintf(d, sizeof d, "%lld", (long long)(*b - *a));
	char *k = tsv_field(key);
	put(o, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", section, k, status, figure, x, y, d);
	free(k);
}

static void write_tsv(Output *o, const Compare *m)
{
	const Cap *a = m->side[0], *b = m->side[1];
	char key[64];
	put(o, "# amp-compare %d\nsection\tkey\tstatus\tfigure\ta\tb\tdelta\n", COMPARE_VERSION);
	for (int i = 0; i < a->nfigs; i++) {
		const CapFig *fb = cap_fig(b, a->figs[i].key);
		if (fb)
			tsv(o, "summary", "-", "both", a->figs[i].key, &a->figs[i].v, &fb->v, !is_id(a->figs[i].key));
	}
	static const char *opk[] = { "compute_cycles", "exchange_cycles", "sync_cycles", "local_copy_cycles",
				     "total_cycles" };
	for (int i = 0; i < m->nops; i++) {
		const Val *va = m->ops[i].v[0], *vb = m->ops[i].v[1];
		for (size_t k = 0; k < sizeof opk / sizeof *opk; k++) {
			int64_t u = va ? fig(va, opk[k]) : 0, v = vb ? fig(vb, opk[k]) : 0;
			tsv(o, "op", m->ops[i].op, cmp_status((int[2]){ m->ops[i].v[0] != NULL, m->ops[i].v[1] != NULL }), opk[k], va ? &u : NULL, vb ? &v : NULL, 1);
		}
	}
	for (int i = 0; i < m->nph; i++) {
		const PhaseLine *l = &m->ph[i];
		int64_t f[2][PF_N], g = l->group;
		char *lab[2];
		const char *st = line_kind_name(l->kind);
		snprintf(key, sizeof key, l->a < 0 ? "-:" : "%d:", l->a);
		snprintf(key + strlen(key), sizeof key - strlen(key), l->b < 0 ? "-" : "%d", l->b);
		for (int s = 0; s < 2; s++) {
			int p = (s ? l->b : l->a);
			lab[s] = p < 0 ? xstrdup("-") : labels(&m->side[s]->phases->items[p]);
			if (p >= 0)
				cmp_phase_figs(m->side[s], p, f[s]);
		}
		tsv(o, "phase", key, st, "group", &g, &g, 0);
		char *la = tsv_field(lab[0]), *lb = tsv_field(lab[1]);
		put(o, "phase\t%s\t%s\tlabels\t%s\t%s\t-\n", key, st, la, lb);
		free(la), free(lb);
		for (int k = 0; k < PF_N; k++)
			tsv(o, "phase", key, st, cmp_phase_fig_name[k], l->a >= 0 ? &f[0][k] : NULL, l->b >= 0 ? &f[1][k] : NULL, 1);
		free(lab[0]), free(lab[1]);
	}
	static const char *tot[][2] = { { "transfers", "transfers" }, { "bytes", "bytes" },
					{ "max_row_bytes", "max_row_bytes" }, { "exchange_cycles", "cycles" } };
	for (size_t k = 0; k < sizeof tot / sizeof *tot; k++) {
		int64_t u = fig(a->summary, tot[k][0]), v = fig(b->summary, tot[k][0]);
		tsv(o, "phase", "total", "both", tot[k][1], &u, &v, 1);
	}
	for (int i = 0; m->classes && i < m->ncl; i++) {
		const ClassRow *r = &m->cl[i];
		char *ck = xmalloc(strlen(r->op) + strlen(r->operand) + strlen(r->movement) + 3);
		sprintf(ck, "%s.%s:%s", r->op, r->operand, r->movement);
		for (int k = 0; k < CLS_FIGS; k++)
			tsv(o, "class", ck, cmp_status(r->in), cls_fig_name[k], r->in[0] ? &r->v[0][k] : NULL,
			    r->in[1] ? &r->v[1][k] : NULL, 1);
		free(ck);
	}
	const TileFigs *ta = m->tiles[0], *tb = m->tiles[1];
	if (!ta)
		return;
	for (int k = 0; k < TF_FIGS; k++) {
		TileStat st;
		tiles_stat(ta, tb, k, &st);
		const char *n = tile_fig_name[k];
		int64_t mt[2] = { st.max_tile[0], st.max_tile[1] }, it = st.inc_tile;
		int64_t ia = tile_fig(ta, st.inc_tile, k), ib = tile_fig(tb, st.inc_tile, k);
		tsv(o, "tiles", n, "both", "max", &st.max[0], &st.max[1], 1);
		tsv(o, "tiles", n, "both", "max_tile", &mt[0], &mt[1], 0);
		tsv(o, "tiles", n, "both", "median", &st.median[0], &st.median[1], 1);
		tsv(o, "tiles", n, "both", "largest_increase", &ia, &ib, 1);
		tsv(o, "tiles", n, "both", "largest_increase_tile", &it, &it, 0);
	}
	int n = ta->ntiles > tb->ntiles ? ta->ntiles : tb->ntiles;
	for (int t = 0; t < n; t++) {
		int differs = 0;
		for (int k = 0; k < TF_FIGS; k++)
			differs |= tile_fig(ta, t, k) != tile_fig(tb, t, k);
		if (!differs)
			continue;
		snprintf(key, sizeof key, "%d", t);
		for (int k = 0; k < TF_FIGS; k++) {
			int64_t u = tile_fig(ta, t, k), v = tile_fig(tb, t, k);
			tsv(o, "tile", key, "both", tile_fig_name[k], &u, &v, 1);
		}
	}
}

int compare_write(Output *o, const Compare *m, CompareOut form, Err *e)
{
	if (form == COMPARE_JSON)
		return write_json(o, m, e);
	write_failed = 0;
	if (form == COMPARE_TSV)
		write_tsv(o, m);
	else
		write_text(o, m);
	if (write_failed) {
		*e = write_err;
		return -1;
	}
	return 0;
}
