/* Lowering regressions: fp8 lanes, per-destination traversal, coalescing,
 * forwarding order, and the stage formats' round trips. */
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

/* Plans (and expands, if asked) a model given as text. */
static int plan_text(const char *text, int64_t tiles, Plan *pl, Err *e)
{
	char path[] = "/tmp/amp-lower-XXXXXX";
	int fd = mkstemp(path);
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		return -1;
	close(fd);
	Model m;
	Machine mc = test_machine(tiles);
	PlanOpts po = { OBJ_CAPACITY, 0, NULL, OWN_AUTO, 0, NULL, NULL, NULL, NULL, NULL };
	int rc = model_load(&m, path, e);
	if (!rc) {
		rc = plan_build(pl, &m, &mc, &po, NULL, e);
		model_free(&m);
	}
	unlink(path);
	return rc ? -1 : 0;
}

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

/* ---- per-destination traversal ---- */

/* Multiset signature of the members that land on tile t in step s. */
typedef struct {
	int64_t tile, members, bytes, records;
	int hit;
} Sig;

static int sig_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Sig *g = ctx;
	(void)m, (void)st, (void)sa, (void)da;
	for (int64_t j = 0; j < x->nrecv; j++)
		if (tile_mod(dt + j * x->recv_step, 1 << 20) == g->tile) {
			g->members++;
			g->bytes += x->len;
			g->hit = 1;
		}
	return 0;
}

static Sig signature(const Plan *pl, int step, int64_t tile)
{
	Sig g = { tile, 0, 0, 0, 0 };
	for (int i = 0; i < pl->nx; i++) {
		if (pl->x[i].step != step || pl->x[i].kind == X_ZERO)
			continue;
		g.hit = 0;
		xfer_each(&pl->x[i], pl->machine.tiles, sig_member, &g);
		g.records += g.hit;
	}
	return g;
}

static const char *mlp = "amp-model: 1\nname: t\ninputs:\n  x: {shape: [2, 6, %d], dtype: fp16}\n"
	"params:\n  w: {shape: [%d, 48], dtype: fp8}\nops:\n"
	"  - {op: matmul, name: m, a: x, b: w, out: y}\noutputs: [y]\n"
	"pins:\n  m: {grid: [1, 3, 1], cast: early, staging: direct}\n";

static void irregular_destination(void)
{
	char a[1024], b[1024];
	Plan pa, pb;
	Err e;

	/* K = 96: three full fp8 strips; K = 80: the last strip is clipped. */
	snprintf(a, sizeof a, mlp, 96, 96);
	snprintf(b, sizeof b, mlp, 80, 80);
	t_case("one irregular destination leaves the regular destinations of the copy unchanged");
	int ok = plan_text(a, 16, &pa, &e) == 0 && plan_expand(&pa, &e) == 0 &&
		 plan_text(b, 16, &pb, &e) == 0 && plan_expand(&pb, &e) == 0;
	CHECK(ok, "%s", e.msg);
	if (!ok)
		return;
	int step = -1;
	for (int i = 0; i < pa.ns; i++)
		if (pa.s[i].kind == STEP_COPY && pa.s[i].operand == OPD_A)
			step = i;
	CHECK(step >= 0 && pb.s[step].kind == STEP_COPY && pb.s[step].operand == OPD_A,
	      "the a copy is the same step in both plans");
	/* Grid [1, 3, 1]: tiles 0 and 1 hold the regular K blocks. */
	for (int64_t t = 0; t < 2; t++) {
		Sig ga = signature(&pa, step, t), gb = signature(&pb, step, t);
		CHECK(ga.members > 0 && ga.members == gb.members && ga.bytes == gb.bytes,
		      "tile %lld: regular destination changed: %lld members/%lld bytes vs %lld/%lld",
		      (long long)t, (long long)ga.members, (long long)ga.bytes, (long long)gb.members,
		      (long long)gb.bytes);
		CHECK(gb.records == ga.records && gb.records <= 3,
		      "tile %lld: regular destination spread over %lld records (%lld when all are regular)",
		      (long long)t, (long long)gb.records, (long long)ga.records);
	}
	Sig g2 = signature(&pb, step, 2);
	CHECK(g2.bytes == 2 * 6 * 16, "the clipped destination gets its 16 valid columns per row (%lld bytes)",
	      (long long)g2.bytes);
	plan_free(&pa);
	plan_free(&pb);
}

