/* model_ops.c: one item of a model's ops list (formats/model.md): an op,
 * its keys, its operands (defined already and visible from its repeat),
 * the rules on their roles, dtypes and shapes, and the tensor it defines;
 * or the MAP head, read as the ten ops it stands for. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model_int.h"

/* The tensor an op operand names; it must be defined already. */
static int operand(Model *m, const char *f, const Val *op, const char *key, int rep, int *idx, Err *e)
{
	const Val *v;

	if (map_need(f, op, key, &v, e))
		return -1;
	return model_visible(m, f, v, rep, idx, e);
}

static int activation(const char *f, const Val *at, const MOp *o, const MTensor *t, Err *e)
{
	if (t->role == T_PARAM || t->rank != 3)
		return val_err(f, at, e, "%s '%s': '%s' must be an activation [batch, tokens, features]",
			       op_name(o->kind), o->name, t->name);
	return 0;
}

static int vector(const char *f, const Val *at, const MOp *o, const MTensor *t, int64_t n, Err *e)
{
	if (t->role != T_PARAM || t->rank != 1 || t->shape[0] != n)
		return val_err(f, at, e, "%s '%s': '%s' must be a parameter of shape [%lld]",
			       op_name(o->kind), o->name, t->name, (long long)n);
	return 0;
}

/* Positions p of op o for the rows of activation a: int32 [B, T, 1]. */
static int positions_of(const char *f, const Val *at, const MOp *o, const MTensor *p, const MTensor *a, Err *e)
{
	if (p->dtype != FMT_I32 || p->rank != 3 || p->shape[0] != a->shape[0] || p->shape[1] != a->shape[1] ||
	    p->shape[2] != 1)
		return val_err(f, at, e, "%s '%s': positions '%s' must be int32 [%lld, %lld, 1], a position per "
			       "row of '%s'", op_name(o->kind), o->name, p->name, (long long)a->shape[0],
			       (long long)a->shape[1], a->name);
	return 0;
}

/* append: x [B, T, W] fp16 written into state cache [B, P, W] at rows
 * positions [B, T, 1]; once per state, outside every repeat. */
static int append_op(Model *m, const char *f, const Val *v, MOp *o, Err *e)
{
	const MTensor *c = &m->t[o->out], *x = &m->t[o->in[0]];
	if (c->role != T_STATE)
		return val_err(f, map_get(v, "cache"), e, "append '%s': cache '%s' must be a state", o->name, c->name);
	if (o->rep != c->rep)
		return val_err(f, v, e, "append '%s': state '%s' is appended %s", o->name, c->name,
			       c->rep < 0 ? "outside every repeat (a repeat's own states, in its body)" :
			       "in the body of the repeat that declares it");
	for (int i = 0; i < m->nops; i++)
		if (m->ops[i].kind == OP_APPEND && m->ops[i].out == o->out)
			return val_err(f, map_get(v, "cache"), e, "append '%s': state '%s' is already appended by "
				       "'%s' (line %ld); a program appends each state once", o->name, c->name,
				       m->ops[i].name, m->ops[i].line);
	if (x->role == T_PARAM || x->role == T_STATE || x->rank != 3 || x->dtype != FMT_FP16 ||
	    x->shape[0] != c->shape[0] || x->shape[2] != c->shape[2] || x->shape[1] > c->shape[1])
		return val_err(f, map_get(v, "x"), e, "append '%s': x '%s' must be an fp16 activation [%lld, at most "
			       "%lld, %lld], rows of state '%s'", o->name, x->name, (long long)c->shape[0],
			       (long long)c->shape[1], (long long)c->shape[2], c->name);
	if (positions_of(f, map_get(v, "positions"), o, &m->t[o->in[1]], x, e))
		return -1;
	if (o->first >= 0 && o->first + x->shape[1] > c->shape[1])
		return val_err(f, map_get(v, "first"), e, "append '%s': rows %lld to %lld pass the %lld positions of "
			       "state '%s'", o->name, (long long)o->first, (long long)(o->first + x->shape[1] - 1),
			       (long long)c->shape[1], c->name);
	o->name = xstrdup(o->name);
	m->ops = xrealloc(m->ops, (size_t)(m->nops + 1) * sizeof *m->ops);
	m->ops[m->nops++] = *o;
	return 0;
}

static int positive(const char *f, const Val *v, const char *key, int64_t *out, Err *e)
{
	return get_int(f, v, key, 1, INT64_C(1) << 30, out, e);
}

/* An op's key that a model version added, naming one of two words (kv
 * its value): *flag 1 for the second. Refused at the key before that
 * version, or naming any other word (what: the words and their meaning). */
