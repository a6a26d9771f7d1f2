/* plan: the stage record (Plan), its names and its queries. Reading and
 * writing the four stage formats is stage_read*.c and stage_write.c; the
 * cross-record checks are plan_check.c; SRAM accounting plan_memory.c. */
#include "stage/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const role_names[R_COUNT] = { "input", "param", "act", "output", "partial", "state" };
const char *const map_names[MAP_COUNT] = { "identity", "native-panel", "relayout" };
const char *const move_names[MOVE_COUNT] = { "parameter", "activation", "reduction",
					       "output", "copy", "relay" };
#define COMPUTE_NAME(E, name, ...) [C_##E] = name,
const char *const compute_names[C_COUNT] = { AMP_COMPUTES(COMPUTE_NAME) };
#undef COMPUTE_NAME
#define COMPUTE_SINCE(E, name, since, ...) [C_##E] = since,
static const int compute_sinces[C_COUNT] = { AMP_COMPUTES(COMPUTE_SINCE) };
#undef COMPUTE_SINCE
int compute_since(ComputeKind k) { return compute_sinces[k]; }
const char *const operand_names[OPD_COUNT] = { "a", "b", "bias", "partial", "out", "x",
					        "scale", "q", "k", "v", "positions" };

static const char *stage_names[STAGE_COUNT] = { "amp-plan", "amp-expand", "amp-exchange",
						  "amp-group" };

const char *stage_format(StageKind k) { return stage_names[k]; }
const char *role_name(PRole r) { return role_names[r]; }
const char *mapping_name(Mapping m) { return map_names[m]; }
const char *movement_name(Movement m) { return move_names[m]; }
const char *compute_name(ComputeKind c) { return compute_names[c]; }
const char *operand_name(Operand o) { return operand_names[o]; }

int plan_name_lookup(const char *const *names, int n, const char *s)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return i;
	return -1;
}

void plan_free(Plan *p)
{
	for (int i = 0; i < p->nt; i++)
		free(p->t[i].name);
	for (int i = 0; i < p->ng; i++)
		free(p->g[i].op);
	for (int i = 0; i < p->np; i++)
		free(p->p[i].name);
	for (int i = 0; i < p->ns; i++)
		free(p->s[i].op);
	for (int i = 0; i < p->nph; i++)
		free(p->ph[i].label);
	for (int i = 0; i < p->nh; i++)
		free(p->h[i].op);
	for (int i = 0; i < p->nr; i++)
		free(p->r[i].name);
	free(p->h);
	free(p->r);
	free(p->x);
	free(p->ph);
	free(p->t);
	free(p->g);
	free(p->p);
	free(p->s);
	free(p->model);
	for (int i = 0; i < p->nprov; i++)
		prov_free(&p->prov[i]);
	free(p->prov);
	memset(p, 0, sizeof *p);
}

void prov_free(Prov *pr)
{
	free(pr->tool);
	free(pr->version);
	free(pr->options);
	for (int i = 0; i < pr->nf; i++) {
		free(pr->f[i].role);
		free(pr->f[i].name);
	}
	memset(pr, 0, sizeof *pr);
}

static void prov_copy(Prov *d, const Prov *s)
{
	*d = *s;
	d->tool = xstrdup(s->tool);
	d->version = xstrdup(s->version);
	d->options = xstrdup(s->options);
	for (int i = 0; i < s->nf; i++) {
		d->f[i].role = xstrdup(s->f[i].role);
		d->f[i].name = xstrdup(s->f[i].name);
	}
}

void prov_hex(uint64_t fnv1a, char hex[17])
{
	snprintf(hex, 17, "%016" PRIx64, fnv1a);
}

void plan_add_prov(Plan *p, const Prov *pr)
{
	p->prov = xrealloc(p->prov, (size_t)(p->nprov + 1) * sizeof *p->prov);
	prov_copy(&p->prov[p->nprov++], pr);
}

static void *dup_array(const void *a, size_t n, size_t size)
{
	void *d = xmalloc(n ? n * size : 1);
	if (n)
		memcpy(d, a, n * size);
	return d;
}

void plan_dup(Plan *d, const Plan *p)
{
	*d = *p;
	d->model = xstrdup(p->model);
	d->prov = dup_array(p->prov, (size_t)p->nprov, sizeof *p->prov);
	for (int i = 0; i < p->nprov; i++)
		prov_copy(&d->prov[i], &p->prov[i]);
	d->t = dup_array(p->t, (size_t)p->nt, sizeof *p->t);
	d->g = dup_array(p->g, (size_t)p->ng, sizeof *p->g);
	d->p = dup_array(p->p, (size_t)p->np, sizeof *p->p);
	d->s = dup_array(p->s, (size_t)p->ns, sizeof *p->s);
	d->x = dup_array(p->x, (size_t)p->nx, sizeof *p->x);
	d->ph = dup_array(p->ph, (size_t)p->nph, sizeof *p->ph);
	d->h = dup_array(p->h, (size_t)p->nh, sizeof *p->h);
	d->r = dup_array(p->r, (size_t)p->nr, sizeof *p->r);
	for (int i = 0; i < p->nt; i++)
		d->t[i].name = xstrdup(p->t[i].name);
	for (int i = 0; i < p->ng; i++)
		d->g[i].op = xstrdup(p->g[i].op);
	for (int i = 0; i < p->np; i++)
		d->p[i].name = xstrdup(p->p[i].name);
	for (int i = 0; i < p->ns; i++)
		d->s[i].op = xstrdup(p->s[i].op);
	for (int i = 0; i < p->nph; i++)
		d->ph[i].label = xstrdup(p->ph[i].label);
	for (int i = 0; i < p->nh; i++)
		d->h[i].op = xstrdup(p->h[i].op);
	for (int i = 0; i < p->nr; i++)
		d->r[i].name = xstrdup(p->r[i].name);
	/* plan_add_xfer grows x in powers of two */
	if (p->nx) {
		size_t cap = 1;
		while (cap < (size_t)p->nx)
			cap *= 2;
		d->x = xrealloc(d->x, cap * sizeof *d->x);
	}
}

