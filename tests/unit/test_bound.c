/* The bound (lib/cost/bound.h, formats/capture.md "The bound"): the
 * movement term against a brute-force minimum of g over a dense grid; the
 * longest chains of products and forced syncs on small plans, a repeat's
 * runs counted; the same bound for two plans of the same ops. Machine:
 * testlib.h's test_machine (256 KiB of SRAM a tile). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/bound.h"
#include "cost/floor.h"
#include "t.h"
#include "testlib.h"

/* g(f) = f / r + max(0, 3F / f^(1/3) - R) e / (X P), minimised by walking
 * 200,000 points geometrically spaced over [F / P, F]: the minimum less
 * F / (P r). */
static double brute_extra(double F, double R, double e, double r, double P, double X)
{
	double lo = F / P, best = -1;
	int n = 200000;
	for (int i = 0; i <= n; i++) {
		double f = lo * pow(F / lo, (double)i / n);
		double m = 3 * F / cbrt(f) - R, g = f / r + (m > 0 ? m * e / (X * P) : 0);
		if (best < 0 || g < best)
			best = g;
	}
	return best - lo / r;
}

static void movement_cases(void)
{
	t_case("bound_movement is g's minimum, rounded down: never above a dense walk's, at most 1 below");
	for (int c = 0; c < 300; c++) {
		double P = (double)t_pick(1, 2000), X = (double)t_pick(1, 8), r = (double)t_pick(8, 256);
		double e = (double)t_pick(1, 2), m = (double)t_pick(1, 4096), k = (double)t_pick(16, 8192),
		       n = (double)t_pick(16, 160000);
		double F = m * k * n, R = m * k + k * n + m * n;
		int64_t got = bound_movement(F, R, e, r, P, X);
		double want = brute_extra(F, R, e, r, P, X);
		/* the walk's minimum is at or above the true one, within the grid's step */
		CHECK(got >= 0 && (double)got <= want + 1e-6 && (double)got >= floor(want) - 1,
		      "case %d: m %g k %g n %g on %g tiles: %lld, the walk's %g", c, m, k, n, P, (long long)got, want);
	}
	t_case("bound_movement of a product with no room to spread is 0");
	CHECK(bound_movement(1000, 1e9, 1, 128, 1472, 4) == 0, "huge R");
	CHECK(bound_movement(1e6, 3e4, 1, 128, 1, 4) == 0, "one tile");
}

/* ---- small plans ---- */

typedef struct {
	Plan pl;
} B;

static int tensor(B *b, const char *name, PRole role, int64_t d0, int64_t d1, int64_t d2, Format f)
{
	PTensor *t = &b->pl.t[b->pl.nt];
	memset(t, 0, sizeof *t);
	t->name = (char *)name, t->role = role, t->rank = d2 ? 3 : 2, t->fmt = f, t->count = 1;
	t->shape[0] = d0, t->shape[1] = d1, t->shape[2] = d2;
	Placement *p = &b->pl.p[b->pl.np];
	memset(p, 0, sizeof *p);
	p->tensor = b->pl.nt, p->rank = t->rank, p->fmt = f;
	memcpy(p->shape, t->shape, sizeof p->shape);
	b->pl.nt++;
	return b->pl.np++;     /* placement i holds tensor i */
}

static void step(B *b, ComputeKind k, const char *op, int in0, int in1, int out)
{
	Step *s = &b->pl.s[b->pl.ns++];
	memset(s, 0, sizeof *s);
	s->kind = STEP_COMPUTE, s->compute = k, s->op = (char *)op;
	s->in[0] = in0, s->in[1] = in1 >= 0 ? in1 : in0, s->nin = in1 >= 0 ? 2 : 1, s->out = out;
	if (k == C_ATTENTION)
		s->heads = 1, s->kv_heads = 1, s->nin = 3, s->in[2] = in1;
}

static void copy(B *b, int src)
{
	Step *s = &b->pl.s[b->pl.ns++];
	memset(s, 0, sizeof *s);
	s->kind = STEP_COPY, s->op = "move", s->src = src, s->dst = src;
}