static int word_pair(const char *f, const Model *m, const Val *kv, const char *kind, const char *name,
		     const char *key, int since, const char *no, const char *yes, const char *what, int *flag,
		     Err *e)
{
	if (m->version < since)
		return val_err(f, kv, e, "%s '%s': %s needs amp-model: %d (this file is version %d)", kind, name, key,
			       since, m->version);
	if (kv->kind != VAL_SCALAR || (strcmp(kv->s, no) && strcmp(kv->s, yes)))
		return val_err(f, kv, e, "%s '%s': %s is %s", kind, name, key, what);
	*flag = !strcmp(kv->s, yes);
	return 0;
}

/* A grid rope's patch_grid [rows, columns] and class_tokens (version 9),
 * in place of positions (kv: the patch_grid). */
static int rope_grid(Model *m, const char *f, const Val *v, const Val *kv, MOp *o, Err *e)
{
	RopeGrid *g = &o->rope_grid;
	int64_t rc[2];
	int n;
	if (m->version < 9)
		return val_err(f, kv, e, "rope '%s': patch_grid needs amp-model: 9 (this file is version %d)", o->name,
			       m->version);
	if (val_ints(f, kv, 2, 1, 1 << 15, rc, &n, e))
		return -1;
	if (n != 2)
		return val_err(f, kv, e, "rope '%s': patch_grid is [rows, columns] of the patches", o->name);
	g->rows = rc[0], g->cols = rc[1];
	if (o->in[1] >= 0)
		return val_err(f, map_get(v, "positions"), e, "rope '%s': a patch_grid rope takes no positions (each "
			       "token's row and column follow from patch_grid and class_tokens)", o->name);
	if (map_get(v, "class_tokens") && get_int(f, v, "class_tokens", 0, 64, &g->cls, e))
		return -1;
	o->nin = 1;
	return 0;
}

/* A rope's attributes (o: its op, read so far): heads and head width,
 * head_stride (version 6), pairs (7), theta and scaling (8), patch_grid and
 * class_tokens (9); positions, unless it has a patch_grid. */
static int rope_attrs(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	const Val *kv;
	(void)first;
	if (!map_get(v, "patch_grid") && o->in[1] < 0 && operand(m, f, v, "positions", rep, &o->in[1], e))
		return -1;      /* (missing) */
	if (map_get(v, "class_tokens") && !map_get(v, "patch_grid"))     /* (with one, rope_grid checks) */
		return m->version < 9 ? val_err(f, map_get(v, "class_tokens"), e, "rope '%s': class_tokens needs "
						"amp-model: 9 (this file is version %d)", o->name, m->version) :
					val_err(f, map_get(v, "class_tokens"), e, "rope '%s': class_tokens goes with "
						"patch_grid", o->name);
	if (positive(f, v, "heads", &o->heads, e) || positive(f, v, "head_dim", &o->head_dim, e))
		return -1;
	if (o->head_dim % 2)
		return val_err(f, map_get(v, "head_dim"), e, "rope '%s': head_dim %lld is odd (each head's "
			       "halves rotate together)", o->name, (long long)o->head_dim);
	o->head_stride = o->head_dim;
	if ((kv = map_get(v, "head_stride"))) {
		if (m->version < 6)
			return val_err(f, kv, e, "rope '%s': head_stride needs amp-model: 6 (this file is "
				       "version %d)", o->name, m->version);
		if (positive(f, v, "head_stride", &o->head_stride, e))
			return -1;
		if (o->head_stride < o->head_dim)
			return val_err(f, kv, e, "rope '%s': head_stride %lld is less than head_dim %lld (the "
				       "rotated heads would overlap)", o->name, (long long)o->head_stride,
				       (long long)o->head_dim);
	}
	if ((kv = map_get(v, "pairs"))) {
		if (word_pair(f, m, kv, "rope", o->name, "pairs", 7, "half", "interleaved",
			      "'half' (element i of a head with i + head_dim/2) or 'interleaved' (2i with 2i + 1)",
			      &o->interleaved, e))
			return -1;
		if (o->interleaved && o->head_stride % 2)
			return val_err(f, map_get(v, "head_stride"), e, "rope '%s': pairs interleaved needs an even "
				       "head_stride (%lld would start head 1's pairs at an odd column)", o->name,
				       (long long)o->head_stride);
	}
	o->theta = 10000;
	if ((kv = map_get(v, "theta")) && val_f64(f, kv, &o->theta, e))
		return -1;
	if (!(o->theta > 1) || !isfinite(o->theta))
		return val_err(f, kv, e, "rope '%s': theta must be a number above 1", o->name);
	if ((kv = map_get(v, "scaling")) &&
	    (m->version < 8 ? val_err(f, kv, e, "rope '%s': scaling needs amp-model: 8 (this file is version %d)",
				      o->name, m->version) : rope_scale_read(f, kv, o->name, &o->rope_scale, e)))
		return -1;
	if ((kv = map_get(v, "patch_grid"))) {
		if (rope_grid(m, f, v, kv, o, e))
			return -1;
		if (o->head_dim % 4)
			return val_err(f, map_get(v, "head_dim"), e, "rope '%s': head_dim %lld is not a multiple of 4 (a "
				       "patch_grid rope turns each half of a head by pairs)", o->name, (long long)o->head_dim);
		if (map_get(v, "scaling"))
			return val_err(f, map_get(v, "scaling"), e, "rope '%s': scaling is for a rope by positions, not "
				       "a patch_grid rope", o->name);
	}
	return 0;
}

