/* test_lower_random: lowering regressions checked on random cases against
 * brute force: fp8 lanes, cutting at the largest transfer, and parameter
 * copies moved ahead of compute (plan_hoist) on random ViT-shaped models.
 * One fixed-seed xorshift draws them all, in this order. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lower/compose.h"
#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/group.h"
#include "planner/planner.h"
#include "run/sim.h"
#include "stage/plan_check.h"
#include "stage/stage_io.h"
#include "t.h"
#include "testlib.h"
#include "vitgen.h"

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }

/* ---- fp8 lanes ---- */

/* Element (r, c) of a shard at storage offset o, by brute force. */
static void inverse(const Layout *l, int64_t *er, int64_t *ec)
{
	int64_t n = layout_elems(l);
	for (int64_t i = 0; i < n; i++)
		er[i] = ec[i] = -1;
	for (int64_t r = 0; r < l->rows; r++)
		for (int64_t c = 0; c < l->cols; c++) {
			int64_t o = layout_offset(l, r, c);
			er[o] = r;
			ec[o] = c;
		}
}

static void fp8_lanes(void)
{
	for (int iter = 0; iter < 200; iter++) {
		/* W[K, N] fp8, transposed-right on both sides, K and N clipped,
		 * both cut on panel boundaries (32 K-values, 16 columns). */
		int64_t K = pick(1, 150), N = pick(1, 60), ks = cdiv(K, 32), cg = cdiv(N, 16);
		Placement S, D;
		memset(&S, 0, sizeof S);
		memset(&D, 0, sizeof D);
		S.layout = D.layout = LAYOUT_TRANSPOSED_RIGHT;
		S.fmt = D.fmt = FMT_FP8;
		S.rank = D.rank = 2;
		S.shape[0] = D.shape[0] = K;
		S.shape[1] = D.shape[1] = N;
		int64_t sp[2] = { pick(1, ks), pick(1, cg) }, dp[2] = { pick(1, ks), pick(1, cg) };
		for (int a = 0; a < 2; a++) {
			int64_t u = a ? cg : ks, q = a ? 16 : 32;
			while (!uniform_ok(u, sp[a])) sp[a]--;
			while (!uniform_ok(u, dp[a])) dp[a]--;
			S.split[a] = sp[a], S.block[a] = cdiv(u, sp[a]) * q;
			D.split[a] = dp[a], D.block[a] = cdiv(u, dp[a]) * q;
		}
		int whole = (int)(next() % 2);
		t_case("clipped fp8 panels move as whole 32-byte lanes, paired byte for byte");
		Run *runs = NULL;
		int64_t cap = 0;
		for (int64_t d0 = 0; d0 < dp[0]; d0++)
			for (int64_t d1 = 0; d1 < dp[1]; d1++) {
				int64_t di[2] = { d0, d1 };
				Layout ld = place_layout(&D, di);
				int64_t *dr = malloc((size_t)layout_elems(&ld) * 8), *dc = malloc((size_t)layout_elems(&ld) * 8);
				inverse(&ld, dr, dc);
				for (int64_t s0 = 0; s0 < sp[0]; s0++)
					for (int64_t s1 = 0; s1 < sp[1]; s1++) {
						int64_t si[2] = { s0, s1 }, lo[2], hi[2];
						int empty = 0;
						for (int a = 0; a < 2; a++) {
							int64_t a0 = di[a] * D.block[a], a1 = a0 + place_extent(&D, a, di[a]);
							int64_t b0 = si[a] * S.block[a], b1 = b0 + place_extent(&S, a, si[a]);
							lo[a] = a0 > b0 ? a0 : b0;
							hi[a] = a1 < b1 ? a1 : b1;
							empty |= lo[a] >= hi[a];
						}
						if (empty)
							continue;
						Layout ls = place_layout(&S, si);
						int64_t *sr = malloc((size_t)layout_elems(&ls) * 8), *sc = malloc((size_t)layout_elems(&ls) * 8);
						inverse(&ls, sr, sc);
						int64_t n = shard_runs(&S, si, &D, di, lo, hi, whole, &runs, &cap);
						for (int64_t k = 0; k < n; k++) {
							Run r = runs[k];
							/* lanes are whole: a run starts and ends on a lane
							 * boundary unless a lane is clipped by K */
							for (int64_t b = 0; b < r.len; b++) {
								int64_t so = r.src + b, dof = r.dst + b;
								if (dr[dof] < 0) {      /* padding travels only in whole mode */
									CHECK(whole && sr[so] < 0, "K%lld N%lld: padding paired with data", (long long)K, (long long)N);
									continue;
								}
								CHECK(sr[so] >= 0 &&
								      sr[so] + s0 * S.block[0] == dr[dof] + d0 * D.block[0] &&
								      sc[so] + s1 * S.block[1] == dc[dof] + d1 * D.block[1],
								      "K%lld N%lld: dst byte %lld gets the wrong element", (long long)K,
								      (long long)N, (long long)dof);
							}
							CHECK(r.dst % 32 == 0 || whole == 0,
							      "K%lld N%lld whole: run starts mid-lane at %lld", (long long)K,
							      (long long)N, (long long)r.dst);
							int64_t lane_valid = (K % 32 && (r.dst / 512) % cdiv(ld.rows, 32) == cdiv(ld.rows, 32) - 1)
								? ld.rows % 32 : 32;
							CHECK(r.len >= (whole ? 32 : lane_valid) || r.len % lane_valid == 0,
							      "K%lld N%lld: a %lld-byte span splits a lane", (long long)K,
							      (long long)N, (long long)r.len);
							CHECK(r.len != 16 || lane_valid == 16 || (!whole && ld.rows % 32 == 16),
							      "K%lld N%lld: a 16-byte half-lane span", (long long)K, (long long)N);
						}
						/* maximal: no two runs continue each other on both sides */
						for (int64_t k = 1; k < n; k++)
							CHECK(!(runs[k - 1].dst + runs[k - 1].len == runs[k].dst &&
								runs[k - 1].src + runs[k - 1].len == runs[k].src),
							      "K%lld N%lld: runs %lld and %lld were not joined", (long long)K,
							      (long long)N, (long long)k - 1, (long long)k);
						free(sr);
						free(sc);
					}
				free(dr);
				free(dc);
			}
		free(runs);
	}
}

