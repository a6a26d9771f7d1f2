/* test_run_models: randomized tiny models (clipped shapes, random pinned
 * grids, cast orders, stagings of a (pack-once, direct, spread where the
 * grid allows) and of
 * the result, fp8 and fp16 weights; a third ViT-shaped with attention,
 * a repeat, a MAP head and key blocks, vitgen.h), planned by the capacity
 * baseline or the memory objective, pass both of amp-run's checks:
 * calibrated, planned, composed, lowered, emitted and executed on the
 * machine model, every phase byte-exact and every output within cosine
 * 0.99 of the FP32 reference. FUZZ=1 runs more. (The fixed cases:
 * test_run_reference and test_run_kernels.) */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lower/compose.h"
#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/group.h"
#include "lower/lower.h"
#include "base/num.h"
#include "planner/planner.h"
#include "lower/program.h"
#include "run/run.h"
#include "lower/schedule.h"
#include "t.h"
#include "testlib.h"
#include "vitgen.h"
#include "decgen.h"
#include "run/run_int.h"

#include <math.h>

static uint64_t rng = 0xD1B54A32D192ED03u;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }

/* Returns the first position of its rope's rows (a head model's), or -1. */
static int64_t model(const char *path, int64_t tiles, char *desc, size_t dn)
{
	/* A quarter are one-token steps over a batch of up to 8 rows (a
	 * decode step's shape): norm vectors resident on the owners, and
	 * reduce scatter cutting the batch in fewer parts than K. */
	int64_t T = next() % 4 ? pick(2, 24) : 1, B = T == 1 ? pick(2, 8) : pick(1, 2);
	int64_t D = pick(8, 72), H = pick(8, 96);
	const char *f1 = next() % 3 ? "fp8" : "fp16", *f2 = next() % 3 ? "fp8" : "fp16";
	int gated = next() % 2 == 0;    /* the decoders' block: rmsnorm, silu(m1) * m3 */
	/* Most one-token steps are gated, and three in four of those go on
	 * to a final norm and a head, so that the residual is no output: the
	 * residual stream, both norms and the adds then own their rows wide
	 * (column blocks, each norm through its rows' sums of squares) when
	 * D leaves two blocks. Drawn from a stream of their own, so that the
	 * other cases stay the ones they were. */
	static uint64_t rng2 = 0x9E3779B97F4A7C15u;
	rng2 ^= rng2 << 13, rng2 ^= rng2 >> 7, rng2 ^= rng2 << 17;
	gated |= T == 1 && rng2 % 4 != 0;
	/* One in four multi-token models of one batch entry (a prefill's
	 * shape) takes the head too, wider: their rows leave tiles over, so
	 * the residual stream may be owned wide in blocks of several rows
	 * (formats/plan.md, "Wide activations") */
	int rows = T > 1 && (rng2 >> 56) % 4 == 0;
	gated |= rows;
	int head = (gated && T == 1 && (rng2 >> 8) % 4 != 0) || rows;
	int il = head && (rng2 >> 50) % 2;      /* its pairs interleaved: on any cut of whole pairs */
	/* the head rotates whole heads of 16 or 32 columns of the final norm's
	 * rows (those past the last whole head unrotated) at a random position */
	int64_t hd = 16 << ((rng2 >> 24) % 2), at = (int64_t)((rng2 >> 32) % 1000);
	/* half the one-token steps add a bias at m2, left to the planner,
	 * whose reduction may then land on the residual stream's owners: the
	 * bias follows it */
	int b2 = T == 1 && (rng2 >> 44) % 2;
	if (head) {
		D = 48 + (int64_t)((rng2 >> 16) % 89);
		B = B * 16 <= tiles ? B : tiles / 16 > 1 ? tiles / 16 : 1;     /* rows the tiles can widen */
	}
	if (rows)       /* 12 to 16 units of 16 columns, rows x 2.9 tiles: one row an owner wastes a third */
		D = 192 + (int64_t)((rng2 >> 16) % 65), B = 1, T = tiles * 10 / 29 > 2 ? tiles * 10 / 29 : 2;
	FILE *f = fopen(path, "w");
	char pos[80] = "";
	if (head)
		snprintf(pos, sizeof pos, "  pos: {shape: [%lld, %lld, 1], dtype: int32}\n", (long long)B, (long long)T);
	fprintf(f, "amp-model: %d\nname: rnd\ninputs:\n  x: {shape: [%lld, %lld, %lld], dtype: fp16}\n%s"
		"params:\n  s: {shape: [%lld], dtype: fp16}\n  o: {shape: [%lld], dtype: fp16}\n"
		"  w1: {shape: [%lld, %lld], dtype: %s}\n  b1: {shape: [%lld], dtype: fp16}\n"
		"  w2: {shape: [%lld, %lld], dtype: %s}\n",
		il ? 7 : gated ? 4 : 3, (long long)B, (long long)T, (long long)D, pos, (long long)D, (long long)D, (long long)D,
		(long long)H, f1, (long long)H, (long long)H, (long long)D, f2);
	if (head)
		fprintf(f, "  w4: {shape: [%lld, 16], dtype: fp16}\n", (long long)D);
	if (b2)
		fprintf(f, "  b2: {shape: [%lld], dtype: fp16}\n", (long long)D);
	if (gated)
		fprintf(f, "  w3: {shape: [%lld, %lld], dtype: %s}\nops:\n"
			"  - {op: rmsnorm, name: ln, x: x, scale: s, eps: 1e-5, out: xn}\n"
			"  - {op: matmul, name: m1, a: xn, b: w1, bias: b1, out: h}\n"
			"  - {op: matmul, name: m3, a: xn, b: w3, out: u}\n"
			"  - {op: silu, name: act, x: h, out: g0}\n"
			"  - {op: mul, name: gate, a: g0, b: u, out: g}\n",
			(long long)D, (long long)H, f1);
	else
		fprintf(f, "ops:\n  - {op: layernorm, name: ln, x: x, scale: s, bias: o, out: xn}\n"
			"  - {op: matmul, name: m1, a: xn, b: w1, bias: b1, out: h}\n"
			"  - {op: gelu, name: act, x: h, out: g}\n");
	fprintf(f, "  - {op: matmul, name: m2, a: g, b: w2%s, out: y}\n"
		"  - {op: add, name: res, a: x, b: y, out: z}\n", b2 ? ", bias: b2" : "");
	if (head)
		fprintf(f, "  - {op: rmsnorm, name: ln2, x: z, scale: s, eps: 1e-5, out: zn}\n"
			"  - {op: rope, name: rot, x: zn, positions: pos, heads: %lld, head_dim: %lld,%s theta: 10000, "
			"out: zr}\n"
			"  - {op: matmul, name: m4, a: zr, b: w4, out: zo}\noutputs: [zo]\npins:\n",
			(long long)(D / hd), (long long)hd, il ? " pairs: interleaved," : "");
	else
		fprintf(f, "outputs: [z]\npins:\n");
	int64_t K[2] = { D, H }, N[2] = { H, D };
	const char *fm[2] = { f1, f2 };
	size_t u = (size_t)snprintf(desc, dn, "B%lld T%lld D%lld H%lld %s/%s%s%s", (long long)B, (long long)T,
				    (long long)D, (long long)H, f1, f2, gated ? " gated" : "", head ? il ? " head(il)" : " head" : "");
	for (int i = 0; i < 2; i++) {
		int64_t mu = strcmp(fm[i], "fp8") ? 16 : 32;
		int64_t r = t_parts(T, pick(1, 4)), k = t_parts((K[i] + mu - 1) / mu, pick(1, 3)),
			c = t_parts((N[i] + 15) / 16, pick(1, 4));
		while (r * k * c > tiles)
			c > 1 ? (c = t_parts((N[i] + 15) / 16, c - 1)) : (r = t_parts(T, r - 1));
		static const char *sts[3] = { "pack-once", "direct", "spread" };
		const char *cast = next() % 2 ? "early" : "late", *st = sts[next() % 3];
		int64_t sk = ((K[i] + mu - 1) / mu + k - 1) / k;        /* strips per K block */
		for (int64_t cc = c; !strcmp(st, "spread") && cc <= (N[i] + 15) / 16 && r * k * cc <= tiles; cc++)
			if (cc > 1 && sk % cc == 0 && (K[i] + sk / cc * mu - 1) / (sk / cc * mu) == k * cc &&
			    uniform_ok((N[i] + 15) / 16, cc)) {
				c = cc;         /* the first cols from c up that spread */
				break;
			}
		if (!strcmp(st, "spread") && (c < 2 || sk % c || (K[i] + sk / c * mu - 1) / (sk / c * mu) != k * c))
			st = "pack-once";       /* no grid near it can spread */
		const char *out = next() % 2 ? "unpack" : "direct", *red = next() % 2 ? "scatter" : "gather";
		if (b2 && i == 1) {     /* the planner's own (the draws made all the same) */
			u += (size_t)snprintf(desc + u, dn - u, " m2:auto");
			continue;
		}
		fprintf(f, "  m%d: {grid: [%lld, %lld, %lld], cast: %s, staging: %s, out_staging: %s, reduce: %s}\n",
			i + 1, (long long)r, (long long)k, (long long)c, cast, st, out, red);
		u += (size_t)snprintf(desc + u, dn - u, " m%d:[%lld,%lld,%lld]/%s/%s/%s/%s", i + 1, (long long)r,
				      (long long)k, (long long)c, cast, st, out, red);
	}
	fclose(f);
	return head ? at : -1;
}