/* An attention's operands (a fused qkv, or q and kv: *first names a's key)
 * and attributes: heads, kv_heads and causal (version 4), kv_order (6) and
 * positions (5). */
static int attention_attrs(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	const Val *kv;
	if (map_get(v, "qkv")) {
		*first = "qkv";
		if (map_get(v, "q") || map_get(v, "kv"))
			return val_err(f, map_get(v, "qkv"), e,
				       "attention '%s': give either qkv or q and kv", o->name);
		if (operand(m, f, v, "qkv", rep, &o->in[0], e))
			return -1;
		o->in[1] = o->in[0];
	} else {
		*first = "q";
		if (operand(m, f, v, "q", rep, &o->in[0], e) || operand(m, f, v, "kv", rep, &o->in[1], e))
			return -1;
	}
	if (positive(f, v, "heads", &o->heads, e))
		return -1;
	o->kv_heads = o->heads;
	if ((map_get(v, "kv_heads") || map_get(v, "causal")) && m->version < 4)
		return val_err(f, map_get(v, map_get(v, "kv_heads") ? "kv_heads" : "causal"), e,
			       "attention '%s': %s needs amp-model: 4 (this file is version %d)", o->name,
			       map_get(v, "kv_heads") ? "kv_heads" : "causal", m->version);
	if (map_get(v, "kv_heads") && positive(f, v, "kv_heads", &o->kv_heads, e))
		return -1;
	if (o->heads % o->kv_heads)
		return val_err(f, map_get(v, "kv_heads"), e, "attention '%s': %lld kv_heads do not divide "
			       "%lld heads", o->name, (long long)o->kv_heads, (long long)o->heads);
	if ((kv = map_get(v, "causal")) && val_bool(f, kv, &o->causal, e))
		return -1;
	if ((kv = map_get(v, "kv_order"))) {
		if (word_pair(f, m, kv, "attention", o->name, "kv_order", 6, "kv", "heads",
			      "'kv' (every key, then every value) or 'heads' (each kv head's keys, then its values)",
			      &o->kv_order, e))
			return -1;
		if (o->kv_order && map_get(v, "qkv"))
			return val_err(f, kv, e, "attention '%s': kv_order heads takes q and kv, not a fused qkv",
				       o->name);
	}
	o->nin = 2;
	if ((kv = map_get(v, "positions"))) {
		if (m->version < 5)
			return val_err(f, kv, e, "attention '%s': positions needs amp-model: 5 (this file is "
				       "version %d)", o->name, m->version);
		if (map_get(v, "causal") && !o->causal)
			return val_err(f, map_get(v, "causal"), e, "attention '%s': positions make it causal "
				       "(each query sees the keys up to its position)", o->name);
		if (operand(m, f, v, "positions", rep, &o->in[2], e))
			return -1;
		o->causal = 1;
		o->nin = 3;
	}
	return 0;
}

static int no_attrs(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	(void)m, (void)f, (void)v, (void)rep, (void)o, (void)first, (void)e;
	return 0;
}

static int norm_attrs(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	(void)m, (void)rep, (void)first;
	const Val *kv;
	o->eps = 1e-6;
	if ((kv = map_get(v, "eps")) && val_f64(f, kv, &o->eps, e))
		return -1;
	if (!(o->eps > 0) || !isfinite(o->eps))
		return val_err(f, kv, e, "%s eps must be positive", op_name(o->kind));
	return 0;
}

static int patchify_attrs(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	(void)m, (void)rep, (void)first;
	if (positive(f, v, "patch", &o->patch, e))
		return -1;
	return map_get(v, "class_tokens") && get_int(f, v, "class_tokens", 0, 64, &o->cls, e) ? -1 : 0;
}

static int broadcast_attrs(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	(void)m, (void)rep, (void)first;
	return positive(f, v, "batch", &o->batch, e);
}

