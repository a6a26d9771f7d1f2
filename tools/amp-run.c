/* amp-run: execute a program on the machine model and check it. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "base/num.h"
#include "lower/program.h"
#include "run/run.h"
#include "model/scales.h"
#include "run/sim.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-run [OPTION]... PROGRAM\n"
	"       amp-run --calibrate MODEL -o SCALES [OPTION]...\n"
	"Execute a program written by amp-emit on the machine model: every tile's\n"
	"SRAM, the encoded exchange tables in their order, and the compute steps\n"
	"with the numbers of docs/machine.md §3. Two checks: after every exchange\n"
	"phase each destination holds exactly its tensor's bytes (padding zero),\n"
	"else the first wrong byte is named (tile, phase, offset, tensor,\n"
	"expected, found), and no write (receive, local copy or zero fill) lands\n"
	"outside its step's destination;\n"
	"and each output against an FP32 reference: minimum cosine similarity and\n"
	"maximum absolute error. The reference interprets the model file's ops on\n"
	"data made from the model's tensors and scales, never the stage's records,\n"
	"when the program names its model (--model, or amp-emit --model embedded\n"
	"it); otherwise it follows the stage's own ops, which checks movement and\n"
	"arithmetic only. The report's second line says which one ran. With the\n"
	"model, each op is also checked after its last compute step, every\n"
	"iteration: interpreted in FP32 on the machine's own inputs, within a\n"
	"tolerance derived from its formats (docs/machine.md §8); the third line\n"
	"names the op closest to it, and an op over it fails the run.\n";

static const char epilogue[] =
	"It runs on two threads; AMP_THREADS=1 in the environment runs on one, with\n"
	"the same results. The matrix products use the widest vectors the CPU has\n"
	"(16 floats with AVX-512, else 8; --timing says which); AMP_GEMM_WIDTH=8\n"
	"holds them to 8, with the same results.\n"
	"\n"
	"Exit status: 0 both checks pass, 1 bad input, a wrong byte, an output\n"
	"below --min-cosine or a write error, 2 usage error.\n";

static const Opt opts[] = {
	{ 'D', 0, "data", OPT_ARG, "DIR", "dir",
	  "read inputs and parameters from DIR/<tensor>.npy;\n"
	  "missing ones are generated from the seed (an int32\n"
	  "positions input: each row's token index); int32 ones\n"
	  "(token ids, positions) from int32 files only; a stacked\n"
	  "parameter's [count, ...] (count 1: or one instance's);\n"
	  "a --prefill run once per part of the decode's batch\n"
	  "reads its part of DIR/<input>.npy, which holds the\n"
	  "whole batch's [B, ...]; a tensor whose name holds '/'\n"
	  "is refused, never read outside DIR" },
	{ 'W', 0, "weights", OPT_ARG, "DIR", "dir",
	  "read every parameter from DIR/<tensor>.npy as amp-import\n"
	  "--weights-dir wrote them (before --data), for the\n"
	  "machine and the reference alike; DIR/weights.yaml must\n"
	  "name each with the program's shape and its file's\n"
	  "digest (formats/import.md)" },
	{ 'S', 0, "seed", OPT_ARG, "N", NULL,
	  "seed for generated data (default 1)" },
	{ 'A', 0, "save", OPT_ARG, "DIR", "dir",
	  "write each output as DIR/<tensor>.npy and its FP32\n"
	  "reference as DIR/<tensor>.ref.npy; with --steps or\n"
	  "--prefill every run's, in DIR/prefill.<Q>/ (prefill run\n"
	  "Q) and DIR/step.<S>/ (PROGRAM's run S), from 0; a name\n"
	  "that holds '/' is refused, never written outside" },
	{ 'C', 0, "min-cosine", OPT_ARG, "X", NULL,
	  "exit 1 when an output's (or a carried state's) cosine\n"
	  "is below X (default 0.99)" },
	{ 'N', 0, "steps", OPT_ARG, "N", NULL,
	  "run the program N times (default 1), each run's states\n"
	  "(a KV cache) starting from the previous run's, on the\n"
	  "machine and in the reference alike; from the second\n"
	  "run on, inputs are made from the seed and the run, and\n"
	  "made positions advance by each run's tokens" },
	{ 'P', 0, "position", OPT_ARG, "P", NULL,
	  "the first run's made positions start at P (default 0,\n"
	  "or the prefill's tokens; at most 16777216, as far as\n"
	  "floats hold integers exactly)" },
	{ 'F', 0, "prefill", OPT_ARG, "PROG", "file",
	  "run program PROG (its embedded model) first, at\n"
	  "position 0; PROGRAM's runs continue from its states,\n"
	  "each of one shape (but for the batch) and written by\n"
	  "the same chain of ops: both programs' models must give\n"
	  "it one digest (formats/model.md, state digests; an\n"
	  "fp8 state's scale among them). With --calibrate, PROG\n"
	  "is the prefill's model file" },
	{ 'G', 0, "generate", OPT_ARG, "N", NULL,
	  "--steps N, each run's token ids (an embed's, one per\n"
	  "sequence) the reference's greedy tokens from the run\n"
	  "before, for both (teacher-forced); prints each\n"
	  "sequence's greedy tokens, the machine's and the\n"
	  "reference's, and where they part" },
	{ 'T', 0, "timing", OPT_NOARG, NULL, NULL,
	  "print on stderr the machine's and the reference's matrix\n"
	  "products (GFLOP, GFLOP/s, vector width; CPU seconds and\n"
	  "GFLOP/s per core) and where the wall time went:\n"
	  "data; the machine's setup (encoding, filling SRAM),\n"
	  "compute steps, phases with their checks (tables,\n"
	  "matching them with the schedule, poisoning, moves\n"
	  "(with the poisoning when done tile by tile), checks);\n"
	  "the reference\n"
	  "(which runs alongside the machine; AMP_THREADS=1 runs\n"
	  "everything on one thread)" },
	{ 'M', 0, "model", OPT_ARG, "FILE", "file",
	  "the model the program claims to lower (default: the\n"
	  "one amp-emit --model embedded, if any): its stage must\n"
	  "agree with it (every tensor's shape, dtype and fp8\n"
	  "scale; every compute step derived again from its op\n"
	  "and the plan's choices, field by field: operands,\n"
	  "result and attributes, a matmul's GEMM record's m,\n"
	  "k, n and format; no step for anything else; the file\n"
	  "must be the one amp-plan planned from), else the\n"
	  "first difference is named" },
	{ 'L', 0, "scales", OPT_ARG, "FILE", "file",
	  "with --model: the fp8 scales the program was planned\n"
	  "with (amp-plan --scales), checked the same way" },
	{ 'K', 0, "calibrate", OPT_ARG, "MODEL", "file",
	  "write fp8 scales (formats/scales.md) from the FP32\n"
	  "reference's amax to -o (amp-plan --scales reads them);\n"
	  "with --prefill PMODEL (a model file then), PMODEL's\n"
	  "too, one file for both programs, each name at the\n"
	  "larger scale: a state keeps one range" },
	{ 'm', 'm', "machine", OPT_ARG, "FILE", "machine",
	  "the machine file the program was planned for, or NAME\n"
	  "for the shared machines/NAME.yaml (default:\n"
	  "the file its provenance names, from the shared\n"
	  "machines directory): its machine header must equal\n"
	  "it and the provenance's hash match it, so limits and\n"
	  "rates come from the machine; with --calibrate, the\n"
	  "machine the model must fit (its size is checked)" },
	{ 'o', 'o', "output", OPT_ARG, "FILE", "file",
	  "the scales file for --calibrate" },
	{ 0 },
};

static const OptTool tool = { "amp-run", usage, opts, epilogue };

static void free_vals(float **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Scales from the reference's amax, for a model the machine (machine_path,
 * else the default) can hold: a model over the machine's SRAM is refused
 * before the reference allocates for it. */