/* run_program's own checks of a program's rows against the plan it is
 * given (a program read from a file has had them compared with its STAGE
 * already; one built or patched in memory has not): a RECV whose peer or
 * length is not the one the schedule needs is refused; a RECV address whose
 * receive ends exactly at the top of SRAM is in SRAM (the run fails
 * elsewhere, for the bytes it misplaces), one byte further is not. */
static void patched_rows(const Plan *pl, Program *prog, const char *desc)
{
	int ei = -1;            /* an entry whose row starts with a RECV at a new address */
	for (int i = 0; i < prog->nent && ei < 0; i++) {
		const Entry *en = &prog->ent[i];
		const uint8_t *row = prog->row[en->row];
		if (en->npatch[0] == 0 && en->npatch[2] > 0 && prog->row_len[en->row] >= 16 && row[8] == 4)
			ei = i;
	}
	if (ei < 0)
		return;
	const Entry *en = &prog->ent[ei];
	const uint8_t *row = prog->row[en->row];
	int64_t len = row[12] | row[13] << 8 | row[14] << 16 | (int64_t)row[15] << 24;
	uint32_t *peer = &prog->patches[en->patch], *addr = &prog->patches[en->patch + en->npatch[1]];
	uint32_t peer0 = *peer, addr0 = *addr;
	int64_t sram = pl->machine.sram_bytes;
	uint8_t *lenp = prog->row[en->row] + 12, len0 = lenp[0];
	for (int k = 0; k < 4; k++) {
		RunOpts ro = { .seed = 3, .quantized = 1 };
		float **val = calloc((size_t)pl->nt, sizeof *val);
		Err e = { "" };
		if (k == 0)
			*peer = (uint32_t)((peer0 + 1) % (uint32_t)pl->machine.tiles);
		else if (k < 3)
			*addr = (uint32_t)(sram - len + (k == 2));
		else
			lenp[0] = (uint8_t)(len0 ^ 2);  /* another length (the row is shared: every entry of it) */
		int rc = run_data(pl, &ro, val, &e) || run_program(prog, pl, &ro, val, &e);
		if (k == 0) {
			t_case("run_program refuses a RECV from a tile that is not the sender");
			CHECK(rc && strstr(e.msg, "is not the receive of"), "%s: %s", desc, rc ? e.msg : "passed");
		} else if (k == 1) {
			t_case("run_program takes a receive that ends exactly at the top of SRAM as in SRAM, "
			       "and names the bytes it misplaces");
			CHECK(rc && strstr(e.msg, "a receive writes bytes") && !strstr(e.msg, "out of SRAM"), "%s: %s",
			      desc, rc ? e.msg : "passed");
		} else if (k == 2) {
			t_case("run_program refuses a receive one byte past the top of SRAM");
			CHECK(rc && strstr(e.msg, "out of SRAM"), "%s: %s", desc, rc ? e.msg : "passed");
		} else {
			t_case("run_program refuses a RECV of another length than the schedule's");
			CHECK(rc && strstr(e.msg, "is not the receive of"), "%s: %s", desc, rc ? e.msg : "passed");
		}
		*peer = peer0, *addr = addr0, lenp[0] = len0;
		for (int t = 0; t < pl->nt; t++)
			free(val[t]);
		free(val);
	}
}