static int embed_attrs(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	(void)m, (void)first;
	const Val *kv;
	if ((kv = map_get(v, "transposed")) && val_bool(f, kv, &o->transposed, e))
		return -1;
	if (rep >= 0)
		return val_err(f, v, e, "embed '%s': an embed runs on the host, outside every repeat", o->name);
	return 0;
}

/* append: the state it writes (its cache) and the first row it writes at. */
static int append_attrs(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	(void)first;
	if (operand(m, f, v, "cache", rep, &o->out, e))
		return -1;
	o->first = -1;
	return map_get(v, "first") && get_int(f, v, "first", 0, INT64_C(1) << 30, &o->first, e) ? -1 : 0;
}

/* The operands' roles: int32 tensors are positions, read by rope, append
 * and attention alone (or an embed's ids), the slots of those keys; a
 * state is an append's cache or an attention's kv. */
static int operand_roles(const Model *m, const char *f, const Val *v, const MOp *o, Err *e)
{
	const char *const *slot = op_info(o->kind)->slots;
	for (int k = 0; k < 3 && slot[k]; k++) {
		int pos = !strcmp(slot[k], "positions") || !strcmp(slot[k], "ids");
		if (o->in[k] >= 0 && m->t[o->in[k]].dtype == FMT_I32 && !pos)
			return val_err(f, v, e, "%s '%s': int32 '%s' can only be the positions of rope, append or "
				       "attention, or an embed's ids", op_name(o->kind), o->name, m->t[o->in[k]].name);
		if (o->in[k] >= 0 && m->t[o->in[k]].role == T_STATE && !(!strcmp(slot[k], "kv") && o->in[0] != o->in[1]))
			return val_err(f, v, e, "%s '%s': state '%s' can only be an append's cache or an attention's "
				       "kv", op_name(o->kind), o->name, m->t[o->in[k]].name);
	}
	return 0;
}

/* An attention's shape rules (a its q or fused qkv): its output's width
 * into *out. */
static int attention_shape(const Model *m, const char *f, const Val *v, const MOp *o, const char *first,
			   MTensor *out, Err *e)
{
	const MTensor *a = &m->t[o->in[0]], *kvt = &m->t[o->in[1]];
	const Val *at = map_get(v, first);
	int fused = o->in[0] == o->in[1];
	int64_t H = o->heads, G = o->kv_heads, parts = H + 2 * G;    /* widths in head widths */
	int64_t c = !fused ? a->shape[2] : G == H ? a->shape[2] / 3 : a->shape[2] / parts * H;
	if (!fused && activation(f, map_get(v, "kv"), o, kvt, e))
		return -1;
	if (fused && G == H && a->shape[2] % 3)
		return val_err(f, at, e, "attention '%s': qkv '%s' has %lld features, not 3 x width",
			       o->name, a->name, (long long)a->shape[2]);
	if (fused && G < H && a->shape[2] % parts)
		return val_err(f, at, e, "attention '%s': qkv '%s' has %lld features, not a whole number of "
			       "(heads + 2 x kv_heads) = %lld head widths", o->name, a->name, (long long)a->shape[2],
			       (long long)parts);
	if (c % o->heads)
		return val_err(f, map_get(v, "heads"), e,
			       "attention '%s': %lld heads do not divide width %lld", o->name,
			       (long long)o->heads, (long long)c);
	if (!fused && (kvt->shape[2] != 2 * c / H * G || kvt->shape[0] != a->shape[0]))
		return val_err(f, map_get(v, "kv"), e,
			       "attention '%s': kv '%s' must be [%lld, tokens, %lld] (k then v: %lld kv head%s of "
			       "%lld columns each)", o->name, kvt->name, (long long)a->shape[0],
			       (long long)(2 * c / H * G), (long long)G, G > 1 ? "s" : "", (long long)(c / H));
	if (o->causal && o->in[2] < 0 && a->shape[1] > kvt->shape[1])
		return val_err(f, map_get(v, "causal"), e, "attention '%s': causal with %lld queries over "
			       "%lld keys (the queries are the last of the keys' positions)", o->name,
			       (long long)a->shape[1], (long long)kvt->shape[1]);
	if (a->dtype != FMT_FP16 || (kvt->dtype != FMT_FP16 && !(kvt->dtype == FMT_FP8 && kvt->role == T_STATE)))
		return val_err(f, at, e, "attention '%s': q, k and v must be fp16 (k and v fp8 only in a "
			       "state)", o->name);
	if (o->in[2] >= 0 && positions_of(f, map_get(v, "positions"), o, &m->t[o->in[2]], a, e))
		return -1;
	out->shape[2] = c;
	return 0;
}

