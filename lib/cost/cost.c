#include "cost/cost.h"

#include <stdlib.h>
#include <string.h>

/* What one tile's cost reads: its output shard, and the shard of the
 * step's first input on the same tile (rows 0 when it holds none). */
typedef struct {
	Layout out, in;
	int64_t keys;           /* attention: the keys each query row attends over */
	int64_t head_dim;       /* attention: D (the tile's heads: its q shard's columns over D) */
	int64_t group;          /* attention: q heads per kv head */
} TileWork;

/* How a tile's cycles follow from its shards: the compute table's cost
 * column (lib/stage/plan.h, AMP_COMPUTES). */
typedef enum { COST_ELEMENTWISE, COST_COPY, COST_MATMUL, COST_REDUCTION, COST_ATTENTION, COST_APPEND } CostKind;
#define COMPUTE_COST(E, name, since, cost) [C_##E] = COST_##cost,
static const CostKind cost_kinds[C_COUNT] = { AMP_COMPUTES(COMPUTE_COST) };
#undef COMPUTE_COST

/* Kind k's cost kind; a kind outside the table (none is read from a
 * stage) costs as elementwise. */
static CostKind cost_kind(ComputeKind k)
{
	return k >= 0 && k < C_COUNT ? cost_kinds[k] : COST_ELEMENTWISE;
}

/* Does the kind's cost read the input shard, or the output shard alone? */
static int reads_input(ComputeKind k)
{
	CostKind c = cost_kind(k);
	return c == COST_MATMUL || c == COST_REDUCTION || c == COST_ATTENTION || c == COST_APPEND;
}

/* One tile's cycles, by the kind's cost row. */
static int64_t tile_cycles(const Machine *m, ComputeKind k, const TileWork *w)
{
	switch (cost_kind(k)) {
	case COST_MATMUL: {
		int64_t macs = w->in.fmt == FMT_FP8 ? m->macs_fp8 : m->macs_fp16;
		return cdiv(w->out.rows * w->in.cols * w->out.cols, macs) + m->matmul_call_cycles;
	}
	case COST_REDUCTION:
		return w->in.rows * w->in.cols * m->reduction_cycles_per_element;
	case COST_ATTENTION: {  /* q·kᵀ and p·v on the matrix unit (fp16), softmax per score */
		/* the tile's heads that share a kv head (at most group of them)
		 * stack their rows into one call of each product */
		int64_t R = w->in.rows, D = w->head_dim, N = w->keys, nh = w->in.cols / D;
		nh = nh > 0 ? nh : 1;   /* a stage whose heads disagree with its shards: amp-run names it */
		int64_t r = nh < w->group ? nh : w->group, calls = cdiv(nh, r);
		return calls * (2 * (cdiv(r * R * N * D, m->macs_fp16) + m->matmul_call_cycles)) +
		       nh * R * N * m->reduction_cycles_per_element;
	}
	case COST_APPEND: {     /* at worst every row it received lands in its block: copied on the tile */
		int64_t in = layout_bytes(&w->in), out = layout_bytes(&w->out);
		return cdiv(in < out ? in : out, m->local_copy_bytes_per_cycle);
	}
	case COST_COPY:         /* on-tile copies */
		return cdiv(layout_bytes(&w->out), m->local_copy_bytes_per_cycle);
	case COST_ELEMENTWISE:
		break;
	}
	return w->out.rows * w->out.cols * m->elementwise_cycles_per_element;
}

typedef struct {
	const Plan *pl;
	const Step *s;
	Layout *in;             /* [tiles]: the input shard on each tile, or NULL (the kind reads none) */
	int64_t best, tile;
	int64_t *per;           /* [tiles] or NULL: each tile's cycles */
} Visit;

static int note_input(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
		      int64_t tile)
{
	Visit *v = ctx;
	(void)rep;
	v->in[tile] = place_layout(p, idx);
	return 0;
}

static int cost_output(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
		       int64_t tile)
{
	Visit *v = ctx;
	TileWork w = { place_layout(p, idx), { 0 }, 0, 0, 0 };
	if (v->in)
		w.in = v->in[tile];
	if (v->s->compute == C_ATTENTION)       /* the tile's key block, and its heads' width */
		w.keys = v->pl->p[v->s->in[1]].block[1], w.head_dim = plan_head_dim(v->pl, v->s),
		w.group = v->s->heads / v->s->kv_heads;
	int64_t c = tile_cycles(&v->pl->machine, v->s->compute, &w);
	(void)rep;
	if (v->tile < 0 || c > v->best)
		v->best = c, v->tile = tile;
	if (v->per && c > v->per[tile])
		v->per[tile] = c;
	return 0;
}

int64_t step_cycles(const Plan *pl, int step, int64_t *worst_tile)
{
	const Step *s = &pl->s[step];
	int64_t T = pl->machine.tiles, zero[MAX_RANK] = { 0 };
	const Placement *out = &pl->p[s->out];

	if (worst_tile)
		*worst_tile = -1;
	if (s->kind != STEP_COMPUTE)
		return 0;
	if (!reads_input(s->compute)) {
		TileWork w = { place_layout(out, zero), { 0 }, 0, 0, 0 };
		if (worst_tile)
			*worst_tile = place_tile(out, zero, zero, T);
		return tile_cycles(&pl->machine, s->compute, &w);
	}
	Visit v = { pl, s, xcalloc((size_t)T, sizeof *v.in), 0, -1, NULL };
	place_each(&pl->p[s->in[0]], T, note_input, &v);
	place_each(out, T, cost_output, &v);
	free(v.in);
	if (worst_tile)
		*worst_tile = v.tile;
	return v.best;
}

