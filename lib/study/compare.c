/* compare.c: the capture reader of amp-compare (lib/study/compare.h). */
#include "study/compare.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"

static int traffic_ok(Cap *c, const char *f, Err *e);

int cap_load(Cap *c, const char *path, Err *e)
{
	return cap_load_input(c, input_open(path, e), e);
}

void cap_free(Cap *c)
{
	free(c->figs);
	c->figs = NULL, c->nfigs = 0;
	yr_close(&c->r);
}

const CapFig *cap_fig(const Cap *c, const char *key)
{
	for (int i = 0; i < c->nfigs; i++)
		if (!strcmp(c->figs[i].key, key))
			return &c->figs[i];
	return NULL;
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);
	return n >= k && !strcmp(s + n - k, tail);
}

/* A ratio: a non-negative number, or null. */
static int ratio_ok(const char *f, const Val *v, Err *e)
{
	double x;
	if (v->kind == VAL_SCALAR && v->s && !strcmp(v->s, "null"))
		return 0;
	if (val_f64(f, v, &x, e))
		return -1;
	if (x < 0)
		return val_err(f, v, e, "expected a ratio (a number, 0 or more, or null)");
	return 0;
}

/* The figures of map m (the summary, or one of its objects: floor in
 * versions 5 and 6, bound and plan_floor from version 7):
 * integers kept; ratios, and version 6's microseconds and throughput,
 * checked and left out. */
static int summary_object(const char *k, int64_t version)
{
	return (version >= 5 && version <= 6 && !strcmp(k, "floor")) ||
	       (version >= 7 && (!strcmp(k, "bound") || !strcmp(k, "plan_floor")));
}

static int read_figs(Cap *c, const char *f, const Val *m, int64_t version, int nested, Err *e)
{
	for (int i = 0; i < m->n; i++) {
		const char *k = m->items[2 * i].s;
		const Val *v = &m->items[2 * i + 1];
		int64_t x;
		if (version >= 5 && (ends_with(k, "_ratio") || (nested && !strcmp(k, "ratio")))) {
			if (ratio_ok(f, v, e))
				return -1;
			continue;
		}
		/* version 6's time at the clock: a number or null, and the
		 * throughput object or null; checked and left out (cycles are
		 * compared; time follows from them) */
		if (version >= 6 && !nested && !strcmp(k, "microseconds")) {
			if (ratio_ok(f, v, e))
				return -1;
			continue;
		}
		if (version >= 6 && !nested && !strcmp(k, "throughput")) {
			if (v->kind != VAL_MAP && !(v->kind == VAL_SCALAR && v->s && !strcmp(v->s, "null")))
				return val_err(f, v, e, "expected 'throughput' to be an object or null");
			continue;
		}
		if (!nested && summary_object(k, version)) {
			if (v->kind != VAL_MAP)
				return val_err(f, v, e, "expected '%s' to be an object", k);
			if (read_figs(c, f, v, version, 1, e))
				return -1;
			continue;
		}
		if (val_int(f, v, 0, INT64_MAX, &x, e))
			return -1;
		c->figs[c->nfigs++] = (CapFig){ k, x };
	}
	return 0;
}