/* amp-run counts writes (run_exchange.c, count_writes), whatever the
 * bytes' values: on a plan whose run passed, a send record repeated (each
 * byte it writes written twice, with the same value) or a multicast that
 * loses its last receiver (a shard never written) is refused with that
 * named, from a program built from the edited plan (its rows agree). */
static int counted[2];  /* the cases counted_writes ran: a repeated send, a lost receiver */

static void counted_writes(const Plan *pl, const char *desc)
{
	int dup = -1, lose = -1;
	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind != X_SEND)
			continue;
		dup = dup < 0 ? i : dup;
		if (lose < 0 && x->nrecv > 1 && x->nloop == 0)
			lose = i;
	}
	for (int k = 0; k < 2; k++) {
		int i = k ? lose : dup;
		if (i < 0)
			continue;
		Plan q;
		Program prog;
		Err e = { "" };
		plan_dup(&q, pl);
		Xfer *x = malloc((size_t)(pl->nx + 1) * sizeof *x);
		memcpy(x, pl->x, (size_t)(i + 1) * sizeof *x);
		memcpy(x + i + 1 + !k, pl->x + i + 1, (size_t)(pl->nx - i - 1) * sizeof *x);
		if (!k)
			x[i + 1] = x[i];        /* the record twice */
		else
			x[i].nrecv--;           /* the last receiver lost */
		q.nx = 0;
		for (int j = 0; j < pl->nx + !k; j++)
			plan_add_xfer(&q, &x[j]);
		free(x);
		RunOpts ro = { .seed = 3, .quantized = 1 };
		float **val = calloc((size_t)q.nt, sizeof *val);
		int rc = program_build(&q, &prog, &e);
		if (!rc) {
			rc = run_data(&q, &ro, val, &e) || run_program(&prog, &q, &ro, val, &e);
			program_free(&prog);
		}
		counted[k]++;
		t_case(k ? "amp-run refuses a multicast that lost a receiver: the shard's bytes written 0 times"
			 : "amp-run refuses a send record repeated: its bytes written twice, with the same values");
		CHECK(rc && strstr(e.msg, k ? "written 0 times (missing)" : "written twice (overwritten)"),
		      "%s: record %d: %s", desc, i, rc ? e.msg : "passed");
		for (int t = 0; t < q.nt; t++)
			free(val[t]);
		free(val);
		plan_free(&q);
	}
}

/* The per-op check on a run that passed: every op with a compute step
 * ran, each within its tolerance; and faults made of the reference's own
 * values fail at their op: a layernorm that returns its input, or runs
 * with gamma and beta swapped; an attention with half its heads; an add
 * that adds its input to itself; a gelu that is the identity; an rmsnorm
 * that returns its input, a silu that is the identity and a mul that
 * returns its first operand. The exact
 * result on the same inputs passes. */