/* The shape rules, one per op (every op but append; the op table's shape
 * column): *out, the tensor op o defines, starts as a copy of in[0]'s
 * shape and dtype and follows from them. */
static int shape_embed(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, MTensor *out,
		       Err *e)
{
	(void)first;
	const MTensor *a = &m->t[o->in[0]], *tb = &m->t[o->in[1]];
	if (a->dtype != FMT_I32 || a->role != T_INPUT || a->rank != 3 || a->shape[2] != 1)
		return val_err(f, map_get(v, "ids"), e, "embed '%s': ids '%s' must be an int32 input [batch, "
			       "tokens, 1]", o->name, a->name);
	if (tb->role != T_PARAM || tb->rank != 2 || tb->dtype == FMT_I32 || tb->dtype == FMT_FP32)
		return val_err(f, map_get(v, "table"), e, "embed '%s': table '%s' must be an fp16 or fp8 "
			       "parameter [vocab, features] (or [features, vocab], transposed)", o->name, tb->name);
	out->shape[2] = tb->shape[o->transposed ? 0 : 1];
	out->dtype = FMT_FP16;
	return 0;
}

static int shape_patchify(const Model *m, const char *f, const Val *v, const MOp *o, const char *first,
			  MTensor *out, Err *e)
{
	(void)first;
	const MTensor *a = &m->t[o->in[0]];
	int64_t p = o->patch;
	if (a->role != T_INPUT || a->rank != 4)
		return val_err(f, map_get(v, "x"), e,
			       "patchify '%s': '%s' must be an input image [batch, channels, height, width]",
			       o->name, a->name);
	if (a->shape[2] < p || a->shape[3] < p)      /* a remainder is dropped, as a valid convolution does */
		return val_err(f, map_get(v, "patch"), e,
			       "patchify '%s': patch %lld is larger than the image %lld x %lld",
			       o->name, (long long)p, (long long)a->shape[2], (long long)a->shape[3]);
	out->shape[0] = a->shape[0];
	out->shape[1] = o->cls + (a->shape[2] / p) * (a->shape[3] / p);
	out->shape[2] = a->shape[1] * p * p;
	out->shape[3] = 0;
	return 0;
}

static int shape_broadcast(const Model *m, const char *f, const Val *v, const MOp *o, const char *first,
			   MTensor *out, Err *e)
{
	(void)first;
	const MTensor *a = &m->t[o->in[0]];
	if (a->role != T_PARAM || a->rank != 2)
		return val_err(f, map_get(v, "x"), e,
			       "broadcast '%s': '%s' must be a [tokens, features] parameter", o->name, a->name);
	out->shape[0] = o->batch;
	out->shape[1] = a->shape[0];
	out->shape[2] = a->shape[1];
	return 0;
}

static int shape_same(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, MTensor *out,
		      Err *e)
{
	(void)m, (void)f, (void)v, (void)o, (void)first, (void)out, (void)e;
	return 0;
}

static int shape_rope(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, MTensor *out,
		      Err *e)
{
	(void)first, (void)out;
	const MTensor *a = &m->t[o->in[0]];
	const RopeGrid *g = &o->rope_grid;
	if (a->dtype != FMT_FP16)
		return val_err(f, map_get(v, "x"), e, "rope '%s': x '%s' must be fp16", o->name, a->name);
	if (o->in[1] >= 0 && positions_of(f, map_get(v, "positions"), o, &m->t[o->in[1]], a, e))
		return -1;
	char *why = rope_grid_bad(g, o->name, a->name, a->shape[1]);
	if (why) {
		val_err(f, map_get(v, "patch_grid"), e, "%s", why);
		free(why);
		return -1;
	}
	if ((o->heads - 1) * o->head_stride + o->head_dim > a->shape[2]) {
		char *apart = o->head_stride == o->head_dim ? xstrdup("") :
			      xasprintf(", %lld apart,", (long long)o->head_stride);
		val_err(f, map_get(v, "heads"), e, "rope '%s': %lld heads of %lld columns%s pass the %lld of "
			"'%s'", o->name, (long long)o->heads, (long long)o->head_dim, apart, (long long)a->shape[2],
			a->name);
		free(apart);
		return -1;
	}
	return 0;
}