int cap_load_input(Cap *c, Input *in, Err *e)
{
	const Val *v, *m;
	const char *fmt;
	int64_t version;

	memset(c, 0, sizeof *c);
	if (yr_open_input(&c->r, in, e) || yr_node(&c->r, &c->root, e))
		return -1;
	const char *f = c->r.name;
	if (c->root->kind != VAL_MAP)
		return val_err(f, c->root, e, "expected a capture (a JSON object)");
	if (get_str(f, c->root, "format", &fmt, e))
		return -1;
	if (strcmp(fmt, "amp-capture"))
		return val_err(f, map_get(c->root, "format"), e, "format '%s' is not a capture (amp-capture)", fmt);
	if (get_int(f, c->root, "version", 0, INT64_MAX, &version, e))
		return -1;
	if (version < CAPTURE_VERSION_OLDEST || version > CAPTURE_VERSION)
		return val_err(f, map_get(c->root, "version"), e,
			       "unsupported capture version %lld (this amp reads %d to %d)", (long long)version,
			       CAPTURE_VERSION_OLDEST, CAPTURE_VERSION);
	if (get_str(f, c->root, "model", &c->model, e) || map_need(f, c->root, "machine", &m, e) ||
	    get_str(f, m, "name", &c->machine, e))
		return -1;
	if (map_get(m, "tiles") && get_int(f, m, "tiles", 1, INT32_MAX, &c->tiles, e))
		return -1;
	if (map_need(f, c->root, "summary", &c->summary, e) || map_need(f, c->root, "ops", &c->ops, e) ||
	    map_need(f, c->root, "phases", &c->phases, e))
		return -1;
	if (c->summary->kind != VAL_MAP)
		return val_err(f, c->summary, e, "expected 'summary' to be an object");
	size_t nf = (size_t)c->summary->n + 1;
	for (int i = 0; i < c->summary->n; i++) {
		const Val *o = &c->summary->items[2 * i + 1];
		if (summary_object(c->summary->items[2 * i].s, version) && o->kind == VAL_MAP)
			nf += (size_t)o->n;
	}
	c->figs = xcalloc(nf, sizeof *c->figs);
	if (read_figs(c, f, c->summary, version, 0, e))
		return -1;
	if (c->ops->kind != VAL_SEQ)
		return val_err(f, c->ops, e, "expected 'ops' to be an array");
	if (c->phases->kind != VAL_SEQ)
		return val_err(f, c->phases, e, "expected 'phases' to be an array");
	for (int i = 0; i < c->ops->n; i++) {
		const char *s;
		int64_t x;
		v = &c->ops->items[i];
		if (v->kind != VAL_MAP)
			return val_err(f, v, e, "expected an op record (an object)");
		if (get_str(f, v, "op", &s, e) || get_int(f, v, "compute_cycles", 0, INT64_MAX, &x, e) ||
		    get_int(f, v, "exchange_cycles", 0, INT64_MAX, &x, e) ||
		    get_int(f, v, "total_cycles", 0, INT64_MAX, &x, e))
			return -1;
	}
	for (int i = 0; i < c->phases->n; i++) {
		const Val *l;
		int64_t x;
		v = &c->phases->items[i];
		if (v->kind != VAL_MAP)
			return val_err(f, v, e, "expected a phase record (an object)");
		if (map_need(f, v, "labels", &l, e) || get_int(f, v, "count", 0, INT64_MAX, &x, e) ||
		    get_int(f, v, "transfers", 0, INT64_MAX, &x, e) ||
		    get_int(f, v, "max_row_bytes", 0, INT64_MAX, &x, e) || get_int(f, v, "cycles", 0, INT64_MAX, &x, e))
			return -1;
		if (l->kind != VAL_SEQ)
			return val_err(f, l, e, "expected 'labels' to be an array of strings");
		for (int k = 0; k < l->n; k++)
			if (l->items[k].kind != VAL_SCALAR)
				return val_err(f, &l->items[k], e, "expected a label (a string)");
	}
	if (traffic_ok(c, f, e))
		return -1;
	return yr_expect(&c->r, YAML_DOCUMENT_END_EVENT, "the end of the capture", e);
}

/* The phase whose id is the text id (phases[].id; the index when the
 * record has none), or NULL. */
static const Val *phase_by_id(const Cap *c, const char *id)
{
	for (int i = 0; i < c->phases->n; i++) {
		const Val *p = &c->phases->items[i], *v = map_get(p, "id");
		char idx[24];
		snprintf(idx, sizeof idx, "%d", i);
		if (!strcmp(v && v->kind == VAL_SCALAR ? v->s : idx, id))
			return p;
	}
	return NULL;
}

/* phase_traffic, when present: an object keyed by phase id, each a list of
 * classes with the fields compared. */