static int faults[OP_COUNT];     /* per op kind, the faults opcheck_cases asserted */

static void opcheck_cases(const Model *md, OpCheck *oc, ModelRef *mr, const char *desc)
{
	const OpCheckResult *r;
	int n = run_opcheck_ops(oc, &r), checked = 0;
	for (int k = 0; k < n; k++) {
		checked += r[k].runs > 0;
		t_case("per-op check: every op within its tolerance on a faithful lowering");
		CHECK(r[k].runs == 0 || r[k].worst <= r[k].tol, "%s: op %s: %.3g over %.3g", desc, r[k].op,
		      r[k].worst, r[k].tol);
	}
	t_case("per-op check: every op with a compute step was checked");
	CHECK(checked == run_opcheck_checked(oc) && checked > 0, "%s: %d of %d", desc, checked,
	      run_opcheck_checked(oc));
	for (int k = 0; k < md->nops; k++) {
		const MOp *op = &md->ops[k];
		float *in[3] = { NULL, NULL, NULL };
		int have = r[k].runs > 0;
		for (int j = 0; j < op->nin; j++)
			if (op->in[j] >= 0) {
				in[j] = mr->v[op->in[j]];
				have &= in[j] != NULL;
			}
		if (!have || op->kind == OP_MATMUL || op->kind == OP_CAST || op->kind == OP_BROADCAST)
			continue;
		int64_t cnt = model_elements(&md->t[op->out]);
		/* the exact result on these inputs: the reference's own op */
		ModelRef x;
		memset(&x, 0, sizeof x);
		x.n = md->nt;
		x.v = calloc((size_t)md->nt, sizeof *x.v);
		x.own = calloc((size_t)md->nt, 1);
		for (int j = 0; j < op->nin; j++)
			if (op->in[j] >= 0)
				x.v[op->in[j]] = in[j];
		if (op->kind == OP_APPEND)      /* its rows written over the final state (as run_opcheck does) */
			x.v[op->out] = mr->v[op->out];
		Model alt = *md;                /* attention with half the heads, when it can */
		MOp *ops = malloc((size_t)md->nops * sizeof *ops);
		memcpy(ops, md->ops, (size_t)md->nops * sizeof *ops);
		alt.ops = ops;
		run_model_op(md, &x, k, 0);
		float *exact = x.v[op->out];
		Err e;
		t_case("per-op check: the op's exact result on the machine's inputs passes");
		CHECK(run_opcheck_op(oc, k, 0, in, exact, &e) == 0, "%s: op %s: %s", desc, op->name, e.msg);
		float *bad = malloc((size_t)cnt * sizeof *bad);
		int64_t nin0 = model_elements(&md->t[op->in[0]]);
		const char *what = NULL;
		float *swapped[3] = { in[0], in[2], in[1] };
		/* faults that return the op's first operand as its result */
		static const char *ident[OP_COUNT] = {
			[OP_LAYERNORM] = "a layernorm that returns its input", [OP_GELU] = "a gelu that is the identity",
			[OP_RMSNORM] = "an rmsnorm that returns its input", [OP_SILU] = "a silu that is the identity",
			[OP_MUL] = "a mul that returns its first operand", [OP_ROPE] = "a rope that returns its input",
		};
		if (ident[op->kind]) {
			what = ident[op->kind];
			memcpy(bad, in[0], (size_t)cnt * sizeof *bad);
		}
		switch (op->kind) {
		case OP_ADD:
			what = "an add of its input to itself";
			for (int64_t i = 0; i < cnt; i++)
				bad[i] = in[0][i] + in[0][i % nin0];
			break;
		case OP_ATTENTION:
			/* half the heads (when k and v have one head per q head), or
			 * a causal attention without its mask */
			if ((op->heads % 2 == 0 && op->kv_heads == op->heads) || op->causal) {
				if (op->causal) {
					what = "a causal attention without its mask";
					ops[k].causal = 0;
					ops[k].in[2] = -1;      /* nor its positions */
				} else {
					what = "an attention with half its heads";
					ops[k].heads = ops[k].kv_heads = op->heads / 2;
				}
				ModelRef y = x;
				y.v = calloc((size_t)md->nt, sizeof *y.v);
				y.own = calloc((size_t)md->nt, 1);
				for (int j = 0; j < op->nin; j++)
					if (op->in[j] >= 0)
						y.v[op->in[j]] = in[j];
				run_model_op(&alt, &y, k, 0);
				memcpy(bad, y.v[op->out], (size_t)cnt * sizeof *bad);
				free(y.v[op->out]);
				free(y.v);
				free(y.own);
			}
			break;
		case OP_APPEND: {               /* its rows as zeros */
			float *zero = calloc((size_t)nin0, sizeof *zero);
			ModelRef y = x;
			y.v = calloc((size_t)md->nt, sizeof *y.v);
			y.own = calloc((size_t)md->nt, 1);
			y.v[op->in[0]] = zero, y.v[op->in[1]] = in[1], y.v[op->out] = mr->v[op->out];
			run_model_op(md, &y, k, 0);
			memcpy(bad, y.v[op->out], (size_t)cnt * sizeof *bad);
			what = "an append that writes zero rows";
			free(y.v[op->out]);
			free(y.v);
			free(y.own);
			free(zero);
			break;
		}
		default:
			break;
		}
		/* a fault that moves the result by more than 4x the op's tolerance
		 * (half of an attention's heads may not, on two near-equal keys),
		 * the tolerance from docs/machine.md §8, not from the check: twice
		 * the unit roundoff of the result's format plus fp32 arithmetic's */
		Format of = md->t[op->out].dtype;
		double u = of == FMT_FP8 ? 1.0 / 16 : of == FMT_FP16 ? 1.0 / 2048 : 1.0 / 16777216;
		double tol = 2 * (u + 1.0 / 65536), dd = 0, nn = 0;
		for (int64_t i = 0; what && i < cnt; i++)
			dd += ((double)bad[i] - exact[i]) * ((double)bad[i] - exact[i]), nn += (double)exact[i] * exact[i];
		if (what && sqrt(dd) > 4 * tol * sqrt(nn)) {
			t_case("per-op check: a fault at an op fails at that op");
			int rc = run_opcheck_op(oc, k, 0, in, bad, &e);
			CHECK(rc != 0 && strstr(e.msg, op->name), "%s: op %s, %s: passed", desc, op->name, what);
			faults[op->kind]++;
		}
		if (op->kind == OP_LAYERNORM) {
			t_case("per-op check: a layernorm with gamma and beta swapped fails");
			CHECK(run_opcheck_op(oc, k, 0, swapped, exact, &e) != 0, "%s: op %s passed", desc, op->name);
		}
		free(bad);
		free(exact);
		free(x.v);
		free(x.own);
		free(ops);
	}
}

