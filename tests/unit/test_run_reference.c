/* test_run_reference: the model's reference is the model's, not the
 * stage's: stage corruptions that run byte-exact pass the stage's own
 * reference and fail the model's (the fixed cases of the former test_run;
 * its random models are test_run_models). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/group.h"
#include "lower/lower.h"
#include "planner/planner.h"
#include "lower/program.h"
#include "run/run.h"
#include "t.h"
#include "testlib.h"

/* The output z's cosine and largest error against both references: the
 * stage's own (from pl's steps) and the model's. */
static void against_both(const Model *md, const Scales *sc, Plan *pl, const Program *prog, double *stage_cos,
			 double *model_cos, double *stage_abs, double *model_abs)
{
	RunOpts ro = { .seed = 7, .quantized = 1 };
	float **val = calloc((size_t)pl->nt, sizeof *val), **ref = calloc((size_t)pl->nt, sizeof *ref);
	ModelRef mr;
	memset(&mr, 0, sizeof mr);
	Err e;
	*stage_cos = *model_cos = -2;
	*stage_abs = *model_abs = 0;
	int z = plan_find_tensor(pl, "z"), mz = -1;
	for (int i = 0; i < md->nt; i++)
		mz = strcmp(md->t[i].name, "z") ? mz : i;
	if (z >= 0 && mz >= 0 && !run_data(pl, &ro, val, &e) && !run_program(prog, pl, &ro, val, &e) &&
	    !run_reference(pl, &ro, val, ref, &e) && !run_model_reference(md, sc, &ro, pl, val, &mr, &e)) {
		run_compare(val[z], ref[z], tensor_count(&pl->t[z]), stage_cos, stage_abs);
		run_compare(val[z], mr.v[mz], tensor_count(&pl->t[z]), model_cos, model_abs);
	}
	for (int t = 0; t < pl->nt; t++)
		free(val[t]), free(ref[t]);
	free(val);
	free(ref);
	model_ref_free(&mr);
}

/* Stage corruptions that run byte-exact: an fp8 weight's scale that
 * flushes it to zero, a layernorm's eps, the residual add reading another
 * tensor. The stage's reference computes from the same corrupted stage
 * and passes them; the model's reference must not: its cosine falls below
 * 0.9, or (eps scales every row alike, which a cosine cannot see) its
 * largest error is over ten times the stage's. */
static void independence(const char *path)
{
	static const char *kinds[] = { "an fp8 weight's scale that flushes it to zero",
				       "a layernorm's eps", "the residual add reading the layernorm's result" };
	FILE *f = fopen(path, "w");
	fprintf(f, "amp-model: 1\nname: ind\ninputs:\n  x: {shape: [2, 16, 64], dtype: fp16}\n"
		"params:\n  s: {shape: [64], dtype: fp16}\n  o: {shape: [64], dtype: fp16}\n"
		"  w: {shape: [64, 64], dtype: fp8}\n"
		"ops:\n  - {op: layernorm, name: ln, x: x, scale: s, bias: o, out: xn, eps: 1e-6}\n"
		"  - {op: matmul, name: mm, a: xn, b: w, out: y}\n"
		"  - {op: add, name: res, a: xn, b: y, out: z}\noutputs: [z]\n");
	fclose(f);
	for (int k = 0; k < 3; k++) {
		Machine mc = test_machine(16);
		Model md;
		Plan pl;
		Program prog;
		Scales sc = { NULL, NULL, 0 };
		RunOpts ro = { .seed = 7, .quantized = 1 };
		PlanOpts po = { OBJ_CAPACITY, 0, &sc, OWN_AUTO, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 };
		Err e;
		double sgood, mgood, sbad, mbad, sa, ma, sab, mab;
		t_case("a stage corruption that runs byte-exact fools the stage's reference, not the model's");
		int ok = model_load(&md, path, &e) == 0 && run_calibrate(&md, &ro, &sc, &e) == 0 &&
			 plan_build(&pl, &md, &mc, &po, NULL, &e) == 0;
		ok = ok && lower_plan(&pl, NULL, &e) == 0 && program_build(&pl, &prog, &e) == 0;
		CHECK(ok, "%s: %s", kinds[k], e.msg);
		if (!ok)
			continue;
		against_both(&md, &sc, &pl, &prog, &sgood, &mgood, &sa, &ma);
		CHECK(sgood >= 0.99 && mgood >= 0.99, "%s: the faithful stage: cosine %.5f (stage), %.5f (model)",
		      kinds[k], sgood, mgood);
		if (k == 0) {
			int w = plan_find_tensor(&pl, "w");
			pl.t[w].scale += 40;
		}
		for (int st = 0; st < pl.ns; st++) {
			Step *x = &pl.s[st];
			if (k == 1 && x->kind == STEP_COMPUTE && x->compute == C_LAYERNORM)
				x->eps = 4;
			if (k == 2 && x->kind == STEP_COMPUTE && x->compute == C_ADD && !strcmp(x->op, "res"))
				x->in[0] = x->in[1];    /* z = y + y */
		}
		program_free(&prog);
		CHECK(program_build(&pl, &prog, &e) == 0, "%s: %s", kinds[k], e.msg);
		against_both(&md, &sc, &pl, &prog, &sbad, &mbad, &sab, &mab);
		CHECK(sbad >= 0.99, "%s: the stage's reference should follow the stage: cosine %.5f", kinds[k], sbad);
		CHECK(mbad < 0.9 || mab > 10 * sab, "%s: the model's reference passed it: cosine %.5f, "
		      "largest error %.4g (the stage's %.4g)", kinds[k], mbad, mab, sab);
		program_free(&prog);
		plan_free(&pl);
		scales_free(&sc);
		model_free(&md);
	}
}

int main(void)
{
	char path[] = "/tmp/amp-run-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	independence(path);
	unlink(path);
	return t_summary();
}