/* With a prefill's model too: both calibrated, one file for both
 * programs, each name at the larger of its two scales (a state the
 * prefill fills and the decode reads keeps one range). */
static void calibrate(const char *model_path, const char *prefill, const char *machine_path, const char *out,
		      const RunOpts *ro)
{
	Machine mc;
	Err e;
	Scales sc = { NULL, NULL, 0 };

	if (machine_load(&mc, machine_path ? machine_path : default_machine(), &e) ||
	    run_calibrate_files(model_path, prefill, &mc, ro, &sc, &e) || scales_write(&sc, out, &e))
		fail(&e);
	scales_free(&sc);
}

/* The model (and scales) the program claims to lower: --model (--scales)
 * or the ones amp-emit --model embedded. 0 when there is none. */
static int claimed_model(const Program *prog, const Plan *pl, const char *in_path, const char *model_path,
			 const char *scales_path, Model *md, Scales *sc, int *has_sc, char **name)
{
	Err e;
	const char *p = in_path ? in_path : "<stdin>";
	*has_sc = 0;
	if (model_path) {
		/* the files the program was planned from, by their hashes */
		char *text;
		size_t len;
		for (int k = 0; k < 2; k++) {
			const char *path = k ? scales_path : model_path;
			if (!path)
				continue;
			if (input_slurp(path, &text, &len, &e))
				fail(&e);
			check_planned_file(pl, k ? "scales" : "model", text, len, path, in_path);
			free(text);
		}
		*name = xstrdup(model_path);
		if (model_load(md, model_path, &e) || (scales_path && scales_load(sc, scales_path, &e)))
			fail(&e);
		*has_sc = scales_path != NULL;
		return 1;
	}
	if (!prog->model)
		return 0;
	check_planned_file(pl, "model", prog->model, prog->model_len, "<embedded MODEL>", in_path);
	if (prog->scales)
		check_planned_file(pl, "scales", prog->scales, prog->scales_len, "<embedded SCALES>", in_path);
	*name = xasprintf("%s(MODEL)", p);
	if (model_load_input(md, input_open_mem(*name, prog->model, prog->model_len, &e), &e))
		fail(&e);
	if (prog->scales) {
		char *sname = xasprintf("%s(SCALES)", p);
		if (scales_load_input(sc, input_open_mem(sname, prog->scales, prog->scales_len, &e), &e))
			fail(&e);
		free(sname);
		*has_sc = 1;
	}
	return 1;
}

