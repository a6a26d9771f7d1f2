/* digest.c: a state's digest, from the chain of ops that writes it and
 * the attentions that read it (lib/model/digest.h, formats/model.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/digest.h"

/* The walk from an append's rows back to the inputs and parameters. */
typedef struct {
	const Model *m;
	const Scales *sc;
	int *id;        /* per tensor: its number in the walk (from 1), or 0 */
	int *def;       /* per tensor: the op that defines it, or -1 */
	int *carry;     /* per tensor: the repeat whose carry it is, or -1 */
	int *cache;     /* per tensor: the state an append writes it into, or -1 */
	char **line;    /* per number: its line, without the newline */
	int n;
} Walk;

/* fp8's scale: the scales file's, else the model's. */
static int scale_of(const Walk *w, const MTensor *x)
{
	int scale = x->scale;
	scales_find(w->sc, x->name, &scale);
	return scale;
}

/* Dimensions; a batch (and an activation's tokens) as '*', the parts a
 * prefill and its decode step need not share. */
static void dims(Str *t, const MTensor *x)
{
	str_printf(t, " [");
	for (int a = 0; a < x->rank; a++) {
		int any = x->role != T_PARAM && (a == 0 || (a == 1 && x->rank == 3 && x->role != T_STATE));
		if (any)
			str_printf(t, "%s*", a ? ", " : "");
		else
			str_printf(t, "%s%lld", a ? ", " : "", (long long)x->shape[a]);
	}
	str_printf(t, "]");
}

/* A state, a parameter or an input: by name, what a run carries or reads. */
static void leaf(Str *t, const Walk *w, const MTensor *x)
{
	static const char *role[] = { "input", "param", "act", "state" };
	str_printf(t, "%s %s", role[x->role], x->name);
	dims(t, x);
	str_printf(t, " x%lld %s", (long long)x->count, fmt_name(x->dtype));
	if (x->dtype == FMT_FP8)
		str_printf(t, " scale %d", scale_of(w, x));
}

/* The width of an attention's head. */
static int64_t head_dim(const Model *m, const MOp *o)
{
	int64_t w = m->t[o->in[0]].shape[2], H = o->heads, G = o->kv_heads;
	if (o->in[0] != o->in[1])
		return w / H;
	return (G == H ? w / 3 : w / (H + 2 * G) * H) / H;
}

/* The state attention o reads as its kv (the state, or the rows an append
 * writes into it), or -1. */
static int kv_state(const Walk *w, const MOp *o)
{
	if (o->kind != OP_ATTENTION || o->in[0] == o->in[1])
		return -1;
	int kv = o->in[1];
	return w->m->t[kv].role == T_STATE ? kv : w->cache[kv];
}

static int node(Walk *w, int t);

static void operand(Str *l, Walk *w, const char *key, int t)
{
	if (t < 0)
		str_printf(l, " %s none", key);
	else {
		int k = node(w, t);
		str_printf(l, " %s #%d", key, k);
	}
}

/* Op o's kind, attributes and operands. */
static void op_line(Str *l, Walk *w, const MOp *o)
{
	const char *const *keys = op_info(o->kind)->slots;        /* the op table's operand keys */
	const Model *m = w->m;
	str_printf(l, "%s", op_name(o->kind));
	switch (o->kind) {
	case OP_LAYERNORM:
	case OP_RMSNORM: str_printf(l, " eps %.17g", o->eps); break;
	case OP_CAST: str_printf(l, " to %s", fmt_name(o->to)); break;
	case OP_PATCHIFY: str_printf(l, " patch %lld class_tokens %lld", (long long)o->patch, (long long)o->cls); break;
	case OP_BROADCAST: str_printf(l, " batch %lld", (long long)o->batch); break;
	case OP_ROPE:
		str_printf(l, " heads %lld head_dim %lld theta %.17g", (long long)o->heads, (long long)o->head_dim, o->theta);
		if (o->head_stride != o->head_dim)     /* (version 6; absent, the digest of older models stays) */
			str_printf(l, " head_stride %lld", (long long)o->head_stride);
		if (o->interleaved)                     /* (version 7) */
			str_printf(l, " pairs interleaved");
		if (o->rope_scale.factor > 0)           /* (version 8) */
			str_printf(l, " scaling llama3 factor %.17g low %.17g high %.17g original %.17g",
				   o->rope_scale.factor, o->rope_scale.low, o->rope_scale.high, o->rope_scale.original);
		if (o->rope_grid.rows > 0)              /* (version 9) */
			str_printf(l, " patch_grid %lld %lld class_tokens %lld", (long long)o->rope_grid.rows,
				   (long long)o->rope_grid.cols, (long long)o->rope_grid.cls);
		break;
	case OP_EMBED: str_printf(l, " transposed %d", o->transposed); break;
	case OP_ATTENTION:
		str_printf(l, " heads %lld kv_heads %lld head_dim %lld causal %d", (long long)o->heads,
		    (long long)o->kv_heads, (long long)head_dim(m, o), o->causal);
		if (o->kv_order)
			str_printf(l, " kv_order heads");
		break;
	default: break;
	}
	int s = kv_state(w, o);
	if (o->kind == OP_ATTENTION && o->in[0] == o->in[1]) {
		operand(l, w, "qkv", o->in[0]);
		operand(l, w, "positions", o->in[2]);
	} else if (s >= 0) {            /* over a cache: what it holds, not how this program fills it */
		operand(l, w, "q", o->in[0]);
		str_printf(l, " kv state %s", m->t[s].name);
	} else {
		for (int k = 0; k < 3 && keys[k]; k++)
			if (k < o->nin || o->in[k] >= 0)
				operand(l, w, keys[k], o->in[k]);
	}
}

