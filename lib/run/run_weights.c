/* run_weights.c: amp-run --weights DIR (run.h): the weights amp-import
 * wrote, checked against the program before a run reads them. */
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "base/npy.h"
#include "base/yio.h"
#include "run/run_int.h"

/* The manifest's record of tensor name, or NULL. */
static const Val *record(const Val *tensors, const char *name)
{
	for (int i = 0; i < tensors->n; i++) {
		const Val *n = map_get(&tensors->items[i], "name");
		if (n && n->kind == VAL_SCALAR && !strcmp(n->s, name))
			return &tensors->items[i];
	}
	return NULL;
}

/* Does shape s (n long) hold parameter x: its [count, ...], or with count
 * 1 one instance's? */
static int holds(const PTensor *x, const int64_t *s, int n)
{
	int stacked = n == x->rank + 1;
	if (n != x->rank + stacked || (stacked && s[0] != x->count) || (!stacked && x->count != 1))
		return 0;
	for (int k = 0; k < x->rank; k++)
		if (s[k + stacked] != x->shape[k])
			return 0;
	return 1;
}

/* One parameter's file against its record: shape, dtype and digest. */
static int check_file(const char *dir, const char *man, const Val *r, const PTensor *x, Err *e)
{
	int64_t shape[NPY_MAX_RANK + 1];
	int n;
	const char *dt, *dg;
	const Val *v;
	if (map_need(man, r, "shape", &v, e) || val_ints(man, v, NPY_MAX_RANK, 0, INT64_C(1) << 40, shape, &n, e) ||
	    get_str(man, r, "dtype", &dt, e) || get_str(man, r, "fnv1a", &dg, e))
		return -1;
	if (!holds(x, shape, n))
		return val_err(man, v, e, "tensor '%s': this shape is not the program's (%lld instances of its shape)",
			       x->name, (long long)x->count);
	if (strcmp(dt, "fp32"))
		return val_err(man, map_get(r, "dtype"), e, "tensor '%s' is %s; amp-import writes fp32", x->name, dt);
	char *path = xasprintf("%s/%s.npy", dir, x->name), *text = NULL, hex[17];
	size_t len = 0;
	Npy a;
	int rc = input_slurp(path, &text, &len, e);
	if (!rc) {
		snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a(text, len));
		if (strcmp(hex, dg))
			rc = errf(e, "%s: its digest %s differs from %s, recorded at import (%s)", path, hex, dg, man);
	}
	free(text);
	if (!rc && !(rc = npy_read(path, &a, e))) {
		int same = a.type == NPY_F32 && a.rank == n;
		for (int k = 0; same && k < n; k++)
			same = a.shape[k] == shape[k];
		if (!same)
			rc = errf(e, "%s: not the fp32 array of the shape %s records for '%s'", path, man, x->name);
		npy_free(&a);
	}
	free(path);
	return rc;
}

int run_weights_check(const Plan *pl, const char *dir, Err *e)
{
	char *man = xasprintf("%s/weights.yaml", dir);
	YReader r;
	Val *doc = NULL;
	const Val *tensors;
	int64_t version;
	int rc = yr_open(&r, man, e);
	if (rc) {
		free(man);
		return -1;
	}
	rc = yr_node(&r, &doc, e);
	if (!rc && doc->kind != VAL_MAP)
		rc = val_err(man, doc, e, "expected the manifest amp-import writes (amp-weights: 1)");
	rc = rc || get_int(man, doc, "amp-weights", 1, 1, &version, e) || map_need(man, doc, "tensors", &tensors, e);
	if (!rc && tensors->kind != VAL_SEQ)
		rc = val_err(man, tensors, e, "expected a list of tensors");
	for (int i = 0; !rc && i < tensors->n; i++) {
		const char *name;
		const Val *t = &tensors->items[i];
		if (t->kind != VAL_MAP)
			rc = val_err(man, t, e, "expected {name, shape, dtype, fnv1a}");
		else if (!(rc = get_str(man, t, "name", &name, e)) &&
			 (plan_find_tensor(pl, name) < 0 || pl->t[plan_find_tensor(pl, name)].role != R_PARAM))
			rc = val_err(man, t, e, "tensor '%s' is no parameter of the program", name);
	}
	for (int k = 0; !rc && k < pl->nt; k++) {
		const PTensor *x = &pl->t[k];
		if (x->role != R_PARAM)
			continue;
		const Val *rec = record(tensors, x->name);
		if (strchr(x->name, '/'))       /* its file would not be in DIR */
			rc = errf(e, "%s: parameter '%s' holds '/'", man, x->name);
		else
			rc = !rec ? errf(e, "%s: the program's parameter '%s' is missing", man, x->name)
			  : check_file(dir, man, rec, x, e);
	}
	yr_close(&r);
	free(man);
	return rc;
}
