/* sweep.c: sweep specs, job directories, job runs and merges (lib/sweep.h,
 * formats/sweep.md). */
#include "sweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json.h"
#include "machine.h"
#include "model.h"
#include "num.h"

extern char **environ;

const char *const sweep_axis_names[AX_COUNT] = { "model", "batch", "layers", "machine", "pins", "plan_flags",
						 "group_flags", "limits" };
/* the spec's key for each axis */
static const char *const axis_keys[AX_COUNT] = { "models", "batch", "layers", "machines", "pins", "plan_flags",
						 "group_flags", "limits" };
static const char *const limit_opts[3] = { "--table-budget", "--fragment-limit", "--sram-limit" };
static const char *const limit_keys[3] = { "table_budget", "fragment_limit", "sram_limit" };
static const char *const limit_names[3] = { "tables", "fragments", "sram" };

/* ---- a growable string ---- */

typedef struct {
	char *s;
	size_t n, cap;
} Buf;

__attribute__((format(printf, 2, 3)))
static void bprintf(Buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (b->n + (size_t)k + 1 > b->cap) {
		b->cap = (b->n + (size_t)k + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)k;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = xmalloc((size_t)k + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)k + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* A label, file name part or path: letters, digits and . _ + - (and / in
 * paths), so it is safe in a file name, a make target and a shell word. */
static int safe(const char *s, int slash)
{
	if (!*s)
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '_' || *p == '+' || *p == '-' || (slash && *p == '/')))
			return 0;
	return 1;
}

int sweep_safe_path(const char *s)
{
	return safe(s, 1);
}

/* ---- the spec ---- */

static int need_seq(const char *f, const Val *v, const char *key, Err *e)
{
	if (v->kind != VAL_SEQ)
		return val_err(f, v, e, "expected '%s' to be a list", key);
	if (!v->n)
		return val_err(f, v, e, "axis '%s' is empty", key);
	return 0;
}

static int need_map(const char *f, const Val *v, const char *key, Err *e)
{
	if (v->kind != VAL_MAP)
		return val_err(f, v, e, "expected '%s' to be a mapping of labels to values", key);
	if (!v->n)
		return val_err(f, v, e, "axis '%s' is empty", key);
	return 0;
}

/* path as written in the spec, relative to the spec's directory */
static char *beside(const char *spec, const char *path)
{
	const char *slash = strrchr(spec, '/');
	if (path[0] == '/' || !slash)
		return xstrdup(path);
	return xasprintf("%.*s/%s", (int)(slash - spec), spec, path);
}

/* the file's basename without .yaml / .yml */
static char *stem(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	size_t n = strlen(b);
	if (n > 5 && !strcmp(b + n - 5, ".yaml"))
		n -= 5;
	else if (n > 4 && !strcmp(b + n - 4, ".yml"))
		n -= 4;
	return xasprintf("%.*s", (int)n, b);
}

static int split_words(const char *f, const Val *v, SweepValue *x, Err *e)
{
	const char *p = v->s;
	if (v->kind != VAL_SCALAR)
		return val_err(f, v, e, "expected a string of flags");
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		const char *q = p;
		while (*q && *q != ' ' && *q != '\t')
			q++;
		x->words = xrealloc(x->words, (size_t)(x->nwords + 1) * sizeof *x->words);
		x->words[x->nwords++] = xasprintf("%.*s", (int)(q - p), p);
		for (const char *c = p; c < q; c++)
			if (strchr("'\"\\$`;|&<>(){}*?!#~", *c) || (unsigned char)*c < ' ')
				return val_err(f, v, e, "flag '%s' has a character a shell or make would change ('%c'); "
					       "flags are words separated by spaces, without quoting",
					       x->words[x->nwords - 1], *c);
		p = q;
	}
	return 0;
}

/* a flag the sweep sets itself, or one that changes what a job writes */
static int reserved(const char *w, int plan)
{
	static const char *const both[] = { "-o", "--output", "-z", "--compress", "--help", "--version", NULL };
	static const char *const planonly[] = { "--machine", "--explain", NULL };
	for (const char *const *r = both; *r; r++)
		if (!strcmp(w, *r) || (!strncmp(w, *r, strlen(*r)) && w[strlen(*r)] == '=') ||
		    (w[0] == '-' && w[1] != '-' && (*r)[1] != '-' && w[1] == (*r)[1]))
			return 1;
	for (const char *const *r = planonly; plan && *r; r++)
		if (!strcmp(w, *r) || (!strncmp(w, *r, strlen(*r)) && w[strlen(*r)] == '='))
			return 1;
	return 0;
}

static int parse_limits(const char *f, const Val *v, SweepValue *x, Err *e)
{
	if (split_words(f, v, x, e))
		return -1;
	x->lim[0] = x->lim[1] = x->lim[2] = -1;
	for (int i = 0; i < x->nwords; i++) {
		const char *w = x->words[i], *num = NULL;
		int k;
		for (k = 0; k < 3; k++) {
			size_t n = strlen(limit_opts[k]);
			if (!strcmp(w, limit_opts[k])) {
				if (i + 1 == x->nwords)
					return val_err(f, v, e, "'%s' needs a value", w);
				num = x->words[++i];
				break;
			}
			if (!strncmp(w, limit_opts[k], n) && w[n] == '=') {
				num = w + n + 1;
				break;
			}
		}
		if (k == 3)
			return val_err(f, v, e, "unknown limit '%s' (limits are --table-budget, --fragment-limit and "
				       "--sram-limit)", w);
		int64_t n;
		if (parse_i64(num, &n) || n < 0)
			return val_err(f, v, e, "'%s' takes a non-negative integer, not '%s'", limit_opts[k], num);
		if (x->lim[k] >= 0)
			return val_err(f, v, e, "'%s' given twice", limit_opts[k]);
		x->lim[k] = n;
	}
	return 0;
}

static const char *const pin_keys[] = { "grid", "cast", "staging", "out_staging", "reduce", "blocks", "kv_staging",
					NULL };

static int check_choice(const char *f, const Val *v, const char *key, const char *a, const char *b, Err *e)
{
	if (v->kind != VAL_SCALAR || (strcmp(v->s, a) && strcmp(v->s, b)))
		return val_err(f, v, e, "pin '%s' is '%s' or '%s'", key, a, b);
	return 0;
}

static int check_pins(const char *f, const Val *set, Err *e)
{
	if (set->kind != VAL_MAP)
		return val_err(f, set, e, "expected a pin set: a mapping of op names to pins ({} for none)");
	for (int i = 0; i < set->n; i++) {
		const Val *op = &set->items[2 * i], *pin = &set->items[2 * i + 1];
		if (pin->kind != VAL_MAP || !pin->n)
			return val_err(f, pin, e, "expected the pins of op '%s' (a mapping such as {grid: [r, k, c]})",
				       op->s);
		if (map_keys(f, pin, pin_keys, e))
			return -1;
		for (int k = 0; k < pin->n; k++) {
			const char *key = pin->items[2 * k].s;
			const Val *v = &pin->items[2 * k + 1];
			int64_t xs[3];
			int n;
			if (!strcmp(key, "grid") || !strcmp(key, "blocks")) {
				int want = key[0] == 'g' ? 3 : 2;
				if (v->kind != VAL_SEQ || v->n != want)
					return val_err(f, v, e, "pin '%s' is a list of %d integers", key, want);
				if (val_ints(f, v, want, 1, INT32_MAX, xs, &n, e))
					return -1;
			} else if (!strcmp(key, "cast") && check_choice(f, v, key, "early", "late", e))
				return -1;
			else if (!strcmp(key, "staging") && check_choice(f, v, key, "pack-once", "direct", e))
				return -1;
			else if (!strcmp(key, "out_staging") && check_choice(f, v, key, "direct", "unpack", e))
				return -1;
			else if (!strcmp(key, "reduce") && check_choice(f, v, key, "gather", "scatter", e))
				return -1;
			else if (!strcmp(key, "kv_staging") && check_choice(f, v, key, "direct", "relay", e))
				return -1;
		}
	}
	return 0;
}

