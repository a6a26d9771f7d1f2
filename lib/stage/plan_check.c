/* plan_check: the cross-record checks of a plan (plan_check.h). */
#include "stage/plan_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
	case C_ROPE: {          /* a patch grid: its class tokens and patches are x's tokens */
		const PTensor *x = &pl->t[in->tensor];
		char *why = rope_grid_bad(&s->rope_grid, s->op, x->name, x->rank == 3 ? x->shape[1] : 0);
		if (why) {
			errf(e, "%s", why);
			free(why);
			return -1;
		}
		break;
	}
	case C_ATTENTION: {
		if (out->fmt != FMT_FP16 && !(out->fmt == FMT_FP32 && pl->t[out->tensor].role == R_PARTIAL) &&
		    !(out->fmt == FMT_FP8 && pl->t[out->tensor].role != R_PARTIAL))
			return errf(e, "attention writes fp16 or fp8 output (a fused cast) or an fp16 or fp32 partial, "
				    "not '%s'", out->name);
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
	case C_SUMSQ:
		if (s->nin != 1 || out->fmt != FMT_FP32 || in->rank != 3 || out->rank != 3 ||
		    pl->t[out->tensor].role != R_PARTIAL || in->shape[0] != out->shape[0] ||
		    in->shape[1] != out->shape[1])
			return errf(e, "sumsq reads an activation [B, T, C] and writes an fp32 partial [B, T, "
				    "blocks] (from '%s' to '%s')", in->name, out->name);
		break;
	case C_RMSNORM:
		if (s->nin == 3 && (P[s->in[2]].fmt != FMT_FP32 || pl->t[P[s->in[2]].tensor].role != R_PARTIAL))
			return errf(e, "rmsnorm's third input '%s' is not an fp32 partial of sums of squares",
				    P[s->in[2]].name);
		break;
	case C_REDUCE: {
		int bias, sums;
		plan_reduce_inputs(pl, s, &bias, &sums);
		if (s->nin > 3 || (s->nin == 3 && (bias != 1 || sums != 2)) || in->rank != 4 || out->rank != 3)
			return errf(e, "reduce reads its partials [K, B, T, N], then a bias and a folded rmsnorm's "
				    "fp32 row sums of squares [B, T, blocks], each at most once, and writes [B, T, N] "
				    "(from '%s' to '%s')", in->name, out->name);
		if (sums >= 0) {
			const Placement *q = &P[s->in[sums]];
			if (q->rank != 3 || q->shape[0] != out->shape[0] || q->shape[1] != out->shape[1] ||
			    !(s->eps > 0) || !isfinite(s->eps))
				return errf(e, "reduce's row sums '%s' are not [B, T, blocks] of its result's rows, or "
					    "its eps is not positive", q->name);
		}
		break;
	}
	case C_MUL:
		if (s->nin != 2 || (P[s->in[1]].rank == 1 && (in->rank != 3 || out->rank != 3 ||
							      P[s->in[1]].shape[0] != in->shape[2])) ||
		    (P[s->in[1]].rank != 1 && P[s->in[1]].rank != in->rank))
			return errf(e, "mul reads two activations of one shape, or rows [B, T, C] and a vector [C] "
				    "(from '%s' to '%s')", in->name, out->name);
		break;
	case C_MERGE:
		if (s->nin != 1 || (in->fmt != FMT_FP32 && in->fmt != FMT_FP16) ||
		    (out->fmt != FMT_FP16 && out->fmt != FMT_FP8) || in->rank != 4)
			return errf(e, "merge reads one fp16 or fp32 partial [KB, B, T, H*(D+2*chunks)] and writes fp16 "
				    "or fp8 (a fused cast) output (from '%s' to '%s')", in->name, out->name);
		break;
	default:
		break;
	}
	return 0;
}

/* The box of tensor coordinates step s writes in its destination: the
 * destination's window, and for a copy only its part inside the source's
 * window (the copies of a segmented attention's results each write
 * theirs). Returns its elements. */
static int64_t written_box(const Plan *pl, const Step *s, int64_t *lo, int64_t *hi)
{
	const Placement *d = &pl->p[s->kind == STEP_COPY ? s->dst : s->out];
	int64_t n = 1;
	for (int a = 0; a < d->rank; a++) {
		lo[a] = d->off[a], hi[a] = d->off[a] + d->shape[a];
		if (s->kind == STEP_COPY) {
			const Placement *x = &pl->p[s->src];
			lo[a] = lo[a] > x->off[a] ? lo[a] : x->off[a];
			hi[a] = hi[a] < x->off[a] + x->shape[a] ? hi[a] : x->off[a] + x->shape[a];
		}
		n *= hi[a] > lo[a] ? hi[a] - lo[a] : 0;
	}
	return n;
}

static int64_t place_elements(const Placement *p)
{
	int64_t n = 1;
	for (int a = 0; a < p->rank; a++)
		n *= p->shape[a];
	return n;
}

/* The parts of a placement written so far: boxes that may not overlap. */
typedef struct {
	int64_t (*box)[2 * MAX_RANK];
	int n;
	int64_t done;           /* elements written */
} Parts;

static int parts_overlap(const Parts *w, int rank, const int64_t *lo, const int64_t *hi)
{
	for (int i = 0; i < w->n; i++) {
		int meet = 1;
		for (int a = 0; a < rank && meet; a++)
			meet = lo[a] < w->box[i][MAX_RANK + a] && w->box[i][a] < hi[a];
		if (meet)
			return 1;
	}
	return 0;
}

static void parts_add(Parts *w, int rank, const int64_t *lo, const int64_t *hi, int64_t n)
{
	w->box = xrealloc(w->box, (size_t)(w->n + 1) * sizeof *w->box);
	memcpy(w->box[w->n], lo, (size_t)rank * sizeof *lo);
	memcpy(w->box[w->n] + MAX_RANK, hi, (size_t)rank * sizeof *hi);
	w->n++;
	w->done += n;
}

int plan_check(const Plan *pl, const char *file, Err *e)
{
	char *ready = xcalloc((size_t)pl->np + 1, 1);
	Parts *parts = xcalloc((size_t)pl->np + 1, sizeof *parts);
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
		int64_t lo[MAX_RANK], hi[MAX_RANK], got = written_box(pl, s, lo, hi), all = place_elements(&pl->p[w]);
		if (back || append)
			continue;       /* (ready: written before, or the state's home) */
		if (ready[w] || parts_overlap(&parts[w], pl->p[w].rank, lo, hi)) {
			errf(e, "%s: step %d writes '%s' a second time", file, i, pl->p[w].name);
			goto out;
		}
		if (!got) {
			errf(e, "%s: step %d writes nothing of '%s': its source's window misses it", file, i,
			     pl->p[w].name);
			goto out;
		}
		parts_add(&parts[w], pl->p[w].rank, lo, hi, got);
		ready[w] = parts[w].done == all;
	}
	for (int i = 0; i < pl->np; i++)
		if (!ready[i] && parts[i].n) {
			errf(e, "%s: placement '%s' is written in part (%lld of %lld elements) and never whole",
			     file, pl->p[i].name, (long long)parts[i].done, (long long)place_elements(&pl->p[i]));
			goto out;
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
	for (int i = 0; i < pl->np; i++)
		free(parts[i].box);
	free(parts);
	free(ready);
	return rc;
}
