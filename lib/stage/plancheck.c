/* Cross-record checks of a plan, and its memory accounting. */
#include "stage/plan.h"

#include <stdlib.h>
#include <string.h>

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

static int initial(const Plan *pl, int i)
{
	PRole r = pl->t[pl->p[i].tensor].role;
	return ((r == R_INPUT || r == R_PARAM) && plan_writer(pl, i) < 0) || plan_state_home(pl, i);
}

int plan_check_step(const Plan *pl, int i, Err *e)
{
	const Step *s = &pl->s[i];
	const Placement *P = pl->p;

	if (s->kind == STEP_COPY) {
		if (s->src == s->dst)
			return errf(e, "copy from '%s' to itself", P[s->src].name);
		if (P[s->src].tensor != P[s->dst].tensor)
			return errf(e, "copy from '%s' to '%s' changes the tensor; a cast is compute",
				    P[s->src].name, P[s->dst].name);
		Mapping m = copy_mapping(&P[s->src], &P[s->dst]);
		if (m != s->map)
			return errf(e, "map '%s' does not match the placements (expected '%s')",
				    mapping_name(s->map), mapping_name(m));
		return 0;
	}
	for (int k = 0; k < s->nin; k++)
		if (s->in[k] == s->out)
			return errf(e, "compute reads and writes '%s'", P[s->out].name);
	const Placement *in = &P[s->in[0]], *out = &P[s->out];
	switch (s->compute) {
	case C_CAST:
		if (in->fmt == out->fmt || s->nin != 1)
			return errf(e, "cast from '%s' to '%s' must change the format",
				    in->name, out->name);
		break;
	case C_PACK:
		if (in->tensor != out->tensor || in->layout == out->layout || s->nin != 1)
			return errf(e, "pack from '%s' to '%s' must keep the tensor and change the layout",
				    in->name, out->name);
		break;
	case C_MATMUL:
		if (s->nin < 2)
			return errf(e, "matmul needs a and b");
		break;
	case C_ATTENTION: {
		if (out->fmt != FMT_FP16 && !(out->fmt == FMT_FP32 && pl->t[out->tensor].role == R_PARTIAL))
			return errf(e, "attention writes fp16 output or an fp32 partial, not '%s'", out->name);
		const PTensor *o = &pl->t[out->tensor];
		int64_t w = o->shape[o->rank - 1], n = plan_chunks(s), D = w / s->heads - (o->role == R_PARTIAL ? 2 * n : 0);
		if (w % s->heads || D < 1 || D % n || (n > 1 && o->role != R_PARTIAL))
			return errf(e, "attention '%s' with %lld heads and %lld chunks: its output '%s' is %lld wide, "
				    "not heads x D (a partial: heads x (D + 2 x chunks), D a multiple of chunks)", s->op,
				    (long long)s->heads, (long long)n, out->name, (long long)w);
		break;
	}
	case C_APPEND:
		if (s->nin != 2 || pl->t[out->tensor].role != R_STATE || P[s->in[0]].tensor == out->tensor ||
		    P[s->in[1]].fmt != FMT_I32)
			return errf(e, "append writes a state ('%s') from rows and their int32 positions", out->name);
		break;
	case C_LAST:
		if (s->nin != 1 || in->tensor == out->tensor || in->rank != 3 || out->rank != 3 || out->shape[1] != 1)
			return errf(e, "last reads an activation [B, T, C] and writes [B, 1, C] (from '%s' to '%s')",
				    in->name, out->name);
		break;
	case C_MERGE:
		if (s->nin != 1 || in->fmt != FMT_FP32 || out->fmt != FMT_FP16 || in->rank != 4)
			return errf(e, "merge reads one fp32 partial [KB, B, T, H*(D+2)] and writes fp16 "
				    "output (from '%s' to '%s')", in->name, out->name);
		break;
	default:
		break;
	}
	return 0;
}