/* Every byte a record moves, as (src tile, src addr, dst tile, dst addr),
 * one byte at a time: the brute-force reference for cutting. */
typedef struct {
	int64_t (*b)[4];
	int n, cap;
} Bytes;

static int each_byte(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Bytes *v = ctx;
	(void)m;
	for (int64_t i = 0; i < x->len; i++) {
		if (v->n == v->cap)
			v->b = realloc(v->b, (size_t)(v->cap = v->cap ? 2 * v->cap : 256) * sizeof *v->b);
		v->b[v->n][0] = st, v->b[v->n][1] = sa + i, v->b[v->n][2] = dt, v->b[v->n][3] = da + i;
		v->n++;
	}
	return 0;
}

static int byte_cmp(const void *a, const void *b) { return memcmp(a, b, 4 * sizeof(int64_t)); }

static void cutting(void)
{
	int bad = 0, cut = 0;
	for (int c = 0; c < 3000 && !bad; c++) {
		int64_t max = pick(4, 64);
		Xfer x;
		memset(&x, 0, sizeof x);
		x.kind = X_SEND;
		x.len = c < 200 ? max + 1 - c % 3 : pick(1, 3 * max + 2);      /* the bound and either side first */
		x.src_tile = pick(0, 15), x.dst_tile = pick(0, 15), x.nrecv = 1;
		x.src_addr = pick(0, 1000), x.dst_addr = pick(0, 1000);
		x.nloop = (int)pick(0, 2);
		for (int l = 0; l < x.nloop; l++) {
			int64_t joined = pick(0, 1) ? x.len : pick(1, 4 * max);
			x.loop[l] = (XLoop){ pick(1, 4), pick(0, 1), joined, pick(0, 1), pick(0, 1) ? joined : pick(1, 4 * max) };
		}
		Xfer out[2];
		int n = xfer_fragment(&x, max, out);
		Bytes a = { NULL, 0, 0 }, b = { NULL, 0, 0 };
		xfer_each(&x, 16, each_byte, &a);
		for (int i = 0; i < n; i++) {
			bad |= out[i].len > max;
			xfer_each(&out[i], 16, each_byte, &b);
		}
		cut += n == 2 || x.len > max;
		qsort(a.b, (size_t)a.n, sizeof *a.b, byte_cmp);
		qsort(b.b, (size_t)b.n, sizeof *b.b, byte_cmp);
		bad |= n < 1 || a.n != b.n || memcmp(a.b, b.b, (size_t)a.n * sizeof *a.b);
		if (bad)
			printf("case %d: max %lld, len %lld, %d loops: %d fragments\n", c, (long long)max, (long long)x.len,
			       x.nloop, n);
		free(a.b);
		free(b.b);
	}
	t_case("random records cut at max_transfer_bytes: every fragment within it, the same bytes to the same places");
	CHECK(!bad && cut > 1000, "%d cases cut", cut);
}

