/* model.c: the model record (lib/model/model.h): the names of ops, cast
 * orders and stagings, the lookups of tensors and ops, the primitives both
 * parts of the reader use to define a tensor, read a dtype and name a
 * visible tensor, and model_free. The reader is model_read.c (the file)
 * and model_ops.c (its ops); lib/model/model_int.h says which part holds
 * what. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_int.h"

#define OPTAB_INFO(E, name, since, slots, need, keys, ...) \
	[OP_##E] = { name, since, { OPTAB_LIST slots, NULL }, need, { OPTAB_LIST keys, NULL } },
static const OpInfo op_infos[OP_COUNT] = { AMP_OPS(OPTAB_INFO) };
#undef OPTAB_INFO

const OpInfo *op_info(OpKind k) { return &op_infos[k]; }
const char *op_name(OpKind k) { return op_infos[k].name; }

char *rope_grid_bad(const RopeGrid *g, const char *op, const char *x, int64_t T)
{
	int64_t n = g->cls + g->rows * g->cols;
	if (!g->rows || n == T)
		return NULL;
	return xasprintf("rope '%s': %lld class token%s and a %lld x %lld patch_grid make %lld tokens; x '%s' has %lld",
			 op, (long long)g->cls, g->cls == 1 ? "" : "s", (long long)g->rows, (long long)g->cols,
			 (long long)n, x, (long long)T);
}

static const char *cast_names[] = { "auto", "early", "late" };
static const char *staging_names[] = { "auto", "pack-once", "direct", "spread" };
const char *cast_name(CastOrder c) { return cast_names[c]; }
const char *staging_name(Staging s) { return staging_names[s]; }

int cast_parse(const char *s, CastOrder *c)
{
	for (int i = 1; i < 3; i++)
		if (strcmp(s, cast_names[i]) == 0) {
			*c = (CastOrder)i;
			return 0;
		}
	return -1;
}

int staging_parse(const char *s, Staging *st)
{
	for (int i = 1; i < STAGING_COUNT; i++)
		if (strcmp(s, staging_names[i]) == 0) {
			*st = (Staging)i;
			return 0;
		}
	return -1;
}

double rope_frequency(double theta, const RopeScale *sc, int64_t i, int64_t D)
{
	double f = pow(theta, -2.0 * (double)i / (double)D);
	if (!sc || sc->factor == 0)
		return f;
	double w = 2 * 3.14159265358979323846 / f;  /* pi */
	if (w < sc->original / sc->high)
		return f;
	if (w > sc->original / sc->low)
		return f / sc->factor;
	double s = (sc->original / w - sc->low) / (sc->high - sc->low);
	return (1 - s) * f / sc->factor + s * f;
}

int rope_scale_read(const char *f, const Val *kv, const char *op, RopeScale *sc, Err *e)
{
	static const char *const keys[] = { "type", "factor", "low_freq_factor", "high_freq_factor",
					    "original_context", NULL };
	const char *type;
	const Val *x;
	if (kv->kind != VAL_MAP)
		return val_err(f, kv, e, "rope '%s': scaling is a mapping {type: llama3, factor, low_freq_factor, "
			       "high_freq_factor, original_context}", op);
	if (map_keys(f, kv, keys, e) || map_need(f, kv, "type", &x, e) || val_str(f, x, &type, e))
		return -1;
	if (strcmp(type, "llama3"))
		return val_err(f, x, e, "rope '%s': scaling type '%s' is not one amp has (llama3)", op, type);
	double *to[4] = { &sc->factor, &sc->low, &sc->high, &sc->original };
	const char *why;
	for (int i = 0; i < 4; i++)
		if (map_need(f, kv, keys[i + 1], &x, e) || val_f64(f, x, to[i], e))
			return -1;
		else if ((why = rope_scale_bad(sc, i)))
			return val_err(f, x, e, "rope '%s': scaling %s must be %s", op, keys[i + 1], why);
	return 0;
}

const char *rope_scale_bad(const RopeScale *sc, int i)
{
	double v[4] = { sc->factor, sc->low, sc->high, sc->original };
	if (!isfinite(v[i]) || !(v[i] > 0) || (i == 0 && !(v[i] >= 1)) || (i == 2 && !(v[i] > sc->low)))
		return i == 0 ? "a number of at least 1" : i == 2 ? "a number above low_freq_factor" : "a number above 0";
	return NULL;
}