/* The reference, on its own thread: the model's ops on the model's data
 * when the program names its model, else only the stage's own ops. */
typedef struct {
	const Model *md;        /* NULL: the stage's own ops */
	const Scales *sc;
	const RunOpts *ro;
	const Plan *pl;
	float **val, **ref;
	ModelRef *mr;
	int rc;
	double secs;
	Err e;
} RefJob;

static void *ref_job(void *arg)
{
	RefJob *j = arg;
	double t0 = run_now();
	j->rc = j->md ? run_model_reference(j->md, j->sc, j->ro, j->pl, j->val, j->mr, &j->e)
		      : run_reference(j->pl, j->ro, j->val, j->ref, &j->e);
	j->secs = run_now() - t0;
	return NULL;
}

/* The per-op check's summary: how many ops, and the one closest to its
 * tolerance. */
static void per_op(const OpCheck *c)
{
	const OpCheckResult *r;
	int n = run_opcheck_ops(c, &r), w = -1;
	for (int k = 0; k < n; k++)
		if (r[k].runs && (w < 0 || r[k].worst / r[k].tol > r[w].worst / r[w].tol))
			w = k;
	if (w < 0) {
		printf("per op: no op has a compute step to check\n");
		return;
	}
	printf("per op: %d ops checked after every run, each on the machine's own inputs against its "
	       "FP32 reference; closest to its tolerance: '%s', relative L2 error %.3g of %.3g\n",
	       run_opcheck_checked(c), r[w].op, r[w].worst, r[w].tol);
}