/* ---- parameter copies moved ahead of compute (plan_hoist) ---- */

/* The placements step s reads (r) and writes (w). */
static void step_sets(const Step *s, int r[4], int *nr, int *w)
{
	*nr = 0;
	if (s->kind == STEP_COPY) {
		r[(*nr)++] = s->src;
		*w = s->dst;
		return;
	}
	for (int k = 0; k < s->nin; k++)
		if (s->in[k] >= 0)
			r[(*nr)++] = s->in[k];
	*w = s->out;
}

static int conflict(const Step *a, const Step *b)
{
	int ra[4], rb[4], na, nb, wa, wb;
	step_sets(a, ra, &na, &wa);
	step_sets(b, rb, &nb, &wb);
	if (wa == wb)
		return 1;
	for (int k = 0; k < nb; k++)
		if (rb[k] == wa)
			return 1;
	for (int k = 0; k < na; k++)
		if (ra[k] == wb)
			return 1;
	return 0;
}

/* Could the copy run starting at step i (after a compute) still move,
 * by the rule, brute force: every copy of the run a parameter vector's (no
 * compute of the run before it touching that tensor) or an
 * activation's (no compute before it writing its source placement or reading or writing its destination), a
 * copy before those computes in the same repeat region. */
static int could_move(const Plan *pl, int i)
{
	int h = i, j = i;
	while (h > 0 && pl->s[h - 1].kind == STEP_COMPUTE)
		h--;
	while (j + 1 < pl->ns && pl->s[j + 1].kind == STEP_COPY)
		j++;
	if (h == 0)
		return 0;
	for (int k = h; k <= j; k++)            /* no repeat boundary in [h - 1, j] */
		if (plan_repeat_of(pl, k) != plan_repeat_of(pl, h - 1))
			return 0;
	for (int k = i; k <= j; k++) {
		const Step *c = &pl->s[k];
		int t = pl->p[c->src].tensor;
		if (c->move == MOVE_ACTIVATION) {
			for (int q = h; q < i; q++) {
				int r[4], nr, w;
				step_sets(&pl->s[q], r, &nr, &w);
				if (w == c->src || w == c->dst)
					return 0;
				for (int m = 0; m < nr; m++)
					if (r[m] == c->dst)
						return 0;
			}
			continue;
		}
		if (c->move != MOVE_PARAMETER || pl->t[t].role != R_PARAM || pl->t[t].rank != 1 ||
		    pl->p[c->dst].tensor != t)
			return 0;
		for (int q = h; q < i; q++) {
			int r[4], nr, w;
			step_sets(&pl->s[q], r, &nr, &w);
			if (pl->p[w].tensor == t)
				return 0;
			for (int m = 0; m < nr; m++)
				if (pl->p[r[m]].tensor == t)
					return 0;
		}
	}
	return 1;
}

