#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "yio.h"

static const char *op_names[OP_COUNT] = { "matmul", "gelu", "add", "layernorm", "cast" };

const char *op_name(OpKind k) { return op_names[k]; }

static const char *cast_names[] = { "auto", "early", "late" };
static const char *staging_names[] = { "auto", "pack-once", "direct" };
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
	for (int i = 1; i < 3; i++)
		if (strcmp(s, staging_names[i]) == 0) {
			*st = (Staging)i;
			return 0;
		}
	return -1;
}

int model_find(const Model *m, const char *name)
{
	for (int i = 0; i < m->nt; i++)
		if (strcmp(m->t[i].name, name) == 0)
			return i;
	return -1;
}

static int find_op(const Model *m, const char *name)
{
	for (int i = 0; i < m->nops; i++)
		if (strcmp(m->ops[i].name, name) == 0)
			return i;
	return -1;
}

static MTensor *new_tensor(Model *m, const char *f, const Val *key, Err *e)
{
	if (model_find(m, key->s) >= 0) {
		val_err(f, key, e, "tensor '%s' is defined twice", key->s);
		return NULL;
	}
	m->t = xrealloc(m->t, (size_t)(m->nt + 1) * sizeof *m->t);
	MTensor *t = &m->t[m->nt++];
	memset(t, 0, sizeof *t);
	t->name = xstrdup(key->s);
	t->line = key->line;
	t->col = key->col;
	return t;
}

static int dtype(const char *f, const Val *v, Format *fmt, Err *e)
{
	const char *s;
	if (val_str(f, v, &s, e))
		return -1;
	if (fmt_parse(s, fmt))
		return val_err(f, v, e, "unknown dtype '%s' (expected fp32, fp16 or fp8)", s);
	return 0;
}

static int declared(Model *m, const char *f, const Val *sec, TensorRole role, Err *e)
{
	static const char *keys[] = { "shape", "dtype", "scale", NULL };

	if (sec->kind != VAL_MAP)
		return val_err(f, sec, e, "expected a mapping of tensor names");
	for (int i = 0; i < sec->n; i++) {
		const Val *k = &sec->items[2 * i], *v = &sec->items[2 * i + 1], *x;
		MTensor *t = new_tensor(m, f, k, e);
		if (!t || map_keys(f, v, keys, e) || map_need(f, v, "shape", &x, e) ||
		    val_ints(f, x, MAX_RANK, 1, INT64_C(1) << 40, t->shape, &t->rank, e) ||
		    map_need(f, v, "dtype", &x, e) || dtype(f, x, &t->dtype, e))
			return -1;
		t->role = role;
		if (role == T_INPUT && t->rank != 3)
			return val_err(f, map_get(v, "shape"), e,
				       "input '%s' must be [batch, tokens, features]", t->name);
		if (role == T_PARAM && (t->rank < 1 || t->rank > 2))
			return val_err(f, map_get(v, "shape"), e,
				       "parameter '%s' must have rank 1 or 2", t->name);
		if ((x = map_get(v, "scale"))) {
			int64_t s;
			if (val_int(f, x, -126, 126, &s, e))
				return -1;
			if (t->dtype != FMT_FP8)
				return val_err(f, x, e, "only fp8 tensors carry a scale");
			t->has_scale = 1;
			t->scale = (int)s;
		}
	}
	return 0;
}

/* The tensor an op operand names; it must be defined already. */
static int operand(Model *m, const char *f, const Val *op, const char *key, int *idx, Err *e)
{
	const Val *v;
	const char *s;

	if (map_need(f, op, key, &v, e) || val_str(f, v, &s, e))
		return -1;
	*idx = model_find(m, s);
	if (*idx < 0)
		return val_err(f, v, e, "undefined tensor '%s'", s);
	return 0;
}

static int same_shape(const MTensor *a, const MTensor *b)
{
	if (a->rank != b->rank)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->shape[i] != b->shape[i])
			return 0;
	return 1;
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

