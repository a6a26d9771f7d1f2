/* The exchange schedule (lib/lower/schedule.h) on random phases: the same
 * fragments per step, every (sender, first receiver) pair and every step
 * in order, a forwarding step untouched, never slower than record order,
 * and costed the same whatever the SRAM the replay indexes;
 * and all-to-all reductions, whose record order sends every block's first
 * fragment to one receiver, and groups gathering small partials, scheduled
 * to their floor. */
#include <stdlib.h>
#include <string.h>

#include "cost/floor.h"
#include "cost/replay.h"
#include "lower/schedule.h"
#include "stage/table.h"
#include "t.h"
#include "testlib.h"

#define T 16
#define W 300000                /* bytes of each step's source and destination */

/* A plan of nsteps copy steps in one phase; step s reads placement 2s at
 * s * 2W and writes placement 2s + 1 at s * 2W + W, every tile. */
static Plan phase_plan(int nsteps)
{
	Plan pl;
	memset(&pl, 0, sizeof pl);
	pl.machine = test_machine(T);
	pl.machine.sram_bytes = 1 << 22;
	pl.ns = nsteps;
	pl.s = calloc((size_t)nsteps, sizeof *pl.s);
	pl.np = 2 * nsteps;
	pl.p = calloc((size_t)pl.np, sizeof *pl.p);
	pl.nt = pl.np;
	pl.t = calloc((size_t)pl.nt, sizeof *pl.t);
	for (int i = 0; i < pl.np; i++) {
		Placement *p = &pl.p[i];
		pl.t[i].role = R_ACT;
		pl.t[i].rank = 2;
		pl.t[i].shape[0] = 1, pl.t[i].shape[1] = W;
		pl.t[i].fmt = FMT_FP8;
		pl.t[i].count = 1;
		p->tensor = i;
		p->layout = LAYOUT_ROW_MAJOR;
		p->fmt = FMT_FP8;
		p->rank = 2;
		p->shape[0] = 1, p->shape[1] = W;
		p->split[0] = p->split[1] = 1;
		p->block[0] = 1, p->block[1] = W;
		p->nrep = 1, p->rep[0] = T, p->rstride[0] = 1;
		p->addr = (int64_t)i * W;
	}
	for (int s = 0; s < nsteps; s++) {
		pl.s[s].kind = STEP_COPY;
		pl.s[s].src = 2 * s, pl.s[s].dst = 2 * s + 1;
	}
	pl.nph = 1;
	pl.ph = calloc(1, sizeof *pl.ph);
	pl.ph[0].first = 0, pl.ph[0].last = nsteps - 1;
	pl.ph[0].label = "p";
	return pl;
}

static void plan_done(Plan *pl)
{
	free(pl->s);
	free(pl->t);
	free(pl->p);
	free(pl->ph);
	free(pl->x);
}

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
	x.recv_step = nrecv > 1 ? 1 : 0;
	return x;
}

/* Every send fragment of a plan, flat, in record order. */
typedef struct {
	int64_t step, src, sa, dst, da, len, nrecv, rstep;
} F;

typedef struct {
	F *f;
	int n, cap;
	int step;
} Fs;

static int flat(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Fs *v = ctx;
	(void)m;
	if (v->n == v->cap)
		v->f = realloc(v->f, (size_t)(v->cap = v->cap ? 2 * v->cap : 64) * sizeof *v->f);
	v->f[v->n++] = (F){ x->step, st, sa, tile_mod(dt, T), da, x->len, x->nrecv, x->recv_step };
	return 0;
}

static Fs flatten(const Plan *pl)
{
	Fs v = { NULL, 0, 0, 0 };
	for (int i = 0; i < pl->nx; i++)
		if (pl->x[i].kind == X_SEND)
			xfer_each(&pl->x[i], T, flat, &v);
	return v;
}

static int fcmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(F));
}

/* Do b's fragments keep a's (sender, first receiver) orders and step order? */
static int orders_kept(const Fs *a, const Fs *b)
{
	for (int i = 0; i < b->n; i++)
		if (i && b->f[i].step < b->f[i - 1].step)
			return 0;
	for (int s = 0; s < T; s++)
		for (int d = 0; d < T; d++) {
			int j = 0;
			for (int i = 0; i < a->n; i++) {
				if (a->f[i].src != s || a->f[i].dst != d)
					continue;
				while (j < b->n && (b->f[j].src != s || b->f[j].dst != d))
					j++;
				if (j == b->n || memcmp(&a->f[i], &b->f[j], sizeof(F)))
					return 0;
				j++;
			}
		}
	return 1;
}