/* ---- derived model files: the base model re-written with its batch,
 * layer count and pins replaced ---- */

typedef struct {
	const Val *at;
	char text[32];
} Override;

typedef struct {
	Override *o;
	int n;
	const Val *pins;        /* the pin set to merge, or NULL */
} Derive;

static void scalar_out(Buf *b, const char *s)
{
	if (safe(s, 1) && !strchr(s, ' ')) {
		bprintf(b, "%s", s);
		return;
	}
	bprintf(b, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			bprintf(b, "\\%c", *p);
		else if (*p < ' ')
			bprintf(b, "\\x%02x", *p);
		else
			bprintf(b, "%c", *p);
	}
	bprintf(b, "\"");
}

static const char *override(const Derive *d, const Val *v)
{
	for (int i = 0; i < d->n; i++)
		if (d->o[i].at == v)
			return d->o[i].text;
	return NULL;
}

static void flow_out(Buf *b, const Val *v, const Derive *d)
{
	const char *o = d ? override(d, v) : NULL;
	if (o) {
		bprintf(b, "%s", o);
		return;
	}
	if (v->kind == VAL_SCALAR) {
		scalar_out(b, v->s);
		return;
	}
	bprintf(b, "%c", v->kind == VAL_SEQ ? '[' : '{');
	for (int i = 0; i < v->n; i++) {
		if (i)
			bprintf(b, ", ");
		if (v->kind == VAL_SEQ) {
			flow_out(b, &v->items[i], d);
		} else {
			scalar_out(b, v->items[2 * i].s);
			bprintf(b, ": ");
			flow_out(b, &v->items[2 * i + 1], d);
		}
	}
	bprintf(b, "%c", v->kind == VAL_SEQ ? ']' : '}');
}

/* block style: the root, a list of mappings, a mapping holding a mapping
 * or a list of mappings; everything else is written in flow style */
static int is_block(const Val *v)
{
	if (v->kind == VAL_SCALAR)
		return 0;
	if (v->kind == VAL_SEQ) {
		for (int i = 0; i < v->n; i++)
			if (v->items[i].kind == VAL_MAP)
				return 1;
		return 0;
	}
	for (int i = 0; i < v->n; i++) {
		const Val *x = &v->items[2 * i + 1];
		if (x->kind == VAL_MAP || (x->kind == VAL_SEQ && is_block(x)))
			return 1;
	}
	return 0;
}

static void block_out(Buf *b, const Val *v, int indent, int inline_first, const Derive *d);

/* one "key: value" of a block mapping (the indentation already written) */
static void pair_out(Buf *b, const Val *k, const Val *v, int indent, const Derive *d)
{
	scalar_out(b, k->s);
	bprintf(b, ":");
	if (is_block(v)) {
		bprintf(b, "\n");
		block_out(b, v, indent + 2, 0, d);
	} else {
		bprintf(b, " ");
		flow_out(b, v, d);
		bprintf(b, "\n");
	}
}

static void block_out(Buf *b, const Val *v, int indent, int inline_first, const Derive *d)
{
	for (int i = 0; i < v->n; i++) {
		if (!(inline_first && i == 0))
			bprintf(b, "%*s", indent, "");
		if (v->kind == VAL_SEQ) {
			const Val *x = &v->items[i];
			bprintf(b, "- ");
			if (x->kind == VAL_MAP && is_block(x)) {
				block_out(b, x, indent + 2, 1, d);
			} else {
				flow_out(b, x, d);
				bprintf(b, "\n");
			}
		} else {
			pair_out(b, &v->items[2 * i], &v->items[2 * i + 1], indent, d);
		}
	}
}

/* one op's pins: the model's, each key the pin set names replaced, then
 * the pin set's other keys */
static void merged_pin_out(Buf *b, const Val *base, const Val *add)
{
	int first = 1;
	bprintf(b, "{");
	for (int i = 0; base && i < base->n; i++) {
		const char *k = base->items[2 * i].s;
		const Val *v = map_get(add, k);
		bprintf(b, "%s", first ? "" : ", ");
		first = 0;
		scalar_out(b, k);
		bprintf(b, ": ");
		flow_out(b, v ? v : &base->items[2 * i + 1], NULL);
	}
	for (int i = 0; i < add->n; i++) {
		const char *k = add->items[2 * i].s;
		if (base && map_get(base, k))
			continue;
		bprintf(b, "%s", first ? "" : ", ");
		first = 0;
		scalar_out(b, k);
		bprintf(b, ": ");
		flow_out(b, &add->items[2 * i + 1], NULL);
	}
	bprintf(b, "}\n");
}

static void pins_out(Buf *b, const Val *base, const Val *add)
{
	bprintf(b, "pins:\n");
	for (int i = 0; base && base->kind == VAL_MAP && i < base->n; i++) {
		const Val *k = &base->items[2 * i], *v = &base->items[2 * i + 1];
		const Val *a = add ? map_get(add, k->s) : NULL;
		bprintf(b, "  ");
		scalar_out(b, k->s);
		bprintf(b, ": ");
		if (a && v->kind == VAL_MAP) {
			merged_pin_out(b, v, a);
		} else {
			flow_out(b, a ? a : v, NULL);
			bprintf(b, "\n");
		}
	}
	for (int i = 0; add && i < add->n; i++) {
		const Val *k = &add->items[2 * i];
		if (base && base->kind == VAL_MAP && map_get(base, k->s))
			continue;
		bprintf(b, "  ");
		scalar_out(b, k->s);
		bprintf(b, ": ");
		merged_pin_out(b, NULL, &add->items[2 * i + 1]);
	}
}

static void add_override(Derive *d, const Val *at, int64_t n)
{
	d->o = xrealloc(d->o, (size_t)(d->n + 1) * sizeof *d->o);
	d->o[d->n].at = at;
	snprintf(d->o[d->n].text, sizeof d->o[d->n].text, "%" PRId64, n);
	d->n++;
}

static void broadcast_batches(Derive *d, const Val *ops, int64_t batch)
{
	for (int i = 0; ops && ops->kind == VAL_SEQ && i < ops->n; i++) {
		const Val *op = &ops->items[i], *k = map_get(op, "op"), *bt = map_get(op, "batch");
		if (op->kind != VAL_MAP)
			continue;
		if (k && k->kind == VAL_SCALAR && !strcmp(k->s, "broadcast") && bt && bt->kind == VAL_SCALAR)
			add_override(d, bt, batch);
		if (map_get(op, "repeat"))
			broadcast_batches(d, map_get(op, "ops"), batch);
	}
}

static int count_repeats(const Val *root)
{
	const Val *ops = map_get(root, "ops");
	int n = 0;
	for (int i = 0; ops && ops->kind == VAL_SEQ && i < ops->n; i++)
		if (ops->items[i].kind == VAL_MAP && map_get(&ops->items[i], "repeat"))
			n++;
	return n;
}

/* The derived model's text: a header line naming what was changed, then
 * the base model with batch (-1: kept), layers (-1: kept) and pins (NULL:
 * none) applied. */
static char *derive_model(const Val *root, const char *base, int64_t batch, int64_t layers, const Val *pins,
			  const char *pins_label)
{
	Derive d = { NULL, 0, pins };
	Buf b = { NULL, 0, 0 };
	const Val *in = map_get(root, "inputs"), *ops = map_get(root, "ops");

	if (batch >= 0) {
		for (int i = 0; in && in->kind == VAL_MAP && i < in->n; i++) {
			const Val *sh = map_get(&in->items[2 * i + 1], "shape");
			if (sh && sh->kind == VAL_SEQ && sh->n)
				add_override(&d, &sh->items[0], batch);
		}
		broadcast_batches(&d, ops, batch);
	}
	for (int i = 0; layers >= 0 && ops && ops->kind == VAL_SEQ && i < ops->n; i++) {
		const Val *c = ops->items[i].kind == VAL_MAP && map_get(&ops->items[i], "repeat") ?
				       map_get(&ops->items[i], "count") : NULL;
		if (c)
			add_override(&d, c, layers);
	}
	bprintf(&b, "# Derived by amp-sweep from %s", base);
	if (batch >= 0)
		bprintf(&b, ", batch %" PRId64, batch);
	if (layers >= 0)
		bprintf(&b, ", %" PRId64 " layers", layers);
	if (pins_label)
		bprintf(&b, ", pins '%s'", pins_label);
	bprintf(&b, ".\n");
	int wrote_pins = 0;
	for (int i = 0; i < root->n; i++) {
		const Val *k = &root->items[2 * i];
		if (!strcmp(k->s, "pins") && pins) {
			pins_out(&b, &root->items[2 * i + 1], pins);
			wrote_pins = 1;
			continue;
		}
		pair_out(&b, k, &root->items[2 * i + 1], 0, &d);
	}
	if (pins && pins->n && !wrote_pins)
		pins_out(&b, NULL, pins);
	free(d.o);
	return b.s;
}

