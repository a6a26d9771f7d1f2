/* Expansion against a brute-force reference: random small models (clipped
 * shapes, random pinned grids, cast orders and stagings, fp8 and fp16; and
 * ViT-shaped ones with attention windows and a repeat, vitgen.h; decoder
 * layers with grouped-query attention, whose k and v are replicated over
 * two axes, decgen.h) are
 * planned, optionally composed, expanded, and every copy is executed on the
 * machine model; each destination byte must hold the reference byte of its
 * logical element, written exactly once (sim_check_copy). FUZZ=1 runs more. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lower/compose.h"
#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/group.h"
#include "planner/planner.h"
#include "run/sim.h"
#include "t.h"
#include "testlib.h"
#include "vitgen.h"
#include "decgen.h"

/* A random MLP-shaped model; returns the path of its file. */
static void random_model(const char *path, int64_t tiles, char *desc, size_t dn)
{
	int64_t B = t_pick(1, 3), T = t_pick(1, 40), D = t_pick(1, 100), H = t_pick(1, 150);
	const char *f1 = t_rnd() % 3 ? "fp8" : "fp16", *f2 = t_rnd() % 3 ? "fp8" : "fp16";
	int ln = t_rnd() % 2;
	FILE *f = fopen(path, "w");

	fprintf(f, "amp-model: 1\nname: rnd\ninputs:\n  x: {shape: [%lld, %lld, %lld], dtype: fp16}\n",
		(long long)B, (long long)T, (long long)D);
	fprintf(f, "params:\n  w1: {shape: [%lld, %lld], dtype: %s}\n  b1: {shape: [%lld], dtype: fp16}\n"
		"  w2: {shape: [%lld, %lld], dtype: %s}\n", (long long)D, (long long)H, f1,
		(long long)H, (long long)H, (long long)D, f2);
	if (ln)
		fprintf(f, "  s: {shape: [%lld], dtype: fp16}\n  o: {shape: [%lld], dtype: fp16}\n",
			(long long)D, (long long)D);
	fprintf(f, "ops:\n");
	if (ln)
		fprintf(f, "  - {op: layernorm, name: ln, x: x, scale: s, bias: o, out: xn}\n");
	fprintf(f, "  - {op: matmul, name: m1, a: %s, b: w1, bias: b1, out: h}\n", ln ? "xn" : "x");
	fprintf(f, "  - {op: gelu, name: act, x: h, out: g}\n");
	fprintf(f, "  - {op: matmul, name: m2, a: g, b: w2, out: y}\n");
	fprintf(f, "  - {op: add, name: res, a: x, b: y, out: z}\noutputs: [z]\npins:\n");
	const char *ops[2] = { "m1", "m2" };
	int64_t K[2] = { D, H }, N[2] = { H, D };
	const char *fm[2] = { f1, f2 };
	size_t used = (size_t)snprintf(desc, dn, "B%lld T%lld D%lld H%lld %s/%s", (long long)B,
				       (long long)T, (long long)D, (long long)H, f1, f2);
	for (int i = 0; i < 2; i++) {
		int64_t mu = strcmp(fm[i], "fp8") ? 16 : 32;
		int64_t ks = (K[i] + mu - 1) / mu, cg = (N[i] + 15) / 16;
		int64_t r = t_parts(T, t_pick(1, 5)), k = t_parts(ks, t_pick(1, 4)),
			c = t_parts(cg, t_pick(1, 6));
		while (r * k * c > tiles) {
			if (c > 1) c = t_parts(cg, c - 1);
			else if (r > 1) r = t_parts(T, r - 1);
			else k = t_parts(ks, k - 1);
		}
		const char *cast = t_rnd() % 2 ? "early" : "late";
		const char *st = t_rnd() % 2 ? "pack-once" : "direct";
		if (t_rnd() % 4 == 0) {
			fprintf(f, "  %s: {cast: %s}\n", ops[i], cast);   /* planner's grid */
			used += (size_t)snprintf(desc + used, dn - used, " %s:auto/%s", ops[i], cast);
		} else {
			fprintf(f, "  %s: {grid: [%lld, %lld, %lld], cast: %s, staging: %s}\n", ops[i],
				(long long)r, (long long)k, (long long)c, cast, st);
			used += (size_t)snprintf(desc + used, dn - used, " %s:[%lld,%lld,%lld]/%s/%s",
						 ops[i], (long long)r, (long long)k, (long long)c, cast, st);
		}
	}
	fclose(f);
}

/* Field by field (a record's padding is not compared). */
static int same_xfer(const Xfer *a, const Xfer *b)
{
	if (a->kind != b->kind || a->step != b->step || a->len != b->len || a->src_tile != b->src_tile ||
	    a->src_addr != b->src_addr || a->dst_tile != b->dst_tile || a->dst_addr != b->dst_addr ||
	    a->nrecv != b->nrecv || a->recv_step != b->recv_step || a->nloop != b->nloop)
		return 0;
	for (int k = 0; k < a->nloop; k++)
		if (memcmp(&a->loop[k], &b->loop[k], sizeof a->loop[k]))
			return 0;
	return 1;
}

/* Copies expanded before (kept per thread by their placements' shapes)
 * give the requests a fresh expansion gives, moved to the new addresses:
 * every placement moved, expanded with the copies kept, then again with
 * none kept. pl's requests are left as they were. */
