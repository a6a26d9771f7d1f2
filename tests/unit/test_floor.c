/* The floors (lib/cost/floor.h, formats/capture.md "Floors"): each phase's
 * floor against a brute-force walk of its fragments, its order
 * independence, the replay never under it for any order of the records;
 * the model's floor against its definition, computed plainly. 16 tiles,
 * 4 bytes a cycle, send control 2, receive control 3. */
#include <stdlib.h>
#include <string.h>

#include "cost/floor.h"
#include "cost/replay.h"
#include "t.h"
#include "testlib.h"

#define TILES 16

static Xfer send(int step, int64_t src, int64_t sa, int64_t dst, int64_t da, int64_t nrecv, int64_t len)
{
	Xfer x;
	memset(&x, 0, sizeof x);
	x.kind = X_SEND;
	x.step = step;
	x.len = len;
	x.src_tile = src, x.src_addr = sa;
	x.dst_tile = dst, x.dst_addr = da;
	x.nrecv = nrecv;
	x.recv_step = nrecv > 1 ? t_pick(1, 5) : 0;
	return x;
}

/* A plan of ns steps cut into phases and the records x[n]. */
static Plan plan_of(const Xfer *x, int n, int ns, const Phase *ph, int nph)
{
	Plan pl;
	memset(&pl, 0, sizeof pl);
	pl.machine = test_machine(TILES);
	pl.ns = ns;
	pl.nph = nph;
	pl.ph = calloc((size_t)nph + 1, sizeof *pl.ph);
	memcpy(pl.ph, ph, (size_t)nph * sizeof *ph);
	pl.x = calloc((size_t)n + 1, sizeof *pl.x);
	memcpy(pl.x, x, (size_t)n * sizeof *x);
	pl.nx = n;
	return pl;
}

static void done(Plan *pl)
{
	free(pl->ph);
	free(pl->x);
}

static int64_t mx(int64_t a, int64_t b) { return a > b ? a : b; }

/* The definition, one fragment at a time: every member decoded from its
 * loop indices, every receiver counted, each fragment's port cycles
 * ceil(len / 4) added on its own. */
static int64_t brute_floor(const Plan *pl, int p, int64_t *tile)
{
	const Machine *m = &pl->machine;
	int64_t sent[TILES] = { 0 }, rcvd[TILES] = { 0 }, ns[TILES] = { 0 }, nr[TILES] = { 0 };
	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind != X_SEND || x->step < pl->ph[p].first || x->step > pl->ph[p].last)
			continue;
		int64_t members = 1;
		for (int k = 0; k < x->nloop; k++)
			members *= x->loop[k].count;
		for (int64_t mi = 0; mi < members; mi++) {
			int64_t r = mi, s = x->src_tile, d = x->dst_tile;
			for (int k = 0; k < x->nloop; k++) {
				int64_t ix = r % x->loop[k].count;
				r /= x->loop[k].count;
				s += ix * x->loop[k].src_tile, d += ix * x->loop[k].dst_tile;
			}
			s = ((s % TILES) + TILES) % TILES;
			int64_t c = (x->len + m->exchange_bytes_per_cycle - 1) / m->exchange_bytes_per_cycle;
			sent[s] += c, ns[s]++;
			for (int64_t j = 0; j < x->nrecv; j++) {
				int64_t t = (((d + j * x->recv_step) % TILES) + TILES) % TILES;
				rcvd[t] += c, nr[t]++;
			}
		}
	}
	int64_t best = 0, at = -1;
	for (int t = 0; t < TILES; t++) {
		if (!ns[t] && !nr[t])
			continue;
		int64_t f = m->send_control_cycles * ns[t] + m->receive_control_cycles * nr[t];
		if (ns[t])
			f = mx(f, m->send_control_cycles + sent[t]);
		if (nr[t])
			f = mx(f, m->receive_control_cycles + rcvd[t]);
		if (at < 0 || f > best)
			best = f, at = t;
	}
	*tile = at;
	return best;
}

/* Random phases: 1 to 4 phases over up to 8 steps (some steps in none),
 * records of random steps in random order, multicasts (loopback when
 * the sender falls among the receivers), member loops, local copies and
 * zero fills that count for nothing, addresses crowded so forwards wait. */
