/* planner_fit.c: does the machine hold a plan: the parameters' homes, the
 * SRAM walk, the exact limits of the lowered plan (plan_fit), the refusal
 * with its "Next:" advice, and the progress callback (planner_int.h). */
#include "planner/planner_int.h"
#include "cost/floor.h"
#include "lower/lower.h"
#include "stage/plan_check.h"
#include "stage/plan_memory.h"

/* ---- the whole model ---- */

int planner_fit_check_params(Builder *b, Err *e)
{
	int64_t T = b->mc->tiles, avail = machine_avail(b->mc), total = 0, worst = 0;
	int state = 0;
	for (int i = 0; i < b->pl->np; i++) {
		total += place_total_bytes(&b->pl->p[i]) * b->pl->t[b->pl->p[i].tensor].count;
		state |= b->pl->t[b->pl->p[i].tensor].role == R_STATE;
	}
	const char *what = state ? "parameters and state" : "parameters";
	if (total > T * avail)
		return err_at(e, b->m->file, b->m->params_line, b->m->params_col,
			      "model '%s': %s need %lld bytes; %lld tiles hold at most %lld "
			      "(%lld bytes each after reserved_bytes).%s", b->m->name, what, (long long)total,
			      (long long)T, (long long)(T * avail), (long long)avail, NEXT_NO_PLAN);
	for (int64_t t = 1; t < T; t++)
		if (b->base[t] > b->base[worst])
			worst = t;
	if (b->base[worst] > avail)
		return err_at(e, b->m->file, b->m->params_line, b->m->params_col,
			      "model '%s': %s homes put %lld bytes on tile %lld; %lld are available",
			      b->m->name, state ? "parameter and state" : "parameter", (long long)b->base[worst], (long long)worst, (long long)avail);
	return 0;
}

int planner_fit_check_memory(Builder *b, Err *e)
{
	Plan *pl = b->pl;
	int64_t worst, avail = machine_avail(b->mc);
	int at;
	int64_t *step_peak = xcalloc((size_t)pl->ns + 1, sizeof *step_peak);
	int64_t peak = plan_memory(pl, NULL, NULL, step_peak, &worst, &at);

	for (int g = 0; g < pl->ng; g++)
		for (int s = 0; s < pl->ns; s++)
			if (strcmp(pl->s[s].op, pl->g[g].op) == 0 && step_peak[s] > pl->g[g].peak_bytes)
				pl->g[g].peak_bytes = step_peak[s];
	free(step_peak);
	if (peak > avail) {
		/* at the op of that step in the model (its pin when pinned);
		 * a step of no model op: the params mapping */
		const Model *m = b->m;
		long line = m->params_line, col = m->params_col;
		for (int i = 0; i < m->nops; i++)
			if (strcmp(m->ops[i].name, pl->s[at].op) == 0) {
				line = m->ops[i].pinned ? m->ops[i].pin_line : m->ops[i].line;
				col = m->ops[i].pinned ? m->ops[i].pin_col : m->ops[i].col;
				break;
			}
		char *next = plan_next_steps(pl, pl->s[at].op);
		err_at(e, m->file, line, col, "tile %lld needs %lld bytes at step %d (op '%s'); "
		       "%lld are available (sram_bytes - reserved_bytes).%s", (long long)worst,
		       (long long)peak, at, pl->s[at].op, (long long)avail, next);
		free(next);
		return -1;
	}
	return 0;
}

/* The memory and cycles objectives promise a plan the machine holds: the
 * plan is lowered as amp-compose, amp-expand, amp-exchange and amp-group
 * do (amp-group's default weights) and checked as amp-emit checks it.
 * When it does not fit, the error names the tile and the figure, and says
 * what no plan can avoid: the parameters, each byte once, spread evenly.
 * plan_fit: the whole plan lowered so, its worst tiles' figures (Fit,
 * lib/planner/planner_int.h). */
void plan_fit(const Plan *pl, int want_cycles, Fit *f)
{
	const Machine *mc = &pl->machine;
	int64_t T = mc->tiles;
	int *peak_step = xcalloc((size_t)T, sizeof *peak_step);
	Plan q;
	Err le;

	memset(f, 0, sizeof *f);
	plan_dup(&q, pl);
	Lowering lw = lowering_default();       /* record order: lib/lower/lower.h */
	lw.schedule = want_cycles == FIT_SCHEDULED, lw.group = trial_group;
	if (lower_plan(&q, &lw, &le)) {
		snprintf(f->why, sizeof f->why, "%s", le.msg);
		f->excess = 1e30;
		goto out;
	}
	f->lowered = 1;
	limits_measure(&q, -1, &f->lim, NULL, NULL, NULL, peak_step);
	f->over = limits_over(&q, &f->lim);
	f->excess = planner_limit_excess(mc, f->lim.table, f->lim.frags, f->lim.sram);
	if (f->over != LIMIT_NONE && limits_error(&q, &f->lim, NULL, 0, &le))
		snprintf(f->why, sizeof f->why, "%s", le.msg);
	if (f->lim.sram > f->lim.avail) {       /* what the worst tile holds most of */
		int64_t *part = xmalloc(((size_t)q.np + 1) * sizeof *part);
		plan_memory_parts(&q, f->lim.sram_tile, f->lim.peak_step, part);
		f->big_step = f->lim.peak_step;
		for (int i = 0; i < q.np; i++)
			if (part[i] > f->big_bytes) {
				int w = plan_writer(&q, i);
				f->big_bytes = part[i];
				snprintf(f->big, sizeof f->big, "%s", q.p[i].name);
				snprintf(f->big_op, sizeof f->big_op, "%s", w >= 0 ? q.s[w].op : "");
			}
		free(part);
	}
	if (want_cycles == FIT_CYCLES || want_cycles == FIT_SCHEDULED ||
	    (want_cycles == FIT_CYCLES_IF_FITS && planner_fit_ok(f))) {
		Metrics *ph = xcalloc((size_t)q.nph + 1, sizeof *ph), sum;
		capture_metrics(&q, ph, NULL, &sum);
		f->cycles = sum.total_cycles;
		free(ph);
	}
out:
	plan_free(&q);
	free(peak_step);
}