static void random_phases(void)
{
	int faster = 0, forwards = 0;
	for (int c = 0; c < 400; c++) {
		int nsteps = (int)t_pick(1, 3), n = (int)t_pick(1, 30);
		Plan pl = phase_plan(nsteps);
		int fwd_step = t_upto(4) == 0 ? (int)t_pick(0, nsteps - 1) : -1;
		Xfer *x = calloc((size_t)n, sizeof *x);
		int at = 0;
		for (int s = 0; s < nsteps; s++)
			for (int k = 0; k < n / nsteps + (s == nsteps - 1 ? n % nsteps : 0); k++) {
				int64_t len = t_pick(1, c % 2 ? 64 : 3000), nr = t_pick(1, 3);
				int64_t src = pl.p[2 * s].addr, dst = pl.p[2 * s + 1].addr;
				x[at] = send(s, t_pick(0, T - 1), src + t_pick(0, W - 8000), t_pick(0, T - 1),
					     dst + t_pick(0, W - 8000), nr, len);
				if (s == fwd_step && k > 0 && t_upto(2) == 0)    /* reads the step's destination */
					x[at].src_addr = dst + t_pick(0, W - 8000);
				if (t_upto(3) == 0) {
					x[at].nloop = 1;
					x[at].loop[0] = (XLoop){ t_pick(2, 4), t_pick(0, 1) * (int64_t)t_pick(1, 3), t_pick(0, 1) * 2000,
								 t_pick(0, 2), 2000 };
				}
				at++;
			}
		pl.x = x, pl.nx = at;
		Plan before = pl;
		before.x = malloc((size_t)(at + 1) * sizeof *x);
		memcpy(before.x, x, (size_t)at * sizeof *x);
		int64_t c0 = phase_cycles(&pl, 0);
		/* the replay's index of a tile's writes widens its buckets on a
		 * machine with more SRAM, and clamps addresses past a small one;
		 * which writes a forward waits for is the same */
		t_case("a phase costs the same cycles whatever SRAM the replay indexes: 2^13, 2^32 or 2^40 bytes");
		static const int shs[] = { 13, 32, 40 };
		for (int i = 0; i < 3; i++) {
			int sh = shs[i];
			pl.machine.sram_bytes = (int64_t)1 << sh;
			int64_t cw = phase_cycles(&pl, 0);
			CHECK(cw == c0, "case %d: %lld cycles with 2^%d bytes, %lld with 2^22", c, (long long)cw, sh,
			      (long long)c0);
		}
		pl.machine.sram_bytes = 1 << 22;
		Fs a = flatten(&pl);
		Err e;
		ScheduleStats st;
		int rc = plan_schedule(&pl, 0, &st, &e);
		t_case("the schedule takes a phase in step order");
		CHECK(rc == 0, "case %d: %s", c, e.msg);
		Fs b = flatten(&pl);
		int64_t c1 = phase_cycles(&pl, 0);
		t_case("a scheduled phase is never slower than record order, and says what it saved");
		CHECK(c1 <= c0 && st.before == c0 && st.after == c1, "case %d: %lld cycles, record order %lld (stats %lld -> %lld)",
		      c, (long long)c1, (long long)c0, (long long)st.before, (long long)st.after);
		faster += c1 < c0;
		t_case("a scheduled phase keeps step order and every (sender, first receiver) pair's order");
		CHECK(orders_kept(&a, &b), "case %d", c);
		t_case("a scheduled phase moves the same fragments");
		qsort(a.f, (size_t)a.n, sizeof *a.f, fcmp);
		qsort(b.f, (size_t)b.n, sizeof *b.f, fcmp);
		CHECK(a.n == b.n && !memcmp(a.f, b.f, (size_t)a.n * sizeof *a.f), "case %d: %d fragments, %d before",
		      c, b.n, a.n);
		if (fwd_step >= 0) {
			/* the forwarding step's records, before and after, are the same sequence */
			int i0 = 0, i1 = 0;
			while (i0 < before.nx && before.x[i0].step != fwd_step)
				i0++;
			while (i1 < pl.nx && pl.x[i1].step != fwd_step)
				i1++;
			int same = 1, reads = 0;
			for (; i0 < before.nx && before.x[i0].step == fwd_step; i0++, i1++) {
				same &= i1 < pl.nx && !memcmp(&before.x[i0], &pl.x[i1], sizeof *pl.x);
				reads |= before.x[i0].src_addr >= pl.p[2 * fwd_step + 1].addr;
			}
			if (reads) {
				forwards++;
				t_case("a step whose sends read its own destination keeps record order");
				CHECK(same, "case %d, step %d", c, fwd_step);
			}
		}
		free(a.f);
		free(b.f);
		free(before.x);
		plan_done(&pl);
	}
	t_case("random phases: some get faster, some forward");
	CHECK(faster > 40 && forwards > 10, "%d of 400 faster, %d forwarding", faster, forwards);
}