static void random_phase_floors(void)
{
	for (int c = 0; c < 400; c++) {
		t_case("phase floors: the brute-force walk's, order-free, and never above the replay");
		int ns = (int)t_pick(1, 8), nph = 0, n = (int)t_pick(1, 30);
		Phase ph[8];
		for (int s = 0; s < ns;) {
			int len = (int)t_pick(1, 3);
			if (s + len > ns)
				len = ns - s;
			if (t_upto(4))
				ph[nph].first = s, ph[nph].last = s + len - 1, ph[nph].label = NULL, nph++;
			s += len;
		}
		if (!nph)
			ph[0].first = ph[0].last = 0, ph[0].label = NULL, nph = 1;
		Xfer *x = calloc((size_t)n, sizeof *x);
		int64_t span = c % 2 ? 2048 : 200000;
		for (int i = 0; i < n; i++) {
			int64_t len = t_pick(1, c % 3 ? 64 : 20000);
			x[i] = send((int)t_upto(ns), t_upto(TILES), t_upto(span), t_upto(TILES), t_upto(span),
				    t_pick(1, 3), len);
			if (t_upto(3) == 0) {
				x[i].nloop = (int)t_pick(1, 2);
				for (int k = 0; k < x[i].nloop; k++)
					x[i].loop[k] = (XLoop){ t_pick(2, 4), t_pick(0, 3), t_pick(0, 700), t_pick(0, 3),
								t_pick(0, 700) };
			}
			if (t_upto(10) == 0)
				x[i].kind = t_upto(2) ? X_LOCAL : X_ZERO;
		}
		Plan pl = plan_of(x, n, ns, ph, nph);
		int64_t all[8], at[8];
		phase_floors(&pl, all, at);
		for (int p = 0; p < nph; p++) {
			int64_t bt, tile, want = brute_floor(&pl, p, &bt), got = phase_floor(&pl, p, &tile);
			CHECK(got == want && tile == bt, "case %d phase %d: floor %lld at tile %lld, brute force %lld at %lld",
			      c, p, (long long)got, (long long)tile, (long long)want, (long long)bt);
			CHECK(all[p] == want && at[p] == bt, "case %d phase %d: phase_floors %lld at %lld, brute force %lld at %lld",
			      c, p, (long long)all[p], (long long)at[p], (long long)want, (long long)bt);
			int64_t cyc = phase_cycles(&pl, p);
			CHECK(cyc >= want, "case %d phase %d: replay %lld under the floor %lld", c, p, (long long)cyc,
			      (long long)want);
		}
		/* any order of the records: the same floors, the replay never under them */
		for (int perm = 0; perm < 6; perm++) {
			for (int i = n - 1; i > 0; i--) {
				int j = (int)t_upto(i + 1);
				Xfer tmp = pl.x[i];
				pl.x[i] = pl.x[j], pl.x[j] = tmp;
			}
			int64_t again[8];
			phase_floors(&pl, again, NULL);
			for (int p = 0; p < nph; p++) {
				int64_t cyc = phase_cycles(&pl, p);
				CHECK(again[p] == all[p], "case %d phase %d: floor %lld after a shuffle, %lld before", c, p,
				      (long long)again[p], (long long)all[p]);
				CHECK(cyc >= all[p], "case %d phase %d order %d: replay %lld under the floor %lld", c, p, perm,
				      (long long)cyc, (long long)all[p]);
			}
		}
		done(&pl);
		free(x);
	}
}

/* ---- the model's floor ---- */

/* A plan with placements of the given 3-d shapes (tensor shapes alike),
 * GEMMs and steps added by the caller. */
typedef struct {
	Plan pl;
	int np, ns, ng;
} Build;

static int place(Build *b, int64_t d0, int64_t d1, int64_t d2)
{
	Placement *p = &b->pl.p[b->np];
	memset(p, 0, sizeof *p);
	p->rank = 3;
	p->shape[0] = d0, p->shape[1] = d1, p->shape[2] = d2;
	return b->np++;
}

static int step(Build *b, ComputeKind k, const char *op, int in0, int in1, int out)
{
	Step *s = &b->pl.s[b->ns];
	memset(s, 0, sizeof *s);
	s->kind = STEP_COMPUTE;
	s->compute = k;
	s->op = (char *)op;
	s->in[0] = in0, s->in[1] = in1, s->in[2] = in1;
	s->nin = 3;
	s->out = out;
	return b->ns++;
}

static void gemm(Build *b, const char *op, int64_t m, int64_t k, int64_t n, Format f)
{
	Gemm *g = &b->pl.g[b->ng++];
	memset(g, 0, sizeof *g);
	g->op = (char *)op;
	g->m = m, g->k = k, g->n = n, g->fmt = f;
}

