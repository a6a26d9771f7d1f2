#include "cost/floor.h"

#include <stdlib.h>
#include <string.h>

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* ---- phase floors ---- */

/* Per tile: port cycles sent and received (each fragment's
 * ceil(len / exchange_bytes_per_cycle)) and fragments sent and received. */
typedef struct {
	int64_t *sent, *rcvd, *nsend, *nrecv;
	int64_t tiles;
	int64_t d;              /* the current transfer's port cycles per fragment */
} Sums;

static void sums_init(Sums *w, int64_t tiles)
{
	w->tiles = tiles;
	w->sent = xcalloc((size_t)(4 * tiles), sizeof *w->sent);
	w->rcvd = w->sent + tiles, w->nsend = w->rcvd + tiles, w->nrecv = w->nsend + tiles;
	w->d = 0;
}

static int add_member(void *ctx, const Xfer *x, int64_t m, int64_t s, int64_t sa, int64_t dt, int64_t da)
{
	Sums *w = ctx;
	(void)m, (void)sa, (void)da;
	w->sent[s] += w->d;
	w->nsend[s]++;
	for (int64_t j = 0; j < x->nrecv; j++) {
		int64_t t = tile_mod(dt + j * x->recv_step, w->tiles);
		w->rcvd[t] += w->d;
		w->nrecv[t]++;
	}
	return 0;
}

static void add_xfer(const Plan *pl, const Xfer *x, Sums *w)
{
	w->d = cdiv(x->len, pl->machine.exchange_bytes_per_cycle);
	xfer_each(x, pl->machine.tiles, add_member, w);
}

/* The largest floor_t and its lowest tile (-1 when no tile moves
 * anything); the sums are zeroed for the next phase. */
static int64_t settle(const Machine *mc, Sums *w, int64_t *tile)
{
	int64_t best = 0, at = -1, sc = mc->send_control_cycles, rc = mc->receive_control_cycles;
	for (int64_t t = 0; t < w->tiles; t++) {
		if (!w->nsend[t] && !w->nrecv[t])
			continue;
		int64_t f = sc * w->nsend[t] + rc * w->nrecv[t];
		if (w->nsend[t])
			f = max64(f, sc + w->sent[t]);
		if (w->nrecv[t])
			f = max64(f, rc + w->rcvd[t]);
		if (at < 0 || f > best)
			best = f, at = t;
		w->sent[t] = w->rcvd[t] = w->nsend[t] = w->nrecv[t] = 0;
	}
	if (tile)
		*tile = at;
	return best;
}

int64_t phase_floor(const Plan *pl, int p, int64_t *tile)
{
	Sums w;
	sums_init(&w, pl->machine.tiles);
	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind == X_SEND && x->step >= pl->ph[p].first && x->step <= pl->ph[p].last)
			add_xfer(pl, x, &w);
	}
	int64_t f = settle(&pl->machine, &w, tile);
	free(w.sent);
	return f;
}

void phase_floors(const Plan *pl, int64_t *cycles, int64_t *tile)
{
	int *of = xcalloc((size_t)pl->ns + 1, sizeof *of), *start = xcalloc((size_t)pl->nph + 2, sizeof *start);
	int *order = xcalloc((size_t)pl->nx + 1, sizeof *order);
	Sums w;

	/* the send transfers of each phase, in record order */
	for (int s = 0; s < pl->ns; s++)
		of[s] = -1;
	for (int p = 0; p < pl->nph; p++)
		for (int s = pl->ph[p].first; s <= pl->ph[p].last; s++)
			of[s] = p;
	for (int i = 0; i < pl->nx; i++)
		if (pl->x[i].kind == X_SEND && of[pl->x[i].step] >= 0)
			start[of[pl->x[i].step] + 1]++;
	for (int p = 0; p < pl->nph; p++)
		start[p + 1] += start[p];
	for (int i = 0; i < pl->nx; i++)
		if (pl->x[i].kind == X_SEND && of[pl->x[i].step] >= 0)
			order[start[of[pl->x[i].step]]++] = i;
	for (int p = pl->nph; p > 0; p--)       /* start[p] was advanced to start[p + 1] */
		start[p] = start[p - 1];
	start[0] = 0;
	sums_init(&w, pl->machine.tiles);
	for (int p = 0; p < pl->nph; p++) {
		for (int k = start[p]; k < start[p + 1]; k++)
			add_xfer(pl, &pl->x[order[k]], &w);
		cycles[p] = settle(&pl->machine, &w, tile ? &tile[p] : NULL);
	}
	free(w.sent);
	free(of);
	free(start);
	free(order);
}

/* ---- the plan's movement floor ---- */

