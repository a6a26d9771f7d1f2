/* bound: the plan-independent lower bound (bound.h). */
#include "cost/bound.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/floor.h"

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t elements(const PTensor *t)
{
	int64_t n = 1;
	for (int a = 0; a < t->rank; a++)
		n *= t->shape[a];
	return n;
}

/* Bytes of one instance of tensor t (a stacked parameter's: one layer's). */
static int64_t instance_bytes(const PTensor *t)
{
	return elements(t) * fmt_bytes(t->fmt);
}

/* The GEMM record of the op of matmul step s, or NULL. */
static const Gemm *gemm_of(const Plan *pl, const Step *s)
{
	int i = plan_gemm_index(pl, s->op);
	return i >= 0 ? &pl->g[i] : NULL;
}

/* Is the product of step s spread: does its resident operand (a GEMM's
 * b, an attention's keys and values) exceed one tile's available SRAM,
 * so that no tile computes a whole row of its result? */
static int spread(const Plan *pl, const Step *s)
{
	int64_t avail = machine_avail(&pl->machine);
	if (s->compute == C_MATMUL) {
		const Gemm *g = gemm_of(pl, s);
		return g && g->b >= 0 && instance_bytes(&pl->t[g->b]) > avail;
	}
	return s->compute == C_ATTENTION && instance_bytes(&pl->t[pl->p[s->in[1]].tensor]) > avail;
}

/* The longest chains, tensor by tensor: products and forced exchanges on
 * the longest path to it, and whether a row of it depends on a spread
 * product since the last norm (cut). */
typedef struct {
	int64_t *products, *syncs;
	char *cut;
	int64_t spread;
} Chain;

static void chain_step(const Plan *pl, int i, Chain *c, int first_run)
{
	const Step *s = &pl->s[i];
	if (s->kind != STEP_COMPUTE)
		return;         /* a copy moves a tensor; it makes none */
	int out = pl->p[s->out].tensor, cut = 0;
	int64_t pr = 0, sy = 0;
	for (int k = 0; k < s->nin; k++) {
		int t = pl->p[s->in[k]].tensor;        /* a pack's is its own */
		pr = max64(pr, c->products[t]), sy = max64(sy, c->syncs[t]);
		cut |= c->cut[t];
	}
	switch (s->compute) {
	case C_MATMUL:
	case C_ATTENTION: {
		int sp = spread(pl, s);
		pr += s->compute == C_ATTENTION ? 2 : 1;
		cut |= sp;
		c->spread += sp && first_run;
		break;
	}
	case C_SUMSQ:           /* a row's sums: its norm's exchange */
		sy += cut;
		cut = 0;
		break;
	case C_LAYERNORM:
	case C_RMSNORM:         /* (a wide one reads its sums: counted there) */
		sy += s->compute == C_RMSNORM && s->nin == 3 ? 0 : cut;
		cut = 0;
		break;
	case C_MUL:             /* a folded norm: its sums reach its GEMMs' reductions */
		cut = plan_norm_fold(pl, s) ? 0 : cut;
		break;
	default:
		break;
	}
	/* an append writes into a state others read: its chain only grows */
	c->products[out] = max64(pr, s->compute == C_APPEND ? c->products[out] : 0);
	c->syncs[out] = max64(sy, s->compute == C_APPEND ? c->syncs[out] : 0);
	c->cut[out] = (char)(cut | (s->compute == C_APPEND && c->cut[out]));
}

static void chains(const Plan *pl, Chain *c)
{
	for (int i = 0; i < pl->ns; i++) {
		int r = plan_repeat_of(pl, i);
		if (r < 0 || pl->r[r].first != i) {
			chain_step(pl, i, c, 1);
			continue;
		}
		for (int64_t n = 0; n < pl->r[r].count; n++)     /* the body, run after run */
			for (int k = pl->r[r].first; k <= pl->r[r].last; k++)
				chain_step(pl, k, c, n == 0);
		i = pl->r[r].last;
	}
}

int64_t bound_movement(double F, double R, double eb, double rate, double tiles, double x)
{
	double lo = F / tiles, best = -1;
	/* g is convex: its minimum is where its derivative vanishes (clamped),
	 * or where the received elements reach 0, or at lo */
	double at[3] = { lo, pow(F * eb * rate / (x * tiles), 0.75), pow(3 * F / R, 3) };
	for (int k = 0; k < 3; k++) {
		double f = at[k] < lo ? lo : at[k] > F ? F : at[k];
		double moved = 3 * F / cbrt(f) - R;
		double g = f / rate + (moved > 0 ? moved * eb / (x * tiles) : 0);
		if (best < 0 || g < best)
			best = g;
	}
	double extra = best - lo / rate;
	/* rounded down, a hair below for the floating point: it stays a bound */
	return extra > 0 ? (int64_t)floor(extra * (1 - 1e-12)) : 0;
}

/* The movement term: the GEMMs grouped by their a operand and their
 * count (q, k and v of one layer read one normalised x: the union of
 * their products is one product with their columns side by side). */
static int64_t movement(const Plan *pl)
{
	const Machine *mc = &pl->machine;
	char *done = xcalloc((size_t)pl->ng + 1, 1);
	int64_t total = 0;

	for (int i = 0; i < pl->ng; i++) {
		if (done[i])
			continue;
		const Gemm *g = &pl->g[i];
		double n = 0, F = 0, bc = 0;
		int64_t count = 0;
		for (int s = 0; s < pl->ns; s++)
			if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].compute == C_MATMUL && !strcmp(pl->s[s].op, g->op))
				count = plan_step_count(pl, s);
		for (int j = i; j < pl->ng; j++) {
			const Gemm *h = &pl->g[j];
			if (done[j] || h->a != g->a || h->m != g->m || h->k != g->k || h->fmt != g->fmt)
				continue;
			int64_t hc = 0;
			for (int s = 0; s < pl->ns; s++)
				if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].compute == C_MATMUL &&
				    !strcmp(pl->s[s].op, h->op))
					hc = plan_step_count(pl, s);
			if (hc != count)
				continue;
			done[j] = 1;
			n += (double)h->n;
		}
		F = (double)g->m * (double)g->k * n;
		bc = (double)g->m * (double)g->k + (double)g->k * n + (double)g->m * n;
		int64_t rate = g->fmt == FMT_FP8 ? mc->macs_fp8 : mc->macs_fp16;
		total += count * bound_movement(F, bc, fmt_bytes(g->fmt), (double)rate, (double)mc->tiles,
						(double)mc->exchange_bytes_per_cycle);
	}
	free(done);
	return total;
}

void model_bound(const Plan *pl, ModelBound *b)
{
	const Machine *mc = &pl->machine;
	Chain c;
	int n = pl->nt + 1;

	memset(b, 0, sizeof *b);
	c.products = xcalloc((size_t)n, sizeof *c.products);
	c.syncs = xcalloc((size_t)n, sizeof *c.syncs);
	c.cut = xcalloc((size_t)n, 1);
	c.spread = 0;
	chains(pl, &c);
	for (int t = 0; t < pl->nt; t++)
		b->products = max64(b->products, c.products[t]), b->syncs = max64(b->syncs, c.syncs[t]);
	b->spread = c.spread;
	free(c.products);
	free(c.syncs);
	free(c.cut);
	b->compute = essential_compute(pl);
	b->calls = b->products * mc->matmul_call_cycles;
	b->sync = b->syncs * mc->sync_cycles;
	b->movement = movement(pl);
	b->total = b->compute + b->calls + b->sync + b->movement;
}