int planner_fit_why(const Fit *f, char *why, size_t size)
{
	if (planner_fit_ok(f))
		return 0;
	snprintf(why, size, "%s", f->why);
	return 1;
}

/* The next steps after "does not fit", most direct first (op: the GEMM to
 * pin, or NULL), allocated: op is a model's name, of any length. */
char *plan_next_steps(const Plan *pl, const char *op)
{
	int64_t batch = 0;
	char smaller[64] = "";
	for (int t = 0; t < pl->nt && !batch; t++)
		if (pl->t[t].role == R_INPUT && pl->t[t].rank > 1)
			batch = pl->t[t].shape[0];
	if (batch > 1)
		snprintf(smaller, sizeof smaller, " plan a smaller batch (this one is %lld);", (long long)batch);
	return xasprintf(" Next:%s%s%s%s or " NEXT_MORE_TILES, op ? " pin '" : "", op ? op : "",
			 op ? "' to a grid over more tiles in the model's plan: (amp-plan --explain lists its grids);" : "",
			 smaller);
}

/* planner_fit_error's next steps, allocated: the GEMM whose operand holds
 * most of the worst tile (placement names are tensor@op.operand). */
static char *next_steps(const Plan *pl, const Fit *f, int64_t per_tile)
{
	if (per_tile > machine_avail(&pl->machine))
		return xstrdup(NEXT_NO_PLAN);
	char *next = plan_next_steps(pl, f->big_bytes && *f->big_op ? f->big_op : NULL);
	if (!f->big_bytes)
		return next;
	char *out = xasprintf(" Tile %lld holds most for '%s' (%lld bytes at step %lld).%s", (long long)f->lim.sram_tile,
			      f->big, (long long)f->big_bytes, (long long)f->big_step, next);
	free(next);
	return out;
}

/* 0 when f fits; else -1 with the error at the model's params mark. */
int planner_fit_error(const Plan *pl, const Model *m, const Fit *f, Err *e)
{
	const Machine *mc = &pl->machine;
	int64_t T = mc->tiles, avail = machine_avail(mc), params = 0;
	char why[sizeof e->msg];
	int state = 0;

	if (!planner_fit_why(f, why, sizeof why))
		return 0;
	for (int i = 0; i < pl->np; i++) {
		int home = plan_state_home(pl, i);      /* resident too: a state's home */
		if ((pl->t[pl->p[i].tensor].role == R_PARAM && plan_writer(pl, i) < 0) || home)
			/* each byte once: a home kept beside several owners (a
			 * resident norm vector) is this plan's choice, not a need */
			params += place_total_bytes(&pl->p[i]) / place_replicas(&pl->p[i]) *
				  pl->t[pl->p[i].tensor].count;
		state |= home;
	}
	char *next = next_steps(pl, f, cdiv(params, T));
	err_at(e, m->file, m->params_line, m->params_col,
	       "model '%s' does not fit machine '%s' at its limits: %s. No plan avoids the parameters%s: "
	       "%lld bytes, at least %lld per tile, which leaves at most %lld of the %lld available for "
	       "activations, working buffers and exchange tables.%s", m->name, mc->name, why,
	       state ? " and states" : "",
	       (long long)params, (long long)cdiv(params, T), (long long)(avail - cdiv(params, T)),
	       (long long)avail, next);
	free(next);
	return -1;
}

int plan_check_fit(const Plan *pl, const Model *m, Err *e)
{
	Fit f;
	plan_fit(pl, FIT_LIMITS, &f);
	return planner_fit_error(pl, m, &f, e);
}

int plan_batch_split(const Plan *pl)
{
	return pl->owners_batch;
}

int planner_fit_ok(const Fit *f) { return f->lowered && f->over == LIMIT_NONE; }

void plan_progress(const PlanOpts *o, const char *what, int done, int total)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	if (!o->progress)
		return;
	pthread_mutex_lock(&mu);
	o->progress(o->progress_ctx, what, done, total);
	pthread_mutex_unlock(&mu);
}
