/* model_read.c: the model file (formats/model.md) read into a Model:
 * model_load, its version, the declared inputs, states and parameters,
 * the ops list and its repeats (each op by model_ops.c), the outputs, the
 * pins, and the size bound on every tensor. */
#include <inttypes.h>
#include <string.h>

#include "model/model_int.h"

/* Tensor t of file f, at line:col, has more elements than any machine
 * holds (MODEL_MAX_ELEMENTS). */
static int too_big(const char *f, long line, long col, const MTensor *t, Err *e)
{
	return err_at(e, f, line, col, "tensor '%s' has %s%" PRId64 " elements; at most 2^48 are supported (no "
		      "machine holds more)", t->name, model_elements(t) == INT64_MAX ? "more than " : "",
		      model_elements(t));
}

static int declared(Model *m, const char *f, const Val *sec, TensorRole role, Err *e)
{
	static const char *keys[] = { "shape", "dtype", "scale", NULL };

	if (sec->kind != VAL_MAP)
		return val_err(f, sec, e, "expected a mapping of tensor names");
	for (int i = 0; i < sec->n; i++) {
		const Val *k = &sec->items[2 * i], *v = &sec->items[2 * i + 1], *x;
		MTensor *t = model_new_tensor(m, f, k, e);
		if (!t || map_keys(f, v, keys, e) || map_need(f, v, "shape", &x, e) ||
		    val_ints(f, x, MAX_RANK, 1, INT64_C(1) << 40, t->shape, &t->rank, e) ||
		    map_need(f, v, "dtype", &x, e) || model_dtype(f, x, &t->dtype, e))
			return -1;
		t->role = role;
		if (role == T_STATE && (t->rank != 3 || (t->dtype != FMT_FP16 && t->dtype != FMT_FP8)))
			return val_err(f, t->rank != 3 ? map_get(v, "shape") : x, e, "state '%s' must be an fp16 or fp8 "
				       "[batch, positions, features] tensor (a KV cache)", t->name);
		if (t->dtype == FMT_I32 && (role != T_INPUT || m->version < 4 || t->rank != 3 || t->shape[2] != 1))
			return val_err(f, x, e, "int32 '%s' must be an input [batch, tokens, 1] (positions) of "
				       "amp-model 4", t->name);
		if (model_elements(t) > MODEL_MAX_ELEMENTS) {
			const Val *sh = map_get(v, "shape");
			return too_big(f, sh->line, sh->col, t, e);
		}
		if (role == T_INPUT && t->rank != 3 && t->rank != 4)
			return val_err(f, map_get(v, "shape"), e,
				       "input '%s' must be [batch, tokens, features] or an image "
				       "[batch, channels, height, width]", t->name);
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

/* A repeat: its per-iteration parameters, then its body ops. */
static int repeat(Model *m, const char *f, const Val *v, Err *e)
{
	static const char *keys[] = { "repeat", "count", "in", "carry", "params", "state", "ops", NULL };
	const Val *x, *ops, *cv;
	const char *name;
	MRepeat r;
	int ri = m->nrep;

	memset(&r, 0, sizeof r);
	r.line = v->line;
	r.col = v->col;
	if (map_keys(f, v, keys, e) || get_str(f, v, "repeat", &name, e) ||
	    model_name_ok(f, map_get(v, "repeat"), "repeat", 0, e) || map_need(f, v, "count", &x, e))
		return -1;
	if (val_int(f, x, 1, 1 << 20, &r.count, e))
		return val_err(f, x, e, "repeat '%s': count must be an integer from 1 to %d", name, 1 << 20);
	if (map_need(f, v, "in", &x, e) ||
	    model_visible(m, f, x, -1, &r.in, e))
		return -1;
	for (int i = 0; i < m->nrep; i++)
		if (strcmp(m->rep[i].name, name) == 0)
			return val_err(f, map_get(v, "repeat"), e, "repeat '%s' is defined twice", name);
	if (m->t[r.in].role == T_PARAM || m->t[r.in].rank != 3)
		return val_err(f, x, e, "repeat '%s': in '%s' must be an activation [batch, tokens, features]",
			       name, m->t[r.in].name);
	r.name = xstrdup(name);
	m->rep = xrealloc(m->rep, (size_t)(m->nrep + 1) * sizeof *m->rep);
	m->rep[m->nrep++] = r;

	if (map_need(f, v, "carry", &cv, e))
		return -1;
	if (cv->kind != VAL_SCALAR)
		return val_err(f, cv, e, "expected a tensor name");
	MTensor *c = model_new_tensor(m, f, cv, e);
	if (!c)
		return -1;
	const MTensor *in = &m->t[m->rep[ri].in];
	c->role = T_ACT;
	c->rank = in->rank;
	memcpy(c->shape, in->shape, sizeof c->shape);
	c->dtype = in->dtype;
	m->rep[ri].carry = m->nt - 1;

	if ((x = map_get(v, "params"))) {
		int from = m->nt;
		if (declared(m, f, x, T_PARAM, e))
			return -1;
		for (int i = from; i < m->nt; i++)
			m->t[i].count = r.count, m->t[i].rep = ri;
	}
	if ((x = map_get(v, "state"))) {        /* a state per iteration (each layer's cache), stacked */
		int from = m->nt;
		if (m->version < 5)
			return val_err(f, x, e, "state needs amp-model: 5 (this file is version %d)", m->version);
		if (declared(m, f, x, T_STATE, e))
			return -1;
		for (int i = from; i < m->nt; i++)
			m->t[i].count = r.count, m->t[i].rep = ri;
	}
	if (map_need(f, v, "ops", &ops, e))
		return -1;
	if (ops->kind != VAL_SEQ || ops->n == 0)
		return val_err(f, ops, e, "repeat '%s': expected a non-empty list of ops", name);
	m->rep[ri].first = m->nops;
	for (int i = 0; i < ops->n; i++) {
		if (ops->items[i].kind == VAL_MAP && map_get(&ops->items[i], "repeat"))
			return val_err(f, &ops->items[i], e, "repeat '%s': repeats do not nest", name);
		if (model_an_op(m, f, &ops->items[i], ri, e))
			return -1;
	}
	m->rep[ri].last = m->nops - 1;
	const MTensor *y = &m->t[m->ops[m->nops - 1].out], *ct = &m->t[m->rep[ri].carry];
	if (!model_same_shape(y, ct) || y->dtype != ct->dtype)
		return val_err(f, &ops->items[ops->n - 1], e,
			       "repeat '%s': the last op's result '%s' must have the shape and dtype of carry '%s'",
			       name, y->name, ct->name);
	return 0;
}

/* A two-way pin: *out = 1 for `one`, 2 for `two`; anything else is an
 * error at the value. */
static int pin_choice(const char *f, const Val *x, const char *key, const char *one,
		      const char *two, const char *three, int *out, Err *e)
{
	const char *s;
	if (val_str(f, x, &s, e))
		return -1;
	*out = strcmp(s, one) == 0 ? 1 : strcmp(s, two) == 0 ? 2 : three && strcmp(s, three) == 0 ? 3 : 0;
	if (!*out && three)
		return val_err(f, x, e, "unknown %s '%s' (expected %s, %s or %s)", key, s, one, two, three);
	if (!*out)
		return val_err(f, x, e, "unknown %s '%s' (expected %s or %s)", key, s, one, two);
	return 0;
}

static int pins(Model *m, const char *f, const Val *sec, Err *e)
{
	static const char *keys[] = { "grid", "cast", "staging", "out_staging", "reduce", NULL };
	static const char *akeys[] = { "blocks", "kv_staging", NULL };

	if (sec->kind != VAL_MAP)
		return val_err(f, sec, e, "expected a mapping of op names");
	for (int i = 0; i < sec->n; i++) {
		const Val *k = &sec->items[2 * i], *v = &sec->items[2 * i + 1], *x;
		const char *s;
		int n, oi = model_find_op(m, k->s);
		if (oi < 0)
			return val_err(f, k, e, "pin for unknown op '%s'", k->s);
		MOp *o = &m->ops[oi];
		if (o->kind != OP_MATMUL && o->kind != OP_ATTENTION)
			return val_err(f, k, e, "pin for '%s': only matmul and attention ops take pins", k->s);
		if (map_keys(f, v, o->kind == OP_ATTENTION ? akeys : keys, e))
			return -1;
		o->pinned = 1;
		o->pin_line = v->line;
		o->pin_col = v->col;
		if (o->kind == OP_ATTENTION) {  /* blocks: [query blocks, key blocks]; kv_staging */
			if ((x = map_get(v, "kv_staging")) &&
			    pin_choice(f, x, "kv_staging", "direct", "relay", "home", &o->kv_staging, e))
				return -1;
			if ((x = map_get(v, "blocks"))) {
				if (val_ints(f, x, 2, 1, INT64_C(1) << 30, o->grid, &n, e))
					return -1;
				if (n != 2)
					return val_err(f, x, e, "blocks must be [query_blocks, key_blocks]");
				o->pin_line = x->line;
				o->pin_col = x->col;
			}
			continue;
		}
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
			if (strcmp(s, "auto") && cast_parse(s, &o->cast))      /* auto: the planner's (a plan's record */
				return val_err(f, x, e, "unknown cast order '%s' (expected early, late or auto)", s);  /* when a needs none) */
		}
		if ((x = map_get(v, "staging"))) {
			if (val_str(f, x, &s, e))
				return -1;
			if (staging_parse(s, &o->staging))
				return val_err(f, x, e, "unknown staging '%s' (expected pack-once, direct or spread)", s);
			if (o->staging == STAGING_SPREAD && m->version < 3)
				return val_err(f, x, e, "staging 'spread' needs amp-model 3 (this file is version %d)",
					       m->version);
		}
		if ((x = map_get(v, "out_staging")) &&
		    pin_choice(f, x, "out_staging", "direct", "unpack", NULL, &o->out_staging, e))
			return -1;
		if ((x = map_get(v, "reduce")) &&
		    pin_choice(f, x, "reduce", "gather", "scatter", NULL, &o->reduce, e))
			return -1;
	}
	return 0;
}

int model_load(Model *m, const char *path, Err *e)
{
	return model_load_input(m, input_open(path, e), e);
}

int model_load_input(Model *m, Input *in, Err *e)
{
	static const char *keys[] = { "amp-model", "name", "inputs", "state", "params", "ops",
				      "outputs", "pins", NULL };
	YReader r;
	Val *root;
	const Val *v;
	const char *f, *name;
	int64_t version;
	int rc = -1;

	memset(m, 0, sizeof *m);
	if (yr_open_input(&r, in, e))
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
	if (version < 1 || version > MODEL_VERSION) {
		val_err(f, map_get(root, "amp-model"), e,
			"unsupported model file version %lld (this amp reads 1 to %d)",
			(long long)version, MODEL_VERSION);
		goto out;
	}
	m->version = (int)version;
	if (get_str(f, root, "name", &name, e))
		goto out;
	m->name = xstrdup(name);
	if (map_need(f, root, "inputs", &v, e) || declared(m, f, v, T_INPUT, e))
		goto out;
	if ((v = map_get(root, "state"))) {
		if (m->version < 5) {
			val_err(f, v, e, "state needs amp-model: 5 (this file is version %d)", m->version);
			goto out;
		}
		if (declared(m, f, v, T_STATE, e))
			goto out;
	}
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
	for (int i = 0; i < v->n; i++) {
		const Val *it = &v->items[i];
		if (it->kind == VAL_MAP && map_get(it, "repeat") && version < 2) {
			val_err(f, it, e, "repeat needs amp-model: 2");
			goto out;
		}
		if (it->kind == VAL_MAP && map_get(it, "repeat") ? repeat(m, f, it, e) : model_an_op(m, f, it, -1, e))
			goto out;
	}
	for (int i = 0; i < m->nt; i++)         /* op results, and parameters stacked by a repeat */
		if (model_elements(&m->t[i]) > MODEL_MAX_ELEMENTS) {
			too_big(f, m->t[i].line, m->t[i].col, &m->t[i], e);
			goto out;
		}
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
		if (model_visible(m, f, &v->items[i], -1, &t, e))
			goto out;
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