static int shape_matmul(const Model *m, const char *f, const Val *v, const MOp *o, const char *first,
			MTensor *out, Err *e)
{
	(void)first;
	const MTensor *a = &m->t[o->in[0]], *b = &m->t[o->in[1]];
	if (b->role != T_PARAM || b->rank != 2)
		return val_err(f, map_get(v, "b"), e,
			       "matmul '%s': b '%s' must be a [K, N] parameter", o->name, b->name);
	if (b->dtype == FMT_FP32)
		return val_err(f, map_get(v, "b"), e,
			       "matmul '%s': b '%s' must be fp16 or fp8", o->name, b->name);
	if (a->shape[2] != b->shape[0])
		return val_err(f, map_get(v, "b"), e,
			       "matmul '%s': inner dimensions differ: a '%s' has %lld features, b '%s' has %lld rows",
			       o->name, a->name, (long long)a->shape[2], b->name, (long long)b->shape[0]);
	if (o->in[2] >= 0 && vector(f, map_get(v, "bias"), o, &m->t[o->in[2]], b->shape[1], e))
		return -1;
	if (o->in[2] >= 0 && m->t[o->in[2]].dtype != FMT_FP16)
		return val_err(f, map_get(v, "bias"), e, "matmul '%s': bias '%s' must be fp16",
			       o->name, m->t[o->in[2]].name);
	out->shape[2] = b->shape[1];
	out->dtype = FMT_FP16;
	return 0;
}

/* b, an activation of a's shape and dtype (add's and mul's rule). */
static int same_as_a(const Model *m, const char *f, const Val *v, const MOp *o, Err *e)
{
	const MTensor *a = &m->t[o->in[0]], *b = &m->t[o->in[1]];
	if (activation(f, map_get(v, "b"), o, b, e))
		return -1;
	if (!model_same_shape(a, b) || a->dtype != b->dtype)
		return val_err(f, map_get(v, "b"), e, "%s '%s': '%s' and '%s' differ in shape or dtype",
			       op_name(o->kind), o->name, a->name, b->name);
	return 0;
}

static int shape_add(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, MTensor *out,
		     Err *e)
{
	(void)first, (void)out;
	const MTensor *a = &m->t[o->in[0]], *b = &m->t[o->in[1]];
	if (b->role != T_PARAM)
		return same_as_a(m, f, v, o, e);
	/* a table added to every batch entry */
	if (b->rank != 2 || b->shape[0] != a->shape[1] || b->shape[1] != a->shape[2] || b->dtype != a->dtype)
		return val_err(f, map_get(v, "b"), e,
			       "add '%s': parameter '%s' must be [%lld, %lld] %s, like a row of '%s'",
			       o->name, b->name, (long long)a->shape[1], (long long)a->shape[2],
			       fmt_name(a->dtype), a->name);
	return 0;
}

/* mul: b an activation of a's shape, or (version 9) a per-channel scale,
 * an fp16 parameter [features] multiplying every row (LayerScale). */
static int shape_mul(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, MTensor *out,
		     Err *e)
{
	(void)first, (void)out;
	const MTensor *a = &m->t[o->in[0]], *b = &m->t[o->in[1]];
	if (b->role != T_PARAM || (m->version < 9 && b->rank != 1))
		return same_as_a(m, f, v, o, e);
	if (m->version < 9)
		return val_err(f, map_get(v, "b"), e, "mul '%s': a parameter b (a per-channel scale) needs amp-model: 9 "
			       "(this file is version %d)", o->name, m->version);
	if (b->rank != 1 || b->shape[0] != a->shape[2] || b->dtype != FMT_FP16 || a->dtype != FMT_FP16)
		return val_err(f, map_get(v, "b"), e, "mul '%s': parameter '%s' must be fp16 [%lld], a scale per "
			       "feature of the fp16 activation '%s'", o->name, b->name, (long long)a->shape[2], a->name);
	return 0;
}

static int shape_norm(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, MTensor *out,
		      Err *e)
{
	(void)first, (void)out;
	const MTensor *a = &m->t[o->in[0]];
	if (vector(f, map_get(v, "scale"), o, &m->t[o->in[1]], a->shape[2], e) ||
	    (o->kind == OP_LAYERNORM && vector(f, map_get(v, "bias"), o, &m->t[o->in[2]], a->shape[2], e)))
		return -1;
	return 0;
}

static int shape_last(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, MTensor *out,
		      Err *e)
{
	(void)m, (void)f, (void)v, (void)o, (void)first, (void)e;
	out->shape[1] = 1;       /* each batch entry's last row */
	return 0;
}

static int shape_cast(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, MTensor *out,
		      Err *e)
{
	(void)m, (void)o, (void)first;
	if (model_dtype(f, map_get(v, "to") ? map_get(v, "to") : v, &out->dtype, e))
		return -1;
	if (!map_get(v, "to"))
		return val_err(f, v, e, "missing key 'to'");
	return 0;
}

/* The model layer's own columns of the op table: each op's attribute
 * reader, whether in[0] is an activation, and its shape rule. */
typedef int (*AttrsFn)(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e);
typedef int (*ShapeFn)(const Model *m, const char *f, const Val *v, const MOp *o, const char *first,
		       MTensor *out, Err *e);