/* A program and what checks it: its plan, the model it claims to lower
 * (and scales), the per-op check. */
typedef struct {
	const char *path;
	Program prog;
	Plan pl;
	Model md;
	Scales sc;
	int has_model, has_sc;
	char *mname;            /* the model's name in messages, or NULL */
	OpCheck *opcheck;
	int ids, logits;        /* an embed's token ids, and the output over its vocabulary (-1: none) */
} Prog;

static void load_prog(Prog *p, const char *path, const char *model_path, const char *scales_path,
		      const char *machine_path, const RunOpts *ro)
{
	Err e;
	int is_prog;
	memset(p, 0, sizeof *p);
	p->path = path;
	p->sc = (Scales){ NULL, NULL, 0 };
	if (program_or_stage(&p->pl, &p->prog, &is_prog, path, &e))
		fail(&e);
	if (!is_prog) {
		errf(&e, "'%s': not a program (amp-emit writes one from a grouped stage)", path ? path : "<stdin>");
		fail(&e);
	}
	check_machine(&p->pl, machine_path, path);
	p->has_model = claimed_model(&p->prog, &p->pl, path, model_path, scales_path, &p->md, &p->sc, &p->has_sc,
				     &p->mname);
	if (p->has_model && run_check_model(&p->pl, &p->md, p->has_sc ? &p->sc : NULL, &e))
		fail(&e);
	if (!p->has_model)
		fprintf(stderr, "amp-run: warning: '%s' carries no model (amp-emit --no-model) and none was given "
			"(--model): movement and arithmetic are checked, not that the stage computes the "
			"model\n", path ? path : "<stdin>");
	if (ro->weights_dir && run_weights_check(&p->pl, ro->weights_dir, &e))
		fail(&e);
	if (p->has_model)
		p->opcheck = run_opcheck_new(&p->md, p->has_sc ? &p->sc : NULL, &p->pl, ro);
	p->ids = run_token_ids(&p->pl, &p->logits);
}

static void free_prog(Prog *p)
{
	run_opcheck_free(p->opcheck);
	if (p->has_model) {
		model_free(&p->md);
		scales_free(&p->sc);
	}
	program_free(&p->prog);
	plan_free(&p->pl);
	free(p->mname);
}

/* The states the two programs share have one shape, but for the batch
 * (carry_parts), and are written by the same chain of ops, by their
 * models' digests (carry_digests, which refuses a program without its
 * model): fails naming them otherwise. */
static int64_t same_states(const Prog *a, const Prog *b, int64_t *batch)
{
	Err e;
	const char *bpath = b->path ? b->path : "<stdin>";
	int64_t parts = carry_parts(&a->pl, a->path, &b->pl, bpath, batch, &e);
	if (parts < 0 || carry_digests(a->has_model ? &a->md : NULL, a->has_sc ? &a->sc : NULL, a->path,
				       b->has_model ? &b->md : NULL, b->has_sc ? &b->sc : NULL, bpath, &e))
		fail(&e);
	return parts;
}

typedef struct {
	double min_cos;
	const char *save_dir;
	char sub[32];           /* the run's subdirectory of save_dir ("": none, the one run) */
	int timing, last, many;
	double t_data, t_prog, t_ref;
	int along;
	FILE *lines;            /* the runs' lines, printed after the summary */
	int64_t seq0;           /* the sequence the run's batch entry 0 is (a prefill run per part of the batch) */
	int64_t nseq, *len;     /* per sequence: its next tokens so far, judged */
	NextToken **tok;
} Report;