static void build_init(Build *b, int64_t tiles)
{
	memset(b, 0, sizeof *b);
	b->pl.machine = test_machine(tiles);
	b->pl.p = calloc(32, sizeof *b->pl.p);
	b->pl.s = calloc(32, sizeof *b->pl.s);
	b->pl.g = calloc(8, sizeof *b->pl.g);
	b->pl.x = calloc(8, sizeof *b->pl.x);
	b->pl.r = calloc(2, sizeof *b->pl.r);
}

static void build_done(Build *b)
{
	b->pl.np = b->np, b->pl.ns = b->ns, b->pl.ng = b->ng;
}

static void build_free(Build *b)
{
	free(b->pl.p), free(b->pl.s), free(b->pl.g), free(b->pl.x), free(b->pl.r);
}

/* ceil(num / den) of a fraction given over the common denominator l. */
static int64_t cdiv_frac(int64_t num, int64_t den) { return (num + den - 1) / den; }

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

static void model_floors(void)
{
	t_case("the model's floor: whole tensors at the machine's rates, GEMM records once, a repeat's count times");
	Build b;
	build_init(&b, TILES);
	const Machine *m = &b.pl.machine;
	int64_t B = 2, T = 10, C = 24, H = 3, F = 40;
	int x = place(&b, B, T, C), q = place(&b, B, T, C), k = place(&b, B, 7, C), up = place(&b, B, T, F);
	int part = place(&b, 2, B * T, F);
	step(&b, C_LAYERNORM, "ln", x, x, x);                 /* 0 */
	step(&b, C_CAST, "mm", x, x, x);                      /* 1: a plan's work */
	step(&b, C_PACK, "mm", x, x, x);                      /* 2 */
	step(&b, C_MATMUL, "mm", x, x, part);                 /* 3: a K-split's partials */
	step(&b, C_MATMUL, "mm", x, x, part);                 /* 4: the same op's other step */
	step(&b, C_REDUCE, "mm", part, part, up);             /* 5 */
	int at = step(&b, C_ATTENTION, "attn", q, k, q);      /* 6 */
	b.pl.s[at].heads = H;
	step(&b, C_MERGE, "attn", q, q, q);                   /* 7 */
	step(&b, C_GELU, "act", up, up, up);                  /* 8 */
	step(&b, C_ADD, "res", x, x, x);                      /* 9 */
	step(&b, C_BROADCAST, "res", x, x, x);                /* 10 */
	step(&b, C_CARRY, "res", x, x, x);                    /* 11 */
	step(&b, C_MATMUL, "head", x, x, x);                  /* 12 */
	gemm(&b, "mm", B * T, C, F, FMT_FP8);
	gemm(&b, "head", B * T, C, C, FMT_FP16);
	b.pl.r[0] = (Repeat){ "layers", 0, 11, 5 };
	b.pl.nr = 1;
	Xfer s1 = send(0, 0, 0, 1, 0, 3, 100), s2 = send(6, 1, 0, 2, 0, 1, 7);
	s2.nloop = 1;
	s2.loop[0] = (XLoop){ 4, 1, 8, 1, 8 };
	b.pl.x[0] = s1, b.pl.x[1] = s2;
	Xfer s3 = send(12, 3, 0, 4, 0, 2, 9);
	b.pl.x[2] = s3;
	b.pl.nx = 3;
	build_done(&b);

	PlanFloor f;
	plan_movement_floor(&b.pl, &f);
	int64_t reps = 5;
	/* every term over the common denominator 128 (the fp8 rate, a multiple of fp16's) */
	int64_t elem = reps * (B * T * C * m->reduction_cycles_per_element            /* layernorm */
			       + B * T * F * m->elementwise_cycles_per_element          /* gelu */
			       + B * T * C * m->elementwise_cycles_per_element          /* add */
			       + B * H * T * 7 * m->reduction_cycles_per_element);      /* softmax */
	int64_t w128 = elem * 128 + reps * (B * T * C * F) * (128 / m->macs_fp8)
		       + reps * (2 * B * H * T * 7 * (C / H)) * (128 / m->macs_fp16)
		       + (B * T * C * C) * (128 / m->macs_fp16);
	CHECK(f.compute == cdiv_frac(w128, 128 * TILES), "compute floor %lld, the definition %lld", (long long)f.compute,
	      (long long)cdiv_frac(w128, 128 * TILES));
	int64_t rcv = reps * (100 * 3 + 7 * 4) + 9 * 2;
	CHECK(f.movement == cdiv_frac(rcv, 4 * TILES), "movement floor %lld, the definition %lld", (long long)f.movement,
	      (long long)cdiv_frac(rcv, 4 * TILES));
	/* mm and attn inside the repeat (5 runs each), head once */
	CHECK(f.sync == m->sync_cycles * (reps + reps + 1), "sync floor %lld", (long long)f.sync);
	CHECK(f.total == f.compute + f.movement + f.sync, "total %lld", (long long)f.total);

	t_case("the compute floor rounds the exact sum up once, whatever the two MAC rates");
	for (int c = 0; c < 500; c++) {
		b.pl.machine.macs_fp16 = t_pick(1, 60);
		b.pl.machine.macs_fp8 = t_pick(1, 60);
		b.pl.machine.tiles = t_pick(1, 40);
		b.pl.machine.elementwise_cycles_per_element = t_pick(0, 3);
		b.pl.machine.reduction_cycles_per_element = t_pick(0, 3);
		b.pl.g[0].m = t_pick(1, 30), b.pl.g[0].k = t_pick(1, 30), b.pl.g[0].n = t_pick(1, 30);
		b.pl.g[1].m = t_pick(1, 30), b.pl.g[1].k = t_pick(1, 30), b.pl.g[1].n = t_pick(1, 30);
		plan_movement_floor(&b.pl, &f);
		int64_t r16 = m->macs_fp16, r8 = m->macs_fp8, l = r16 / gcd(r16, r8) * r8;
		int64_t e = reps * (B * T * C * m->reduction_cycles_per_element + B * T * F * m->elementwise_cycles_per_element +
				    B * T * C * m->elementwise_cycles_per_element +
				    B * H * T * 7 * m->reduction_cycles_per_element);
		int64_t m8 = reps * b.pl.g[0].m * b.pl.g[0].k * b.pl.g[0].n;
		int64_t m16 = reps * 2 * B * H * T * 7 * (C / H) + b.pl.g[1].m * b.pl.g[1].k * b.pl.g[1].n;
		int64_t w = e * l + m8 * (l / r8) + m16 * (l / r16);
		int64_t want = cdiv_frac(w, l * m->tiles);
		CHECK(f.compute == want, "case %d: rates %lld/%lld on %lld tiles: %lld, the exact sum's %lld", c,
		      (long long)r16, (long long)r8, (long long)m->tiles, (long long)f.compute, (long long)want);
	}
	build_free(&b);
}