static int one_op(Model *m, const char *f, const Val *v, Err *e)
{
	static const char *keys[OP_COUNT][9] = {
		[OP_MATMUL] = { "op", "name", "a", "b", "bias", "out", NULL },
		[OP_GELU] = { "op", "name", "x", "out", NULL },
		[OP_ADD] = { "op", "name", "a", "b", "out", NULL },
		[OP_LAYERNORM] = { "op", "name", "x", "scale", "bias", "eps", "out", NULL },
		[OP_CAST] = { "op", "name", "x", "to", "out", NULL },
	};
	const char *kind, *name;
	const Val *kv, *outv;
	MOp o;
	int k;

	memset(&o, 0, sizeof o);
	o.in[0] = o.in[1] = o.in[2] = -1;
	o.line = v->line;
	o.col = v->col;
	if (v->kind != VAL_MAP)
		return val_err(f, v, e, "expected an op mapping");
	if (map_need(f, v, "op", &kv, e) || val_str(f, kv, &kind, e))
		return -1;
	for (k = 0; k < OP_COUNT; k++)
		if (strcmp(kind, op_names[k]) == 0)
			break;
	if (k == OP_COUNT)
		return val_err(f, kv, e, "unknown op '%s' (expected matmul, gelu, add, layernorm or cast)", kind);
	o.kind = (OpKind)k;
	if (map_keys(f, v, keys[k], e) || get_str(f, v, "name", &name, e))
		return -1;
	if (find_op(m, name) >= 0)
		return val_err(f, map_get(v, "name"), e, "op '%s' is defined twice", name);
	o.name = (char *)name;

	switch (o.kind) {
	case OP_MATMUL:
		if (operand(m, f, v, "a", &o.in[0], e) || operand(m, f, v, "b", &o.in[1], e))
			return -1;
		if (map_get(v, "bias") && operand(m, f, v, "bias", &o.in[2], e))
			return -1;
		o.nin = 3;
		break;
	case OP_GELU:
	case OP_CAST:
		if (operand(m, f, v, "x", &o.in[0], e))
			return -1;
		o.nin = 1;
		break;
	case OP_ADD:
		if (operand(m, f, v, "a", &o.in[0], e) || operand(m, f, v, "b", &o.in[1], e))
			return -1;
		o.nin = 2;
		break;
	case OP_LAYERNORM:
		if (operand(m, f, v, "x", &o.in[0], e) || operand(m, f, v, "scale", &o.in[1], e) ||
		    operand(m, f, v, "bias", &o.in[2], e))
			return -1;
		o.nin = 3;
		o.eps = 1e-6;
		if ((kv = map_get(v, "eps")) && val_f64(f, kv, &o.eps, e))
			return -1;
		if (!(o.eps > 0) || !isfinite(o.eps))
			return val_err(f, kv, e, "layernorm eps must be positive");
		break;
	default:
		break;
	}

	/* Shape rules; the new tensor follows from them. */
	MTensor out;
	const MTensor *a = &m->t[o.in[0]];
	memset(&out, 0, sizeof out);
	out.role = T_ACT;
	out.rank = 3;
	memcpy(out.shape, a->shape, sizeof out.shape);
	out.dtype = a->dtype;
	if (activation(f, map_get(v, o.kind == OP_MATMUL || o.kind == OP_ADD ? "a" : "x"), &o, a, e))
		return -1;
	if (o.kind == OP_MATMUL) {
		const MTensor *b = &m->t[o.in[1]];
		if (b->role != T_PARAM || b->rank != 2)
			return val_err(f, map_get(v, "b"), e,
				       "matmul '%s': b '%s' must be a [K, N] parameter", o.name, b->name);
		if (b->dtype == FMT_FP32)
			return val_err(f, map_get(v, "b"), e,
				       "matmul '%s': b '%s' must be fp16 or fp8", o.name, b->name);
		if (a->shape[2] != b->shape[0])
			return val_err(f, map_get(v, "b"), e,
				       "matmul '%s': inner dimensions differ: a '%s' has %lld features, b '%s' has %lld rows",
				       o.name, a->name, (long long)a->shape[2], b->name, (long long)b->shape[0]);
		if (o.in[2] >= 0 && vector(f, map_get(v, "bias"), &o, &m->t[o.in[2]], b->shape[1], e))
			return -1;
		if (o.in[2] >= 0 && m->t[o.in[2]].dtype != FMT_FP16)
			return val_err(f, map_get(v, "bias"), e, "matmul '%s': bias '%s' must be fp16",
				       o.name, m->t[o.in[2]].name);
		out.shape[2] = b->shape[1];
		out.dtype = FMT_FP16;
	} else if (o.kind == OP_ADD) {
		const MTensor *b = &m->t[o.in[1]];
		if (activation(f, map_get(v, "b"), &o, b, e))
			return -1;
		if (!same_shape(a, b) || a->dtype != b->dtype)
			return val_err(f, map_get(v, "b"), e,
				       "add '%s': '%s' and '%s' differ in shape or dtype", o.name, a->name, b->name);
	} else if (o.kind == OP_LAYERNORM) {
		if (vector(f, map_get(v, "scale"), &o, &m->t[o.in[1]], a->shape[2], e) ||
		    vector(f, map_get(v, "bias"), &o, &m->t[o.in[2]], a->shape[2], e))
			return -1;
	} else if (o.kind == OP_CAST) {
		if (dtype(f, map_get(v, "to") ? map_get(v, "to") : v, &out.dtype, e))
			return -1;
		if (!map_get(v, "to"))
			return val_err(f, v, e, "missing key 'to'");
	}

	if (map_need(f, v, "out", &outv, e))
		return -1;
	if (outv->kind != VAL_SCALAR)
		return val_err(f, outv, e, "expected a tensor name");
	MTensor *t = new_tensor(m, f, outv, e);
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

static int pins(Model *m, const char *f, const Val *sec, Err *e)
{
	static const char *keys[] = { "grid", "cast", "staging", NULL };

	if (sec->kind != VAL_MAP)
		return val_err(f, sec, e, "expected a mapping of op names");
	for (int i = 0; i < sec->n; i++) {
		const Val *k = &sec->items[2 * i], *v = &sec->items[2 * i + 1], *x;
		const char *s;
		int n, oi = find_op(m, k->s);
		if (oi < 0)
			return val_err(f, k, e, "pin for unknown op '%s'", k->s);
		MOp *o = &m->ops[oi];
		if (o->kind != OP_MATMUL)
			return val_err(f, k, e, "pin for '%s': only matmul ops take pins", k->s);
		if (map_keys(f, v, keys, e))
			return -1;
		o->pinned = 1;
		o->pin_line = v->line;
		o->pin_col = v->col;
		if ((x = map_get(v, "grid"))) {
			if (val_ints(f, x, 3, 1, INT64_C(1) << 30, o->grid, &n, e))
				return -1;
			if (n != 3)
				return val_err(f, x, e, "grid must be [rows, k, cols]");
			o->pin_line = x->line;
			o->pin_col = x->col;
		}
		if ((x = map_get(v, "cast"))) {
			if (val_str(f, x, &s, e))
				return -1;
			if (cast_parse(s, &o->cast))
				return val_err(f, x, e, "unknown cast order '%s' (expected early or late)", s);
		}
		if ((x = map_get(v, "staging"))) {
			if (val_str(f, x, &s, e))
				return -1;
			if (staging_parse(s, &o->staging))
				return val_err(f, x, e, "unknown staging '%s' (expected pack-once or direct)", s);
		}
	}
	return 0;
}

int model_load(Model *m, const char *path, Err *e)
{
	static const char *keys[] = { "amp-model", "name", "inputs", "params", "ops",
				      "outputs", "pins", NULL };
	YReader r;
	Val *root;
	const Val *v;
	const char *f, *name;
	int64_t version;
	int rc = -1;

	memset(m, 0, sizeof *m);
	if (yr_open(&r, path, e))
		goto out;
	f = r.name;
	m->file = xstrdup(f);
	if (yr_node(&r, &root, e))
		goto out;
	if (root->kind != VAL_MAP) {
		val_err(f, root, e, "expected a model mapping");
		goto out;
	}
	if (map_keys(f, root, keys, e) || get_int(f, root, "amp-model", 0, INT64_MAX, &version, e))
		goto out;
	if (version != MODEL_VERSION) {
		val_err(f, map_get(root, "amp-model"), e,
			"unsupported model file version %lld (this amp reads %d)",
			(long long)version, MODEL_VERSION);
		goto out;
	}
	if (get_str(f, root, "name", &name, e))
		goto out;
	m->name = xstrdup(name);
	if (map_need(f, root, "inputs", &v, e) || declared(m, f, v, T_INPUT, e))
		goto out;
	m->params_line = root->line;
	m->params_col = root->col;
	if ((v = map_get(root, "params"))) {
		m->params_line = v->line;
		m->params_col = v->col;
		if (declared(m, f, v, T_PARAM, e))
			goto out;
	}
	if (map_need(f, root, "ops", &v, e))
		goto out;
	if (v->kind != VAL_SEQ) {
		val_err(f, v, e, "expected a list of ops");
		goto out;
	}
	for (int i = 0; i < v->n; i++)
		if (one_op(m, f, &v->items[i], e))
			goto out;
	if (map_need(f, root, "outputs", &v, e))
		goto out;
	if (v->kind != VAL_SEQ || v->n == 0) {
		val_err(f, v, e, "expected a list of output tensor names");
		goto out;
	}
	for (int i = 0; i < v->n; i++) {
		const char *s;
		int t;
		if (val_str(f, &v->items[i], &s, e))
			goto out;
		if ((t = model_find(m, s)) < 0) {
			val_err(f, &v->items[i], e, "undefined tensor '%s'", s);
			goto out;
		}
		if (m->t[t].role != T_ACT) {
			val_err(f, &v->items[i], e, "output '%s' must be computed by an op", s);
			goto out;
		}
		m->t[t].output = 1;
	}
	if ((v = map_get(root, "pins")) && pins(m, f, v, e))
		goto out;
	if (yr_expect(&r, YAML_DOCUMENT_END_EVENT, "end of document", e) ||
	    yr_expect(&r, YAML_STREAM_END_EVENT, "end of input (one document only)", e))
		goto out;
	rc = 0;
out:
	yr_close(&r);
	if (rc)
		model_free(m);
	return rc;
}

void model_free(Model *m)
{
	for (int i = 0; i < m->nt; i++)
		free(m->t[i].name);
	for (int i = 0; i < m->nops; i++)
		free(m->ops[i].name);
	free(m->t);
	free(m->ops);
	free(m->name);
	free(m->file);
	memset(m, 0, sizeof *m);
}