int64_t step_cycles_tiles(const Plan *pl, int step, int64_t *per)
{
	const Step *s = &pl->s[step];
	int64_t T = pl->machine.tiles;
	memset(per, 0, (size_t)T * sizeof *per);
	if (s->kind != STEP_COMPUTE)
		return 0;
	Visit v = { pl, s, NULL, 0, -1, per };
	if (reads_input(s->compute)) {
		v.in = xcalloc((size_t)T, sizeof *v.in);
		place_each(&pl->p[s->in[0]], T, note_input, &v);
	}
	place_each(&pl->p[s->out], T, cost_output, &v);
	free(v.in);
	return v.best;
}

int64_t step_tiles(const Plan *pl, int step)
{
	const Step *s = &pl->s[step];
	if (s->kind != STEP_COMPUTE)
		return 0;
	return place_shards(&pl->p[s->out]) * place_replicas(&pl->p[s->out]);
}

static int add_local(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt,
		     int64_t da)
{
	int64_t *bytes = ctx;
	(void)m, (void)sa, (void)dt, (void)da;
	bytes[st] += x->len;
	return 0;
}

int64_t local_copy_cycles(const Plan *pl, int first, int last, int64_t *worst_tile)
{
	int64_t T = pl->machine.tiles, *bytes = xcalloc((size_t)T, sizeof *bytes), w = -1;

	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind == X_LOCAL && x->step >= first && x->step <= last)
			xfer_each(x, T, add_local, bytes);
	}
	for (int64_t t = 0; t < T; t++)
		if (bytes[t] && (w < 0 || bytes[t] > bytes[w]))
			w = t;
	int64_t c = w < 0 ? 0 : cdiv(bytes[w], pl->machine.local_copy_bytes_per_cycle);
	free(bytes);
	if (worst_tile)
		*worst_tile = w;
	return c;
}

/* ---- compute sets ---- */

typedef struct {
	char *mark;             /* [tiles]: 1 on the tiles of the set so far */
	int hit, set;           /* a tile of the step is in the set already; mark the step's */
} SetTiles;

static int set_tile(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t tile)
{
	SetTiles *v = ctx;
	(void)p, (void)idx, (void)rep;
	if (v->set)
		v->mark[tile] = 1;
	else if (v->mark[tile])
		v->hit = 1;
	return 0;
}

/* Do compute steps a < b touch one tensor where either writes it: b
 * reads or writes what a writes, or writes what a reads? */
static int conflict(const Plan *pl, int a, int b)
{
	const Step *x = &pl->s[a], *y = &pl->s[b];
	int wa = pl->p[x->out].tensor, wb = pl->p[y->out].tensor;
	if (wa == wb && !place_apart(&pl->p[x->out], &pl->p[y->out]))
		return 1;
	for (int i = 0; i < y->nin; i++)
		if (pl->p[y->in[i]].tensor == wa)
			return 1;
	for (int i = 0; i < x->nin; i++)
		if (pl->p[x->in[i]].tensor == wb)
			return 1;
	return 0;
}

static int body_first(const Plan *pl, int s)
{
	for (int i = 0; i < pl->nr; i++)
		if (pl->r[i].first == s)
			return 1;
	return 0;
}

void compute_sets(const Plan *pl, int first, int last, int *lead)
{
	int64_t T = pl->machine.tiles;
	SetTiles v = { xcalloc((size_t)T, 1), 0, 0 };
	for (int s = first; s <= last; s++) {
		lead[s] = -1;
		if (pl->s[s].kind != STEP_COMPUTE)
			continue;
		int l = s > first && lead[s - 1] >= 0 && !body_first(pl, s) ? lead[s - 1] : -1;
		for (int k = l < 0 ? s : l; k < s; k++)
			if (conflict(pl, k, s))
				l = -1, k = s;
		if (l >= 0) {
			v.hit = 0, v.set = 0;
			place_each(&pl->p[pl->s[s].out], T, set_tile, &v);
			l = v.hit ? -1 : l;
		}
		if (l < 0) {
			memset(v.mark, 0, (size_t)T);
			l = s;
		}
		lead[s] = l;
		v.set = 1;
		place_each(&pl->p[pl->s[s].out], T, set_tile, &v);
	}
	free(v.mark);
}

void compute_charge(const int *lead, const int64_t *own, int first, int last, int64_t *charged)
{
	int64_t most = 0;
	for (int s = first; s <= last; s++) {
		charged[s] = own[s];
		if (lead[s] < 0)
			continue;
		if (lead[s] == s)
			most = own[s];
		else
			charged[s] = own[s] > most ? own[s] - most : 0, most = own[s] > most ? own[s] : most;
	}
}