/* Tensor t's number, its line (and those of the tensors it is made from)
 * written on the first visit. */
static int node(Walk *w, int t)
{
	if (w->id[t])
		return w->id[t];
	int k = w->id[t] = ++w->n;
	const MTensor *x = &w->m->t[t];
	Str l = { NULL, 0, 0 };
	str_printf(&l, "#%d = ", k);
	if (w->carry[t] >= 0) {
		const MRepeat *r = &w->m->rep[w->carry[t]];
		str_printf(&l, "carry of a repeat x%lld", (long long)r->count);
		operand(&l, w, "in", r->in);
		operand(&l, w, "next", w->m->ops[r->last].out);
	} else if (w->def[t] >= 0) {
		op_line(&l, w, &w->m->ops[w->def[t]]);
	} else {
		leaf(&l, w, x);
	}
	if (w->carry[t] >= 0 || w->def[t] >= 0) {      /* an activation: its dtype and row width */
		str_printf(&l, " : %s", fmt_name(x->dtype));
		dims(&l, x);
	}
	w->line = xrealloc(w->line, (size_t)(w->n + 1) * sizeof *w->line);
	w->line[k] = l.s ? l.s : xstrdup("");
	return k;
}

static int by_text(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

uint64_t model_state_digest(const Model *m, const Scales *sc, int s, char **text)
{
	Walk w = { m, sc, NULL, NULL, NULL, NULL, NULL, 0 };
	size_t nt = (size_t)m->nt;
	w.id = xcalloc(nt, sizeof *w.id);
	w.def = xmalloc(nt * sizeof *w.def);
	w.carry = xmalloc(nt * sizeof *w.carry);
	w.cache = xmalloc(nt * sizeof *w.cache);
	for (int t = 0; t < m->nt; t++)
		w.def[t] = w.carry[t] = w.cache[t] = -1;
	const MOp *app = NULL;
	for (int i = 0; i < m->nops; i++) {
		const MOp *o = &m->ops[i];
		if (o->kind == OP_APPEND) {
			w.cache[o->in[0]] = o->out;
			if (o->out == s)
				app = o;
		} else if (o->out >= 0) {
			w.def[o->out] = i;
		}
	}
	for (int r = 0; r < m->nrep; r++)
		w.carry[m->rep[r].carry] = r;

	int ax = app ? node(&w, app->in[0]) : 0, ap = app ? node(&w, app->in[1]) : 0;
	Str t = { NULL, 0, 0 };
	str_printf(&t, "amp-state-digest %d\n", STATE_DIGEST_VERSION);
	leaf(&t, &w, &m->t[s]);
	if (app)
		str_printf(&t, "\nappend x #%d positions #%d\n", ax, ap);
	else
		str_printf(&t, "\nappend none\n");
	for (int k = 1; k <= w.n; k++)
		str_printf(&t, "%s\n", w.line[k]);

	/* its readers, each kind once, in the order of their text */
	char **rd = NULL;
	int nr = 0;
	for (int i = 0; i < m->nops; i++) {
		const MOp *o = &m->ops[i];
		if (kv_state(&w, o) != s)
			continue;
		rd = xrealloc(rd, (size_t)(nr + 1) * sizeof *rd);
		rd[nr++] = xasprintf("read by attention heads %lld kv_heads %lld head_dim %lld causal %d%s",
				     (long long)o->heads, (long long)o->kv_heads, (long long)head_dim(m, o), o->causal,
				     o->kv_order ? " kv_order heads" : "");
	}
	qsort(rd, (size_t)nr, sizeof *rd, by_text);
	for (int i = 0; i < nr; i++)
		if (!i || strcmp(rd[i], rd[i - 1]))
			str_printf(&t, "%s\n", rd[i]);
	if (!nr)
		str_printf(&t, "read by none\n");

	uint64_t h = fnv1a(t.s, t.n);
	if (text)
		*text = t.s;
	else
		free(t.s);
	for (int i = 0; i < nr; i++)
		free(rd[i]);
	free(rd);
	for (int k = 1; k <= w.n; k++)
		free(w.line[k]);
	free(w.line), free(w.id), free(w.def), free(w.carry), free(w.cache);
	return h;
}
