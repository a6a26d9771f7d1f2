/* test_lower_cases: lowering regressions on hand-made cases:
 * per-destination traversal, coalescing, forwarding order, the stage
 * movement check against bad stages, and the stage formats' round trips. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost/replay.h"
#include "lower/compose.h"
#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/group.h"
#include "lower/lower.h"
#include "planner/planner.h"
#include "run/sim.h"
#include "stage/plan_check.h"
#include "stage/stage_io.h"
#include "t.h"
#include "testlib.h"

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
	PlanOpts po = { OBJ_CAPACITY, 0, NULL, OWN_AUTO, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 };
	int rc = model_load(&m, path, e);
	if (!rc) {
		rc = plan_build(pl, &m, &mc, &po, NULL, e);
		model_free(&m);
	}
	unlink(path);
	return rc ? -1 : 0;
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
	Lowering lw = lowering_default();       /* forwarded, in record order */
	lw.weights = WEIGHTS_FORWARD, lw.schedule = 0;
	ok = ok && lower_plan(&pl, &lw, &e) == 0;
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
	Lowering lw = lowering_default();       /* forwarded, in record order */
	lw.weights = WEIGHTS_FORWARD, lw.schedule = 0;
	return plan_text(text, 32, pl, e) || lower_plan(pl, &lw, e) ? -1 : 0;
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

/* ---- the one lowering sequence ---- */

/* lower_plan with the pipeline's defaults writes the stage the four tools
 * write, stage by stage; in record order it has the same phases, none
 * faster than the schedule's. */
static void one_lowering(void)
{
	/* a reduction over 4 K blocks: its senders all start at the same
	 * receiver, which the schedule reorders */
	const char *text = "amp-model: 1\nname: r\ninputs:\n  x: {shape: [1, 64, 256], dtype: fp16}\n"
		"params:\n  w: {shape: [256, 64], dtype: fp8}\nops:\n"
		"  - {op: matmul, name: m, a: x, b: w, out: y}\noutputs: [y]\n"
		"pins:\n  m: {grid: [2, 4, 2], cast: early, staging: direct}\n";
	Plan a, b, c;
	Err e;
	char path[] = "/tmp/amp-lw-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	t_case("lower_plan gives the stage amp-compose | amp-expand | amp-exchange | amp-group give");
	int ok = plan_text(text, 32, &a, &e) == 0;
	CHECK(ok, "%s", e.msg);
	if (!ok) {
		unlink(path);
		return;
	}
	plan_dup(&b, &a);
	plan_dup(&c, &a);
	plan_compose(&b);
	ScheduleStats st = { 0, 0, 0 };
	ok = lower_plan(&a, NULL, &e) == 0 && plan_expand(&b, &e) == 0 && plan_exchange(&b, &e) == 0 &&
	     plan_group(&b, WEIGHTS_DEFAULT, &e) == 0 && plan_schedule(&b, SCHEDULE_CYCLES_PER_RECORD, &st, &e) == 0;
	char *one = ok ? write_mem(&a, path) : NULL, *two = ok ? write_mem(&b, path) : NULL;
	CHECK(ok && one && two && strcmp(one, two) == 0, "%s", ok ? "the stages differ" : e.msg);
	CHECK(st.phases > 0, "no phase reordered: the case tests nothing");
	free(one);
	free(two);
	t_case("lower_plan in record order: the same phases, none faster than the schedule's, one slower");
	Lowering lw = lowering_default();
	lw.schedule = 0;
	int ok2 = lower_plan(&c, &lw, &e) == 0, slower = 0;
	CHECK(ok2 && c.nph == a.nph, "%s: %d and %d phases", ok2 ? "" : e.msg, c.nph, a.nph);
	for (int p = 0; ok && ok2 && p < c.nph && p < a.nph; p++) {
		int64_t sa = phase_cycles(&a, p), sc = phase_cycles(&c, p);
		CHECK(sa <= sc, "phase %d: %lld scheduled, %lld in record order", p, (long long)sa, (long long)sc);
		slower += sa < sc;
	}
	CHECK(slower > 0, "record order is as fast as the schedule in every phase");
	plan_free(&a);
	plan_free(&b);
	plan_free(&c);
	unlink(path);
}

/* The base of tensor name's home (its placement that no step writes), or -1. */
static int64_t home_base(const Plan *pl, const char *name)
{
	int t = plan_find_tensor(pl, name);
	for (int i = 0; t >= 0 && i < pl->np; i++)
		if (pl->p[i].tensor == t && plan_writer(pl, i) < 0)
			return pl->p[i].base;
	return -1;
}

/* A decode step's up weights go on gate's tiles (its sibling: the matmul
 * before it reading the same a), and with no_sibling (the planner's retry
 * when a plan does not fit: planner.c, siblings_apart) they do not. */
static void siblings(void)
{
	Model m;
	Machine mc;
	Err e;
	if (model_load(&m, "share/models/qwen2.5-0.5b-1layer-decode.yaml", &e) ||
	    machine_load(&mc, "share/machines/amp1472.yaml", &e)) {
		t_case("the 1-layer Qwen decode and amp1472 load");
		CHECK(0, "%s", e.msg);
		return;
	}
	for (int apart = 0; apart < 2; apart++) {
		PlanOpts po = { OBJ_MEMORY, 0, NULL, OWN_AUTO, 1, NULL, NULL, NULL, NULL, NULL, NULL, 0, apart, 0, 0, 0, 0, 0 };
		Plan pl;
		t_case(apart ? "with no_sibling, up's weights are not on gate's tiles"
			     : "a decode step's up weights sit on its sibling gate's tiles");
		int ok = plan_build(&pl, &m, &mc, &po, NULL, &e) == 0;
		CHECK(ok, "%s", e.msg);
		if (!ok)
			continue;
		int64_t g = home_base(&pl, "wg"), u = home_base(&pl, "wu");
		CHECK(g >= 0 && u >= 0 && (u == g) == !apart, "wg's home at tile %lld, wu's at %lld", (long long)g,
		      (long long)u);
		plan_free(&pl);
	}
	model_free(&m);
}

int main(void)
{
	irregular_destination();
	coalescing();
	forwarding_order();
	stage_check_faults();
	round_trips();
	one_lowering();
	siblings();
	return t_summary();
}