static void gemm(B *b, const char *op, int a, int w, int64_t m, int64_t k, int64_t n)
{
	Gemm *g = &b->pl.g[b->pl.ng++];
	memset(g, 0, sizeof *g);
	g->op = (char *)op, g->a = a, g->b = w, g->out = -1, g->bias = -1;
	g->m = m, g->k = k, g->n = n, g->fmt = FMT_FP8;
}

static void init(B *b)
{
	memset(b, 0, sizeof *b);
	b->pl.machine = test_machine(64);
	b->pl.t = calloc(32, sizeof *b->pl.t);
	b->pl.p = calloc(32, sizeof *b->pl.p);
	b->pl.s = calloc(64, sizeof *b->pl.s);
	b->pl.g = calloc(8, sizeof *b->pl.g);
	b->pl.r = calloc(2, sizeof *b->pl.r);
}

static void fini(B *b)
{
	free(b->pl.t), free(b->pl.p), free(b->pl.s), free(b->pl.g), free(b->pl.r);
}

/* x -> norm -> big (spread: 512 KiB of fp8 weights) -> add -> norm -> small
 * (64 KiB: fits) -> norm: products 2, one forced sync (the second norm);
 * the third norm follows a product that fits. inside: the steps from the
 * first norm on are a repeat of count runs, its carry taking z back to x. */
static void chain_plan(B *b, int64_t runs, int order)
{
	init(b);
	int x = tensor(b, "x", R_ACT, 8, 1, 512, FMT_FP16), s1 = tensor(b, "s1", R_PARAM, 512, 0, 0, FMT_FP16);
	int xn = tensor(b, "xn", R_ACT, 8, 1, 512, FMT_FP16), big = tensor(b, "big", R_PARAM, 512, 1024, 0, FMT_FP8);
	int y = tensor(b, "y", R_ACT, 8, 1, 1024, FMT_FP16), h = tensor(b, "h", R_ACT, 8, 1, 1024, FMT_FP16);
	int hn = tensor(b, "hn", R_ACT, 8, 1, 1024, FMT_FP16), small = tensor(b, "small", R_PARAM, 1024, 64, 0, FMT_FP8);
	int z = tensor(b, "z", R_ACT, 8, 1, 64, FMT_FP16), zn = tensor(b, "zn", R_ACT, 8, 1, 64, FMT_FP16);
	step(b, C_RMSNORM, "n0", x, s1, xn);
	if (order)              /* a copy between: it moves, it makes nothing */
		copy(b, xn);
	step(b, C_MATMUL, "big", xn, big, y);
	step(b, C_ADD, "r", y, xn, h);
	step(b, C_RMSNORM, "n1", h, s1, hn);
	step(b, C_MATMUL, "small", hn, small, z);
	step(b, C_RMSNORM, "n2", z, s1, zn);
	step(b, C_CARRY, "loop", zn, -1, x);
	gemm(b, "big", xn, big, 8, 512, 1024);
	gemm(b, "small", hn, small, 8, 1024, 64);
	b->pl.r[0] = (Repeat){ "loop", 0, b->pl.ns - 1, runs };
	b->pl.nr = 1;
}