/* Sequence q's next token from this run. */
static void keep_token(Report *rep, int64_t q, const NextToken *nt)
{
	if (q >= rep->nseq) {
		rep->len = xrealloc(rep->len, (size_t)(q + 1) * sizeof *rep->len);
		rep->tok = xrealloc(rep->tok, (size_t)(q + 1) * sizeof *rep->tok);
		for (int64_t i = rep->nseq; i <= q; i++)
			rep->len[i] = 0, rep->tok[i] = NULL;
		rep->nseq = q + 1;
	}
	int64_t n = rep->len[q]++;
	rep->tok[q] = xrealloc(rep->tok[q], (size_t)(n + 1) * sizeof **rep->tok);
	rep->tok[q][n] = *nt;
}

/* The reference's values of plan tensor t: the model's, interpreted from
 * its ops, when the program carries it, else the plan's. */
static const float *ref_values(const Prog *p, const ModelRef *mr, float *const *ref, int t)
{
	for (int i = 0; p->has_model && i < p->md.nt; i++)
		if (strcmp(p->md.t[i].name, p->pl.t[t].name) == 0)
			return mr->v[i];
	return ref[t];
}

/* One run of program p (RunOpts ro: its step, position and carried
 * states); keeps its states' values in carry. Returns 1 when an output's
 * cosine is below the minimum. */
static int run_once(Prog *p, RunOpts *ro, Carry *carry, Carry *params, Report *rep)
{
	const Plan *pl = &p->pl;
	Err e;
	float **val = xcalloc((size_t)pl->nt, sizeof *val), **ref = xcalloc((size_t)pl->nt, sizeof *ref);
	ModelRef mr;
	memset(&mr, 0, sizeof mr);
	/* The reference runs alongside the machine (AMP_THREADS=1: after it)
	 * and decodes the machine's encoded stacked parameters instead of
	 * making them again (the same bits). */
	ro->cache = run_cache_new();
	ro->opcheck = p->opcheck;
	ro->carry = carry;
	ro->params = params;
	ro->prog = p->path ? p->path : "<stdin>";
	double t0 = run_now(), t_data;
	if (run_data(pl, ro, val, &e))
		fail(&e);
	t_data = run_now();
	RefJob job = { p->has_model ? &p->md : NULL, p->has_sc ? &p->sc : NULL, ro, pl, val, ref, &mr, 0, 0,
		       { { 0 } } };
	pthread_t th;
	int along = sim_threads() > 1;
	if (along) {
		run_cache_expect(ro->cache);
		along = pthread_create(&th, NULL, ref_job, &job) == 0;
		if (!along)
			run_cache_free(ro->cache), ro->cache = run_cache_new();
	}
	int prc = run_program(&p->prog, pl, ro, val, &e);
	double t_prog = run_now();
	if (along)
		pthread_join(th, NULL);
	tool_progress_clear();
	if (prc)
		fail(&e);
	if (!along)
		ref_job(&job);
	if (job.rc)
		fail(&job.e);
	rep->t_data += t_data - t0, rep->t_prog += t_prog - t_data, rep->t_ref += job.secs, rep->along = along;
	char label[96] = "";
	if (rep->many)
		snprintf(label, sizeof label, "run %lld (%s, position %lld): ", (long long)ro->step,
			 pl->model, (long long)ro->position);
	int low = 0;
	for (int t = 0; t < pl->nt; t++) {
		if (pl->t[t].role != R_OUTPUT && pl->t[t].role != R_STATE)
			continue;
		const float *r = ref_values(p, &mr, ref, t);
		if (pl->t[t].role == R_STATE) {         /* each carried on, the machine's and the reference's */
			carry_keep(carry, pl->t[t].name, val[t], tensor_values(&pl->t[t]), 0);
			carry_keep(carry, pl->t[t].name, r, tensor_values(&pl->t[t]), 1);
			if (!rep->last)
				continue;
		}
		double cosv, mabs;
		run_compare(val[t], r, pl->t[t].role == R_STATE ? tensor_values(&pl->t[t]) : tensor_count(&pl->t[t]), &cosv,
			    &mabs);
		fprintf(rep->lines, "%s%s %s: cosine %.6f, max abs error %.6g (against FP32)\n", label,
		       pl->t[t].role == R_STATE ? "state" : "output", pl->t[t].name, cosv, mabs);
		if (!(cosv >= rep->min_cos))    /* an output, or a state carried on */
			low = 1;
		const char *sub = rep->sub[0] ? rep->sub : NULL;
		if (rep->save_dir && pl->t[t].role == R_OUTPUT &&
		    (run_save(rep->save_dir, sub, &pl->t[t], "", val[t], &e) ||
		     run_save(rep->save_dir, sub, &pl->t[t], ".ref", r, &e)))
			fail(&e);
	}
	if (p->logits >= 0) {           /* the greedy next token of every sequence, from both */
		const PTensor *lt = &pl->t[p->logits];
		NextToken *nt = xmalloc((size_t)lt->shape[0] * sizeof *nt);
		run_next_judge(val[p->logits], ref_values(p, &mr, ref, p->logits), lt, nt);
		for (int64_t b = 0; b < lt->shape[0]; b++)
			keep_token(rep, rep->seq0 + b, &nt[b]);
		free(nt);
	}
	for (int t = 0; t < pl->nt; t++)        /* parameters go on to the next run, made once */
		if (pl->t[t].role == R_PARAM && val[t]) {
			char *key = param_key(&pl->t[t]);
			if (!carry_find(params, key, tensor_values(&pl->t[t]), 0))
				carry_take(params, key, val[t], tensor_values(&pl->t[t]));
			free(key);
			val[t] = NULL;
		}
	free_vals(val, pl->nt);
	free_vals(ref, pl->nt);
	run_cache_free(ro->cache);
	ro->cache = NULL;
	if (p->has_model)
		model_ref_free(&mr);
	return low;
}