/* ceil((e + a / ra + b / rb) / t), exactly (ra, rb <= 2^30). */
static int64_t ceil_work(int64_t e, int64_t a, int64_t ra, int64_t b, int64_t rb, int64_t t)
{
	int64_t n = e + a / ra + b / rb;
	int64_t num = (a % ra) * rb + (b % rb) * ra, den = ra * rb;       /* the fractions, in [0, 2) */
	n += num / den;
	num %= den;
	return num ? n / t + 1 : cdiv(n, t);
}

static int64_t elements(const Placement *p)
{
	int64_t n = 1;
	for (int a = 0; a < p->rank; a++)
		n *= p->shape[a];
	return n;
}

/* Is step s the first compute step of its op of a kind that needs its
 * operands exchanged first (matmul, attention)? */
static int needs_sync(const Plan *pl, int s)
{
	const Step *st = &pl->s[s];
	if (st->kind != STEP_COMPUTE || (st->compute != C_MATMUL && st->compute != C_ATTENTION))
		return 0;
	for (int k = 0; k < s; k++)
		if (pl->s[k].kind == STEP_COMPUTE && (pl->s[k].compute == C_MATMUL || pl->s[k].compute == C_ATTENTION) &&
		    !strcmp(pl->s[k].op, st->op))
			return 0;
	return 1;
}

/* How many times GEMM g runs: the count of its op's first matmul step. */
static int64_t gemm_count(const Plan *pl, const Gemm *g)
{
	for (int s = 0; s < pl->ns; s++)
		if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].compute == C_MATMUL && !strcmp(pl->s[s].op, g->op))
			return plan_step_count(pl, s);
	return 1;
}

int64_t essential_compute(const Plan *pl)
{
	const Machine *mc = &pl->machine;
	int64_t cycles = 0, macs16 = 0, macs8 = 0, local = 0;

	for (int i = 0; i < pl->ng; i++) {
		const Gemm *g = &pl->g[i];
		int64_t macs = g->m * g->k * g->n * gemm_count(pl, g);
		*(g->fmt == FMT_FP8 ? &macs8 : &macs16) += macs;
	}
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		int64_t count = plan_step_count(pl, s);
		if (st->kind != STEP_COMPUTE)
			continue;
		switch (st->compute) {
		case C_ATTENTION: {     /* q [B, Tq, H x D], k [B, Tk, H x D] */
			const Placement *q = &pl->p[st->in[0]], *k = &pl->p[st->in[1]];
			int64_t H = st->heads > 0 ? st->heads : 1, D = q->shape[2] / H, Tq = q->shape[1], Tk = k->shape[1];
			/* causal: query i sees i + Tk - Tq + 1 keys, the masked scores are not essential;
			 * by positions (known at run time only): every key, a step at full context */
			int64_t seen = st->causal && st->nin < 4 ? Tq * (Tk - Tq + 1) + Tq * (Tq - 1) / 2 : Tq * Tk;
			int64_t scores = q->shape[0] * H * seen;
			macs16 += 2 * scores * D * count;               /* q.k^T and p.v */
			cycles += scores * mc->reduction_cycles_per_element * count;   /* softmax */
			break;
		}
		case C_LAYERNORM:
		case C_RMSNORM:
			cycles += elements(&pl->p[st->in[0]]) * mc->reduction_cycles_per_element * count;
			break;
		case C_MUL:             /* a folded rmsnorm's: the norm's work (its rows' scale at the GEMMs) */
			cycles += elements(&pl->p[st->out]) * count *
				  (plan_norm_fold(pl, st) ? mc->reduction_cycles_per_element : mc->elementwise_cycles_per_element);
			break;
		case C_GELU:
		case C_SILU:
		case C_ROPE:
		case C_ADD:
			cycles += elements(&pl->p[st->out]) * mc->elementwise_cycles_per_element * count;
			break;
		case C_APPEND:          /* the new rows written once */
			local += elements(&pl->p[st->in[0]]) * fmt_bytes(pl->p[st->in[0]].fmt) * count;
			break;
		default:                /* matmul from the GEMM records; the rest a plan adds */
			break;
		}
	}
	cycles += local / mc->local_copy_bytes_per_cycle;       /* bytes copied on tiles */
	return ceil_work(cycles, macs16, mc->macs_fp16, macs8, mc->macs_fp8, mc->tiles);
}

void plan_movement_floor(const Plan *pl, PlanFloor *f)
{
	const Machine *mc = &pl->machine;
	int64_t recv = 0, syncs = 0;

	memset(f, 0, sizeof *f);
	for (int s = 0; s < pl->ns; s++)
		syncs += needs_sync(pl, s) ? plan_step_count(pl, s) : 0;
	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind == X_SEND)
			recv += x->len * x->nrecv * xfer_members(x) * plan_step_count(pl, x->step);
	}
	f->compute = essential_compute(pl);
	f->movement = cdiv(recv, mc->exchange_bytes_per_cycle * mc->tiles);
	f->sync = mc->sync_cycles * syncs;
	f->total = f->compute + f->movement + f->sync;
}