/* ---- loading ---- */

static int load_axis(Sweep *s, int a, const Val *v, Err *e)
{
	const char *f = s->path, *key = axis_keys[a];
	SweepAxis *ax = &s->ax[a];
	ax->present = 1;
	ax->line = v->line, ax->col = v->col;
	int list = a == AX_MODEL || a == AX_BATCH || a == AX_LAYERS || a == AX_MACHINE;
	if (list ? need_seq(f, v, key, e) : need_map(f, v, key, e))
		return -1;
	ax->n = v->n;
	ax->v = xcalloc((size_t)v->n, sizeof *ax->v);
	for (int i = 0; i < v->n; i++) {
		SweepValue *x = &ax->v[i];
		const Val *item = list ? &v->items[i] : &v->items[2 * i + 1];
		x->v = item;
		x->lim[0] = x->lim[1] = x->lim[2] = -1;
		if (list && item->kind != VAL_SCALAR)
			return val_err(f, item, e, "expected a %s in '%s'",
				       a == AX_MODEL || a == AX_MACHINE ? "file name" : "number", key);
		if (a == AX_MODEL || a == AX_MACHINE) {
			x->path = beside(f, item->s);
			x->label = stem(item->s);
			if (!safe(x->label, 0))
				return val_err(f, item, e, "file name '%s' has characters other than letters, digits "
					       "and . _ + -", x->label);
		} else if (a == AX_BATCH || a == AX_LAYERS) {
			if (val_int(f, item, 1, a == AX_BATCH ? 65536 : 1048576, &x->n, e))
				return -1;
			x->label = xasprintf("%" PRId64, x->n);
		} else {
			const Val *k = &v->items[2 * i];
			x->label = xstrdup(k->s);
			if (!safe(x->label, 0))
				return val_err(f, k, e, "label '%s' has characters other than letters, digits and . _ + -",
					       k->s);
			if (a == AX_PINS && check_pins(f, item, e))
				return -1;
			if ((a == AX_PLAN || a == AX_GROUP) && split_words(f, item, x, e))
				return -1;
			for (int w = 0; (a == AX_PLAN || a == AX_GROUP) && w < x->nwords; w++)
				if (reserved(x->words[w], a == AX_PLAN))
					return val_err(f, item, e, "flag '%s' is the sweep's own (%seach job names its "
						       "output)", x->words[w], a == AX_PLAN ? "machines is an axis; " : "");
			if (a == AX_LIMITS && parse_limits(f, item, x, e))
				return -1;
		}
		for (int j = 0; j < i; j++)
			if (!strcmp(ax->v[j].label, x->label))
				return val_err(f, item, e, "'%s' appears twice in '%s'", x->label, key);
	}
	return 0;
}

int sweep_load(Sweep *s, const char *path, Err *e)
{
	static const char *const keys[] = { "amp-sweep", "name", "models", "batch", "layers", "machines", "pins",
					    "plan_flags", "group_flags", "limits", NULL };
	const Val *v;
	int64_t version;

	memset(s, 0, sizeof *s);
	s->path = xstrdup(path);
	if (input_slurp(path, &s->text, &s->len, e))
		return -1;
	if (yr_open_input(&s->r, input_open_mem(path, s->text, s->len, e), e) || yr_node(&s->r, &s->root, e))
		return -1;
	const char *f = path;
	if (s->root->kind != VAL_MAP)
		return val_err(f, s->root, e, "expected a sweep spec (a mapping starting 'amp-sweep: 1')");
	if (map_keys(f, s->root, keys, e) || get_int(f, s->root, "amp-sweep", 0, INT64_MAX, &version, e))
		return -1;
	if (version != SWEEP_VERSION)
		return val_err(f, map_get(s->root, "amp-sweep"), e, "unsupported sweep version %" PRId64
			       " (this amp reads %d)", version, SWEEP_VERSION);
	if ((v = map_get(s->root, "name"))) {
		if (v->kind != VAL_SCALAR || !safe(v->s, 0))
			return val_err(f, v, e, "a sweep's name is letters, digits and . _ + -");
		s->name = xstrdup(v->s);
	} else {
		s->name = stem(path);
	}
	if (map_need(f, s->root, "models", &v, e))
		return -1;
	for (int a = 0; a < AX_COUNT; a++)
		if ((v = map_get(s->root, axis_keys[a])) && load_axis(s, a, v, e))
			return -1;
	s->njobs = 1;
	for (int a = 0; a < AX_COUNT; a++)
		if (s->ax[a].present) {
			s->njobs *= s->ax[a].n;
			if (s->njobs > SWEEP_MAX_JOBS)
				return err_at(e, f, s->root->line, s->root->col, "the axes multiply to more than %d jobs",
					      SWEEP_MAX_JOBS);
		}
	/* the files, and every derived model, read as the tools will */
	for (int i = 0; i < s->ax[AX_MODEL].n; i++) {
		SweepValue *m = &s->ax[AX_MODEL].v[i];
		Model mo;
		for (int j = 0; j < i; j++)
			if (!strcmp(s->ax[AX_MODEL].v[j].label, m->label))
				return val_err(f, m->v, e, "two models named '%s': their derived files would clash",
					       m->label);
		struct stat st;
		if (stat(m->path, &st))
			return val_err(f, m->v, e, "cannot open model '%s': %s", m->path, strerror(errno));
		if (model_load(&mo, m->path, e))
			return -1;
		model_free(&mo);
		m->doc = xcalloc(1, sizeof *m->doc);
		if (yr_open(m->doc, m->path, e) || yr_node(m->doc, &m->root, e))
			return -1;
		int nrep = count_repeats(m->root);
		if (s->ax[AX_LAYERS].present && nrep != 1)
			return err_at(e, f, s->ax[AX_LAYERS].line, s->ax[AX_LAYERS].col,
				      "model '%s' has %d repeats; 'layers' sets the count of exactly one", m->label, nrep);
	}
	for (int i = 0; i < s->ax[AX_MACHINE].n; i++) {
		SweepValue *m = &s->ax[AX_MACHINE].v[i];
		Machine mc;
		for (int j = 0; j < i; j++)
			if (!strcmp(s->ax[AX_MACHINE].v[j].label, m->label))
				return val_err(f, m->v, e, "two machines named '%s'", m->label);
		struct stat st;
		if (stat(m->path, &st))
			return val_err(f, m->v, e, "cannot open machine '%s': %s", m->path, strerror(errno));
		if (machine_load(&mc, m->path, e))
			return -1;
	}
	int nb = s->ax[AX_BATCH].present ? s->ax[AX_BATCH].n : 1, nl = s->ax[AX_LAYERS].present ? s->ax[AX_LAYERS].n : 1,
	    np = s->ax[AX_PINS].present ? s->ax[AX_PINS].n : 1;
	for (int i = 0; i < s->ax[AX_MODEL].n; i++)
		for (int b = 0; b < nb; b++)
			for (int l = 0; l < nl; l++)
				for (int p = 0; p < np; p++) {
					SweepValue *m = &s->ax[AX_MODEL].v[i];
					SweepValue *bv = s->ax[AX_BATCH].present ? &s->ax[AX_BATCH].v[b] : NULL;
					SweepValue *lv = s->ax[AX_LAYERS].present ? &s->ax[AX_LAYERS].v[l] : NULL;
					SweepValue *pv = s->ax[AX_PINS].present ? &s->ax[AX_PINS].v[p] : NULL;
					char *text = derive_model(m->root, m->v->s, bv ? bv->n : -1, lv ? lv->n : -1,
								  pv ? pv->v : NULL, pv ? pv->label : NULL);
					Model mo;
					Err me;
					int rc = model_load_input(&mo, input_open_mem("derived model", text, strlen(text), &me),
								  &me);
					free(text);
					if (!rc) {
						model_free(&mo);
						continue;
					}
					const Val *at = pv ? pv->v : lv ? lv->v : bv ? bv->v : m->v;
					const char *msg = me.msg;
					if (!strncmp(msg, "derived model:", 14)) {       /* its own location is no help */
						for (int colons = 0; *msg && colons < 3; msg++)
							colons += *msg == ':';
						msg += *msg == ' ';
					}
					return val_err(f, at, e, "model '%s'%s%s%s%s%s%s%s: %s", m->label, bv ? " at batch " : "",
						       bv ? bv->label : "", lv ? " with " : "", lv ? lv->label : "",
						       lv ? " layers" : "", pv ? " and pins " : "", pv ? pv->label : "", msg);
				}
	return 0;
}

