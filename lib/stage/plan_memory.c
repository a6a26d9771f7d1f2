/* plan_memory: live ranges and per-tile SRAM of a plan (plan_memory.h). */
#include "stage/plan_memory.h"

#include <stdlib.h>
#include <string.h>

void plan_lifetimes(const Plan *pl, int *first, int *last, int *alias)
{
	int ns = pl->ns;

	for (int i = 0; i < pl->np; i++) {
		int w = plan_writer(pl, i);
		PRole r = pl->t[pl->p[i].tensor].role;
		int home = plan_state_home(pl, i);      /* resident: the run starts and ends with it */
		first[i] = w < 0 || home ? 0 : w;
		last[i] = (w < 0 || r == R_OUTPUT || home) ? ns : first[i];
		alias[i] = -1;
	}
	for (int s = 0; s < ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind == STEP_COPY) {
			last[st->src] = last[st->src] > s ? last[st->src] : s;
			/* a stacked home holds every instance: a copy of one is never it */
			alias[st->dst] = plan_stacked(pl, st->src) ? -1 : st->src;
		} else {
			for (int k = 0; k < st->nin; k++)
				last[st->in[k]] = last[st->in[k]] > s ? last[st->in[k]] : s;
		}
	}
	/* A repeat's body runs again after its last step: what is live when
	 * it starts (the carried activation, values read in every iteration)
	 * stays live through the whole body. */
	for (int r = 0; r < pl->nr; r++)
		for (int i = 0; i < pl->np; i++)
			if (first[i] < pl->r[r].first && last[i] >= pl->r[r].first && last[i] < pl->r[r].last)
				last[i] = pl->r[r].last;
}

typedef struct {
	int64_t *bytes;         /* [tiles] */
	int64_t instances;      /* a stacked placement holds every instance */
} TileMap;

static int fill(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	TileMap *m = ctx;
	(void)rep;
	m->bytes[t] = place_shard_bytes(p, idx) * m->instances;
	return 0;
}

/* same[t] = 1 where placement i's shard is q's (a shard of q there, and
 * the same region: one buffer when both are live and alike). */
typedef struct {
	const Placement *q;
	const int64_t *q_at;    /* q's shard on each tile, or -1 */
	char *same;
} Same;

static int mark_same(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Same *m = ctx;
	int64_t qidx[MAX_RANK];
	(void)rep;
	if (m->q_at[t] < 0)
		return 0;
	place_shard_idx(m->q, m->q_at[t], qidx);
	int same = p->rank == m->q->rank;
	for (int a = 0; same && a < p->rank; a++)
		same = p->off[a] + idx[a] * p->block[a] == m->q->off[a] + qidx[a] * m->q->block[a] &&
		       place_extent(p, a, idx[a]) == place_extent(m->q, a, qidx[a]);
	m->same[t] = (char)same;
	return 0;
}

/* The walk behind plan_memory and its variants; with part (np + 1
 * entries), at step pstep each placement's bytes on tile ptile as counted
 * (an alias's shared buffer 0), and in part[np] the step's scratch. */
static int64_t memory_walk(const Plan *pl, int64_t *peak, int *peak_step, int64_t *step_peak,
			   int64_t *worst, int *at, MemoryFn fn, void *ctx, int64_t ptile, int pstep,
			   int64_t *part)
{
	int64_t T = pl->machine.tiles, best = 0;
	int np = pl->np, ns = pl->ns;
	TileMap *m = xcalloc((size_t)np, sizeof *m);
	char **same = xcalloc((size_t)np, sizeof *same);
	int *first = xmalloc((size_t)np * sizeof *first), *last = xmalloc((size_t)np * sizeof *last);
	int *alias = xmalloc((size_t)np * sizeof *alias);
	int64_t *cur = xcalloc((size_t)T, sizeof *cur), *q_at = xmalloc((size_t)T * sizeof *q_at);

	if (worst)
		*worst = 0;
	if (at)
		*at = 0;
	if (peak)
		memset(peak, 0, (size_t)T * sizeof *peak);
	plan_lifetimes(pl, first, last, alias);
	for (int i = 0; i < np; i++) {
		m[i].bytes = xcalloc((size_t)T, sizeof *m[i].bytes);
		m[i].instances = plan_stacked(pl, i) ? pl->t[pl->p[i].tensor].count : 1;
		place_each(&pl->p[i], T, fill, &m[i]);
	}
	/* Where a placement and its alias are one buffer (the same region on
	 * a tile): the shard of a copy destination that is its source's. */
	for (int i = 0; i < np; i++) {
		int q = alias[i];
		if (q < 0 || pl->p[q].layout != pl->p[i].layout)
			continue;
		Same sm = { &pl->p[q], q_at, xcalloc((size_t)T, 1) };
		place_shard_at(&pl->p[q], T, q_at);
		place_each(&pl->p[i], T, mark_same, &sm);
		same[i] = sm.same;
	}
	for (int s = 0; s <= ns; s++) {
		memset(cur, 0, (size_t)T * sizeof *cur);
		for (int i = 0; i < np; i++) {
			if (s < first[i] || s > last[i])
				continue;
			int q = alias[i];
			const char *one = same[i] && s >= first[q] && s <= last[q] ? same[i] : NULL;
			const int64_t *bi = m[i].bytes;
			if (one) {
				for (int64_t t = 0; t < T; t++)
					cur[t] += one[t] ? 0 : bi[t];   /* the same buffer: counted once */
			} else {
				for (int64_t t = 0; t < T; t++)
					cur[t] += bi[t];
			}
			if (part && s == pstep)
				part[i] = one && one[ptile] ? 0 : bi[ptile];
		}
		if (s < ns && pl->s[s].kind == STEP_COMPUTE && pl->s[s].scratch)
			for (int64_t t = 0; t < T; t++)
				if (m[pl->s[s].out].bytes[t]) {
					cur[t] += pl->s[s].scratch;
					if (part && s == pstep && t == ptile)
						part[np] = pl->s[s].scratch;
				}
		if (fn && s < ns)
			fn(ctx, s, cur);
		if (step_peak && s < ns)
			step_peak[s] = 0;
		for (int64_t t = 0; t < T; t++) {
			if (step_peak && s < ns && cur[t] > step_peak[s])
				step_peak[s] = cur[t];
			if (peak && cur[t] > peak[t]) {
				peak[t] = cur[t];
				if (peak_step)
					peak_step[t] = s < ns ? s : ns - 1;
			}
			if (cur[t] > best) {
				best = cur[t];
				if (worst)
					*worst = t;
				if (at)
					*at = s < ns ? s : ns - 1;
			}
		}
	}
	for (int i = 0; i < np; i++) {
		free(m[i].bytes);
		free(same[i]);
	}
	free(m);
	free(same);
	free(q_at);
	free(first);
	free(last);
	free(alias);
	free(cur);
	return best;
}

int64_t plan_memory(const Plan *pl, int64_t *peak, int *peak_step, int64_t *step_peak,
		    int64_t *worst, int *at)
{
	return memory_walk(pl, peak, peak_step, step_peak, worst, at, NULL, NULL, 0, -1, NULL);
}

void plan_memory_each(const Plan *pl, MemoryFn fn, void *ctx)
{
	memory_walk(pl, NULL, NULL, NULL, NULL, NULL, fn, ctx, 0, -1, NULL);
}

void plan_memory_parts(const Plan *pl, int64_t tile, int step, int64_t *part)
{
	memset(part, 0, ((size_t)pl->np + 1) * sizeof *part);
	memory_walk(pl, NULL, NULL, NULL, NULL, NULL, NULL, NULL, tile, step, part);
}