#define OPTAB_READ(E, name, since, slots, need, keys, attrs, act, shape, ...) [OP_##E] = { attrs, act, shape },
static const struct {
	AttrsFn attrs;
	int act;
	ShapeFn shape;
} op_rules[OP_COUNT] = { AMP_OPS(OPTAB_READ) };
#undef OPTAB_READ

/* The operands of op o by its slots (the op table), then its attributes;
 * *first: the key of in[0]. */
static int read_operands(Model *m, const char *f, const Val *v, int rep, MOp *o, const char **first, Err *e)
{
	const OpInfo *oi = op_info(o->kind);
	int k = 0;
	*first = oi->slots[0];
	for (; oi->need >= 0 && k < 3 && oi->slots[k]; k++)
		if ((k < oi->need || map_get(v, oi->slots[k])) && operand(m, f, v, oi->slots[k], rep, &o->in[k], e))
			return -1;
	o->nin = k;
	return op_rules[o->kind].attrs(m, f, v, rep, o, first, e);
}

/* The shape rules of op o (every op but append): *out, the tensor it
 * makes, follows from them. */
static int out_shape(const Model *m, const char *f, const Val *v, const MOp *o, const char *first, int rep,
		     MTensor *out, Err *e)
{
	const MTensor *a = &m->t[o->in[0]];
	memset(out, 0, sizeof *out);
	out->role = T_ACT;
	out->rank = 3;
	memcpy(out->shape, a->shape, sizeof out->shape);
	out->dtype = a->dtype;
	out->count = 1;
	out->rep = rep;
	if (op_rules[o->kind].act && activation(f, map_get(v, first), o, a, e))
		return -1;
	return op_rules[o->kind].shape(m, f, v, o, first, out, e);
}

static int one_op(Model *m, const char *f, const Val *v, int rep, Err *e)
{
	const char *kind, *name;
	const Val *kv, *outv;
	MOp o;
	int k;

	memset(&o, 0, sizeof o);
	o.in[0] = o.in[1] = o.in[2] = -1;
	o.rep = rep;
	o.line = v->line;
	o.col = v->col;
	if (v->kind != VAL_MAP)
		return val_err(f, v, e, "expected an op mapping");
	if (map_need(f, v, "op", &kv, e) || val_str(f, kv, &kind, e))
		return -1;
	for (k = 0; k < OP_COUNT; k++)
		if (strcmp(kind, op_name((OpKind)k)) == 0)
			break;
	if (k == OP_COUNT) {
		Str l = { 0 };
		for (int i = 0; i < OP_COUNT; i++)
			str_printf(&l, "%s, ", op_name((OpKind)i));
		val_err(f, kv, e, "unknown op '%s' (expected %sor map)", kind, l.s);
		free(l.s);
		return -1;
	}
	o.kind = (OpKind)k;
	if (m->version < op_info(o.kind)->since)
		return val_err(f, kv, e, "op '%s' needs amp-model: %d (this file is version %d)", kind,
			       op_info(o.kind)->since, m->version);
	if (map_keys(f, v, op_info(o.kind)->keys, e) || get_str(f, v, "name", &name, e) ||
	    model_name_ok(f, map_get(v, "name"), "op", 0, e))
		return -1;
	if (model_find_op(m, name) >= 0)
		return val_err(f, map_get(v, "name"), e, "op '%s' is defined twice", name);
	o.name = (char *)name;

	const char *first;
	if (read_operands(m, f, v, rep, &o, &first, e) || operand_roles(m, f, v, &o, e))
		return -1;
	if (o.kind == OP_APPEND)
		return append_op(m, f, v, &o, e);
	MTensor out;
	if (out_shape(m, f, v, &o, first, rep, &out, e))
		return -1;

	if (map_need(f, v, "out", &outv, e))
		return -1;
	if (outv->kind != VAL_SCALAR)
		return val_err(f, outv, e, "expected a tensor name");
	MTensor *t = model_new_tensor(m, f, outv, e);
	if (!t)
		return -1;
	char *keep = t->name;
	*t = out;
	t->name = keep;
	t->line = outv->line;
	t->col = outv->col;
	o.out = m->nt - 1;
	o.name = xstrdup(name);
	m->ops = xrealloc(m->ops, (size_t)(m->nops + 1) * sizeof *m->ops);
	m->ops[m->nops++] = o;
	return 0;
}

/* The MAP head, `op: map`: a learned probe token attends over all tokens,
 * then a layernorm and an MLP with a residual. It stands for ten ops, each
 * named `<name>.<part>` and defining the tensor of that name (the last
 * defines `out`), so every later stage sees the ops it is made of. */