void rope_scale_write(YWriter *w, const RopeScale *sc)
{
	yw_str(w, "scaling");
	yw_map(w, 1);
	yw_kstr(w, "type", "llama3");
	const char *k[4] = { "factor", "low_freq_factor", "high_freq_factor", "original_context" };
	double v[4] = { sc->factor, sc->low, sc->high, sc->original };
	for (int i = 0; i < 4; i++) {
		yw_str(w, k[i]);
		yw_f64(w, v[i]);
	}
	yw_end_map(w);
}

int model_find(const Model *m, const char *name)
{
	for (int i = 0; i < m->nt; i++)
		if (strcmp(m->t[i].name, name) == 0)
			return i;
	return -1;
}

int model_find_op(const Model *m, const char *name)
{
	for (int i = 0; i < m->nops; i++)
		if (strcmp(m->ops[i].name, name) == 0)
			return i;
	return -1;
}

/* The suffixes of the tensors amp makes: a precision cast's, a K-split's
 * or an attention's partial, a norm's sums of squares, a folded norm's
 * rows before their scale. */
static const char *const reserved[] = { ".fp8", ".fp16", ".fp32", ".int32", ".partial", ".sumsq", ".prenorm",
					NULL };

int model_name_ok(const char *f, const Val *v, const char *what, int tensor, Err *e)
{
	const char *s = v->s;
	size_t n = strlen(s);
	if (!n || n > MODEL_NAME_MAX)
		return val_err(f, v, e, "%s name of %zu bytes: a name has 1 to %d", what, n, MODEL_NAME_MAX);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		if (*c < 0x20 || *c == 0x7f || *c == '@')
			return val_err(f, v, e, "%s name '%s' holds %s: names hold no control character and no '@'",
				       what, *c == '@' ? s : "(a control character)", *c == '@' ? "'@'" : "a control character");
	if (tensor && strchr(s, '/'))
		return val_err(f, v, e, "tensor name '%s' holds '/': a tensor's name is a file's name too "
			       "(amp-run --data DIR and --save DIR read and write DIR/<name>.npy)", s);
	for (int i = 0; tensor && reserved[i]; i++) {
		size_t k = strlen(reserved[i]);
		if (n > k && strcmp(s + n - k, reserved[i]) == 0)
			return val_err(f, v, e, "tensor name '%s' ends in '%s', which amp gives the tensors it makes "
				       "(.fp8, .fp16, .fp32, .int32, .partial, .sumsq, .prenorm)", s, reserved[i]);
	}
	return 0;
}

MTensor *model_new_tensor(Model *m, const char *f, const Val *key, Err *e)
{
	if (model_name_ok(f, key, "tensor", 1, e))
		return NULL;
	if (model_find(m, key->s) >= 0) {
		val_err(f, key, e, "tensor '%s' is defined twice", key->s);
		return NULL;
	}
	m->t = xrealloc(m->t, (size_t)(m->nt + 1) * sizeof *m->t);
	MTensor *t = &m->t[m->nt++];
	memset(t, 0, sizeof *t);
	t->name = xstrdup(key->s);
	t->count = 1;
	t->rep = -1;
	t->line = key->line;
	t->col = key->col;
	return t;
}

int model_dtype(const char *f, const Val *v, Format *fmt, Err *e)
{
	const char *s;
	if (val_str(f, v, &s, e))
		return -1;
	if (fmt_parse(s, fmt))
		return val_err(f, v, e, "unknown dtype '%s' (expected fp32, fp16, fp8 or int32)", s);
	return 0;
}

/* The tensor a name refers to from inside repeat rep (-1: outside any):
 * defined already, and not local to another repeat's body. */
int model_visible(Model *m, const char *f, const Val *v, int rep, int *idx, Err *e)
{
	const char *s;

	if (val_str(f, v, &s, e))
		return -1;
	*idx = model_find(m, s);
	if (*idx < 0)
		return val_err(f, v, e, "undefined tensor '%s'", s);
	if (m->t[*idx].rep >= 0 && m->t[*idx].rep != rep)
		return val_err(f, v, e, "tensor '%s' is local to the body of repeat '%s'", s,
			       m->rep[m->t[*idx].rep].name);
	return 0;
}

int model_same_shape(const MTensor *a, const MTensor *b)
{
	if (a->rank != b->rank)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->shape[i] != b->shape[i])
			return 0;
	return 1;
}

void model_free(Model *m)
{
	for (int i = 0; i < m->nt; i++)
		free(m->t[i].name);
	for (int i = 0; i < m->nops; i++)
		free(m->ops[i].name);
	for (int i = 0; i < m->nrep; i++)
		free(m->rep[i].name);
	free(m->rep);
	free(m->t);
	free(m->ops);
	free(m->name);
	free(m->file);
	memset(m, 0, sizeof *m);
}