/* A prefill per part of the decode's batch (each reads its part of
 * --data's inputs), their states stacked into carry; returns the parts,
 * and sets *low when an output's cosine is below the minimum. */
static int64_t run_prefills(Prog *pre, Prog *dec, const RunOpts *ro, Carry *carry, Carry *params, Report *rep,
			    int *low)
{
	int64_t pre_batch = 0, parts = same_states(pre, dec, &pre_batch);
	for (int64_t q = 0; q < parts; q++) {
		RunOpts po = *ro;
		Carry one;
		memset(&one, 0, sizeof one);
		po.position = 0;
		po.step = q;
		po.part = q, po.parts = parts;
		snprintf(rep->sub, sizeof rep->sub, "prefill.%lld", (long long)q);
		rep->seq0 = q * pre_batch;
		*low |= run_once(pre, &po, &one, params, rep);
		carry_stack(carry, &one, &pre->pl);
		carry_free(&one);
	}
	rep->seq0 = 0;
	return parts;
}

/* --timing: where the run's wall time went, and the matrix products'
 * rates (bench/README.md). */
static void print_timing(const Report *rep, int width)
{
	RunStats st;
	run_stats(&st);
	fprintf(stderr, "amp-run: matrix products (the machine's): %.2f GFLOP in %.3f s, %.2f GFLOP/s, %d wide; "
		"%.3f CPU s, %.2f GFLOP/s per core\n",
		st.gemm_flops / 1e9, st.gemm_secs, st.gemm_secs > 0 ? st.gemm_flops / 1e9 / st.gemm_secs : 0,
		width, st.gemm_cpu, st.gemm_cpu > 0 ? st.gemm_flops / 1e9 / st.gemm_cpu : 0);
	fprintf(stderr, "amp-run: wall seconds: data %.3f, machine %.3f (encoding %.3f, filling SRAM %.3f, "
		"compute steps %.3f, phases and checks %.3f (tables %.3f, matching %.3f, poisoning %.3f, "
		"moves %.3f, checks %.3f), other %.3f), reference %.3f\n", rep->t_data,
		rep->t_prog, st.encode_secs, st.fill_secs, st.compute_secs, st.phase_secs,
		st.table_secs, st.route_secs, st.poison_secs, st.move_secs, st.check_secs,
		rep->t_prog - st.encode_secs - st.fill_secs - st.compute_secs - st.phase_secs, rep->t_ref);
	fprintf(stderr, "amp-run: the reference %s; its matrix products: %.2f GFLOP in %.3f s, "
		"%.2f GFLOP/s; %.3f CPU s, %.2f GFLOP/s per core\n",
		rep->along ? "ran alongside the machine" : "ran after the machine",
		st.ref_gemm_flops / 1e9, st.ref_gemm_secs,
		st.ref_gemm_secs > 0 ? st.ref_gemm_flops / 1e9 / st.ref_gemm_secs : 0, st.ref_gemm_cpu,
		st.ref_gemm_cpu > 0 ? st.ref_gemm_flops / 1e9 / st.ref_gemm_cpu : 0);
}