static void chain_cases(void)
{
	ModelBound bd;
	B b;

	t_case("bound's chain: two products a run, one sync after the spread one, counted run after run");
	for (int64_t runs = 1; runs <= 5; runs++) {
		chain_plan(&b, runs, 0);
		model_bound(&b.pl, &bd);
		/* run 1: n0 reads x (no product made it): no sync; run 2 on, n0 reads the
		 * carried zn, made by small, which fits: still none */
		CHECK(bd.products == 2 * runs && bd.syncs == runs && bd.spread == 1,
		      "runs %lld: products %lld syncs %lld spread %lld", (long long)runs, (long long)bd.products,
		      (long long)bd.syncs, (long long)bd.spread);
		CHECK(bd.calls == 200 * bd.products && bd.sync == 600 * bd.syncs, "terms %lld %lld", (long long)bd.calls,
		      (long long)bd.sync);
		CHECK(bd.compute == essential_compute(&b.pl), "compute %lld", (long long)bd.compute);
		CHECK(bd.total == bd.compute + bd.calls + bd.sync + bd.movement, "total");
		fini(&b);
	}

	t_case("bound's sync: a spread product before a norm forces one, a product that fits does not");
	chain_plan(&b, 1, 0);
	b.pl.t[7].shape[1] = 4096;      /* small: 1024 x 4096 fp8, 4 MiB: now spread too */
	b.pl.g[1].n = 4096, b.pl.t[8].shape[2] = 4096, b.pl.t[9].shape[2] = 4096;
	model_bound(&b.pl, &bd);
	CHECK(bd.syncs == 2 && bd.spread == 2, "syncs %lld spread %lld", (long long)bd.syncs, (long long)bd.spread);
	fini(&b);

	t_case("bound is the same with a plan's copies between the steps");
	ModelBound a;
	chain_plan(&b, 3, 0);
	model_bound(&b.pl, &a);
	fini(&b);
	chain_plan(&b, 3, 1);
	model_bound(&b.pl, &bd);
	CHECK(!memcmp(&a, &bd, sizeof a), "with a copy: %lld, without: %lld", (long long)bd.total, (long long)a.total);
	fini(&b);

	t_case("bound's products: an attention is two, dependent products add, independent ones do not");
	init(&b);
	int q = tensor(&b, "q", R_ACT, 1, 4, 64, FMT_FP16), kv = tensor(&b, "kv", R_STATE, 1, 4096, 64, FMT_FP16);
	int o = tensor(&b, "o", R_ACT, 1, 4, 64, FMT_FP16), w = tensor(&b, "w", R_PARAM, 64, 64, 0, FMT_FP8);
	int p1 = tensor(&b, "p1", R_ACT, 1, 4, 64, FMT_FP16), p2 = tensor(&b, "p2", R_ACT, 1, 4, 64, FMT_FP16);
	step(&b, C_ATTENTION, "attn", q, kv, o);
	step(&b, C_MATMUL, "m1", o, w, p1);     /* after the attention: 3 */
	step(&b, C_MATMUL, "m2", o, w, p2);     /* beside m1: still 3 */
	gemm(&b, "m1", o, w, 4, 64, 64);
	gemm(&b, "m2", o, w, 4, 64, 64);
	model_bound(&b.pl, &bd);
	/* the state is 512 KiB: spread; m1 and m2 share o: one group */
	CHECK(bd.products == 3 && bd.spread == 1, "products %lld spread %lld", (long long)bd.products, (long long)bd.spread);
	CHECK(bd.movement == bound_movement(4.0 * 64 * 128, 4.0 * 64 + 64.0 * 128 + 4.0 * 128, 1, 128, 64, 4),
	      "movement %lld", (long long)bd.movement);
	fini(&b);
}

/* A mul of rows by a vector is a folded rmsnorm's (the norm's work, at the
 * reduction rate, in the floor) only beside its op's sums; a mul op's
 * per-channel scale (LayerScale) is elementwise. */
static void fold_cases(void)
{
	t_case("a rank-1 mul is a folded norm only with its op's sumsq step");
	for (int sums = 0; sums < 2; sums++) {
		B b;
		init(&b);
		int x = tensor(&b, "x", R_ACT, 8, 1, 512, FMT_FP16), g = tensor(&b, "g", R_PARAM, 512, 0, 0, FMT_FP16);
		int y = tensor(&b, "y", R_ACT, 8, 1, 512, FMT_FP16), ss = tensor(&b, "ss", R_PARTIAL, 8, 1, 1, FMT_FP32);
		b.pl.t[1].rank = b.pl.p[g].rank = 1;
		if (sums)
			step(&b, C_SUMSQ, "n", x, -1, ss);
		step(&b, C_MUL, sums ? "n" : "ls", x, g, y);
		const Step *mul = &b.pl.s[b.pl.ns - 1];
		CHECK(plan_norm_fold(&b.pl, mul) == sums, "sums %d: fold %d", sums, plan_norm_fold(&b.pl, mul));
		/* the floor: 4,096 products at 2 cycles (a norm's) or 1, over 64 tiles */
		int64_t want = (sums ? 2 * 4096 : 4096) / 64;
		CHECK(essential_compute(&b.pl) == want, "sums %d: essential %lld, want %lld", sums,
		      (long long)essential_compute(&b.pl), (long long)want);
		fini(&b);
	}
}

int main(void)
{
	movement_cases();
	chain_cases();
	fold_cases();
	return t_summary();
}