/* Every tile holds a partial of T parts of L bytes at the same address
 * and sends part p to tile p: one record per part, the senders p + 1,
 * p + 2, ... around the machine, so in record order every sender first
 * sends to tile 0. The floor is a tile's ports: T - 1 fragments of L
 * bytes each way, after one control, or its T - 1 send and T - 1 receive
 * controls. */
static Plan all_to_all(int64_t L)
{
	Plan pl = phase_plan(1);
	pl.x = calloc((size_t)T, sizeof *pl.x);
	for (int64_t p = 0; p < T; p++) {
		Xfer x = send(0, (p + 1) % T, p * L, p, W, 1, L);
		x.nloop = 1;
		x.loop[0] = (XLoop){ T - 1, 1, 0, 0, L };
		pl.x[pl.nx++] = x;
	}
	return pl;
}

static void reduction(void)
{
	t_case("an all-to-all reduction is scheduled to within 10% of its floor");
	for (int64_t L = 16; L <= 16384; L *= 4) {
		Plan pl = all_to_all(L);
		int64_t c0 = phase_cycles(&pl, 0), floor = 3 + (T - 1) * cdiv(L, 4);
		floor = floor > 5 * (T - 1) ? floor : 5 * (T - 1);
		Err e;
		plan_schedule(&pl, 0, NULL, &e);
		int64_t c1 = phase_cycles(&pl, 0);
		CHECK(c1 * 10 <= floor * 11 && c1 < c0, "L %lld: %lld cycles, record order %lld, floor %lld",
		      (long long)L, (long long)c1, (long long)c0, (long long)floor);
		plan_done(&pl);
	}
}

/* Attention's partials: the tiles in groups of G, each sending its part
 * r (L bytes) to the group's tile r for r < R (the merge tiles; not to
 * itself), one record a sender, so in record order every sender of a
 * group first sends to the group's first tile. Receivers are the
 * bottleneck: G - 1 fragments each. */
#define G 8
#define R 5
static Plan partials(int64_t L)
{
	Plan pl = phase_plan(1);
	pl.x = calloc((size_t)T * R, sizeof *pl.x);
	for (int64_t s = 0; s < T; s++)
		for (int64_t r = 0, g = s / G * G; r < R; r++)
			if (g + r != s)
				pl.x[pl.nx++] = send(0, s, r * L, g + r, W + (s - g) * L, 1, L);
	return pl;
}

static void gathers(void)
{
	for (int64_t L = 8; L <= 512; L *= 4) {
		Plan pl = partials(L);
		int n0 = pl.nx;
		int64_t c0 = phase_cycles(&pl, 0), floor = phase_floor(&pl, 0, NULL);
		Err e;
		ScheduleStats st;
		plan_schedule(&pl, 0, &st, &e);
		int64_t c1 = phase_cycles(&pl, 0);
		t_case("groups gathering small partials are scheduled to within 10% of their floor, in no more records");
		CHECK(c1 * 10 <= floor * 11 && c1 < c0 && pl.nx <= n0, "L %lld: %lld cycles, record order %lld, floor %lld; %d records, %d before",
		      (long long)L, (long long)c1, (long long)c0, (long long)floor, pl.nx, n0);
		plan_done(&pl);
	}
}

/* Complete groups on scrambled tiles: the tiles shuffled, each group's S
 * senders send L bytes to each of its R receivers, one record a sender,
 * every sender's receivers in the same order (so in record order all
 * start with the group's first receiver). The floor is the busiest
 * tile's max(S, R) fragments. */
static Plan groups(int64_t S, int64_t Rc, int64_t L, unsigned *seed)
{
	int64_t perm[T];
	for (int64_t t = 0; t < T; t++)
		perm[t] = t;
	for (int64_t t = T - 1; t > 0; t--) {
		int64_t j = rand_r(seed) % (t + 1), x = perm[t];
		perm[t] = perm[j], perm[j] = x;
	}
	Plan pl = phase_plan(1);
	pl.x = calloc((size_t)T * T, sizeof *pl.x);
	for (int64_t g = 0; (g + 1) * (S + Rc) <= T; g++)
		for (int64_t i = 0; i < S; i++)
			for (int64_t j = 0; j < Rc; j++)
				pl.x[pl.nx++] = send(0, perm[g * (S + Rc) + i], j * L, perm[g * (S + Rc) + S + j],
						     W + i * L, 1, L);
	return pl;
}

static void complete_groups(void)
{
	unsigned seed = 7;
	static const int64_t sr[][2] = { { 4, 4 }, { 3, 5 }, { 5, 3 }, { 7, 8 } };
	t_case("complete groups of senders and receivers on scrambled tiles are scheduled to within 10% of their floor");
	for (int k = 0; k < 4; k++)
		for (int r = 0; r < 5; r++) {
			Plan pl = groups(sr[k][0], sr[k][1], 2048, &seed);
			int64_t c0 = phase_cycles(&pl, 0), floor = phase_floor(&pl, 0, NULL);
			Err e;
			plan_schedule(&pl, 0, NULL, &e);
			int64_t c1 = phase_cycles(&pl, 0);
			CHECK(c1 * 10 <= floor * 11 && c1 < c0, "%lld x %lld: %lld cycles, record order %lld, floor %lld",
			      (long long)sr[k][0], (long long)sr[k][1], (long long)c1, (long long)c0, (long long)floor);
			plan_done(&pl);
		}
}