int main(void)
{
	t_case("a single 400-byte send: the receiver's control and 100 cycles, as the replay");
	Phase one_phase = { 0, 0, NULL };
	Xfer one = send(0, 0, 0, 1, 0, 1, 400);
	Plan pl = plan_of(&one, 1, 1, &one_phase, 1);
	int64_t tile;
	CHECK(phase_floor(&pl, 0, &tile) == 103 && tile == 1, "floor %lld at %lld", (long long)phase_floor(&pl, 0, &tile),
	      (long long)tile);
	CHECK(phase_cycles(&pl, 0) == 103, "replay %lld", (long long)phase_cycles(&pl, 0));
	done(&pl);

	t_case("100 sends of 4 bytes to one receiver: its 100 controls, one under the replay's 301");
	Xfer tiny = send(0, 0, 0, 1, 0, 1, 4);
	tiny.nloop = 1;
	tiny.loop[0] = (XLoop){ 100, 0, 4, 0, 4 };
	pl = plan_of(&tiny, 1, 1, &one_phase, 1);
	CHECK(phase_floor(&pl, 0, &tile) == 300 && tile == 1, "floor %lld at %lld", (long long)phase_floor(&pl, 0, &tile),
	      (long long)tile);
	done(&pl);

	t_case("a loopback multicast counts its sender once as sender and once as receiver");
	Xfer loop = send(0, 0, 0, 0, 256, 2, 64);
	loop.recv_step = 1;
	pl = plan_of(&loop, 1, 1, &one_phase, 1);
	/* tile 0: controls 2 + 3 = 5, send port 2 + 16, receive port 3 + 16: 19 */
	CHECK(phase_floor(&pl, 0, &tile) == 19 && tile == 0, "floor %lld at %lld", (long long)phase_floor(&pl, 0, &tile),
	      (long long)tile);
	CHECK(phase_cycles(&pl, 0) >= 19, "replay %lld", (long long)phase_cycles(&pl, 0));
	done(&pl);

	t_case("a phase that moves nothing has floor 0 and no tile");
	Xfer local = one;
	local.kind = X_LOCAL;
	pl = plan_of(&local, 1, 1, &one_phase, 1);
	CHECK(phase_floor(&pl, 0, &tile) == 0 && tile == -1, "floor %lld at %lld", (long long)phase_floor(&pl, 0, &tile),
	      (long long)tile);
	done(&pl);

	random_phase_floors();
	model_floors();
	return t_summary();
}