/* After a run that appended T rows per batch entry at positions
 * at .. at + T - 1 to a cache that held kv0: every other row of the
 * machine's state is kv0's, bit for bit, and the appended rows are not
 * (brute force over every row). */
static void cache_rows(const Plan *pl, float *const *val, const float *kv0, int64_t at, const char *desc, int *appended)
{
	int t = plan_find_tensor(pl, "kvc"), x = plan_find_tensor(pl, "kk");
	const PTensor *c = &pl->t[t];
	int64_t B = c->shape[0], P = c->shape[1], W = c->shape[2], T = pl->t[x].shape[1];
	t_case("cache: rows outside the appended positions keep their values, bit for bit; appended rows change");
	int kept = 1, changed = 0;
	for (int64_t b = 0; b < B; b++)
		for (int64_t p = 0; p < P; p++) {
			int same = !memcmp(val[t] + (b * P + p) * W, kv0 + (b * P + p) * W, (size_t)W * sizeof *kv0);
			if (p >= at && p < at + T)
				changed += !same;
			else
				kept &= same;
		}
	CHECK(kept && changed > 0, "%s: rows kept %d, appended rows changed %d of %lld", desc, kept, changed,
	      (long long)(B * T));
	(*appended)++;
}

int main(void)
{
	const char *fuzz = getenv("FUZZ");
	int n = fuzz && *fuzz ? 300 : 64, scheduled = 0, spread = 0, causal_blocks = 0, causal_one = 0, grouped = 0, spread_merges = 0;
	int segmented = 0;
	int wide_rows = 0;
	unsigned fused = 0;             /* kinds with a fused cast: rmsnorm 1, mul 2, gelu or silu 4 */
	int homes = 0, chunked = 0, narrow = 0, long_blocks = 0, wide_norms = 0, resident = 0, wide_ropes = 0, il_ropes = 0, landed = 0, merged = 0, biased = 0;
	int appended = 0, grid_ropes = 0, layerscales = 0;
	char path[] = "/tmp/amp-run-XXXXXX", desc[512];
	int fd = mkstemp(path);
	close(fd);

	/* after the n, 12 more: decode layers attending on their cache's home */
	for (int i = 0; i < n + 12; i++) {
		int64_t tiles = pick(8, 96);
		Machine mc = test_machine(tiles);
		Model md;
		Plan pl;
		Program prog;
		Scales sc = { NULL, NULL, 0 };
		RunOpts ro = { .seed = (uint64_t)i + 1, .quantized = 1 };
		/* the capacity baseline, or exact costing (trial lowering): the
		 * default's fewest cycles, or memory's headroom */
		static const Objective objs[] = { OBJ_CYCLES, OBJ_MEMORY, OBJ_CAPACITY };
		PlanOpts po = { objs[next() % 3], 0, NULL, OWN_AUTO, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 };
		Err e;
		if (i >= n && i % 2)    /* half the homes as many blocks as the tiles allow */
			po.state_blocks = INT32_MAX;

		int kind = i < n ? (int)(next() % 4) : 1;
		int64_t room = -1, at = -1;
		Carry carry;
		memset(&carry, 0, sizeof carry);
		if (kind == 0)
			vit_model(path, desc, sizeof desc);
		else if (kind == 1)
			dec_model(path, tiles, i >= n, desc, sizeof desc, &room);
		else
			at = model(path, tiles, desc, sizeof desc);
		if (model_load(&md, path, &e)) {
			t_case("random model loads");
			CHECK(0, "%s: %s", desc, e.msg);
			continue;
		}
		if (plan_build(&pl, &md, &mc, &po, NULL, &e)) {
			model_free(&md);
			if (getenv("AMP_TEST_VERBOSE"))
				fprintf(stderr, "not planned: %s: %s\n", desc, e.msg);
			continue;               /* a pinned grid that does not fit */
		}
		const MTensor *kvc = room >= 0 ? &md.t[model_find(&md, "kvc")] : NULL;
		float *kv0 = NULL;
		if (kvc) {      /* a cache some earlier run filled: the run appends at a random position */
			int64_t nk = kvc->shape[0] * kvc->shape[1] * kvc->shape[2];
			kv0 = malloc((size_t)nk * sizeof *kv0);
			for (int64_t q = 0; q < nk; q++)
				kv0[q] = quantize((float)((int64_t)(next() % 2001) - 1000) / 500, FMT_FP16, 0);
			carry_keep(&carry, "kvc", kv0, nk, 0);
			carry_keep(&carry, "kvc", kv0, nk, 1);
			ro.carry = &carry;
			ro.position = pick(0, room);
			snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " at %lld", (long long)ro.position);
		}
		if (at >= 0) {          /* a head model's rope rotates by position */
			ro.position = at;
			snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " rope at %lld", (long long)at);
		}
		t_case("random model: calibrates from the model alone");
		CHECK(run_calibrate(&md, &ro, &sc, &e) == 0, "%s: %s", desc, e.msg);
		plan_free(&pl);
		po.scales = &sc;
		t_case("random model: plans and lowers with its calibrated scales");
		int ok = plan_build(&pl, &md, &mc, &po, NULL, &e) == 0;
		CHECK(ok, "%s: plan: %s", desc, e.msg);
		/* as planned, before amp-compose may join a copy back into the next copy */
		for (int s = 0; ok && s < pl.ns; s++) {    /* reductions and merges whose result another */
			const Step *st = &pl.s[s];              /* op's compute reads where they wrote it */
			int read = 0;
			if (st->kind != STEP_COMPUTE || (st->compute != C_REDUCE && st->compute != C_MERGE))
				continue;
			for (int c = 0; c < pl.ns; c++)
				for (int k = 0; pl.s[c].kind == STEP_COMPUTE && k < pl.s[c].nin; k++)
					read |= pl.s[c].in[k] == st->out && strcmp(pl.s[c].op, st->op) != 0;
			int back = 0;                   /* a merge's result copied back to other owners */
			for (int c = 0; c < pl.ns; c++)
				back |= pl.s[c].kind == STEP_COPY && pl.s[c].operand == OPD_OUT && pl.s[c].src == st->out;
			landed += read && st->compute == C_REDUCE;
			biased += read && st->compute == C_REDUCE && st->nin > 1;
			merged += (read || !back) && st->compute == C_MERGE;
		}
		if (ok) {
			ScheduleStats ss = { 0, 0, 0 };
			Lowering lw = lowering_default();
			lw.compose = (int)(next() % 2);
			lw.weights = (int)(next() % 3);
			lw.schedule = i % 4 != 0;       /* record order, or scheduled (every faster order taken) */
			lw.per_record = 0, lw.stats = &ss;
			ok = lower_plan(&pl, &lw, &e) == 0 && program_build(&pl, &prog, &e) == 0;
			scheduled += ss.phases;
			CHECK(ok, "%s: lowering: %s", desc, e.msg);
		}
		if (ok) {
			float **val = calloc((size_t)pl.nt, sizeof *val), **ref = calloc((size_t)pl.nt, sizeof *ref);
			ModelRef mr, mr0;
			memset(&mr, 0, sizeof mr);
			memset(&mr0, 0, sizeof mr0);
			RunOpts ro0 = ro;               /* nothing shared: every instance made again */
			ro.cache = run_cache_new();
			OpCheck *oc = ro.opcheck = run_opcheck_new(&md, &sc, &pl, &ro);
			int rc = run_data(&pl, &ro, val, &e) || run_program(&prog, &pl, &ro, val, &e) ||
				 run_reference(&pl, &ro, val, ref, &e) ||
				 run_model_reference(&md, &sc, &ro, &pl, val, &mr, &e) ||
				 run_model_reference(&md, &sc, &ro0, &pl, val, &mr0, &e);
			CHECK(rc == 0, "%s: %s", desc, e.msg);
			ro.opcheck = NULL;
			if (!rc && kvc)
				cache_rows(&pl, val, kv0, ro.position, desc, &appended);
			if (!rc)
				opcheck_cases(&md, oc, &mr, desc);
			if (!rc && i < 8)
				patched_rows(&pl, &prog, desc);
			if (!rc && i < 8)
				counted_writes(&pl, desc);
			run_opcheck_free(oc);
			t_case("random model: the reference decoding the machine's instances is the one making "
			       "them, bit for bit");
			for (int t = 0; !rc && t < md.nt; t++) {
				if (md.t[t].role != T_ACT)
					continue;
				int64_t n = 1;
				for (int k = 0; k < md.t[t].rank; k++)
					n *= md.t[t].shape[k];
				CHECK(mr.v[t] && mr0.v[t] && !memcmp(mr.v[t], mr0.v[t], (size_t)n * sizeof *mr.v[t]),
				      "%s: activation %s", desc, md.t[t].name);
			}
			model_ref_free(&mr0);
			run_cache_free(ro.cache);
			ro.cache = NULL;
			for (int t = 0; !rc && t < pl.nt; t++)
				if (pl.t[t].role == R_OUTPUT) {
					int mt = -1;
					for (int i = 0; i < md.nt; i++)
						mt = strcmp(md.t[i].name, pl.t[t].name) ? mt : i;
					double cs, ma;
					t_case("random model: the model's reference is the stage's, bit for bit, "
					       "when the lowering is faithful");
					CHECK(mt >= 0 && memcmp(mr.v[mt], ref[t], (size_t)tensor_count(&pl.t[t]) *
								sizeof *ref[t]) == 0, "%s: output %s", desc, pl.t[t].name);
					if (mt < 0)
						continue;
					/* (a width under 8, fp8 throughout: too few features for
					 * the output's cosine to mean anything; the per-op checks
					 * hold every op all the same) */
					if (pl.t[t].shape[pl.t[t].rank - 1] < 8)
						continue;
					t_case("random model: runs byte-exact on the machine model within cosine 0.99 of FP32");
					run_compare(val[t], mr.v[mt], tensor_count(&pl.t[t]), &cs, &ma);
					CHECK(cs >= 0.99, "%s: output %s cosine %.5f, max abs %.4g", desc, pl.t[t].name,
					      cs, ma);
				}
			model_ref_free(&mr);
			for (int t = 0; t < pl.nt; t++)
				free(val[t]), free(ref[t]);
			free(val);
			free(ref);
			program_free(&prog);
			for (int g = 0; !rc && g < pl.ng; g++)
				spread += pl.g[g].staging == STAGING_SPREAD;
			for (int s = 0; !rc && s < pl.ns; s++) {   /* row-local steps writing their result's cast */
				const Step *st = &pl.s[s];
				if (st->kind == STEP_COMPUTE && st->nin > 0 &&
				    pl.p[st->out].fmt != pl.p[st->in[0]].fmt && st->compute != C_CAST &&
				    st->compute != C_REDUCE && st->compute != C_MATMUL)
					fused |= 1u << (st->compute == C_RMSNORM ? 0 : st->compute == C_MUL ? 1 :
							st->compute == C_GELU || st->compute == C_SILU ? 2 : 3);
			}
			for (int s = 0; !rc && s < pl.ns; s++)     /* norms over column blocks that ran, */
				if (pl.s[s].kind == STEP_COMPUTE && pl.s[s].compute == C_RMSNORM && pl.s[s].nin == 3) {
					wide_norms++;
					wide_rows += pl.p[pl.s[s].in[0]].block[1] > 1;  /* several rows a tile */
					resident += plan_writer(&pl, pl.s[s].in[1]) < 0;   /* their scales read at home */
				}
			for (int s = 0; !rc && s < pl.ns; s++)     /* and ropes over column blocks of whole heads, */
				wide_ropes += pl.s[s].kind == STEP_COMPUTE && pl.s[s].compute == C_ROPE &&
					      pl.p[pl.s[s].in[0]].split[2] > 1 && !pl.s[s].interleaved;
			for (int s = 0; !rc && s < pl.ns; s++) {   /* 2D ropes and per-channel scales */
				grid_ropes += pl.s[s].kind == STEP_COMPUTE && pl.s[s].compute == C_ROPE &&
					      pl.s[s].rope_grid.rows > 0;
				layerscales += pl.s[s].kind == STEP_COMPUTE && pl.s[s].compute == C_MUL &&
					       pl.p[pl.s[s].in[1]].rank == 1 && !plan_norm_fold(&pl, &pl.s[s]);
			}
			for (int s = 0; !rc && s < pl.ns; s++)     /* or of whole pairs (interleaved) */
				il_ropes += pl.s[s].kind == STEP_COMPUTE && pl.s[s].compute == C_ROPE &&
					    pl.p[pl.s[s].in[0]].split[2] > 1 && pl.s[s].interleaved;
			int attn_steps = 0;                     /* causal attention in segments */
			for (int s = 0; !rc && s < pl.ns; s++)
				attn_steps += pl.s[s].kind == STEP_COMPUTE && pl.s[s].compute == C_ATTENTION;
			segmented += attn_steps > 1;
			for (int s = 0; !rc && s < pl.ns; s++)     /* causal and grouped-query attention that ran */
				if (pl.s[s].kind == STEP_COMPUTE && pl.s[s].compute == C_ATTENTION) {
					int blocks = pl.t[pl.p[pl.s[s].out].tensor].role == R_PARTIAL;
					causal_blocks += pl.s[s].causal && blocks;
					causal_one += pl.s[s].causal && !blocks;
					grouped += pl.s[s].kv_heads < pl.s[s].heads;
					homes += pl.s[s].in[1] == pl.s[s].in[2];  /* on a cache's home, every head */
					chunked += plan_chunks(&pl.s[s]) > 1;
					/* on a home, chunks under 8 columns wide (home_tries) */
					narrow += pl.s[s].in[1] == pl.s[s].in[2] && plan_chunks(&pl.s[s]) > 1 &&
						  plan_head_dim(&pl, &pl.s[s]) < 8 * plan_chunks(&pl.s[s]);
					/* on a home of several positions a block (fewer_state_blocks) */
					long_blocks += pl.s[s].in[1] == pl.s[s].in[2] && pl.p[pl.s[s].in[1]].block[1] > 1;
					/* key blocks of copied keys, each block's tile merging a chunk */
					spread_merges += plan_chunks(&pl.s[s]) > 1 && pl.s[s].in[1] != pl.s[s].in[2];
				}
		}
		if (ok || pl.nt)
			plan_free(&pl);
		scales_free(&sc);
		model_free(&md);
		carry_free(&carry);
		free(kv0);
	}
	t_case("random models: decode steps appended to a cache at random positions and attended over it");
	CHECK(appended >= 3, "only %d random models appended to a cache", appended);
	t_case("random models: phases the schedule reordered ran byte-exact");
	CHECK(scheduled > 0, "no phase of %d random models was reordered", n);
	t_case("random models: causal attention with key blocks and without, and grouped-query attention, ran byte-exact");
	CHECK(causal_blocks >= 2 && causal_one >= 2 && grouped >= 2, "%d causal with key blocks, %d without, %d grouped, "
	      "of %d random models", causal_blocks, causal_one, grouped, n);
	t_case("random models: causal attention in segments (heads outermost, merges cut by rows) ran byte-exact");
	CHECK(segmented >= 2, "%d attentions in segments, of %d random models", segmented, n);
	t_case("random models: attention on a cache's home (every head on a tile, partials chunked) ran byte-exact");
	CHECK(homes >= 2 && chunked >= 1, "%d on a home, %d chunked, of %d random models", homes, chunked, n);
	t_case("random models: attention on a cache's home merging chunks narrower than 8 columns ran byte-exact");
	CHECK(narrow >= 1, "%d on a home with chunks under 8 columns, of %d random models (%d homes, %d long)", narrow, n, homes, long_blocks);
	t_case("random models: attention on a cache's home cut into fewer blocks than the tiles allow ran byte-exact");
	CHECK(long_blocks >= 1, "%d on a home of several positions a block, of %d random models", long_blocks, n);
	t_case("random models: key blocks' partials cut in chunks, each merged on its own block's tile, ran byte-exact");
	CHECK(spread_merges >= 2, "%d attentions merged on every key block's tile, of %d random models", spread_merges, n);
	t_case("random models: rmsnorm over column blocks (rows' sums of squares) and resident norm vectors ran byte-exact");
	CHECK(wide_norms >= 3 && resident >= 3, "%d wide norms, %d resident norm vectors, of %d random models",
	      wide_norms, resident, n);
	t_case("random models: rmsnorm, mul and gelu or silu writing their result's cast (fused casts) ran byte-exact");
	CHECK((fused & 7) == 7, "kinds with a fused cast: %#x of 0x7, of %d random models", fused, n);
	t_case("random models: norms over wide blocks of several token rows ran byte-exact");
	CHECK(wide_rows >= 2, "%d wide norms of several rows a tile, of %d random models", wide_rows, n);
	t_case("random models: GEMM reductions and attention merges written where the next op reads them ran byte-exact");
	CHECK(landed >= 4 && merged >= 1 && biased >= 1, "%d reductions (%d adding a bias) and %d merges read in place, "
	      "of %d random models", landed, biased, merged, n);
	t_case("random models: rope over column blocks of whole heads ran byte-exact");
	CHECK(wide_ropes >= 3, "%d wide ropes of %d random models", wide_ropes, n);
	t_case("random models: rope with interleaved pairs over column blocks ran byte-exact");
	CHECK(il_ropes >= 2, "%d wide interleaved ropes of %d random models", il_ropes, n);
	t_case("random ViTs: 2D ropes by the patch grid and LayerScale ran byte-exact");
	CHECK(grid_ropes >= 2 && layerscales >= 2, "%d grid ropes, %d per-channel scales, of %d random models",
	      grid_ropes, layerscales, n);
	t_case("random models: GEMMs with staging spread ran byte-exact");
	CHECK(spread >= 3, "only %d GEMMs of %d random models spread", spread, n);
	t_case("random models: the per-op check failed a fault at every kind of op that has one");
	for (int k = 0; k < OP_COUNT; k++)
		if (k == OP_LAYERNORM || k == OP_GELU || k == OP_ADD || k == OP_ATTENTION || k == OP_RMSNORM ||
		    k == OP_SILU || k == OP_MUL || k == OP_ROPE || k == OP_APPEND)
			CHECK(faults[k] > 0, "no fault at a %s op of %d random models", op_name((OpKind)k), n);
	t_case("random models: amp-run's count of writes was tried with a repeated send and a lost receiver");
	CHECK(counted[0] >= 3 && counted[1] >= 1, "%d repeated sends and %d lost receivers", counted[0], counted[1]);
	unlink(path);
	return t_summary();
}
