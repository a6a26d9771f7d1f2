/* sweep.c: sweep specs and their derived models (lib/study/sweep.h,
 * formats/sweep.md); the job directory is sweep_jobs.c, a job's run
 * sweep_run.c, the merge sweep_merge.c. */
#include "study/sweep.h"

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

#include "base/json.h"
#include "model/machine.h"
#include "model/model.h"
#include "base/num.h"
#include "study/sweep_int.h"

const char *const sweep_axis_names[AX_COUNT] = { "model", "batch", "tokens", "layers", "machine", "pins",
						 "plan_flags", "group_flags", "limits" };
/* the spec's key for each axis */
static const char *const axis_keys[AX_COUNT] = { "models", "batch", "tokens", "layers", "machines", "pins",
						 "plan_flags", "group_flags", "limits" };
const char *const sweep_limit_opts[3] = { "--table-budget", "--fragment-limit", "--sram-limit" };
const char *const sweep_limit_keys[3] = { "table_budget", "fragment_limit", "sram_limit" };
const char *const sweep_limit_names[3] = { "tables", "fragments", "sram" };


int sweep_safe_path(const char *s)
{
	return sweep_safe(s, 1);
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
		char c = sweep_word_char(x->words[x->nwords - 1]);
		if (c)
			return val_err(f, v, e, "flag '%s' has a character a shell or make would change ('%c'); "
				       "flags are words separated by spaces, without quoting",
				       x->words[x->nwords - 1], c);
		p = q;
	}
	return 0;
}

char sweep_word_char(const char *w)
{
	for (const char *c = w; *c; c++)
		if (strchr("'\"\\$`;|&<>(){}*?!#~", *c) || (unsigned char)*c < ' ')
			return *c;
	return 0;
}

const char *sweep_reserved(const char *w, int plan)
{
	static const char *const both[] = { "-o", "--output", "-z", "--compress", "--help", "--version", NULL };
	static const char *const planonly[] = { "--machine", "-m", "--explain", NULL };
	size_t n = strcspn(w, "=");
	for (int k = 0; k < 2; k++)
		for (const char *const *r = k ? planonly : both; (plan || !k) && *r; r++) {
			if ((*r)[1] == '-' ? n > 2 && !strncmp(w, *r, n) : w[0] == '-' && w[1] == (*r)[1])
				return *r;
		}
	return NULL;
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
			size_t n = strlen(sweep_limit_opts[k]);
			if (!strcmp(w, sweep_limit_opts[k])) {
				if (i + 1 == x->nwords)
					return val_err(f, v, e, "'%s' needs a value", w);
				num = x->words[++i];
				break;
			}
			if (!strncmp(w, sweep_limit_opts[k], n) && w[n] == '=') {
				num = w + n + 1;
				break;
			}
		}
		if (k == 3)
			return val_err(f, v, e, "unknown limit '%s' (limits are --table-budget, --fragment-limit and "
				       "--sram-limit)", w);
		int64_t n;
		if (parse_i64(num, &n) || n < 0)
			return val_err(f, v, e, "'%s' takes a non-negative integer, not '%s'", sweep_limit_opts[k], num);
		if (x->lim[k] >= 0)
			return val_err(f, v, e, "'%s' given twice", sweep_limit_opts[k]);
		x->lim[k] = n;
	}
	return 0;
}

static const char *const pin_keys[] = { "grid", "cast", "staging", "out_staging", "reduce", "blocks", "kv_staging",
					NULL };

/* v is a or b, or (c not NULL) c. */
static int check_choice(const char *f, const Val *v, const char *key, const char *a, const char *b,
			const char *c, Err *e)
{
	if (v->kind != VAL_SCALAR || (strcmp(v->s, a) && strcmp(v->s, b) && (!c || strcmp(v->s, c)))) {
		if (c)
			return val_err(f, v, e, "pin '%s' is '%s', '%s' or '%s'", key, a, b, c);
		return val_err(f, v, e, "pin '%s' is '%s' or '%s'", key, a, b);
	}
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
			} else if (!strcmp(key, "cast") && check_choice(f, v, key, "early", "late", NULL, e))
				return -1;
			else if (!strcmp(key, "staging") && check_choice(f, v, key, "pack-once", "direct", "spread", e))
				return -1;
			else if (!strcmp(key, "out_staging") && check_choice(f, v, key, "direct", "unpack", NULL, e))
				return -1;
			else if (!strcmp(key, "reduce") && check_choice(f, v, key, "gather", "scatter", NULL, e))
				return -1;
			else if (!strcmp(key, "kv_staging") && check_choice(f, v, key, "direct", "relay", "home", e))
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