static void kept_copies(Plan *pl, const char *desc)
{
	int n0 = pl->nx;
	Xfer *x0 = malloc((size_t)(n0 + 1) * sizeof *x0), *x1;
	Err e;
	if (n0)
		memcpy(x0, pl->x, (size_t)n0 * sizeof *x0);
	for (int i = 0; i < pl->np; i++)
		pl->p[i].addr += 4096;
	pl->nx = 0;
	int rc = plan_expand_steps(pl, 0, pl->ns - 1, &e);
	int n1 = pl->nx;
	x1 = malloc((size_t)(n1 + 1) * sizeof *x1);
	if (n1)
		memcpy(x1, pl->x, (size_t)n1 * sizeof *x1);
	expand_release();
	pl->nx = 0;
	rc = rc || plan_expand_steps(pl, 0, pl->ns - 1, &e);
	t_case("random model: a copy expanded before gives a fresh expansion's requests at new addresses");
	int same = !rc && n1 == pl->nx;
	for (int k = 0; same && k < n1; k++)
		same = same_xfer(&x1[k], &pl->x[k]);
	CHECK(same, "%s: %d kept requests, %d fresh", desc, n1, pl->nx);
	for (int i = 0; i < pl->np; i++)
		pl->p[i].addr -= 4096;
	pl->nx = 0;
	for (int k = 0; k < n0; k++)
		plan_add_xfer(pl, &x0[k]);
	free(x0);
	free(x1);
}

static void random_cases(int n)
{
	char path[] = "/tmp/amp-test-XXXXXX", desc[512];
	int two_axes = 0;
	int fd = mkstemp(path);
	close(fd);
	for (int i = 0; i < n; i++) {
		int64_t tiles = t_pick(8, 200);
		Machine m = test_machine(tiles);
		Model md;
		Plan pl;
		Err e;
		PlanOpts po = { OBJ_CAPACITY, 0, NULL, OWN_AUTO, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 };
		int compose = t_rnd() % 2;

		int kind = (int)(t_rnd() % 3);
		int64_t room;
		if (kind == 0)
			vit_model(path, desc, sizeof desc);
		else if (kind == 1)
			dec_model(path, tiles, 0, desc, sizeof desc, &room);
		else
			random_model(path, tiles, desc, sizeof desc);
		if (model_load(&md, path, &e)) {
			t_case("random model loads");
			CHECK(0, "%s: %s", desc, e.msg);
			continue;
		}
		if (plan_build(&pl, &md, &m, &po, NULL, &e)) {
			model_free(&md);        /* a grid that does not fit: not this test's subject */
			continue;
		}
		if (compose)
			plan_compose(&pl);
		int direct = t_rnd() % 2;
		/* Small fragments so cutting is exercised. */
		pl.machine.max_transfer_bytes = t_pick(16, 600);
		t_case("random model: expansion delivers every destination byte exactly once, unchanged");
		int rc = plan_expand(&pl, &e);
		CHECK(rc == 0, "%s tiles %lld: expand: %s", desc, (long long)tiles, e.msg);
		for (int k = 0; !rc && k < pl.ns; k++)  /* copies to destinations replicated over two axes */
			two_axes += pl.s[k].kind == STEP_COPY && pl.p[pl.s[k].dst].nrep == 2;
		if (!rc) {
			rc = sim_check_stage(&pl, &e);
			CHECK(rc == 0, "%s tiles %lld compose %d: expand: %s", desc, (long long)tiles,
			      compose, e.msg);
		}
		if (!rc)
			kept_copies(&pl, desc);
		t_case("random model: joined and cut fragments deliver every byte exactly once");
		if (!rc) {
			rc = plan_exchange(&pl, &e);
			for (int k = 0; !rc && k < pl.nx; k++)
				CHECK(pl.x[k].kind != X_SEND || pl.x[k].len <= pl.machine.max_transfer_bytes,
				      "%s: fragment of %lld bytes over max_transfer_bytes %lld", desc,
				      (long long)pl.x[k].len, (long long)pl.machine.max_transfer_bytes);
			if (!rc)
				rc = sim_check_stage(&pl, &e);
			CHECK(rc == 0, "%s tiles %lld: exchange: %s", desc, (long long)tiles, e.msg);
		}
		t_case("random model: grouped phases (forwarding or direct) deliver every byte in order");
		if (!rc) {
			rc = plan_group(&pl, direct, &e);
			if (!rc)
				rc = group_check_order(&pl, &e);
			if (!rc)
				rc = sim_check_stage(&pl, &e);
			CHECK(rc == 0, "%s tiles %lld direct %d: group: %s", desc, (long long)tiles, direct, e.msg);
		}
		plan_free(&pl);
		model_free(&md);
	}
	unlink(path);
	t_case("random models: copies to destinations replicated over two axes were expanded and checked");
	CHECK(two_axes >= 5, "only %d such copies in %d models", two_axes, n);
}

int main(void)
{
	const char *fuzz = getenv("FUZZ");
	t_rng = 0x2545F4914F6CDD1Du;
	random_cases(fuzz && *fuzz ? 3000 : 300);
	return t_summary();
}