/* The next-token report (run_next_print), and the report's token records
 * freed. */
static void print_tokens(Report *rep, int generate)
{
	run_next_print(stdout, rep->tok, rep->len, rep->nseq, generate);
	for (int64_t b = 0; b < rep->nseq; b++)
		free(rep->tok[b]);
	free(rep->tok);
	free(rep->len);
}

int main(int argc, char **argv)
{
#ifdef __GLIBC__
	/* Shards and steps allocate and free buffers of hundreds of KiB many
	 * thousand times: from the heap, not a fresh mapping each (whose
	 * page faults and unmapping's TLB shootdowns cost both cores). */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
	RunOpts ro = { .seed = 1, .quantized = 1 };
	const char *save_dir = NULL, *calib = NULL, *out = NULL, *in_path, *prefill = NULL;
	const char *model_path = NULL, *scales_path = NULL, *machine_path = NULL;
	double min_cos = 0.99;
	int timing = 0;
	int64_t n, steps = 1, position = -1;
	int generate = 0;
	int c;

	OptParse op;
	const char *arg;
	opt_init(&op, &tool, argc, argv);
	if (tool_progress_on())
		ro.progress = tool_progress;
	const char *gw = getenv("AMP_GEMM_WIDTH");
	int width = run_gemm_width(gw && strcmp(gw, "8") == 0 ? 8 : 0);
	while ((c = opt_next(&op, &arg)) != -1) {
		switch (c) {
		case 'D': ro.data_dir = arg; break;
		case 'W': ro.weights_dir = arg; break;
		case 'S':
			if (parse_i64(arg, &n) || n < 0)
				usage_error("--seed takes a non-negative integer, not '%s'", arg);
			ro.seed = (uint64_t)n;
			break;
		case 'A': save_dir = arg; break;
		case 'C':
			if (parse_f64(arg, &min_cos) || min_cos < -1 || min_cos > 1)
				usage_error("--min-cosine takes a number from -1 to 1, not '%s'", arg);
			break;
		case 'K': calib = arg; break;
		case 'T': timing = 1; break;
		case 'M': model_path = arg; break;
		case 'L': scales_path = arg; break;
		case 'N':
			if (parse_i64(arg, &steps) || steps < 1 || steps > 1 << 20)
				usage_error("--steps takes an integer from 1 to 1048576, not '%s'", arg);
			break;
		case 'P':
			if (parse_i64(arg, &position) || position < 0 || position > RUN_EXACT_INT)
				usage_error("--position takes an integer from 0 to %d (amp-run holds positions as "
					    "floats, exact that far), not '%s'", RUN_EXACT_INT, arg);
			break;
		case 'F': prefill = arg; break;
		case 'G':
			if (parse_i64(arg, &steps) || steps < 1 || steps > 1 << 20)
				usage_error("--generate takes an integer from 1 to 1048576, not '%s'", arg);
			generate = 1;
			break;
		case 'm': machine_path = machine_arg(arg); break;
		case 'o': out = arg; break;
		}
	}
	if (calib) {
		if (!out)
			usage_error("--calibrate needs -o SCALES");
		if (op.optind < argc)
			usage_error("--calibrate takes no program, found '%s'", argv[op.optind]);
		distinct_outputs((ToolFile[]){ { "-o", out }, { "--calibrate", calib }, { "--machine", machine_path },
						{ "--prefill", prefill } }, 1, 4);
		calibrate(calib, prefill, machine_path, out, &ro);
		return EXIT_OK;
	}
	in_path = one_input(argc, argv, op.optind, "program");
	if (scales_path && !model_path)
		usage_error("--scales needs --model");

	Prog main_p, pre_p;
	load_prog(&main_p, in_path, model_path, scales_path, machine_path, &ro);
	if (prefill)
		load_prog(&pre_p, prefill, NULL, NULL, machine_path, &ro);
	if (generate && (main_p.ids < 0 || main_p.logits < 0 || main_p.pl.t[main_p.ids].shape[1] != 1)) {
		Err e;
		errf(&e, "--generate needs a program of one token per sequence that embeds token ids and outputs "
		     "logits over their vocabulary ('%s' does not)", in_path ? in_path : "<stdin>");
		fail(&e);
	}
	Carry carry, given, params;
	memset(&carry, 0, sizeof carry);
	memset(&given, 0, sizeof given);
	memset(&params, 0, sizeof params);
	char *lines = NULL;
	size_t nlines = 0;
	Report rep = { .min_cos = min_cos, .save_dir = save_dir, .timing = timing, .many = prefill || steps > 1,
		       .lines = open_memstream(&lines, &nlines) };
	if (!rep.lines) {
		Err e;
		errf(&e, "cannot buffer the report: out of memory");
		fail(&e);
	}
	int low = 0;
	int64_t at = position >= 0 ? position : 0, k = 0;
	int64_t parts = prefill ? run_prefills(&pre_p, &main_p, &ro, &carry, &params, &rep, &low) : 0;
	if (parts && position < 0)
		at = run_tokens(&pre_p.pl);
	for (int64_t s = 0; s < steps; s++) {
		RunOpts so = ro;
		so.step = parts + s;
		so.position = at;
		rep.last = s + 1 == steps;
		if (rep.many)
			snprintf(rep.sub, sizeof rep.sub, "step.%lld", (long long)s);
		int64_t B = generate ? main_p.pl.t[main_p.ids].shape[0] : 0;
		if (generate && rep.nseq == B) {        /* the reference's greedy tokens go on, to both */
			float *ids = xmalloc((size_t)B * sizeof *ids);
			for (int64_t b = 0; b < B; b++)
				ids[b] = (float)rep.tok[b][rep.len[b] - 1].reference;
			carry_keep(&given, main_p.pl.t[main_p.ids].name, ids, B, 0);
			free(ids);
			so.given = &given;
		}
		low |= run_once(&main_p, &so, &carry, &params, &rep);
		at += run_tokens(&main_p.pl);
		k++;
	}
	printf("movement: byte-exact after every phase (%d phases%s)\n", main_p.pl.nph,
	       rep.many ? ", every run" : "");
	if (main_p.has_model) {
		printf("reference: FP32 from the model's ops (%s)\n", main_p.mname);
		per_op(main_p.opcheck);
	}
	else
		printf("reference: FP32 from the stage's own ops (no model: amp-emit --model or amp-run "
		       "--model makes it the model's)\n");
	fclose(rep.lines);
	fputs(lines, stdout);
	free(lines);
	print_tokens(&rep, generate);
	carry_free(&given);
	carry_free(&params);
	if (timing)
		print_timing(&rep, width);
	carry_free(&carry);
	free_prog(&main_p);
	if (prefill)
		free_prog(&pre_p);
	if (low) {
		fprintf(stderr, "amp-run: an output's cosine is below %g (--min-cosine)\n", min_cos);
		return EXIT_BAD;
	}
	return EXIT_OK;
}