/* ---- coalescing ---- */

static Xfer family(int64_t len, int64_t count, int64_t sstep, int64_t dstep, int64_t tstep)
{
	Xfer x;
	memset(&x, 0, sizeof x);
	x.kind = X_SEND;
	x.len = len;
	x.src_tile = 3;
	x.dst_tile = 5;
	x.nrecv = 4;
	x.recv_step = 1;
	x.nloop = 1;
	x.loop[0] = (XLoop){ count, tstep, sstep, tstep, dstep };
	return x;
}

static void coalescing(void)
{
	Xfer out[2];
	int n;

	t_case("coalescing joins a run that continues on the sender and every receiver");
	Xfer x = family(64, 10, 64, 64, 0);
	n = xfer_fragment(&x, 16592, out);
	CHECK(n == 1 && out[0].len == 640 && out[0].nloop == 0, "n %d len %lld loops %d", n,
	      (long long)out[0].len, out[0].nloop);

	t_case("coalescing stops at a gap on the receivers");
	x = family(64, 10, 64, 96, 0);
	n = xfer_fragment(&x, 16592, out);
	CHECK(n == 1 && out[0].len == 64 && out[0].nloop == 1 && out[0].loop[0].count == 10, "joined across a gap");

	t_case("coalescing stops at a gap on the sender");
	x = family(64, 10, 128, 64, 0);
	n = xfer_fragment(&x, 16592, out);
	CHECK(n == 1 && out[0].len == 64, "joined across a sender gap");

	t_case("coalescing never joins across tiles");
	x = family(64, 10, 64, 64, 1);
	n = xfer_fragment(&x, 16592, out);
	CHECK(n == 1 && out[0].len == 64, "joined across tiles");

	t_case("coalescing never joins across a receiver-set change");
	{
		Plan pl;
		memset(&pl, 0, sizeof pl);
		pl.machine = test_machine(16);
		Xfer a = family(64, 1, 0, 0, 0), b = a;
		a.nloop = b.nloop = 0;
		b.src_addr = a.src_addr + 64;
		b.dst_addr = a.dst_addr + 64;
		b.nrecv = 3;                    /* contiguous, but other receivers */
		Xfer xs[2] = { a, b };
		int m = xfer_compress(xs, 2);
		CHECK(m == 2, "records with different receivers folded into %d", m);
		for (int i = 0; i < m; i++) {
			n = xfer_fragment(&xs[i], 16592, out);
			CHECK(n == 1 && out[0].len == 64, "joined across receivers");
		}
	}

	t_case("spans longer than max_transfer_bytes are cut into full fragments and a tail");
	x = family(40000, 1, 0, 0, 0);
	x.nloop = 0;
	n = xfer_fragment(&x, 16592, out);
	CHECK(n == 2 && out[0].len == 16592 && out[0].nloop == 1 && out[0].loop[0].count == 2 &&
	      out[0].loop[0].src_addr == 16592 && out[1].len == 40000 - 2 * 16592 &&
	      out[1].src_addr == 2 * 16592 && out[1].dst_addr == 2 * 16592, "cut wrong");

	t_case("a joined run is cut after joining");
	x = family(10000, 4, 10000, 10000, 0);
	n = xfer_fragment(&x, 16592, out);
	CHECK(n == 2 && out[0].len == 16592 && out[0].loop[0].count == 2 && out[1].len == 40000 - 2 * 16592,
	      "n %d", n);
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

/* ---- forwarding order ---- */

static void forwarding_order(void)
{
	Plan pl;
	Err e;
	const char *text = "amp-model: 1\nname: f\ninputs:\n  x: {shape: [1, 12, 64], dtype: fp16}\n"
		"params:\n  w: {shape: [64, 40], dtype: fp8}\n  b: {shape: [40], dtype: fp16}\nops:\n"
		"  - {op: matmul, name: m, a: x, b: w, bias: b, out: y}\noutputs: [y]\n"
		"pins:\n  m: {grid: [3, 1, 2], cast: early, staging: direct}\n";

	t_case("a forwarding phase delivers in order and fails when sorted");
	int ok = plan_text(text, 32, &pl, &e) == 0;
	if (ok) {
		plan_compose(&pl);
		ok = plan_expand(&pl, &e) == 0 && plan_exchange(&pl, &e) == 0 && plan_group(&pl, 0, &e) == 0;
	}
	CHECK(ok, "%s", e.msg);
	if (!ok)
		return;
	CHECK(group_check_order(&pl, &e) == 0 && sim_check_stage(&pl, &e) == 0, "in order: %s", e.msg);
	/* Find a delivery immediately followed by its forward, and sort the
	 * two by sender tile descending, which puts the forward first. */
	int found = 0;
	for (int i = 0; i + 1 < pl.nx && !found; i++) {
		Xfer *a = &pl.x[i], *b = &pl.x[i + 1];
		if (a->kind == X_SEND && b->kind == X_SEND && a->step == b->step &&
		    pl.s[a->step].move == MOVE_PARAMETER && a->nrecv == 1 && b->src_tile == a->dst_tile &&
		    b->src_addr == a->dst_addr) {
			Xfer t = *a;
			*a = *b;
			*b = t;
			found = 1;
		}
	}
	CHECK(found, "no forwarding pair in the grouped plan");
	CHECK(group_check_order(&pl, &e) != 0, "sorted phase passes the order check");
	CHECK(sim_check_stage(&pl, &e) != 0, "sorted phase passes the byte check");
	plan_free(&pl);
}

/* ---- the stage movement check against bad stages ----
 *
 * sim_check_stage is the unit tests' movement oracle for whole lowered
 * stages; it must fail when a byte of a destination is written twice, and
 * when bytes land outside every destination. */

static int lowered_text(Plan *pl, Err *e)
{
	const char *text = "amp-model: 1\nname: f\ninputs:\n  x: {shape: [1, 12, 64], dtype: fp16}\n"
		"params:\n  w: {shape: [64, 40], dtype: fp8}\n  b: {shape: [40], dtype: fp16}\nops:\n"
		"  - {op: matmul, name: m, a: x, b: w, bias: b, out: y}\noutputs: [y]\n"
		"pins:\n  m: {grid: [3, 1, 2], cast: early, staging: direct}\n";
	if (plan_text(text, 32, pl, e))
		return -1;
	plan_compose(pl);
	return plan_expand(pl, e) || plan_exchange(pl, e) || plan_group(pl, 0, e) ? -1 : 0;
}

/* pl with record i copied right after itself (dst_addr, when >= 0, moved
 * there). */
static void add_copy_of(Plan *pl, int i, int64_t dst_addr)
{
	pl->x = realloc(pl->x, (size_t)(pl->nx + 1) * sizeof *pl->x);
	memmove(&pl->x[i + 1], &pl->x[i], (size_t)(pl->nx - i) * sizeof *pl->x);
	pl->nx++;
	if (dst_addr >= 0)
		pl->x[i + 1].dst_addr = dst_addr;
}

static void stage_check_faults(void)
{
	for (int k = 0; k < 3; k++) {
		Plan pl;
		Err e;
		int ok = lowered_text(&pl, &e) == 0;
		t_case("the stage movement check passes the faithful stage");
		CHECK(ok && sim_check_stage(&pl, &e) == 0, "%s", e.msg);
		if (!ok)
			return;
		int i = 0;
		while (i < pl.nx && (pl.x[i].kind != X_SEND || pl.x[i].nloop || pl.x[i].nrecv != 1))
			i++;
		CHECK(i < pl.nx, "no single send in the stage");
		if (i == pl.nx) {
			plan_free(&pl);
			return;
		}
		if (k == 0) {
			t_case("the stage movement check fails a destination byte written twice");
			add_copy_of(&pl, i, -1);
			CHECK(sim_check_stage(&pl, &e) != 0 && strstr(e.msg, "written 2 times"), "%s",
			      e.msg);
		} else if (k == 1) {
			t_case("the stage movement check fails bytes written outside every destination");
			int64_t top = (pl.machine.sram_bytes - pl.x[i].len) / 64 * 64;
			add_copy_of(&pl, i, top);
			CHECK(sim_check_stage(&pl, &e) != 0 && strstr(e.msg, "written outside every destination"),
			      "%s", e.msg);
		} else {
			t_case("the stage movement check fails a write past the top of SRAM");
			add_copy_of(&pl, i, pl.machine.sram_bytes - pl.x[i].len + 8);
			CHECK(sim_check_stage(&pl, &e) != 0 && strstr(e.msg, "address out of SRAM"), "%s", e.msg);
		}
		plan_free(&pl);
	}
}

/* ---- round trips ---- */

static char *write_mem(const Plan *pl, const char *path)
{
	Err e;
	Output *o = output_open(path, 0, &e);
	if (!o || stage_write(pl, o, &e) || output_commit(o, &e))
		return NULL;
	char *data;
	size_t len;
	return input_slurp(path, &data, &len, &e) ? NULL : data;
}

static void round_trips(void)
{
	static const char *names[STAGE_COUNT] = { "plan", "expanded", "exchange", "grouped" };
	Plan pl;
	Err e;
	char path[] = "/tmp/amp-rt-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	FILE *f = fopen("share/models/tiny-mlp.yaml", "r");
	char text[4096];
	size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	int ok = n > 0 && plan_text(text, 1472, &pl, &e) == 0;
	for (StageKind k = STAGE_PLAN; ok && k < STAGE_COUNT; k++) {
		if (k == STAGE_EXPAND)
			ok = plan_expand(&pl, &e) == 0;
		if (k == STAGE_EXCHANGE)
			ok = plan_exchange(&pl, &e) == 0;
		if (k == STAGE_GROUP)
			ok = plan_group(&pl, 0, &e) == 0;
		char buf[64];
		snprintf(buf, sizeof buf, "the %s stage round-trips: parse, emit, parse gives the same bytes", names[k]);
		t_case(buf);
		char *one = write_mem(&pl, path);
		Plan back;
		int rc = stage_read(&back, path, k, &e);
		CHECK(one && rc == 0, "%s", e.msg);
		if (rc == 0) {
			char *two = write_mem(&back, path);
			CHECK(two && strcmp(one, two) == 0, "second emission differs");
			free(two);
			plan_free(&back);
		}
		free(one);
	}
	if (ok)
		plan_free(&pl);
	unlink(path);
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
 * by the rule, brute force: every copy of the run a parameter vector's, no
 * compute of the run before it touching that tensor, a copy before those
 * computes in the same repeat region. */
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
		PlanOpts po = { OBJ_CAPACITY, 0, NULL, OWN_AUTO, 0, NULL, NULL, NULL, NULL, NULL };
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
			 * parameter (a plan edited by hand): the run stays. */
			int s = 1;
			while (s < pl.ns && !(pl.s[s].kind == STEP_COPY && pl.s[s - 1].kind == STEP_COMPUTE &&
					      could_move(&pl, s)))
				s++;
			if (s < pl.ns && pl.s[s - 1].nin > 0) {
				Step *c = &pl.s[s - 1];
				const char *op = pl.s[s].op;
				c->in[c->nin - 1] = pl.s[s].src;
				plan_hoist(&pl);
				t_case("a run whose parameter a compute before it reads stays after it");
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

		t_case("hoisting moves every run the rule allows, and only parameter copies");
		int moved_copies = 0;
		for (int s = 0; s < ns; s++)
			if (at[s] != s && old[s].kind == STEP_COPY && at[s] < s)
				moved_copies++, ok &= old[s].move == MOVE_PARAMETER;
		for (int s = 1; s < pl.ns && ok; s++)
			if (pl.s[s].kind == STEP_COPY && pl.s[s - 1].kind == STEP_COMPUTE)
				ok = !could_move(&pl, s);
		CHECK(ok && moved_copies == moved && plan_hoist(&pl) == 0, "%s: moved %d (%d), ok %d", desc, moved,
		      moved_copies, ok);
		for (int s = 0; s < ns; s++)    /* only parameter vectors move */
			if (at[s] < s)
				ok &= old[s].kind == STEP_COPY && pl.t[pl.p[old[s].src].tensor].rank == 1;
		CHECK(ok, "%s: a copy of a tensor of rank above 1 moved", desc);
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
	irregular_destination();
	coalescing();
	cutting();
	forwarding_order();
	stage_check_faults();
	round_trips();
	hoisting();
	return t_summary();
}