int plan_check(const Plan *pl, const char *file, Err *e)
{
	char *ready = xcalloc((size_t)pl->np + 1, 1);
	int rc = -1;

	for (int i = 0; i < pl->np; i++) {
		ready[i] = (char)initial(pl, i);
		if (plan_writer(pl, i) < 0 && !ready[i]) {
			errf(e, "%s: placement '%s' is never written", file, pl->p[i].name);
			goto out;
		}
	}
	for (int i = 0; i < pl->ns; i++) {
		const Step *s = &pl->s[i];
		int reads[4], n = 0, w = s->kind == STEP_COPY ? s->dst : s->out;
		if (s->kind == STEP_COPY)
			reads[n++] = s->src;
		else
			for (int k = 0; k < s->nin; k++)
				reads[n++] = s->in[k];
		for (int k = 0; k < n; k++)
			if (!ready[reads[k]]) {
				errf(e, "%s: step %d reads '%s' before it is written", file, i,
				     pl->p[reads[k]].name);
				goto out;
			}
		int r = plan_repeat_of(pl, i);
		int back = s->kind == STEP_COMPUTE && s->compute == C_CARRY && r >= 0 && pl->r[r].last == i &&
			   plan_writer(pl, w) < pl->r[r].first;
		int append = s->kind == STEP_COMPUTE && s->compute == C_APPEND && plan_state_home(pl, w);
		if (ready[w] && !back && !append) {
			errf(e, "%s: step %d writes '%s' a second time", file, i, pl->p[w].name);
			goto out;
		}
		ready[w] = 1;
	}
	for (int i = 0; i < pl->nph; i++) {
		int r = plan_repeat_of(pl, pl->ph[i].first);
		if (r != plan_repeat_of(pl, pl->ph[i].last)) {
			errf(e, "%s: phase %d crosses the boundary of a repeat", file, i);
			goto out;
		}
	}
	for (int i = 0; pl->stage >= STAGE_EXPAND && i < pl->np; i++) {
		const Placement *p = &pl->p[i];
		int64_t n = plan_stacked(pl, i) ? pl->t[p->tensor].count : 0;
		if (n && p->addr + n * place_instance(p) > pl->machine.sram_bytes) {
			errf(e, "%s: placement '%s' holds %lld instances of %lld bytes from %lld, beyond SRAM "
			     "(%lld bytes)", file, p->name, (long long)n, (long long)place_instance(p),
			     (long long)p->addr, (long long)pl->machine.sram_bytes);
			goto out;
		}
	}
	/* A stacked tensor is read in one repeat whose count is its count. */
	for (int i = 0; i < pl->ns; i++) {
		const Step *s = &pl->s[i];
		int reads[4], n = 0, r = plan_repeat_of(pl, i);
		if (s->kind == STEP_COPY)
			reads[n++] = s->src;
		else
			for (int k = 0; k < s->nin; k++)
				reads[n++] = s->in[k];
		for (int k = 0; k < n; k++) {
			const PTensor *t = &pl->t[pl->p[reads[k]].tensor];
			if (t->count > 1 && (r < 0 || pl->r[r].count != t->count)) {
				errf(e, "%s: step %d reads '%s', stacked %lld times, %s", file, i, t->name,
				     (long long)t->count, r < 0 ? "outside every repeat" : "in a repeat of another count");
				goto out;
			}
		}
	}
	for (int i = 0; i < pl->nr; i++) {
		const Step *s = &pl->s[pl->r[i].last];
		if (s->kind != STEP_COMPUTE || s->compute != C_CARRY) {
			errf(e, "%s: repeat '%s' must end with a carry step", file, pl->r[i].name);
			goto out;
		}
	}
	for (int i = 0; i < pl->ng; i++) {
		const Gemm *g = &pl->g[i];
		if (g->tiles > pl->machine.tiles) {
			errf(e, "%s: gemm '%s' uses %lld tiles; the machine has %lld", file, g->op,
			     (long long)g->tiles, (long long)pl->machine.tiles);
			goto out;
		}
	}
	rc = 0;
out:
	free(ready);
	return rc;
}

/* ---- memory ---- */

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