void sweep_free(Sweep *s)
{
	for (int a = 0; a < AX_COUNT; a++) {
		for (int i = 0; i < s->ax[a].n; i++) {
			SweepValue *x = &s->ax[a].v[i];
			free(x->label);
			free(x->path);
			for (int w = 0; w < x->nwords; w++)
				free(x->words[w]);
			free(x->words);
			if (x->doc) {
				yr_close(x->doc);
				free(x->doc);
			}
		}
		free(s->ax[a].v);
	}
	yr_close(&s->r);
	free(s->text);
	free(s->path);
	free(s->name);
	memset(s, 0, sizeof *s);
}

/* ---- the job directory ---- */

typedef struct {
	char *path;             /* relative to the directory */
	char *data;
	size_t len;
} File;

typedef struct {
	File *f;
	int n;
} Files;

static void add_file(Files *fs, char *path, char *data, size_t len)
{
	fs->f = xrealloc(fs->f, (size_t)(fs->n + 1) * sizeof *fs->f);
	fs->f[fs->n++] = (File){ path, data, len };
}

static int mkdirs(const char *path, Err *e)
{
	char *p = xstrdup(path);
	for (char *q = p + 1;; q++) {
		if (*q == '/' || !*q) {
			char c = *q;
			*q = 0;
			if (mkdir(p, 0777) && errno != EEXIST) {
				errf(e, "cannot create directory '%s': %s", p, strerror(errno));
				free(p);
				return -1;
			}
			*q = c;
			if (!c)
				break;
		}
	}
	free(p);
	return 0;
}

/* the job's index in the product -> its value of each axis (or -1) */
static void candidate(const Sweep *s, int64_t j, int idx[AX_COUNT])
{
	for (int a = AX_COUNT - 1; a >= 0; a--) {
		if (!s->ax[a].present) {
			idx[a] = -1;
			continue;
		}
		idx[a] = (int)(j % s->ax[a].n);
		j /= s->ax[a].n;
	}
}

static char *variant_name(const Sweep *s, const int idx[AX_COUNT])
{
	Buf b = { NULL, 0, 0 };
	bprintf(&b, "%s", s->ax[AX_MODEL].v[idx[AX_MODEL]].label);
	if (idx[AX_BATCH] >= 0)
		bprintf(&b, "-b%s", s->ax[AX_BATCH].v[idx[AX_BATCH]].label);
	if (idx[AX_LAYERS] >= 0)
		bprintf(&b, "-l%s", s->ax[AX_LAYERS].v[idx[AX_LAYERS]].label);
	if (idx[AX_PINS] >= 0)
		bprintf(&b, "-%s", s->ax[AX_PINS].v[idx[AX_PINS]].label);
	return b.s;
}

static char *job_file(const Sweep *s, const char *id, const int idx[AX_COUNT], const char *model, size_t *len, Err *e)
{
	char *data = NULL;
	Output *o = output_open_mem(&data, len, e);
	YWriter w;
	if (!o || yw_open(&w, o, e)) {
		if (o)
			output_abort(o);
		free(data);
		return NULL;
	}
	yw_map(&w, 0);
	yw_kint(&w, "amp-sweep-job", SWEEP_VERSION);
	yw_kstr(&w, "job", id);
	yw_kstr(&w, "sweep", s->name);
	yw_str(&w, "axes");
	yw_map(&w, 1);
	for (int a = 0; a < AX_COUNT; a++)
		if (idx[a] >= 0)
			yw_kstr(&w, sweep_axis_names[a], s->ax[a].v[idx[a]].label);
	yw_end_map(&w);
	char *mp = xasprintf("../../models/%s.yaml", model);
	yw_kstr(&w, "model", mp);
	free(mp);
	if (idx[AX_MACHINE] >= 0) {
		char *m = xasprintf("../../machines/%s.yaml", s->ax[AX_MACHINE].v[idx[AX_MACHINE]].label);
		yw_kstr(&w, "machine", m);
		free(m);
	}
	for (int a = AX_PLAN; a <= AX_GROUP; a++) {
		yw_str(&w, a == AX_PLAN ? "plan_flags" : "group_flags");
		yw_seq(&w, 1);
		for (int k = 0; idx[a] >= 0 && k < s->ax[a].v[idx[a]].nwords; k++)
			yw_str(&w, s->ax[a].v[idx[a]].words[k]);
		yw_end_seq(&w);
	}
	yw_str(&w, "limits");
	yw_map(&w, 1);
	for (int k = 0; idx[AX_LIMITS] >= 0 && k < 3; k++)
		if (s->ax[AX_LIMITS].v[idx[AX_LIMITS]].lim[k] >= 0)
			yw_kint(&w, limit_keys[k], s->ax[AX_LIMITS].v[idx[AX_LIMITS]].lim[k]);
	yw_end_map(&w);
	yw_end_map(&w);
	if (yw_close(&w, e) || output_commit(o, e)) {
		free(data);
		return NULL;
	}
	return data;
}

static char *job_id(const Sweep *s, int64_t j)
{
	int width = 6;
	for (int64_t n = s->njobs; n >= 1000000; n /= 10)
		width++;
	return xasprintf("%0*" PRId64, width, j + 1);
}

