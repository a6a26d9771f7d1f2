/* drive.c: amp-run's runs of a program, and of a prefill before it, each
 * checked against its FP32 reference, and their report (lib/run/drive.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "lower/expand.h"
#include "lower/program.h"
#include "model/model.h"
#include "model/scales.h"
#include "run/drive.h"
#include "run/run.h"
#include "run/sim.h"
#include "stage/table.h"

static void free_vals(float **v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i]);
	free(v);
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
	int err_in;             /* the error is about this program: the tool names it (DriveResult.in) */
} Prog;

/* The model (and scales) text is the file the stage was planned from. */
static int planned(const DriveHooks *h, Prog *p, const char *role, const void *text, size_t len,
		   const char *shown, Err *e)
{
	if (h->planned && h->planned(&p->pl, role, text, len, shown, e)) {
		p->err_in = 1;
		return -1;
	}
	return 0;
}

/* The model (and scales) the program claims to lower: --model (--scales)
 * or the ones amp-emit --model embedded; sets p->has_model when there is
 * one. */
static int claimed_model(Prog *p, const char *model_path, const char *scales_path, const DriveHooks *h, Err *e)
{
	const char *in = p->path ? p->path : "<stdin>";
	if (model_path) {
		/* the files the program was planned from, by their hashes */
		char *text;
		size_t len;
		for (int k = 0; k < 2; k++) {
			const char *path = k ? scales_path : model_path;
			if (!path)
				continue;
			if (input_slurp(path, &text, &len, e))
				return -1;
			int rc = planned(h, p, k ? "scales" : "model", text, len, path, e);
			free(text);
			if (rc)
				return -1;
		}
		p->mname = xstrdup(model_path);
		if (model_load(&p->md, model_path, e))
			return -1;
		if (scales_path && scales_load(&p->sc, scales_path, e)) {
			model_free(&p->md);
			return -1;
		}
		p->has_model = 1;
		p->has_sc = scales_path != NULL;
		return 0;
	}
	const Program *prog = &p->prog;
	if (!prog->model)
		return 0;
	if (planned(h, p, "model", prog->model, prog->model_len, "<embedded MODEL>", e) ||
	    (prog->scales && planned(h, p, "scales", prog->scales, prog->scales_len, "<embedded SCALES>", e)))
		return -1;
	p->mname = xasprintf("%s(MODEL)", in);
	if (model_load_input(&p->md, input_open_mem(p->mname, prog->model, prog->model_len, e), e))
		return -1;
	if (prog->scales) {
		char *sname = xasprintf("%s(SCALES)", in);
		int rc = scales_load_input(&p->sc, input_open_mem(sname, prog->scales, prog->scales_len, e), e);
		free(sname);
		if (rc) {
			model_free(&p->md);
			return -1;
		}
		p->has_sc = 1;
	}
	p->has_model = 1;
	return 0;
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

/* Program path, checked against its machine and the model it claims to
 * lower (model_path, or its own), with its per-op check. */
static int load_prog(Prog *p, const char *path, const char *model_path, const char *scales_path,
		     const DriveOpts *o, Err *e)
{
	const DriveHooks *h = &o->hooks;
	int is_prog;
	memset(p, 0, sizeof *p);
	p->path = path;
	p->sc = (Scales){ NULL, NULL, 0 };
	int rc = program_or_stage(&p->pl, &p->prog, &is_prog, path, e);
	table_release();        /* the rows and copies its check of the tables kept (the largest */
	expand_release();       /* phase's: some 200 MB on the 27-layer SigLIP), not needed again */
	if (rc)
		return -1;
	if (!is_prog) {
		errf(e, "'%s': not a program (amp-emit writes one from a grouped stage)", path ? path : "<stdin>");
		goto bad;
	}
	if (h->machine && h->machine(&p->pl, o->machine, e)) {
		p->err_in = 1;
		goto bad;
	}
	if (claimed_model(p, model_path, scales_path, h, e) ||
	    (p->has_model && run_check_model(&p->pl, &p->md, p->has_sc ? &p->sc : NULL, e)))
		goto bad;
	if (!p->has_model && h->warn) {
		char *msg = xasprintf("'%s' carries no model (amp-emit --no-model) and none was given (--model): "
				      "movement and arithmetic are checked, not that the stage computes the model",
				      path ? path : "<stdin>");
		h->warn(msg);
		free(msg);
	}
	if (o->ro.weights_dir && run_weights_check(&p->pl, o->ro.weights_dir, e))
		goto bad;
	if (p->has_model)
		p->opcheck = run_opcheck_new(&p->md, p->has_sc ? &p->sc : NULL, &p->pl, &o->ro);
	p->ids = run_token_ids(&p->pl, &p->logits);
	return 0;
bad:
	free_prog(p);
	return -1;
}

/* The states the two programs share have one shape, but for the batch
 * (carry_parts), and are written by the same chain of ops, by their
 * models' digests (carry_digests, which refuses a program without its
 * model). Returns the prefill's parts, or -1 naming the state. */
static int64_t same_states(const Prog *a, const Prog *b, int64_t *batch, Err *e)
{
	const char *bpath = b->path ? b->path : "<stdin>";
	int64_t parts = carry_parts(&a->pl, a->path, &b->pl, bpath, batch, e);
	if (parts < 0 || carry_digests(a->has_model ? &a->md : NULL, a->has_sc ? &a->sc : NULL, a->path,
				       b->has_model ? &b->md : NULL, b->has_sc ? &b->sc : NULL, bpath, e))
		return -1;
	return parts;
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

typedef struct {
	const DriveHooks *hooks;
	double min_cos;
	const char *save_dir;
	char sub[32];           /* the run's subdirectory of save_dir ("": none, the one run) */
	int last, many;
	double t_data, t_prog, t_ref;
	int along;
	FILE *lines;            /* the runs' lines, reported after the summary, */
	char *text;             /* ... into text */
	size_t ntext;
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

/* The machine's values of the run's outputs and carried states against
 * the reference's: a line each (states only on the last run; every
 * state kept in carry), outputs saved; the greedy next tokens kept.
 * Returns 1 when a cosine is below the minimum. */
static int judge(Prog *p, const RunOpts *ro, float *const *val, float *const *ref, const ModelRef *mr,
		 Carry *carry, Report *rep, Err *e)
{
	const Plan *pl = &p->pl;
	char label[96] = "";
	if (rep->many)
		snprintf(label, sizeof label, "run %lld (%s, position %lld): ", (long long)ro->step,
			 pl->model, (long long)ro->position);
	int low = 0;
	for (int t = 0; t < pl->nt; t++) {
		if (pl->t[t].role != R_OUTPUT && pl->t[t].role != R_STATE)
			continue;
		const float *r = ref_values(p, mr, ref, t);
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
		    (run_save(rep->save_dir, sub, &pl->t[t], "", val[t], e) ||
		     run_save(rep->save_dir, sub, &pl->t[t], ".ref", r, e)))
			return -1;
	}
	if (p->logits >= 0) {           /* the greedy next token of every sequence, from both */
		const PTensor *lt = &pl->t[p->logits];
		NextToken *nt = xmalloc((size_t)lt->shape[0] * sizeof *nt);
		run_next_judge(val[p->logits], ref_values(p, mr, ref, p->logits), lt, nt);
		for (int64_t b = 0; b < lt->shape[0]; b++)
			keep_token(rep, rep->seq0 + b, &nt[b]);
		free(nt);
	}
	return low;
}

/* The machine's run of p, with the reference alongside (AMP_THREADS=1:
 * after it) into ref or mr; the run's wall time added to rep. */
static int machine_and_reference(Prog *p, RunOpts *ro, float **val, float **ref, ModelRef *mr, Report *rep,
				 Err *e)
{
	const Plan *pl = &p->pl;
	double t0 = run_now(), t_data;
	if (run_data(pl, ro, val, e))
		return -1;
	t_data = run_now();
	RefJob job = { p->has_model ? &p->md : NULL, p->has_sc ? &p->sc : NULL, ro, pl, val, ref, mr, 0, 0,
		       { { 0 } } };
	pthread_t th;
	int along = sim_threads() > 1;
	if (along) {
		run_cache_expect(ro->cache);
		along = pthread_create(&th, NULL, ref_job, &job) == 0;
		if (!along)
			run_cache_free(ro->cache), ro->cache = run_cache_new();
	}
	int prc = run_program(&p->prog, pl, ro, val, e);
	double t_prog = run_now();
	if (along)
		pthread_join(th, NULL);
	if (rep->hooks->progress_clear)
		rep->hooks->progress_clear();
	if (prc)
		return -1;
	if (!along)
		ref_job(&job);
	if (job.rc) {
		*e = job.e;
		return -1;
	}
	rep->t_data += t_data - t0, rep->t_prog += t_prog - t_data, rep->t_ref += job.secs, rep->along = along;
	return 0;
}

/* One run of program p (RunOpts ro: its step, position and carried
 * states); keeps its states' values in carry, and the parameters it made
 * in params. Returns 1 when an output's cosine is below the minimum. */
static int run_once(Prog *p, RunOpts *ro, Carry *carry, Carry *params, Report *rep, Err *e)
{
	const Plan *pl = &p->pl;
	float **val = xcalloc((size_t)pl->nt, sizeof *val), **ref = xcalloc((size_t)pl->nt, sizeof *ref);
	ModelRef mr;
	memset(&mr, 0, sizeof mr);
	/* The reference runs alongside the machine and decodes the machine's
	 * encoded stacked parameters instead of making them again (the same
	 * bits). */
	ro->cache = run_cache_new();
	ro->opcheck = p->opcheck;
	ro->carry = carry;
	ro->params = params;
	ro->prog = p->path ? p->path : "<stdin>";
	int low = machine_and_reference(p, ro, val, ref, &mr, rep, e);
	if (!low)
		low = judge(p, ro, val, ref, &mr, carry, rep, e);
	/* parameters go on to the next run, made once; after an error too,
	 * since a value params lent to run_data is params' own */
	for (int t = 0; t < pl->nt; t++)
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
	model_ref_free(&mr);
	return low;
}

/* A prefill per part of the decode's batch (each reads its part of
 * --data's inputs), their states stacked into carry; returns the parts,
 * and sets *low when an output's cosine is below the minimum. */
static int64_t run_prefills(Prog *pre, Prog *dec, const RunOpts *ro, Carry *carry, Carry *params, Report *rep,
			    int *low, Err *e)
{
	int64_t pre_batch = 0, parts = same_states(pre, dec, &pre_batch, e);
	for (int64_t q = 0; q < parts; q++) {
		RunOpts po = *ro;
		Carry one;
		memset(&one, 0, sizeof one);
		po.position = 0;
		po.step = q;
		po.part = q, po.parts = parts;
		snprintf(rep->sub, sizeof rep->sub, "prefill.%lld", (long long)q);
		rep->seq0 = q * pre_batch;
		int rc = run_once(pre, &po, &one, params, rep, e);
		if (rc >= 0)
			carry_stack(carry, &one, &pre->pl);
		carry_free(&one);
		if (rc < 0)
			return -1;
		*low |= rc;
	}
	rep->seq0 = 0;
	return parts;
}

/* The per-op check's summary: how many ops, and the one closest to its
 * tolerance. */
static void per_op(FILE *f, const OpCheck *c)
{
	const OpCheckResult *r;
	int n = run_opcheck_ops(c, &r), w = -1;
	for (int k = 0; k < n; k++)
		if (r[k].runs && (w < 0 || r[k].worst / r[k].tol > r[w].worst / r[w].tol))
			w = k;
	if (w < 0) {
		fprintf(f, "per op: no op has a compute step to check\n");
		return;
	}
	fprintf(f, "per op: %d ops checked after every run, each on the machine's own inputs against its "
		"FP32 reference; closest to its tolerance: '%s', relative L2 error %.3g of %.3g\n",
		run_opcheck_checked(c), r[w].op, r[w].worst, r[w].tol);
}

/* The report: movement, the reference, the per-op check, the runs' lines
 * and the next tokens, to f. */
static void report(FILE *f, const Prog *p, Report *rep, int generate)
{
	fprintf(f, "movement: byte-exact after every phase (%d phases%s)\n", p->pl.nph,
		rep->many ? ", every run" : "");
	if (p->has_model) {
		fprintf(f, "reference: FP32 from the model's ops (%s)\n", p->mname);
		per_op(f, p->opcheck);
	}
	else
		fprintf(f, "reference: FP32 from the stage's own ops (no model: amp-emit --model or amp-run "
			"--model makes it the model's)\n");
	fclose(rep->lines);
	rep->lines = NULL;
	fputs(rep->text, f);
	run_next_print(f, rep->tok, rep->len, rep->nseq, generate);
}

static void free_tokens(Report *rep)
{
	for (int64_t b = 0; b < rep->nseq; b++)
		free(rep->tok[b]);
	free(rep->tok);
	free(rep->len);
}

/* The runs: the prefill's, then PROGRAM's steps, each from the states the
 * run before left; their lines and next tokens in rep. Returns 1 when a
 * cosine is below the minimum. */
static int runs(const DriveOpts *o, Prog *main_p, Prog *pre_p, Report *rep, Err *e)
{
	Carry carry, given, params;
	memset(&carry, 0, sizeof carry);
	memset(&given, 0, sizeof given);
	memset(&params, 0, sizeof params);
	int low = 0, rc = 0;
	int64_t at = o->position >= 0 ? o->position : 0;
	int64_t parts = pre_p ? run_prefills(pre_p, main_p, &o->ro, &carry, &params, rep, &low, e) : 0;
	if (parts < 0)
		rc = -1;
	else if (parts && o->position < 0)
		at = run_tokens(&pre_p->pl);
	for (int64_t s = 0; !rc && s < o->steps; s++) {
		RunOpts so = o->ro;
		so.step = parts + s;
		so.position = at;
		rep->last = s + 1 == o->steps;
		if (rep->many)
			snprintf(rep->sub, sizeof rep->sub, "step.%lld", (long long)s);
		int64_t B = o->generate ? main_p->pl.t[main_p->ids].shape[0] : 0;
		if (o->generate && rep->nseq == B) {    /* the reference's greedy tokens go on, to both */
			float *ids = xmalloc((size_t)B * sizeof *ids);
			for (int64_t b = 0; b < B; b++)
				ids[b] = (float)rep->tok[b][rep->len[b] - 1].reference;
			carry_keep(&given, main_p->pl.t[main_p->ids].name, ids, B, 0);
			free(ids);
			so.given = &given;
		}
		int r1 = run_once(main_p, &so, &carry, &params, rep, e);
		if (r1 < 0)
			rc = -1;
		low |= r1 > 0;
		at += run_tokens(&main_p->pl);
	}
	carry_free(&given);
	carry_free(&params);
	carry_free(&carry);
	return rc < 0 ? -1 : low;
}

int run_drive(const DriveOpts *o, DriveResult *r, Err *e)
{
	Prog main_p, pre_p;
	Report rep = { .hooks = &o->hooks, .min_cos = o->min_cos, .save_dir = o->save_dir,
		       .many = o->prefill || o->steps > 1 };
	memset(r, 0, sizeof *r);
	if (load_prog(&main_p, o->program, o->model, o->scales, o, e)) {
		r->in = main_p.err_in ? (o->program ? o->program : "<stdin>") : NULL;
		return -1;
	}
	if (o->prefill && load_prog(&pre_p, o->prefill, NULL, NULL, o, e)) {
		r->in = pre_p.err_in ? o->prefill : NULL;
		free_prog(&main_p);
		return -1;
	}
	int rc = -1;
	size_t n = 0;
	FILE *f = NULL;
	if (o->generate && (main_p.ids < 0 || main_p.logits < 0 || main_p.pl.t[main_p.ids].shape[1] != 1))
		errf(e, "--generate needs a program of one token per sequence that embeds token ids and outputs "
		     "logits over their vocabulary ('%s' does not)", o->program ? o->program : "<stdin>");
	else if (!(rep.lines = open_memstream(&rep.text, &rep.ntext)) || !(f = open_memstream(&r->report, &n)))
		errf(e, "cannot buffer the report: out of memory");
	else
		rc = runs(o, &main_p, o->prefill ? &pre_p : NULL, &rep, e);
	if (rc >= 0) {
		report(f, &main_p, &rep, o->generate);
		r->low = rc;
		r->t_data = rep.t_data, r->t_prog = rep.t_prog, r->t_ref = rep.t_ref, r->along = rep.along;
	}
	if (rep.lines)
		fclose(rep.lines);
	if (f)
		fclose(f);
	if (rc < 0) {
		free(r->report);
		r->report = NULL;
	}
	free(rep.text);
	free_tokens(&rep);
	free_prog(&main_p);
	if (o->prefill)
		free_prog(&pre_p);
	return rc < 0 ? -1 : 0;
}
