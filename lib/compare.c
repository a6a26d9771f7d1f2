/* compare.c: the capture reader of amp-compare (lib/compare.h). */
#include "compare.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"

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

/* The figures of map m (the summary, or its floor object in version 5):
 * integers kept; ratios, and version 6's microseconds and throughput,
 * checked and left out. */
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
		if (version >= 5 && !nested && !strcmp(k, "floor")) {
			if (v->kind != VAL_MAP)
				return val_err(f, v, e, "expected 'floor' to be an object");
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
	if (map_need(f, c->root, "summary", &c->summary, e) || map_need(f, c->root, "ops", &c->ops, e) ||
	    map_need(f, c->root, "phases", &c->phases, e))
		return -1;
	if (c->summary->kind != VAL_MAP)
		return val_err(f, c->summary, e, "expected 'summary' to be an object");
	const Val *fl = version >= 5 ? map_get(c->summary, "floor") : NULL;
	c->figs = xcalloc((size_t)c->summary->n + (fl && fl->kind == VAL_MAP ? (size_t)fl->n : 0) + 1, sizeof *c->figs);
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
	return yr_expect(&c->r, YAML_DOCUMENT_END_EVENT, "the end of the capture", e);
}