static void hoisting(void)
{
	char path[] = "/tmp/amp-hoist-XXXXXX", desc[512];
	int fd = mkstemp(path), moved_any = 0;
	close(fd);
	for (int i = 0; i < 40; i++) {
		Machine mc = test_machine(pick(8, 96));
		PlanOpts po = { OBJ_CAPACITY, 0, NULL, OWN_AUTO, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 };
		Model m;
		Plan pl;
		Err e;
		vit_model(path, desc, sizeof desc);
		if (model_load(&m, path, &e))
			continue;
		int built = plan_build(&pl, &m, &mc, &po, NULL, &e) == 0;
		model_free(&m);
		if (!built)
			continue;
		plan_join(&pl);
		if (i % 4 == 3) {
			/* A compute before a movable run that reads the run's
			 * parameter, or its activation's destination (a plan
			 * edited by hand): the run stays. */
			int s = 1;
			while (s < pl.ns && !(pl.s[s].kind == STEP_COPY && pl.s[s - 1].kind == STEP_COMPUTE &&
					      could_move(&pl, s)))
				s++;
			if (s < pl.ns && pl.s[s - 1].nin > 0) {
				Step *c = &pl.s[s - 1];
				const char *op = pl.s[s].op;
				c->in[c->nin - 1] = pl.s[s].move == MOVE_ACTIVATION ? pl.s[s].dst : pl.s[s].src;
				plan_hoist(&pl);
				t_case("a run whose parameter (or destination) a compute before it reads stays after it");
				CHECK(pl.s[s].op == op, "%s: step %d moved", desc, s);
				plan_free(&pl);
				continue;
			}
		}
		int ns = pl.ns, *region = xmalloc((size_t)ns * sizeof *region), *at = xmalloc((size_t)ns * sizeof *at);
		Step *old = xmalloc((size_t)ns * sizeof *old);
		memcpy(old, pl.s, (size_t)ns * sizeof *old);
		for (int s = 0; s < ns; s++)
			region[s] = plan_repeat_of(&pl, s);
		int moved = plan_hoist(&pl);
		moved_any += moved > 0;

		t_case("hoisting permutes the steps, each within its repeat region");
		int ok = pl.ns == ns;
		for (int s = 0; ok && s < ns; s++) {
			at[s] = -1;
			for (int n = 0; n < ns; n++)
				if (pl.s[n].op == old[s].op)
					at[s] = n;
			ok = at[s] >= 0 && plan_repeat_of(&pl, at[s]) == region[s];
		}
		CHECK(ok, "%s: a step lost or moved across a repeat boundary", desc);
		if (!ok)
			goto next;

		t_case("hoisting keeps copies in order, computes in order, and every dependency");
		for (int a = 0; a < ns && ok; a++)
			for (int b = a + 1; b < ns && ok; b++)
				if ((old[a].kind == old[b].kind || conflict(&old[a], &old[b])) && at[a] > at[b])
					ok = 0;
		CHECK(ok, "%s: an order between two steps changed", desc);

		t_case("hoisting moves every run the rule allows, and only parameter vectors and activations");
		int moved_copies = 0;
		for (int s = 0; s < ns; s++)
			if (at[s] != s && old[s].kind == STEP_COPY && at[s] < s)
				moved_copies++, ok &= old[s].move == MOVE_PARAMETER || old[s].move == MOVE_ACTIVATION;
		for (int s = 1; s < pl.ns && ok; s++)
			if (pl.s[s].kind == STEP_COPY && pl.s[s - 1].kind == STEP_COMPUTE)
				ok = !could_move(&pl, s);
		CHECK(ok && moved_copies == moved && plan_hoist(&pl) == 0, "%s: moved %d (%d), ok %d", desc, moved,
		      moved_copies, ok);
		for (int s = 0; s < ns; s++)    /* only parameter vectors and activations move */
			if (at[s] < s)
				ok &= old[s].kind == STEP_COPY && (pl.t[pl.p[old[s].src].tensor].rank == 1 ||
								   old[s].move == MOVE_ACTIVATION);
		CHECK(ok, "%s: a copy of a parameter of rank above 1 moved", desc);
		CHECK(plan_check(&pl, "hoisted", &e) == 0, "%s: %s", desc, e.msg);
next:
		free(old);
		free(region);
		free(at);
		plan_free(&pl);
	}
	unlink(path);
	t_case("some random model has parameter copies to move");
	CHECK(moved_any > 0, "none of 40 models moved a copy");
}

int main(void)
{
	fp8_lanes();
	cutting();
	hoisting();
	return t_summary();
}