static int build_files(const Sweep *s, const char *dir, Files *fs, Err *e)
{
	Buf jobs = { NULL, 0, 0 }, index = { NULL, 0, 0 }, mk = { NULL, 0, 0 }, sb = { NULL, 0, 0 };
	char **models = NULL;
	int nmodels = 0;

	add_file(fs, xstrdup("sweep.yaml"), xstrdup(s->text), s->len);
	for (int i = 0; i < s->ax[AX_MACHINE].n; i++) {
		char *d;
		size_t n;
		if (input_slurp(s->ax[AX_MACHINE].v[i].path, &d, &n, e))
			return -1;
		add_file(fs, xasprintf("machines/%s.yaml", s->ax[AX_MACHINE].v[i].label), d, n);
	}
	bprintf(&index, "job");
	for (int a = 0; a < AX_COUNT; a++)
		if (s->ax[a].present)
			bprintf(&index, "\t%s", sweep_axis_names[a]);
	bprintf(&index, "\n");
	bprintf(&mk, "# Generated by amp-sweep jobs from sweep.yaml (formats/sweep.md): one target per job.\n"
		"#   make -C DIR -j2     runs every job whose result is missing\n"
		"#   make -C DIR merge   prints the merged table (amp-sweep merge)\n"
		"AMP_SWEEP ?= amp-sweep\n"
		"JOBS :=");
	for (int64_t j = 0; j < s->njobs; j++) {
		int idx[AX_COUNT];
		char *id = job_id(s, j);
		candidate(s, j, idx);
		char *model = variant_name(s, idx);
		int seen = 0;
		for (int k = 0; k < nmodels && !seen; k++)
			seen = !strcmp(models[k], model);
		if (!seen) {
			const SweepValue *m = &s->ax[AX_MODEL].v[idx[AX_MODEL]];
			const SweepValue *pv = idx[AX_PINS] >= 0 ? &s->ax[AX_PINS].v[idx[AX_PINS]] : NULL;
			char *text = derive_model(m->root, m->v->s, idx[AX_BATCH] >= 0 ? s->ax[AX_BATCH].v[idx[AX_BATCH]].n : -1,
						  idx[AX_LAYERS] >= 0 ? s->ax[AX_LAYERS].v[idx[AX_LAYERS]].n : -1,
						  pv ? pv->v : NULL, pv ? pv->label : NULL);
			add_file(fs, xasprintf("models/%s.yaml", model), text, strlen(text));
			models = xrealloc(models, (size_t)(nmodels + 1) * sizeof *models);
			models[nmodels++] = xstrdup(model);
		}
		size_t len;
		char *jf = job_file(s, id, idx, model, &len, e);
		if (!jf)
			return -1;
		add_file(fs, xasprintf("jobs/%s/job.yaml", id), jf, len);
		bprintf(&jobs, "amp-sweep run %s/jobs/%s\n", dir, id);
		bprintf(&index, "%s", id);
		for (int a = 0; a < AX_COUNT; a++)
			if (idx[a] >= 0)
				bprintf(&index, "\t%s", s->ax[a].v[idx[a]].label);
		bprintf(&index, "\n");
		bprintf(&mk, "%s %s", j % 10 == 0 ? " \\\n\t" : "", id);
		free(model);
		free(id);
	}
	for (int k = 0; k < nmodels; k++)
		free(models[k]);
	free(models);
	bprintf(&mk, "\n\n.PHONY: all merge $(JOBS)\n"
		"all: $(JOBS)\n"
		"$(JOBS): %%: jobs/%%/result.json\n"
		"jobs/%%/result.json:\n"
		"\t$(AMP_SWEEP) run jobs/$*\n"
		"merge:\n"
		"\t@$(AMP_SWEEP) merge .\n");
	bprintf(&sb, "#!/bin/bash\n"
		"# Generated by amp-sweep jobs (formats/sweep.md): a Slurm job array over\n"
		"# %s/jobs.txt, task N running line N. Submit it from the directory amp-sweep\n"
		"# jobs ran in (the paths are relative to it):\n"
		"#   sbatch --array=1-%" PRId64 " %s/slurm.sbatch\n"
		"# SWEEP_PER_TASK=K runs lines (N-1)*K+1 .. N*K in task N, for arrays\n"
		"# larger than the cluster's MaxArraySize:\n"
		"#   SWEEP_PER_TASK=10 sbatch --array=1-%" PRId64 " %s/slurm.sbatch\n"
		"#SBATCH --job-name=amp-sweep-%s\n"
		"#SBATCH --array=1-%" PRId64 "\n"
		"#SBATCH --ntasks=1\n"
		"#SBATCH --cpus-per-task=1\n"
		"#SBATCH --output=%s/slurm/%%A_%%a.out\n"
		"set -eu\n"
		"per=${SWEEP_PER_TASK:-1}\n"
		"first=$(( (SLURM_ARRAY_TASK_ID - 1) * per + 1 ))\n"
		"sed -n \"${first},$(( first + per - 1 ))p\" %s/jobs.txt > \"${TMPDIR:-/tmp}/amp-sweep.$$\"\n"
		"trap 'rm -f \"${TMPDIR:-/tmp}/amp-sweep.$$\"' EXIT\n"
		"while IFS= read -r job; do\n"
		"\tbash -c \"$job\"\n"
		"done < \"${TMPDIR:-/tmp}/amp-sweep.$$\"\n",
		dir, s->njobs, dir, (s->njobs + 9) / 10, dir, s->name, s->njobs, dir, dir);
	add_file(fs, xstrdup("jobs.txt"), jobs.s, jobs.n);
	add_file(fs, xstrdup("index.tsv"), index.s, index.n);
	add_file(fs, xstrdup("Makefile"), mk.s, mk.n);
	add_file(fs, xstrdup("slurm.sbatch"), sb.s, sb.n);
	return 0;
}

static void free_files(Files *fs)
{
	for (int i = 0; i < fs->n; i++) {
		free(fs->f[i].path);
		free(fs->f[i].data);
	}
	free(fs->f);
}

int sweep_write(const Sweep *s, const char *dir, Err *e)
{
	Files fs = { NULL, 0 };
	int rc = -1;

	if (build_files(s, dir, &fs, e))
		goto out;
	/* refuse a directory that holds something else, before writing */
	for (int i = 0; i < fs.n; i++) {
		char *p = xasprintf("%s/%s", dir, fs.f[i].path), *old;
		size_t n;
		struct stat st;
		Err ignore;
		int differs = 0;
		if (stat(p, &st) == 0) {
			differs = input_slurp(p, &old, &n, &ignore) != 0;
			if (!differs) {
				differs = n != fs.f[i].len || memcmp(old, fs.f[i].data, n);
				free(old);
			}
		}
		if (differs) {
			errf(e, "'%s' differs from what this spec writes (another sweep, or its inputs changed): "
			     "remove '%s' or write the jobs to another directory", p, dir);
			free(p);
			goto out;
		}
		free(p);
	}
	char *jd = xasprintf("%s/jobs", dir);
	DIR *d = opendir(jd);
	for (struct dirent *de; d && (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		char *want = xasprintf("jobs/%s/job.yaml", de->d_name);
		int found = 0;
		for (int i = 0; i < fs.n && !found; i++)
			found = !strcmp(fs.f[i].path, want);
		free(want);
		if (!found) {
			errf(e, "'%s/%s' is not a job of this spec (another sweep): remove '%s' or write the jobs to "
			     "another directory", jd, de->d_name, dir);
			closedir(d);
			free(jd);
			goto out;
		}
	}
	if (d)
		closedir(d);
	free(jd);
	char *slurm = xasprintf("%s/slurm", dir);
	int bad = mkdirs(slurm, e);
	free(slurm);
	if (bad)
		goto out;
	for (int i = 0; i < fs.n; i++) {
		char *p = xasprintf("%s/%s", dir, fs.f[i].path);
		char *slash = strrchr(p, '/');
		struct stat st;
		if (stat(p, &st) == 0) {        /* the same bytes already */
			free(p);
			continue;
		}
		*slash = 0;
		bad = mkdirs(p, e);
		*slash = '/';
		Output *o = bad ? NULL : output_open(p, 0, e);
		free(p);
		if (!o)
			goto out;
		if (output_write(o, fs.f[i].data, fs.f[i].len, e)) {
			output_abort(o);
			goto out;
		}
		if (output_commit(o, e))
			goto out;
	}
	rc = 0;
out:
	free_files(&fs);
	return rc;
}

/* ---- running one job ---- */

typedef struct {
	char **a;
	int n;
} Argv;

static void arg(Argv *v, const char *s)
{
	v->a = xrealloc(v->a, (size_t)(v->n + 2) * sizeof *v->a);
	v->a[v->n++] = xstrdup(s);
	v->a[v->n] = NULL;
}

static void argv_free(Argv *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->a[i]);
	free(v->a);
	v->a = NULL, v->n = 0;
}

/* Starts the stages as one pipeline: stage 0 reads /dev/null, each reads
 * the one before, each stage's standard error goes to errs[i]. */