static int map_head(Model *m, const char *f, const Val *v, int rep, Err *e)
{
	static const char *keys[] = { "op", "name", "x", "probe", "heads", "wq", "bq", "wkv", "bkv",
				      "wo", "bo", "scale", "bias", "eps", "w1", "b1", "w2", "b2",
				      "out", NULL };
	/* Each op: its kind and part, then key/value pairs: "@k" is the map
	 * op's own value of key k, ".p" the tensor <name>.p, else a literal. */
	static const char *ops[][12] = {
		{ "broadcast", "probe", "x", "@probe", "batch", "#batch", NULL },
		{ "matmul", "q", "a", ".probe", "b", "@wq", "bias", "@bq", NULL },
		{ "matmul", "kv", "a", "@x", "b", "@wkv", "bias", "@bkv", NULL },
		{ "attention", "attn", "q", ".q", "kv", ".kv", "heads", "@heads", NULL },
		{ "matmul", "o", "a", ".attn", "b", "@wo", "bias", "@bo", NULL },
		{ "layernorm", "ln", "x", ".o", "scale", "@scale", "bias", "@bias", "eps", "@eps", NULL },
		{ "matmul", "up", "a", ".ln", "b", "@w1", "bias", "@b1", NULL },
		{ "gelu", "act", "x", ".up", NULL },
		{ "matmul", "down", "a", ".act", "b", "@w2", "bias", "@b2", NULL },
		{ "add", "res", "a", ".o", "b", ".down", NULL },
	};
	const char *name;
	const Val *xv;
	int x;
	char batch[32];

	if (map_keys(f, v, keys, e) || get_str(f, v, "name", &name, e) ||
	    model_name_ok(f, map_get(v, "name"), "op", 0, e) ||
	    map_need(f, v, "x", &xv, e) || model_visible(m, f, xv, rep, &x, e))
		return -1;
	if (strlen(name) + 6 > MODEL_NAME_MAX)         /* its ops' names: name.probe, name.attn, ... */
		return val_err(f, map_get(v, "name"), e, "map name of %zu bytes: the names of its ops add up to 6 "
			       "more, and a name has at most %d", strlen(name), MODEL_NAME_MAX);
	for (const char **k = keys + 3; *k; k++)        /* every key but eps is required */
		if (strcmp(*k, "eps") && !map_get(v, *k))
			return val_err(f, v, e, "map '%s': missing key '%s'", name, *k);
	snprintf(batch, sizeof batch, "%lld", (long long)m->t[x].shape[0]);
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		Val items[24], op;
		char *text[12];
		int n = 0, t = 0;
		memset(items, 0, sizeof items);
#define SCALAR(str) (items[n].kind = VAL_SCALAR, items[n].line = v->line, items[n].col = v->col, \
		     items[n].s = (str), n++)
		SCALAR("op"), SCALAR((char *)ops[i][0]);
		text[t] = xasprintf("%s.%s", name, ops[i][1]);
		SCALAR("name"), SCALAR(text[t++]);
		for (int k = 2; ops[i][k]; k += 2) {
			const char *src = ops[i][k + 1];
			const Val *u = src[0] == '@' ? map_get(v, src + 1) : NULL;
			if (src[0] == '@' && !u)
				continue;               /* eps, when absent */
			SCALAR((char *)ops[i][k]);
			if (u) {
				items[n++] = *u;        /* the user's value, at its own mark */
			} else if (src[0] == '.') {
				text[t] = xasprintf("%s.%s", name, src + 1);
				SCALAR(text[t++]);
			} else {
				SCALAR(batch);
			}
		}
		SCALAR("out");
		if (i + 1 < sizeof ops / sizeof ops[0]) {
			text[t] = xasprintf("%s.%s", name, ops[i][1]);
			SCALAR(text[t++]);
		} else {
			items[n++] = *map_get(v, "out");
		}
#undef SCALAR
		op = *v;
		op.items = items;
		op.n = n / 2;
		int rc = one_op(m, f, &op, rep, e);
		while (t > 0)
			free(text[--t]);
		if (rc)
			return -1;
	}
	return 0;
}

/* An item of an ops list: the MAP head, or one op. */
int model_an_op(Model *m, const char *f, const Val *v, int rep, Err *e)
{
	const Val *k = v->kind == VAL_MAP ? map_get(v, "op") : NULL;
	if (!k || k->kind != VAL_SCALAR || strcmp(k->s, "map"))
		return one_op(m, f, v, rep, e);
	if (m->version < 2)
		return val_err(f, k, e, "op 'map' needs amp-model: 2");
	return map_head(m, f, v, rep, e);
}