static int traffic_ok(Cap *c, const char *f, Err *e)
{
	static const char *strs[] = { "op", "operand", "movement" };
	static const char *ints[] = { "sends", "source_payload_bytes", "receiver_payload_bytes" };
	c->traffic = map_get(c->root, "phase_traffic");
	if (!c->traffic)
		return 0;
	if (c->traffic->kind != VAL_MAP)
		return val_err(f, c->traffic, e, "expected 'phase_traffic' to be an object keyed by phase id");
	for (int i = 0; i < c->traffic->n; i++) {
		const Val *k = &c->traffic->items[2 * i], *l = &c->traffic->items[2 * i + 1];
		if (!phase_by_id(c, k->s))
			return val_err(f, k, e, "phase_traffic names phase '%s', which 'phases' does not have", k->s);
		if (l->kind != VAL_SEQ)
			return val_err(f, l, e, "expected the classes of phase %s (an array)", k->s);
		for (int j = 0; j < l->n; j++) {
			const Val *r = &l->items[j];
			const char *s;
			int64_t x;
			if (r->kind != VAL_MAP)
				return val_err(f, r, e, "expected a movement class (an object)");
			for (size_t q = 0; q < sizeof strs / sizeof *strs; q++)
				if (get_str(f, r, strs[q], &s, e))
					return -1;
			for (size_t q = 0; q < sizeof ints / sizeof *ints; q++)
				if (get_int(f, r, ints[q], 0, INT64_MAX, &x, e))
					return -1;
		}
	}
	return 0;
}

/* ---- lining up ---- */

static int64_t fig_of(const Val *m, const char *key)
{
	const Val *v = map_get(m, key);
	return v ? strtoll(v->s, NULL, 10) : 0;
}

static int by_str(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static int by_int(const void *x, const void *y)
{
	int a = *(const int *)x, b = *(const int *)y;
	return (a > b) - (a < b);
}

/* Each phase's labels as ids into the sorted labels of both captures. */
static LabelSet *label_sets(const Cap *c, const char **names, int nn, int **store)
{
	LabelSet *s = xcalloc((size_t)c->phases->n + 1, sizeof *s);
	int total = 0;
	for (int i = 0; i < c->phases->n; i++)
		total += map_get(&c->phases->items[i], "labels")->n;
	int *ids = *store = xcalloc((size_t)total + 1, sizeof *ids);
	for (int i = 0; i < c->phases->n; i++) {
		const Val *l = map_get(&c->phases->items[i], "labels");
		int k = 0;
		for (int j = 0; j < l->n; j++) {
			const char *key = l->items[j].s;
			const char **at = bsearch(&key, names, (size_t)nn, sizeof *names, by_str);
			ids[k++] = (int)(at - names);
		}
		qsort(ids, (size_t)k, sizeof *ids, by_int);
		int u = 0;
		for (int j = 0; j < k; j++)
			if (!u || ids[u - 1] != ids[j])
				ids[u++] = ids[j];
		s[i] = (LabelSet){ ids, u };
		ids += k;
	}
	return s;
}

int cmp_phases(const Cap *a, const Cap *b, PhaseLine **out)
{
	const Cap *side[2] = { a, b };
	int nn = 0, *store[2];
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < side[s]->phases->n; i++)
			nn += map_get(&side[s]->phases->items[i], "labels")->n;
	const char **names = xcalloc((size_t)nn + 1, sizeof *names);
	nn = 0;
	for (int s = 0; s < 2; s++)
		for (int i = 0; i < side[s]->phases->n; i++) {
			const Val *l = map_get(&side[s]->phases->items[i], "labels");
			for (int j = 0; j < l->n; j++)
				names[nn++] = l->items[j].s;
		}
	qsort(names, (size_t)nn, sizeof *names, by_str);
	int u = 0;
	for (int i = 0; i < nn; i++)
		if (!u || strcmp(names[u - 1], names[i]))
			names[u++] = names[i];
	LabelSet *la = label_sets(a, names, u, &store[0]), *lb = label_sets(b, names, u, &store[1]);
	int n = match_phases(la, a->phases->n, lb, b->phases->n, out);
	free(la), free(lb), free(store[0]), free(store[1]), free(names);
	return n;
}

const char *const cls_fig_name[CLS_FIGS] = { "sends", "bytes", "received_bytes" };