static int spawn_pipeline(const char *bindir, Argv *st, int n, char **errs, pid_t *pids, Err *e)
{
	int prev = -1, rc = 0;
	for (int i = 0; i < n; i++)
		pids[i] = -1;
	for (int i = 0; i < n && !rc; i++) {
		int fd[2] = { -1, -1 };
		posix_spawn_file_actions_t fa;
		if (i + 1 < n && pipe(fd)) {
			rc = errf(e, "cannot make a pipe: %s", strerror(errno));
			break;
		}
		posix_spawn_file_actions_init(&fa);
		if (prev >= 0) {
			posix_spawn_file_actions_adddup2(&fa, prev, 0);
			posix_spawn_file_actions_addclose(&fa, prev);
		} else {
			posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		}
		if (fd[1] >= 0) {
			posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
			posix_spawn_file_actions_addclose(&fa, fd[1]);
			posix_spawn_file_actions_addclose(&fa, fd[0]);
		}
		posix_spawn_file_actions_addopen(&fa, 2, errs[i], O_WRONLY | O_CREAT | O_TRUNC, 0666);
		char *path = bindir ? xasprintf("%s/%s", bindir, st[i].a[0]) : xstrdup(st[i].a[0]);
		int err = bindir ? posix_spawn(&pids[i], path, &fa, NULL, st[i].a, environ) :
				   posix_spawnp(&pids[i], path, &fa, NULL, st[i].a, environ);
		if (err) {
			pids[i] = -1;
			rc = errf(e, "cannot run '%s': %s", path, strerror(err));
		}
		free(path);
		posix_spawn_file_actions_destroy(&fa);
		if (prev >= 0)
			close(prev);
		if (fd[1] >= 0)
			close(fd[1]);
		prev = fd[0];
	}
	if (prev >= 0)
		close(prev);
	return rc;
}

/* The first line of a file (the tool's message), or "". */
static char *first_line(const char *path)
{
	char *d;
	size_t n;
	Err ignore;
	if (input_slurp(path, &d, &n, &ignore))
		return xstrdup("");
	char *nl = strchr(d, '\n');
	if (nl)
		*nl = 0;
	return d;
}

typedef struct {
	int failed;             /* a stage refused the candidate: exit 1 or 2 */
	const char *stage;
	char *message;
	int emit_status;        /* amp-emit's exit status */
} Outcome;

/* Waits for the stages; the first stage that failed other than by a
 * broken pipe is the one reported. -1: a stage could not run or crashed. */
static int wait_stages(Argv *st, int n, pid_t *pids, char **errs, Outcome *oc, int *status0, Err *e)
{
	int rc = 0, blamed = 0;
	for (int i = 0; i < n; i++) {
		int status;
		if (pids[i] < 0)
			continue;
		while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
			;
		if (i == 0 && status0)
			*status0 = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (blamed || rc || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
			continue;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE)
			continue;
		if (WIFEXITED(status) && (WEXITSTATUS(status) == 1 || WEXITSTATUS(status) == 2)) {
			if (!status0) {
				oc->failed = 1;
				oc->stage = st[i].a[0];
				oc->message = first_line(errs[i]);
			}
			blamed = 1;
			continue;
		}
		char *m = first_line(errs[i]);
		if (WIFSIGNALED(status))
			rc = errf(e, "%s was killed by signal %d%s%s", st[i].a[0], WTERMSIG(status), *m ? ": " : "", m);
		else
			rc = errf(e, "%s exited with status %d%s%s", st[i].a[0], WEXITSTATUS(status), *m ? ": " : "", m);
		free(m);
	}
	return rc;
}