/* A new order that adds records must save per_record cycles for each. */
static void per_record(void)
{
	Err e;
	ScheduleStats st;
	Plan pl = all_to_all(512);
	Xfer *x0 = malloc((size_t)pl.nx * sizeof *x0);
	int n0 = pl.nx;
	memcpy(x0, pl.x, (size_t)n0 * sizeof *x0);
	plan_schedule(&pl, 0, &st, &e);
	int64_t saved = st.before - st.after, added = pl.nx - n0;
	t_case("a faster order that adds records is taken when it saves enough a record");
	CHECK(saved > 0 && added > 0 && st.phases == 1, "saved %lld cycles, %lld records added", (long long)saved,
	      (long long)added);
	plan_done(&pl);
	t_case("an order taken saves per_record cycles for each record it adds");
	pl = all_to_all(512);
	int64_t pr = saved / added + 1;
	plan_schedule(&pl, pr, &st, &e);
	CHECK(st.before - st.after >= pr * (pl.nx - n0), "%lld cycles saved, %d records added at %lld a record",
	      (long long)(st.before - st.after), pl.nx - n0, (long long)pr);
	plan_done(&pl);
	t_case("a faster order that adds records is not taken when it saves too little a record");
	pl = all_to_all(512);
	plan_schedule(&pl, 1000000, &st, &e);
	CHECK(pl.nx == n0 && !memcmp(pl.x, x0, (size_t)n0 * sizeof *x0) && st.phases == 0 && st.after == st.before,
	      "%d records, %d phases reordered", pl.nx, st.phases);
	plan_done(&pl);
	pl = all_to_all(512);
	plan_schedule(&pl, saved / added, &st, &e);
	CHECK(st.phases == 1, "at %lld cycles a record: not taken", (long long)(saved / added));
	free(x0);
	plan_done(&pl);
}

/* The largest tile's table bytes and fragments of pl. */
static void worst_tile(const Plan *pl, int64_t *table, int64_t *frags)
{
	int64_t tb[T] = { 0 }, fr[T] = { 0 };
	table_totals(pl, tb, fr, NULL);
	*table = *frags = 0;
	for (int t = 0; t < T; t++) {
		*table = tb[t] > *table ? tb[t] : *table;
		*frags = fr[t] > *frags ? fr[t] : *frags;
	}
}

/* A faster order whose tables pass the table budget is not kept: the
 * schedule falls back to orders that grow no row. */
static void limits(void)
{
	Err e;
	ScheduleStats st;
	Plan pl = all_to_all(512);
	int64_t t0, f0, t1, f1;
	worst_tile(&pl, &t0, &f0);
	plan_schedule(&pl, 0, &st, &e);
	worst_tile(&pl, &t1, &f1);
	t_case("the all-to-all's faster order grows the worst tile's table (the case below tests something)");
	CHECK(t1 > t0 && st.phases == 1, "tables %lld -> %lld bytes", (long long)t0, (long long)t1);
	plan_done(&pl);
	t_case("with the table budget at record order's worst tile, the schedule keeps every tile within it");
	pl = all_to_all(512);
	pl.machine.table_budget_bytes = t0;
	plan_schedule(&pl, 0, &st, &e);
	worst_tile(&pl, &t1, &f1);
	CHECK(t1 <= t0 && f1 <= f0, "tables %lld bytes, budget %lld", (long long)t1, (long long)t0);
	plan_done(&pl);
}

/* A phase no order makes faster keeps its records, and is not counted. */
static void no_gain(void)
{
	Err e;
	ScheduleStats st;
	Plan pl = phase_plan(1);
	pl.x = calloc(1, sizeof *pl.x);
	pl.x[pl.nx++] = send(0, 1, 0, 2, W, 1, 64);
	Xfer x0 = pl.x[0];
	plan_schedule(&pl, 0, &st, &e);
	t_case("a one-record phase keeps its record and counts no phase reordered");
	CHECK(pl.nx == 1 && !memcmp(&pl.x[0], &x0, sizeof x0) && st.phases == 0 && st.before == st.after,
	      "%d records, %d phases reordered, %lld -> %lld cycles", pl.nx, st.phases, (long long)st.before,
	      (long long)st.after);
	plan_done(&pl);
}

int main(void)
{
	random_phases();
	reduction();
	gathers();
	complete_groups();
	per_record();
	limits();
	no_gain();
	return t_summary();
}
