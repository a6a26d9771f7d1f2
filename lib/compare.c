/* compare.c: the capture reader of amp-compare (lib/compare.h). */
#include "compare.h"

#include <stdint.h>
#include <string.h>

#include "capture.h"


int cap_load(Cap *c, const char *path, Err *e)
{
	return cap_load_input(c, input_open(path, e), e);
}

void cap_free(Cap *c)
{
	yr_close(&c->r);
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
	if (c->ops->kind != VAL_SEQ)
		return val_err(f, c->ops, e, "expected 'ops' to be an array");
	if (c->phases->kind != VAL_SEQ)
		return val_err(f, c->phases, e, "expected 'phases' to be an array");
	for (int i = 0; i < c->summary->n; i++) {
		int64_t x;
		if (val_int(f, &c->summary->items[2 * i + 1], 0, INT64_MAX, &x, e))
			return -1;
	}
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

