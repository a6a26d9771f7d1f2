/* Randomized tiny models (clipped shapes, random pinned grids, cast orders,
 * stagings of a and of the result, fp8 and fp16 weights; a third ViT-shaped with attention,
 * a repeat, a MAP head and key blocks, vitgen.h), planned by the capacity
 * baseline or the memory objective, pass both of amp-run's checks:
 * calibrated, planned, composed, lowered, emitted and executed on the
 * machine model, every phase byte-exact and every output within cosine
 * 0.99 of the FP32 reference. FUZZ=1 runs more. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compose.h"
#include "exchange.h"
#include "expand.h"
#include "group.h"
#include "planner.h"
#include "program.h"
#include "run.h"
#include "t.h"
#include "testlib.h"
#include "vitgen.h"

static uint64_t rng = 0xD1B54A32D192ED03u;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }

static int64_t parts(int64_t n, int64_t want)
{
	if (want > n)
		want = n;
	while (want > 1 && !uniform_ok(n, want))
		want--;
	return want < 1 ? 1 : want;
}

static void model(const char *path, int64_t tiles, char *desc, size_t dn)
{
	int64_t B = pick(1, 2), T = pick(2, 24), D = pick(8, 72), H = pick(8, 96);
	const char *f1 = next() % 3 ? "fp8" : "fp16", *f2 = next() % 3 ? "fp8" : "fp16";
	FILE *f = fopen(path, "w");
	fprintf(f, "amp-model: 1\nname: rnd\ninputs:\n  x: {shape: [%lld, %lld, %lld], dtype: fp16}\n"
		"params:\n  s: {shape: [%lld], dtype: fp16}\n  o: {shape: [%lld], dtype: fp16}\n"
		"  w1: {shape: [%lld, %lld], dtype: %s}\n  b1: {shape: [%lld], dtype: fp16}\n"
		"  w2: {shape: [%lld, %lld], dtype: %s}\nops:\n"
		"  - {op: layernorm, name: ln, x: x, scale: s, bias: o, out: xn}\n"
		"  - {op: matmul, name: m1, a: xn, b: w1, bias: b1, out: h}\n"
		"  - {op: gelu, name: act, x: h, out: g}\n"
		"  - {op: matmul, name: m2, a: g, b: w2, out: y}\n"
		"  - {op: add, name: res, a: x, b: y, out: z}\noutputs: [z]\npins:\n",
		(long long)B, (long long)T, (long long)D, (long long)D, (long long)D, (long long)D,
		(long long)H, f1, (long long)H, (long long)H, (long long)D, f2);
	int64_t K[2] = { D, H }, N[2] = { H, D };
	const char *fm[2] = { f1, f2 };
	size_t u = (size_t)snprintf(desc, dn, "B%lld T%lld D%lld H%lld %s/%s", (long long)B, (long long)T,
				    (long long)D, (long long)H, f1, f2);
	for (int i = 0; i < 2; i++) {
		int64_t mu = strcmp(fm[i], "fp8") ? 16 : 32;
		int64_t r = parts(T, pick(1, 4)), k = parts((K[i] + mu - 1) / mu, pick(1, 3)),
			c = parts((N[i] + 15) / 16, pick(1, 4));
		while (r * k * c > tiles)
			c > 1 ? (c = parts((N[i] + 15) / 16, c - 1)) : (r = parts(T, r - 1));
		const char *cast = next() % 2 ? "early" : "late", *st = next() % 2 ? "pack-once" : "direct";
		const char *out = next() % 2 ? "unpack" : "direct", *red = next() % 2 ? "scatter" : "gather";
		fprintf(f, "  m%d: {grid: [%lld, %lld, %lld], cast: %s, staging: %s, out_staging: %s, reduce: %s}\n",
			i + 1, (long long)r, (long long)k, (long long)c, cast, st, out, red);
		u += (size_t)snprintf(desc + u, dn - u, " m%d:[%lld,%lld,%lld]/%s/%s/%s/%s", i + 1, (long long)r,
				      (long long)k, (long long)c, cast, st, out, red);
	}
	fclose(f);
}

int main(void)
{
	const char *fuzz = getenv("FUZZ");
	int n = fuzz && *fuzz ? 300 : 40;
	char path[] = "/tmp/amp-run-XXXXXX", desc[512];
	int fd = mkstemp(path);
	close(fd);

	for (int i = 0; i < n; i++) {
		int64_t tiles = pick(8, 96);
		Machine mc = test_machine(tiles);
		Model md;
		Plan pl;
		Program prog;
		Scales sc = { NULL, NULL, 0 };
		RunOpts ro = { NULL, (uint64_t)i + 1, 1 };
		/* the capacity baseline, or the default: exact costing (trial lowering) */
		PlanOpts po = { next() % 2 ? OBJ_MEMORY : OBJ_CAPACITY, 0, NULL, OWN_AUTO, 0, NULL };
		Err e;

		if (next() % 3 == 0)
			vit_model(path, desc, sizeof desc);
		else
			model(path, tiles, desc, sizeof desc);
		if (model_load(&md, path, &e)) {
			t_case("random model loads");
			CHECK(0, "%s: %s", desc, e.msg);
			continue;
		}
		if (plan_build(&pl, &md, &mc, &po, NULL, &e)) {
			model_free(&md);
			continue;               /* a pinned grid that does not fit */
		}
		t_case("random model: calibrates");
		CHECK(run_calibrate(&pl, &ro, &sc, &e) == 0, "%s: %s", desc, e.msg);
		plan_free(&pl);
		po.scales = &sc;
		t_case("random model: runs byte-exact on the machine model within cosine 0.99 of FP32");
		int ok = plan_build(&pl, &md, &mc, &po, NULL, &e) == 0;
		CHECK(ok, "%s: plan: %s", desc, e.msg);
		if (ok) {
			if (next() % 2)
				plan_compose(&pl);
			ok = plan_expand(&pl, &e) == 0 && plan_exchange(&pl, &e) == 0 &&
			     plan_group(&pl, (int)(next() % 3), &e) == 0 && program_build(&pl, &prog, &e) == 0;
			CHECK(ok, "%s: lowering: %s", desc, e.msg);
		}
		if (ok) {
			float **val = calloc((size_t)pl.nt, sizeof *val), **ref = calloc((size_t)pl.nt, sizeof *ref);
			int rc = run_data(&pl, &ro, val, &e) || run_program(&prog, &pl, val, &e) ||
				 run_reference(&pl, val, ref, &e);
			CHECK(rc == 0, "%s: %s", desc, e.msg);
			for (int t = 0; !rc && t < pl.nt; t++)
				if (pl.t[t].role == R_OUTPUT) {
					double cs, ma;
					run_compare(val[t], ref[t], tensor_count(&pl.t[t]), &cs, &ma);
					CHECK(cs >= 0.99, "%s: output %s cosine %.5f, max abs %.4g", desc, pl.t[t].name,
					      cs, ma);
				}
			for (int t = 0; t < pl.nt; t++)
				free(val[t]), free(ref[t]);
			free(val);
			free(ref);
			program_free(&prog);
		}
		if (ok || pl.nt)
			plan_free(&pl);
		scales_free(&sc);
		model_free(&md);
	}
	unlink(path);
	return t_summary();
}