static int add_classes(const Cap *c, int side, ClassRow **rows, int n, int *cap)
{
	static const char *keys[CLS_FIGS] = { "sends", "source_payload_bytes", "receiver_payload_bytes" };
	if (!c->traffic)
		return n;
	/* in phase order, whatever the order of phase_traffic's keys */
	for (int i = 0; i < c->phases->n; i++) {
		const Val *p = &c->phases->items[i], *idv = map_get(p, "id"), *l = NULL;
		char idx[24];
		snprintf(idx, sizeof idx, "%d", i);
		const char *id = idv && idv->kind == VAL_SCALAR ? idv->s : idx;
		for (int k = 0; k < c->traffic->n && !l; k++)
			if (!strcmp(c->traffic->items[2 * k].s, id))
				l = &c->traffic->items[2 * k + 1];
		if (!l)
			continue;
		int64_t count = fig_of(p, "count");
		if (!map_get(p, "count"))
			count = 1;
		for (int j = 0; j < l->n; j++) {
			const Val *r = &l->items[j];
			const char *op = map_get(r, "op")->s, *od = map_get(r, "operand")->s,
				   *mv = map_get(r, "movement")->s;
			int at = 0;
			while (at < n && (strcmp((*rows)[at].op, op) || strcmp((*rows)[at].operand, od) ||
					  strcmp((*rows)[at].movement, mv)))
				at++;
			if (at == n) {
				if (n == *cap)
					*cap = 2 * *cap + 16, *rows = xrealloc(*rows, (size_t)*cap * sizeof **rows);
				memset(&(*rows)[n], 0, sizeof **rows);
				(*rows)[n].op = op, (*rows)[n].operand = od, (*rows)[n].movement = mv;
				n++;
			}
			ClassRow *w = &(*rows)[at];
			w->in[side] = 1;
			for (int q = 0; q < CLS_FIGS; q++)
				w->v[side][q] += fig_of(r, keys[q]) * count;
		}
	}
	return n;
}

int cmp_classes(const Cap *a, const Cap *b, ClassRow **out)
{
	int cap = 0, n = 0;
	*out = NULL;
	n = add_classes(a, 0, out, n, &cap);
	return add_classes(b, 1, out, n, &cap);
}


static const Val *op_named(const Cap *c, const char *name)
{
	for (int i = 0; i < c->ops->n; i++)
		if (!strcmp(map_get(&c->ops->items[i], "op")->s, name))
			return &c->ops->items[i];
	return NULL;
}

void cmp_build(Compare *m, const Cap *a, const Cap *b, const char *na, const char *nb)
{
	memset(m, 0, sizeof *m);
	m->side[0] = a, m->side[1] = b;
	m->name[0] = na, m->name[1] = nb;
	m->ops = xcalloc((size_t)(a->ops->n + b->ops->n) + 1, sizeof *m->ops);
	for (int side = 0; side < 2; side++) {
		const Cap *c = side ? b : a, *other = side ? a : b;
		for (int i = 0; i < c->ops->n; i++) {
			const Val *x = &c->ops->items[i];
			const Val *y = op_named(other, map_get(x, "op")->s);
			if (side && y)
				continue;       /* with A's */
			OpRow *r = &m->ops[m->nops++];
			r->op = map_get(x, "op")->s, r->v[0] = side ? NULL : x, r->v[1] = side ? x : y;
		}
	}
	m->nph = cmp_phases(a, b, &m->ph);
	m->classes = a->traffic && b->traffic;
	m->ncl = cmp_classes(a, b, &m->cl);
}

void cmp_free(Compare *m)
{
	free(m->ops), free(m->ph), free(m->cl);
	memset(m, 0, sizeof *m);
}

const char *cmp_status(const int in[2])
{
	return in[0] && in[1] ? "both" : in[0] ? "removed" : "added";
}

const char *const cmp_phase_fig_name[PF_N] = { "count", "transfers", "bytes", "max_row_bytes", "max_fragments",
					       "cycles" };

void cmp_phase_figs(const Cap *c, int i, int64_t f[PF_N])
{
	const Val *p = &c->phases->items[i];
	int64_t n = fig_of(p, "count");
	f[PF_COUNT] = n;
	f[PF_TRANSFERS] = fig_of(p, "transfers") * n;
	f[PF_BYTES] = fig_of(p, "bytes") * n;
	f[PF_MAX_ROW] = fig_of(p, "max_row_bytes");
	f[PF_MAX_FRAG] = fig_of(p, "max_fragments");
	f[PF_CYCLES] = fig_of(p, "cycles") * n;
}