Mapping copy_mapping(const Placement *src, const Placement *dst)
{
	if (src->layout != dst->layout)
		return MAP_RELAYOUT;
	if (layout_is_panel(src->layout) && place_panel_aligned(src) && place_panel_aligned(dst))
		return MAP_NATIVE_PANEL;
	return MAP_IDENTITY;
}

int plan_repeat_of(const Plan *p, int step)
{
	for (int i = 0; i < p->nr; i++)
		if (step >= p->r[i].first && step <= p->r[i].last)
			return i;
	return -1;
}

int64_t plan_step_count(const Plan *p, int step)
{
	int r = plan_repeat_of(p, step);
	return r < 0 ? 1 : p->r[r].count;
}

int plan_stacked(const Plan *p, int i)
{
	return p->t[p->p[i].tensor].count > 1 && (plan_writer(p, i) < 0 || plan_state_home(p, i));
}

int64_t plan_chunks(const Step *s)
{
	return s->chunks > 1 ? s->chunks : 1;
}

int plan_gemm_index(const Plan *p, const char *op)
{
	for (int i = 0; i < p->ng; i++)
		if (strcmp(p->g[i].op, op) == 0)
			return i;
	return -1;
}

int plan_fold_rows(const Plan *p, const char *op, int *reduce)
{
	for (int i = 0; i < p->ns; i++) {
		const Step *s = &p->s[i];
		int bias, sums;
		if (s->kind != STEP_COMPUTE || s->compute != C_REDUCE || strcmp(s->op, op) != 0)
			continue;
		plan_reduce_inputs(p, s, &bias, &sums);
		if (sums < 0)
			return -1;
		*reduce = i;
		int t = p->p[s->in[sums]].tensor;
		for (int k = 0; k < i; k++)
			if (p->s[k].kind == STEP_COMPUTE && p->s[k].compute == C_SUMSQ && p->p[p->s[k].out].tensor == t)
				return p->p[p->s[k].in[0]].tensor;
		return -1;
	}
	return -1;
}

int plan_norm_fold(const Plan *p, const Step *s)
{
	if (s->kind != STEP_COMPUTE || s->compute != C_MUL || s->nin != 2 || p->p[s->in[1]].rank != 1)
		return 0;
	for (const Step *q = p->s; q < p->s + p->ns; q++)       /* its norm's sums (a mul op's scale has none) */
		if (q->kind == STEP_COMPUTE && q->compute == C_SUMSQ && q->op && s->op && !strcmp(q->op, s->op))
			return 1;
	return 0;
}

void plan_reduce_inputs(const Plan *p, const Step *s, int *bias, int *sums)
{
	*bias = *sums = -1;
	for (int k = 1; s->kind == STEP_COMPUTE && s->compute == C_REDUCE && k < s->nin; k++) {
		const PTensor *t = &p->t[p->p[s->in[k]].tensor];
		if (t->role == R_PARTIAL && t->fmt == FMT_FP32)
			*sums = k;
		else
			*bias = k;
	}
}

int64_t plan_head_dim(const Plan *p, const Step *s)
{
	const PTensor *o = &p->t[p->p[s->out].tensor];
	int64_t w = o->shape[o->rank - 1] / s->heads;
	return o->role == R_PARTIAL ? w - 2 * plan_chunks(s) : w;
}

void plan_add_xfer(Plan *pl, const Xfer *x)
{
	if ((pl->nx & (pl->nx - 1)) == 0)
		pl->x = xrealloc(pl->x, (size_t)(pl->nx ? 2 * pl->nx : 1) * sizeof *pl->x);
	pl->x[pl->nx++] = *x;
}
int plan_find_tensor(const Plan *pl, const char *s)
{
	for (int i = 0; i < pl->nt; i++)
		if (strcmp(pl->t[i].name, s) == 0)
			return i;
	return -1;
}

int plan_writer(const Plan *pl, int i)
{
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if ((st->kind == STEP_COPY ? st->dst : st->out) == i)
			return s;
	}
	return -1;
}

/* A state's home is the one placement of it that an append writes, or
 * the first when none does. */
int plan_state_home(const Plan *pl, int i)
{
	int first = -1;
	if (pl->t[pl->p[i].tensor].role != R_STATE)
		return 0;
	for (int s = 0; s < pl->ns; s++)
		if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].compute == C_APPEND && pl->p[pl->s[s].out].tensor ==
		    pl->p[i].tensor)
			return pl->s[s].out == i;
	for (int j = 0; j < pl->np && first < 0; j++)
		if (pl->p[j].tensor == pl->p[i].tensor && plan_writer(pl, j) < 0)
			first = j;
	return first == i;
}