static void scalar_out(Str *b, const char *s)
{
	if (sweep_safe(s, 1) && !strchr(s, ' ')) {
		str_printf(b, "%s", s);
		return;
	}
	str_printf(b, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			str_printf(b, "\\%c", *p);
		else if (*p < ' ')
			str_printf(b, "\\x%02x", *p);
		else
			str_printf(b, "%c", *p);
	}
	str_printf(b, "\"");
}

static const char *override(const Derive *d, const Val *v)
{
	for (int i = 0; i < d->n; i++)
		if (d->o[i].at == v)
			return d->o[i].text;
	return NULL;
}

static void flow_out(Str *b, const Val *v, const Derive *d)
{
	const char *o = d ? override(d, v) : NULL;
	if (o) {
		str_printf(b, "%s", o);
		return;
	}
	if (v->kind == VAL_SCALAR) {
		scalar_out(b, v->s);
		return;
	}
	str_printf(b, "%c", v->kind == VAL_SEQ ? '[' : '{');
	for (int i = 0; i < v->n; i++) {
		if (i)
			str_printf(b, ", ");
		if (v->kind == VAL_SEQ) {
			flow_out(b, &v->items[i], d);
		} else {
			scalar_out(b, v->items[2 * i].s);
			str_printf(b, ": ");
			flow_out(b, &v->items[2 * i + 1], d);
		}
	}
	str_printf(b, "%c", v->kind == VAL_SEQ ? ']' : '}');
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

static void block_out(Str *b, const Val *v, int indent, int inline_first, const Derive *d);

/* one "key: value" of a block mapping (the indentation already written) */
static void pair_out(Str *b, const Val *k, const Val *v, int indent, const Derive *d)
{
	scalar_out(b, k->s);
	str_printf(b, ":");
	if (is_block(v)) {
		str_printf(b, "\n");
		block_out(b, v, indent + 2, 0, d);
	} else {
		str_printf(b, " ");
		flow_out(b, v, d);
		str_printf(b, "\n");
	}
}

static void block_out(Str *b, const Val *v, int indent, int inline_first, const Derive *d)
{
	for (int i = 0; i < v->n; i++) {
		if (!(inline_first && i == 0))
			str_printf(b, "%*s", indent, "");
		if (v->kind == VAL_SEQ) {
			const Val *x = &v->items[i];
			str_printf(b, "- ");
			if (x->kind == VAL_MAP && is_block(x)) {
				block_out(b, x, indent + 2, 1, d);
			} else {
				flow_out(b, x, d);
				str_printf(b, "\n");
			}
		} else {
			pair_out(b, &v->items[2 * i], &v->items[2 * i + 1], indent, d);
		}
	}
}

/* one op's pins: the model's, each key the pin set names replaced, then
 * the pin set's other keys */
static void merged_pin_out(Str *b, const Val *base, const Val *add)
{
	int first = 1;
	str_printf(b, "{");
	for (int i = 0; base && i < base->n; i++) {
		const char *k = base->items[2 * i].s;
		const Val *v = map_get(add, k);
		str_printf(b, "%s", first ? "" : ", ");
		first = 0;
		scalar_out(b, k);
		str_printf(b, ": ");
		flow_out(b, v ? v : &base->items[2 * i + 1], NULL);
	}
	for (int i = 0; i < add->n; i++) {
		const char *k = add->items[2 * i].s;
		if (base && map_get(base, k))
			continue;
		str_printf(b, "%s", first ? "" : ", ");
		first = 0;
		scalar_out(b, k);
		str_printf(b, ": ");
		flow_out(b, &add->items[2 * i + 1], NULL);
	}
	str_printf(b, "}\n");
}

static void pins_out(Str *b, const Val *base, const Val *add)
{
	str_printf(b, "pins:\n");
	for (int i = 0; base && base->kind == VAL_MAP && i < base->n; i++) {
		const Val *k = &base->items[2 * i], *v = &base->items[2 * i + 1];
		const Val *a = add ? map_get(add, k->s) : NULL;
		str_printf(b, "  ");
		scalar_out(b, k->s);
		str_printf(b, ": ");
		if (a && v->kind == VAL_MAP) {
			merged_pin_out(b, v, a);
		} else {
			flow_out(b, a ? a : v, NULL);
			str_printf(b, "\n");
		}
	}
	for (int i = 0; add && i < add->n; i++) {
		const Val *k = &add->items[2 * i];
		if (base && base->kind == VAL_MAP && map_get(base, k->s))
			continue;
		str_printf(b, "  ");
		scalar_out(b, k->s);
		str_printf(b, ": ");
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

/* The leading dimension of every tensor of mapping ts (inputs, states). */
static void leading_batches(Derive *d, const Val *ts, int64_t batch)
{
	for (int i = 0; ts && ts->kind == VAL_MAP && i < ts->n; i++) {
		const Val *sh = map_get(&ts->items[2 * i + 1], "shape");
		if (sh && sh->kind == VAL_SEQ && sh->n)
			add_override(d, &sh->items[0], batch);
	}
}

/* Every broadcast op's batch, and every state's leading dimension (a KV
 * cache holds a block of positions per batch entry), in ops and in the
 * repeats among them. */
static void broadcast_batches(Derive *d, const Val *ops, int64_t batch)
{
	for (int i = 0; ops && ops->kind == VAL_SEQ && i < ops->n; i++) {
		const Val *op = &ops->items[i], *k = map_get(op, "op"), *bt = map_get(op, "batch");
		if (op->kind != VAL_MAP)
			continue;
		if (k && k->kind == VAL_SCALAR && !strcmp(k->s, "broadcast") && bt && bt->kind == VAL_SCALAR)
			add_override(d, bt, batch);
		if (map_get(op, "repeat")) {
			leading_batches(d, map_get(op, "state"), batch);
			broadcast_batches(d, map_get(op, "ops"), batch);
		}
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

/* Does a pin set pin staging spread (which needs amp-model 3)? */
static int pins_spread(const Val *pins)
{
	for (int i = 0; pins && pins->kind == VAL_MAP && i < pins->n; i++) {
		const Val *st = map_get(&pins->items[2 * i + 1], "staging");
		if (st && st->kind == VAL_SCALAR && !strcmp(st->s, "spread"))
			return 1;
	}
	return 0;
}

/* The derived model's text: a header line naming what was changed, then
 * the base model with batch (-1: kept), layers (-1: kept) and pins (NULL:
 * none) applied. */
/* The second dimension (the tokens) of every input of rank 3 in mapping ts. */
static void token_counts(Derive *d, const Val *ts, int64_t tokens)
{
	for (int i = 0; ts && ts->kind == VAL_MAP && i < ts->n; i++) {
		const Val *sh = map_get(&ts->items[2 * i + 1], "shape");
		if (sh && sh->kind == VAL_SEQ && sh->n == 3)
			add_override(d, &sh->items[1], tokens);
	}
}

char *sweep_derive_model(const Val *root, const char *base, int64_t batch, int64_t tokens, int64_t layers,
			  const Val *pins, const char *pins_label)
{
	Derive d = { NULL, 0, pins };
	Str b = { NULL, 0, 0 };
	const Val *in = map_get(root, "inputs"), *ops = map_get(root, "ops");

	if (batch >= 0) {
		leading_batches(&d, in, batch);
		leading_batches(&d, map_get(root, "state"), batch);
		broadcast_batches(&d, ops, batch);
	}
	if (tokens >= 0)
		token_counts(&d, in, tokens);
	for (int i = 0; layers >= 0 && ops && ops->kind == VAL_SEQ && i < ops->n; i++) {
		const Val *c = ops->items[i].kind == VAL_MAP && map_get(&ops->items[i], "repeat") ?
				       map_get(&ops->items[i], "count") : NULL;
		if (c)
			add_override(&d, c, layers);
	}
	const Val *ver = map_get(root, "amp-model");     /* a spread pin: version 3 (a superset) */
	if (ver && ver->kind == VAL_SCALAR && strtoll(ver->s, NULL, 10) < 3 && pins_spread(pins))
		add_override(&d, ver, 3);
	str_printf(&b, "# Derived by amp-sweep from %s", base);
	if (batch >= 0)
		str_printf(&b, ", batch %" PRId64, batch);
	if (tokens >= 0)
		str_printf(&b, ", %" PRId64 " tokens", tokens);
	if (layers >= 0)
		str_printf(&b, ", %" PRId64 " layers", layers);
	if (pins_label)
		str_printf(&b, ", pins '%s'", pins_label);
	str_printf(&b, ".\n");
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
	int list = a == AX_MODEL || a == AX_BATCH || a == AX_TOKENS || a == AX_LAYERS || a == AX_MACHINE;
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
			if (!sweep_safe(x->label, 0))
				return val_err(f, item, e, "file name '%s' is not letters, digits and . _ + - "
					       "(not starting with '-')", x->label);
		} else if (a == AX_BATCH || a == AX_TOKENS || a == AX_LAYERS) {
			if (val_int(f, item, 1, a == AX_LAYERS ? 1048576 : 65536, &x->n, e))
				return -1;
			x->label = xasprintf("%" PRId64, x->n);
		} else {
			const Val *k = &v->items[2 * i];
			x->label = xstrdup(k->s);
			if (!sweep_safe(x->label, 0))
				return val_err(f, k, e, "label '%s' is not letters, digits and . _ + - (not starting with '-')",
					       k->s);
			if (a == AX_PINS && check_pins(f, item, e))
				return -1;
			if ((a == AX_PLAN || a == AX_GROUP) && split_words(f, item, x, e))
				return -1;
			const char *r;
			for (int w = 0; (a == AX_PLAN || a == AX_GROUP) && w < x->nwords; w++)
				if ((r = sweep_reserved(x->words[w], a == AX_PLAN)))
					return val_err(f, item, e, "flag '%s'%s%s%s is the sweep's own (%seach job names "
						       "its output)", x->words[w], strcmp(x->words[w], r) ? " abbreviates '" : "",
						       strcmp(x->words[w], r) ? r : "", strcmp(x->words[w], r) ? "', which" : "",
						       a == AX_PLAN ? "machines is an axis; " : "");
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
	static const char *const keys[] = { "amp-sweep", "name", "models", "batch", "tokens", "layers", "machines", "pins",
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
		if (v->kind != VAL_SCALAR || !sweep_safe(v->s, 0))
			return val_err(f, v, e, "a sweep's name is letters, digits and . _ + - (not starting with '-')");
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
		int nrep = count_repeats(m->root), rank3 = 0;
		const Val *ins = map_get(m->root, "inputs");
		for (int k = 0; ins && ins->kind == VAL_MAP && k < ins->n; k++) {
			const Val *sh = map_get(&ins->items[2 * k + 1], "shape");
			rank3 += sh && sh->kind == VAL_SEQ && sh->n == 3;
		}
		if (s->ax[AX_TOKENS].present && !rank3)
			return err_at(e, f, s->ax[AX_TOKENS].line, s->ax[AX_TOKENS].col,
				      "model '%s' has no input [batch, tokens, features]; 'tokens' sets their tokens",
				      m->label);
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
		if (machine_load(&mc, m->path, e) || machine_check_one_chip(&mc, m->path, e))
			return -1;
	}
	int nb = s->ax[AX_BATCH].present ? s->ax[AX_BATCH].n : 1, nl = s->ax[AX_LAYERS].present ? s->ax[AX_LAYERS].n : 1,
	    np = s->ax[AX_PINS].present ? s->ax[AX_PINS].n : 1, nt = s->ax[AX_TOKENS].present ? s->ax[AX_TOKENS].n : 1;
	for (int i = 0; i < s->ax[AX_MODEL].n; i++)
		for (int bt = 0; bt < nb * nt; bt++)
			for (int l = 0; l < nl; l++)
				for (int p = 0; p < np; p++) {
					int b = bt / nt, t = bt % nt;
					SweepValue *m = &s->ax[AX_MODEL].v[i];
					SweepValue *bv = s->ax[AX_BATCH].present ? &s->ax[AX_BATCH].v[b] : NULL;
					SweepValue *tv = s->ax[AX_TOKENS].present ? &s->ax[AX_TOKENS].v[t] : NULL;
					SweepValue *lv = s->ax[AX_LAYERS].present ? &s->ax[AX_LAYERS].v[l] : NULL;
					SweepValue *pv = s->ax[AX_PINS].present ? &s->ax[AX_PINS].v[p] : NULL;
					char *text = sweep_derive_model(m->root, m->v->s, bv ? bv->n : -1, tv ? tv->n : -1,
								  lv ? lv->n : -1, pv ? pv->v : NULL, pv ? pv->label : NULL);
					Model mo;
					Err me;
					int rc = model_load_input(&mo, input_open_mem("derived model", text, strlen(text), &me),
								  &me);
					free(text);
					if (!rc) {
						model_free(&mo);
						continue;
					}
					const Val *at = pv ? pv->v : lv ? lv->v : tv ? tv->v : bv ? bv->v : m->v;
					const char *msg = me.msg;
					if (!strncmp(msg, "derived model:", 14)) {       /* its own location is no help */
						for (int colons = 0; *msg && colons < 3; msg++)
							colons += *msg == ':';
						msg += *msg == ' ';
					}
					return val_err(f, at, e, "model '%s'%s%s%s%s%s%s%s%s%s%s: %s", m->label,
						       bv ? " at batch " : "", bv ? bv->label : "", tv ? " with " : "",
						       tv ? tv->label : "", tv ? " tokens" : "", lv ? " with " : "",
						       lv ? lv->label : "", lv ? " layers" : "", pv ? " and pins " : "",
						       pv ? pv->label : "", msg);
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