static int run_stages(const char *bindir, Argv *st, int n, char **errs, Outcome *oc, int *status0, Err *e)
{
	pid_t pids[8];
	int rc = spawn_pipeline(bindir, st, n, errs, pids, e);
	Err we;
	if (wait_stages(st, n, pids, errs, oc, status0, &we) && !rc) {
		*e = we;
		rc = -1;
	}
	return rc;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	for (struct dirent *de; d && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *p = xasprintf("%s/%s", dir, de->d_name);
		unlink(p);
		free(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static int words(const char *f, const Val *job, const char *key, Argv *v, Err *e)
{
	const Val *l;
	if (map_need(f, job, key, &l, e))
		return -1;
	if (l->kind != VAL_SEQ)
		return val_err(f, l, e, "expected '%s' to be a list of words", key);
	for (int i = 0; i < l->n; i++) {
		if (l->items[i].kind != VAL_SCALAR)
			return val_err(f, &l->items[i], e, "expected a word");
		arg(v, l->items[i].s);
	}
	return 0;
}

static int fig(const char *f, const Val *m, const char *key, int64_t *x, Err *e)
{
	return get_int(f, m, key, INT64_MIN, INT64_MAX, x, e);
}

static int write_result(const char *path, const char *id, const Outcome *oc, const char *capture, const int64_t lim[3],
			const char *emit_msg, Err *e)
{
	YReader r;
	Val *root = NULL;
	const Val *sum = NULL, *mach = NULL;
	int64_t value[3], limit[3];
	int rc = -1;

	memset(&r, 0, sizeof r);
	if (!oc->failed) {
		const char *f = capture;
		if (yr_open(&r, capture, e) || yr_node(&r, &root, e) || map_need(f, root, "summary", &sum, e) ||
		    map_need(f, root, "machine", &mach, e) || fig(f, sum, "max_table_bytes", &value[0], e) ||
		    fig(f, sum, "max_fragments", &value[1], e) || fig(f, sum, "max_sram_bytes", &value[2], e) ||
		    fig(f, mach, "table_budget_bytes", &limit[0], e) || fig(f, mach, "fragment_limit", &limit[1], e) ||
		    fig(f, mach, "available_bytes", &limit[2], e))
			goto out;
		if (sum->kind != VAL_MAP)
			goto out;
		if (lim[2] >= 0)
			limit[2] = lim[2];
	}
	Output *o = output_open(path, 0, e);
	if (!o)
		goto out;
	Json j;
	json_init(&j, o);
	json_open(&j, '{', 0);
	json_kstr(&j, "format", "amp-sweep-result");
	json_kint(&j, "version", SWEEP_VERSION);
	json_kstr(&j, "job", id);
	if (oc->failed) {
		json_kstr(&j, "status", "failed");
		json_kstr(&j, "stage", oc->stage);
		json_kstr(&j, "message", oc->message);
	} else {
		int all = value[0] <= limit[0] && value[1] <= limit[1] && value[2] <= limit[2];
		json_kstr(&j, "status", "ok");
		json_kstr(&j, "fit", oc->emit_status == 0 ? "fit" : all ? "refused" : "OVER");
		if (oc->emit_status)
			json_kstr(&j, "emit_message", emit_msg);
		json_key(&j, "limits");
		json_open(&j, '{', 0);
		for (int k = 0; k < 3; k++) {
			json_key(&j, limit_names[k]);
			json_open(&j, '{', 1);
			json_kint(&j, "value", value[k]);
			json_kint(&j, "limit", limit[k]);
			json_kstr(&j, "fit", value[k] <= limit[k] ? "fit" : "OVER");
			json_close(&j, '}');
		}
		json_close(&j, '}');
		json_key(&j, "summary");
		json_open(&j, '{', 1);
		for (int i = 0; i < sum->n; i++) {
			int64_t x;
			if (val_int(capture, &sum->items[2 * i + 1], INT64_MIN, INT64_MAX, &x, e)) {
				output_abort(o);
				goto out;
			}
			json_kint(&j, sum->items[2 * i].s, x);
		}
		json_close(&j, '}');
	}
	json_close(&j, '}');
	if (json_end(&j, e)) {
		output_abort(o);
		goto out;
	}
	rc = output_commit(o, e);
out:
	yr_close(&r);
	return rc;
}

int sweep_run(const char *jobdir, const char *bindir, int *skipped, Err *e)
{
	char *jobpath = xasprintf("%s/job.yaml", jobdir), *result = xasprintf("%s/result.json", jobdir);
	char *work = xasprintf("%s/work", jobdir);
	YReader r;
	Val *job;
	const Val *v, *lims;
	const char *id, *model, *machine = NULL;
	Argv st[5], emit = { NULL, 0 }, cap = { NULL, 0 }, plan = { NULL, 0 }, group = { NULL, 0 };
	char *errs[5] = { NULL };
	Outcome oc = { 0, NULL, NULL, 0 };
	int64_t lim[3] = { -1, -1, -1 };
	int rc = -1;
	struct stat sb;

	memset(st, 0, sizeof st);
	*skipped = 0;
	if (stat(result, &sb) == 0) {
		*skipped = 1;
		free(jobpath), free(result), free(work);
		return 0;
	}
	if (yr_open(&r, jobpath, e)) {
		free(jobpath), free(result), free(work);
		return -1;
	}
	const char *f = jobpath;
	int64_t version;
	if (yr_node(&r, &job, e))
		goto out;
	if (job->kind != VAL_MAP) {
		val_err(f, job, e, "expected a job (a mapping starting 'amp-sweep-job: 1')");
		goto out;
	}
	if (get_int(f, job, "amp-sweep-job", 0, INT64_MAX, &version, e) || get_str(f, job, "job", &id, e) ||
	    get_str(f, job, "model", &model, e) || words(f, job, "plan_flags", &plan, e) ||
	    words(f, job, "group_flags", &group, e) || map_need(f, job, "limits", &lims, e))
		goto out;
	if (version != SWEEP_VERSION) {
		val_err(f, map_get(job, "amp-sweep-job"), e, "unsupported job version %" PRId64, version);
		goto out;
	}
	if ((v = map_get(job, "machine")) && val_str(f, v, &machine, e))
		goto out;
	for (int k = 0; k < 3; k++)
		if (map_get(lims, limit_keys[k]) && get_int(f, lims, limit_keys[k], 0, INT64_MAX, &lim[k], e))
			goto out;

	/* an interrupted run's leftovers go first */
	remove_dir(work);
	if (mkdir(work, 0777)) {
		errf(e, "cannot create directory '%s': %s", work, strerror(errno));
		goto out;
	}
	static const char *const tools[5] = { "amp-plan", "amp-compose", "amp-expand", "amp-exchange", "amp-group" };
	char *grouped = xasprintf("%s/grouped.yaml.zst", work), *capture = xasprintf("%s/capture.json", work);
	char *emit_err = xasprintf("%s/emit.txt", work), *cap_err = xasprintf("%s/amp-capture.err", work);
	for (int i = 0; i < 5; i++) {
		arg(&st[i], tools[i]);
		errs[i] = xasprintf("%s/%s.err", work, tools[i]);
	}
	char *mp = xasprintf("%s/%s", jobdir, model);
	if (machine) {
		char *mc = xasprintf("%s/%s", jobdir, machine);
		arg(&st[0], "--machine");
		arg(&st[0], mc);
		free(mc);
	}
	for (int i = 0; i < plan.n; i++)
		arg(&st[0], plan.a[i]);
	arg(&st[0], mp);
	free(mp);
	for (int i = 0; i < group.n; i++)
		arg(&st[4], group.a[i]);
	arg(&st[4], "-z");
	arg(&st[4], "-o");
	arg(&st[4], grouped);
	arg(&emit, "amp-emit");
	arg(&cap, "amp-capture");
	for (int k = 0; k < 3; k++) {
		char b[64];
		if (lim[k] < 0)
			continue;
		snprintf(b, sizeof b, "%" PRId64, lim[k]);
		arg(&emit, limit_opts[k]);
		arg(&emit, b);
		if (k < 2) {
			arg(&cap, limit_opts[k]);
			arg(&cap, b);
		}
	}
	arg(&emit, "-o");
	arg(&emit, "/dev/null");
	arg(&emit, grouped);
	arg(&cap, "-o");
	arg(&cap, capture);
	arg(&cap, grouped);

	int bad = run_stages(bindir, st, 5, errs, &oc, NULL, e);
	char *emit_msg = NULL;
	if (!bad && !oc.failed) {
		bad = run_stages(bindir, &emit, 1, &emit_err, &oc, &oc.emit_status, e);
		if (!bad && oc.emit_status != 0 && oc.emit_status != 1)
			bad = errf(e, "amp-emit exited with status %d: %s", oc.emit_status, (emit_msg = first_line(emit_err)));
	}
	if (!bad && !oc.failed)
		bad = run_stages(bindir, &cap, 1, &cap_err, &oc, NULL, e);
	if (!bad) {
		free(emit_msg);
		emit_msg = oc.emit_status ? first_line(emit_err) : xstrdup("");
		char *cap_final = xasprintf("%s/capture.json", jobdir), *emit_final = xasprintf("%s/emit.txt", jobdir);
		char *tmp = xasprintf("%s/result.tmp", work);
		bad = write_result(tmp, id, &oc, capture, lim, emit_msg, e);
		if (!bad && !oc.failed && rename(capture, cap_final))
			bad = errf(e, "cannot rename '%s': %s", capture, strerror(errno));
		if (!bad && !oc.failed && rename(emit_err, emit_final))
			bad = errf(e, "cannot rename '%s': %s", emit_err, strerror(errno));
		free(cap_final);
		free(emit_final);
		/* the result last: its presence means the job is done */
		if (!bad && rename(tmp, result))
			bad = errf(e, "cannot rename '%s': %s", tmp, strerror(errno));
		free(tmp);
	}
	free(emit_msg);
	if (!bad)
		remove_dir(work);
	rc = bad ? -1 : 0;
	free(grouped), free(capture), free(emit_err), free(cap_err);
out:
	for (int i = 0; i < 5; i++) {
		argv_free(&st[i]);
		free(errs[i]);
	}
	argv_free(&emit), argv_free(&cap), argv_free(&plan), argv_free(&group);
	free(oc.message);
	yr_close(&r);
	free(jobpath), free(result), free(work);
	return rc;
}

/* ---- merging ---- */

typedef struct {
	char **cell;            /* index.tsv's row: job id, then the axis labels */
	int cls;                /* 0 ok, 1 failed, 2 missing */
	Val *res;               /* the result, copied out of its reader */
	int64_t key;
} Row;

/* A Val tree copied onto the heap, so that each result's reader (its
 * parser's buffers and arena) is closed as soon as it is read. */
static void val_copy(Val *to, const Val *v)
{
	*to = *v;
	to->s = v->s ? xstrdup(v->s) : NULL;
	int n = v->kind == VAL_MAP ? 2 * v->n : v->kind == VAL_SEQ ? v->n : 0;
	to->items = n ? xcalloc((size_t)n, sizeof *to->items) : NULL;
	for (int i = 0; i < n; i++)
		val_copy(&to->items[i], &v->items[i]);
}

static void val_release(Val *v)
{
	int n = v->kind == VAL_MAP ? 2 * v->n : v->kind == VAL_SEQ ? v->n : 0;
	for (int i = 0; i < n; i++)
		val_release(&v->items[i]);
	free(v->items);
	free(v->s);
}

static int split_tabs(char *line, char ***out)
{
	int n = 0;
	*out = NULL;
	for (char *p = line;;) {
		char *t = strchr(p, '\t');
		*out = xrealloc(*out, (size_t)(n + 1) * sizeof **out);
		(*out)[n++] = p;
		if (!t)
			break;
		*t = 0;
		p = t + 1;
	}
	return n;
}

static const char *sget(const Val *m, const char *k)
{
	const Val *v = m ? map_get(m, k) : NULL;
	return v && v->kind == VAL_SCALAR ? v->s : NULL;
}

static const char *limit_fit(const Val *res, int k)
{
	const Val *l = map_get(res, "limits");
	const Val *x = l ? map_get(l, limit_names[k]) : NULL;
	const char *s = sget(x, "fit");
	return s ? s : "-";
}

static int cmp_rows(const void *a, const void *b)
{
	const Row *x = *(Row *const *)a, *y = *(Row *const *)b;
	if (x->cls != y->cls)
		return x->cls - y->cls;
	if (x->cls == 0 && x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return strcmp(x->cell[0], y->cell[0]);
}

static char *status_of(const Row *w)
{
	if (w->cls == 2)
		return xstrdup("missing");
	if (w->cls == 1) {
		const char *st = sget(w->res, "stage");
		return xasprintf("failed:%s", st ? st : "-");
	}
	return xstrdup("ok");
}

int sweep_merge(const char *dir, const char *rank, int json, Output *o, SweepMerge *m, Err *e)
{
	char *ipath = xasprintf("%s/index.tsv", dir), *text = NULL;
	size_t len;
	char **head = NULL, **lines = NULL;
	Row *rows = NULL, **order = NULL;
	const Val *figs = NULL;
	int nh = 0, nrows = 0, nlines = 0, rc = -1;

	memset(m, 0, sizeof *m);
	if (input_slurp(ipath, &text, &len, e))
		goto out;
	for (char *p = text; *p;) {
		char *nl = strchr(p, '\n');
		if (!nl) {
			errf(e, "'%s': the last line does not end in a newline (not written by amp-sweep jobs)", ipath);
			goto out;
		}
		*nl = 0;
		lines = xrealloc(lines, (size_t)(nlines + 1) * sizeof *lines);
		lines[nlines++] = p;
		p = nl + 1;
	}
	if (!nlines || strncmp(lines[0], "job\t", 4)) {
		errf(e, "'%s': not a sweep's index (its first line is 'job<TAB>...')", ipath);
		goto out;
	}
	nh = split_tabs(lines[0], &head);
	rows = xcalloc((size_t)nlines, sizeof *rows);
	for (int i = 1; i < nlines; i++) {
		Row *w = &rows[nrows++];
		if (split_tabs(lines[i], &w->cell) != nh || !safe(w->cell[0], 0)) {
			errf(e, "%s:%d:1: expected %d fields, the job first", ipath, i + 1, nh);
			goto out;
		}
		char *rp = xasprintf("%s/jobs/%s/result.json", dir, w->cell[0]);
		struct stat sb;
		w->cls = 2;
		if (stat(rp, &sb) == 0) {
			const char *fmt, *status;
			YReader r;
			Val *res = NULL;
			int bad = yr_open(&r, rp, e) || yr_node(&r, &res, e);
			if (!bad && res->kind != VAL_MAP)
				bad = val_err(rp, res, e, "expected a result record");
			if (!bad && get_str(rp, res, "format", &fmt, e))
				bad = -1;
			if (!bad && strcmp(fmt, "amp-sweep-result"))
				bad = val_err(rp, map_get(res, "format"), e, "format '%s' is not a sweep result", fmt);
			if (!bad)
				bad = get_str(rp, res, "status", &status, e);
			if (!bad) {
				w->res = xcalloc(1, sizeof *w->res);
				val_copy(w->res, res);
				status = sget(w->res, "status");
			}
			yr_close(&r);
			if (bad) {
				free(rp);
				goto out;
			}
			w->cls = strcmp(status, "ok") ? 1 : 0;
			if (!w->cls) {
				const Val *sum;
				if (map_need(rp, w->res, "summary", &sum, e)) {
					free(rp);
					goto out;
				}
				if (!figs)
					figs = sum;
			}
		}
		free(rp);
		m->jobs++;
		if (w->cls == 2) {
			m->missing++;
			if (m->nmissing_ids < 20) {
				m->missing_ids = xrealloc(m->missing_ids, (size_t)(m->nmissing_ids + 1) * sizeof *m->missing_ids);
				m->missing_ids[m->nmissing_ids++] = xstrdup(w->cell[0]);
			}
		} else {
			m->finished++;
		}
	}
	if (figs && !map_get(figs, rank)) {
		Buf b = { NULL, 0, 0 };
		for (int i = 0; i < figs->n; i++)
			bprintf(&b, "%s%s", i ? ", " : "", figs->items[2 * i].s);
		errf(e, "--rank: no figure '%s' in the results (figures: %s)", rank, b.s);
		free(b.s);
		goto out;
	}
	for (int i = 0; i < nrows; i++) {
		const Val *sum = rows[i].cls ? NULL : map_get(rows[i].res, "summary");
		const char *x = sget(sum, rank);
		int64_t k = INT64_MAX;
		if (x)
			parse_i64(x, &k);
		rows[i].key = k;
	}
	order = xcalloc((size_t)nrows + 1, sizeof *order);
	for (int i = 0; i < nrows; i++)
		order[i] = &rows[i];
	qsort(order, (size_t)nrows, sizeof *order, cmp_rows);

	Err we;
	int failed = 0;
#define PUT(...) (void)(failed || (failed = output_printf(o, &we, __VA_ARGS__) != 0))
	if (!json) {
		for (int k = 0; k < nh; k++)
			PUT("%s%s", k ? "\t" : "", head[k]);
		PUT("\tstatus\tfit\ttables\tfragments\tsram");
		for (int i = 0; figs && i < figs->n; i++)
			PUT("\t%s", figs->items[2 * i].s);
		PUT("\n");
		for (int r = 0; r < nrows; r++) {
			Row *w = order[r];
			char *st = status_of(w);
			for (int k = 0; k < nh; k++)
				PUT("%s%s", k ? "\t" : "", w->cell[k]);
			const char *fit = w->cls ? NULL : sget(w->res, "fit");
			PUT("\t%s\t%s", st, fit ? fit : "-");
			for (int k = 0; k < 3; k++)
				PUT("\t%s", w->cls ? "-" : limit_fit(w->res, k));
			const Val *sum = w->cls ? NULL : map_get(w->res, "summary");
			for (int i = 0; figs && i < figs->n; i++) {
				const char *x = sget(sum, figs->items[2 * i].s);
				PUT("\t%s", x ? x : "-");
			}
			PUT("\n");
			free(st);
		}
		if (failed) {
			*e = we;
			goto out;
		}
	} else {
		Json j;
		json_init(&j, o);
		json_open(&j, '{', 0);
		json_kstr(&j, "format", "amp-sweep-merge");
		json_kint(&j, "version", SWEEP_VERSION);
		json_kstr(&j, "rank", rank);
		json_kint(&j, "jobs", m->jobs);
		json_kint(&j, "finished", m->finished);
		json_kint(&j, "missing", m->missing);
		json_key(&j, "axes");
		json_open(&j, '[', 1);
		for (int k = 1; k < nh; k++)
			json_str(&j, head[k]);
		json_close(&j, ']');
		json_key(&j, "rows");
		json_open(&j, '[', 0);
		for (int r = 0; r < nrows; r++) {
			Row *w = order[r];
			char *st = status_of(w);
			json_open(&j, '{', 1);
			json_kstr(&j, "job", w->cell[0]);
			json_key(&j, "axes");
			json_open(&j, '{', 1);
			for (int k = 1; k < nh; k++)
				json_kstr(&j, head[k], w->cell[k]);
			json_close(&j, '}');
			json_kstr(&j, "status", st);
			if (w->cls == 1)
				json_kstr(&j, "message", sget(w->res, "message") ? sget(w->res, "message") : "");
			if (!w->cls) {
				const char *fit = sget(w->res, "fit");
				json_kstr(&j, "fit", fit ? fit : "-");
				if (sget(w->res, "emit_message"))
					json_kstr(&j, "emit_message", sget(w->res, "emit_message"));
				json_key(&j, "limits");
				json_open(&j, '{', 1);
				for (int k = 0; k < 3; k++)
					json_kstr(&j, limit_names[k], limit_fit(w->res, k));
				json_close(&j, '}');
				const Val *sum = map_get(w->res, "summary");
				json_key(&j, "summary");
				json_open(&j, '{', 1);
				for (int i = 0; sum && sum->kind == VAL_MAP && i < sum->n; i++) {
					int64_t x = 0;
					parse_i64(sum->items[2 * i + 1].s ? sum->items[2 * i + 1].s : "0", &x);
					json_kint(&j, sum->items[2 * i].s, x);
				}
				json_close(&j, '}');
			}
			json_close(&j, '}');
			free(st);
		}
		json_close(&j, ']');
		json_close(&j, '}');
		if (json_end(&j, e))
			goto out;
	}
#undef PUT
	rc = 0;
out:
	for (int i = 0; i < nrows; i++) {
		if (rows[i].res) {
			val_release(rows[i].res);
			free(rows[i].res);
		}
		free(rows[i].cell);
	}
	free(rows);
	free(order);
	free(head);
	free(lines);
	free(text);
	free(ipath);
	return rc;
}

void sweep_merge_free(SweepMerge *m)
{
	for (int i = 0; i < m->nmissing_ids; i++)
		free(m->missing_ids[i]);
	free(m->missing_ids);
	memset(m, 0, sizeof *m);
}
