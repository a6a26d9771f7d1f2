#include "model/scales.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "base/yio.h"

int scales_find(const Scales *s, const char *name, int *scale)
{
	for (int i = 0; s && i < s->n; i++)
		if (strcmp(s->name[i], name) == 0) {
			*scale = s->scale[i];
			return 1;
		}
	return 0;
}

void scales_add(Scales *s, const char *name, int scale)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->name[i], name) == 0) {
			s->scale[i] = scale;
			return;
		}
	s->name = xrealloc(s->name, (size_t)(s->n + 1) * sizeof *s->name);
	s->scale = xrealloc(s->scale, (size_t)(s->n + 1) * sizeof *s->scale);
	s->name[s->n] = xstrdup(name);
	s->scale[s->n++] = scale;
}

void scales_merge_max(Scales *s, const Scales *from)
{
	for (int i = 0; i < from->n; i++) {
		int had;
		if (!scales_find(s, from->name[i], &had) || had < from->scale[i])
			scales_add(s, from->name[i], from->scale[i]);
	}
}

void scales_free(Scales *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->name[i]);
	free(s->name);
	free(s->scale);
	memset(s, 0, sizeof *s);
}

int scale_for_amax(double amax)
{
	if (!(amax > 0) || !isfinite(amax))
		return 0;
	int s = (int)ceil(log2(amax / 240.0));
	while (ldexp(240.0, s) < amax)      /* guard against log2 rounding */
		s++;
	return s < -126 ? -126 : s > 126 ? 126 : s;
}

int scales_load(Scales *s, const char *path, Err *e)
{
	return scales_load_input(s, input_open(path, e), e);
}

int scales_load_input(Scales *s, Input *in, Err *e)
{
	static const char *keys[] = { "amp-scales", "scales", NULL };
	YReader r;
	Val *root;
	const Val *v;
	int64_t version;
	int rc = -1;

	memset(s, 0, sizeof *s);
	if (yr_open_input(&r, in, e) || yr_node(&r, &root, e))
		goto out;
	if (map_keys(r.name, root, keys, e) || get_int(r.name, root, "amp-scales", 0, INT64_MAX, &version, e))
		goto out;
	if (version != 1) {
		val_err(r.name, map_get(root, "amp-scales"), e, "unsupported scales file version %lld "
			"(this amp reads 1)", (long long)version);
		goto out;
	}
	if (map_need(r.name, root, "scales", &v, e))
		goto out;
	if (v->kind != VAL_MAP) {
		val_err(r.name, v, e, "expected a mapping of tensor names to scale exponents");
		goto out;
	}
	for (int i = 0; i < v->n; i++) {
		int64_t x;
		if (val_int(r.name, &v->items[2 * i + 1], -126, 126, &x, e))
			goto out;
		scales_add(s, v->items[2 * i].s, (int)x);
	}
	if (yr_expect(&r, YAML_DOCUMENT_END_EVENT, "end of document", e))
		goto out;
	rc = 0;
out:
	yr_close(&r);
	if (rc)
		scales_free(s);
	return rc;
}

int scales_write(const Scales *s, const char *path, Err *e)
{
	Output *o = output_open(path, 0, e);
	YWriter w;
	if (!o)
		return -1;
	if (yw_open(&w, o, e)) {
		output_abort(o);
		return -1;
	}
	yw_map(&w, 0);
	yw_kint(&w, "amp-scales", 1);
	yw_str(&w, "scales");
	yw_map(&w, 0);
	for (int i = 0; i < s->n; i++)
		yw_kint(&w, s->name[i], s->scale[i]);
	yw_end_map(&w);
	yw_end_map(&w);
	if (yw_close(&w, e)) {
		output_abort(o);
		return -1;
	}
	return output_commit(o, e);
}
