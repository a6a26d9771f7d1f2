/* planner.c: model + machine -> plan (lib/planner/planner.h): both
 * ownerships built, attempt after attempt (planner_build.c), on two
 * threads, the best fit kept, then the cycles objective's descent
 * (planner_descent.c). planner_int.h lists the parts. */
#include "planner/planner_int.h"
#include "cost/floor.h"
#include "stage/plan_check.h"
#include "stage/plan_memory.h"

/* Does any activation's canonical cut split the batch (ownership batch)? */
static int batch_can_split(const Model *m, const Machine *mc)
{
	for (int i = 0; i < m->nt; i++) {
		const MTensor *t = &m->t[i];
		if (t->rank == 3 && t->shape[0] > 1 && mc->tiles / planner_largest_uniform(t->shape[1], mc->tiles) > 1)
			return 1;
	}
	return 0;
}

/* Is a (the fit of one ownership) better than b under objective o? Fits
 * first; cycles: fewer total modelled cycles; memory (and when neither
 * fits): the most headroom on the worst tile, in steps of 1%, then the
 * smaller SRAM figure of that tile. */
static int fit_better(const Fit *a, const Fit *b, Objective o)
{
	int fa = planner_fit_ok(a), fb = planner_fit_ok(b);
	if (fa != fb)
		return fa;
	if (o == OBJ_CYCLES && fa && a->cycles != b->cycles)
		return a->cycles < b->cycles;
	int64_t ea = (int64_t)(a->excess * 100), eb = (int64_t)(b->excess * 100);
	if (ea != eb)
		return ea < eb;
	return a->lim.sram < b->lim.sram;
}

/* Under the cycles objective the fastest candidates sit near the limits,
 * and a trial lowers one op alone: the whole plan (phases merged across
 * ops) can pass a limit the trials did not. Then the plan is built again,
 * attempt after attempt, the least change first: with table bytes
 * priced, so that the ops the greedy order meets first leave the budget
 * to those that gain the most cycles from it, then also with each trial
 * kept margin further inside every limit (on the shipped models a margin
 * alone of up to 3% changed no choice, and prices found every fitting
 * plan). A table byte on the worst tile costs
 * price x F / table budget cycles, F the model's compute floor (lib/cost/floor.h,
 * of the first attempt's plan): at 0.3, the whole budget is worth 30% of
 * the essential compute. */
typedef struct {
	double margin, price;
} Attempt;
static const Attempt attempts[] = {
	{ 0, 0 }, { 0, 0.1 }, { 0, 0.3 }, { 0, 0.8 }, { 0.03, 0.3 }, { 0.06, 0.8 }, { 0.10, 0.8 },
};
#define NATTEMPTS (int)(sizeof attempts / sizeof *attempts)

/* One ownership's builds, attempt after attempt (a thread's work). */
typedef struct {
	const Model *m;
	const Machine *mc;
	PlanOpts o;
	int n;                          /* attempts to make */
	int explain;                    /* keep each attempt's Explain */
	Stop *stop;
	Memo *memo;                     /* trials already lowered, for the later attempts */
	int64_t floor;                  /* the first attempt's plan's compute floor */
	Plan pl[NATTEMPTS];
	Explain *ex[NATTEMPTS];
	Err e[NATTEMPTS];
	int rc[NATTEMPTS], built[NATTEMPTS];
	Fit fit[NATTEMPTS];
	double price[NATTEMPTS];        /* each attempt's table price, cycles per byte */
} Own;

static void *own_run(void *arg)
{
	Own *w = arg;
	for (int i = 0; i < w->n; i++) {
		if (planner_past_stop(w->stop, i))
			break;
		w->ex[i] = w->explain ? xcalloc((size_t)w->m->nops + 1, sizeof *w->ex[i]) : NULL;
		double price = attempts[i].price * (double)w->floor / (double)w->mc->table_budget_bytes;
		if (i && w->rc[0])
			price = 0;              /* no plan to take a floor from */
		w->price[i] = price;
		w->rc[i] = planner_build_one(&w->pl[i], w->m, w->mc, &w->o, w->ex[i], attempts[i].margin, price,
					     w->memo, w->stop, i, &w->e[i]);
		if (!i && !w->rc[0]) {
			w->floor = essential_compute(&w->pl[0]);
		}
		if (!w->rc[i])          /* (its cycles on this thread: they rank it, and start the descent) */
			plan_fit(&w->pl[i], w->o.objective == OBJ_CYCLES ? FIT_CYCLES_IF_FITS : FIT_LIMITS, &w->fit[i]);
		w->built[i] = 1;
		if (!w->rc[i] && planner_fit_ok(&w->fit[i])) {
			pthread_mutex_lock(&w->stop->mu);
			if (i < w->stop->stop)
				w->stop->stop = i;
			pthread_mutex_unlock(&w->stop->mu);
			break;
		}
	}
	planner_memo_free(w->memo);
	w->memo = NULL;
	table_release();                /* this thread's rows */
	expand_release_thread();        /* and scratch */
	trial_release();                /* and phases */
	return NULL;
}

static void own_free(Own *w)
{
	for (int i = 0; i < w->n; i++) {
		if (w->built[i] && !w->rc[i])
			plan_free(&w->pl[i]);
		explain_free(w->ex[i], w->ex[i] ? w->m->nops : 0);
		free(w->ex[i]);
	}
}

/* With --ownership auto under the memory and cycles objectives, both
 * ownerships are planned and lowered whole when the batch can split (on
 * two threads), and the better kept (ties: batch). Under cycles, attempt
 * after attempt (attempts[]) until the kept plan fits: attempt i's choice
 * is the better of the two builds at i, each of which depends on its own
 * ownership's attempts alone, so each ownership runs its attempts on its
 * own thread, and both stop past the first attempt at which one fits. The fit check's verdict fails
 * the build, or with no_fit_check goes to o->fit when set. */
static int build_objective(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
			   Explain *ex, Held *held, Err *e)
{
	if (o->objective < OBJ_MEMORY) {
		PlanOpts c = *o;
		if (c.ownership == OWN_AUTO)
			c.ownership = OWN_TOKENS;
		return planner_build_one(pl, m, mc, &c, ex, 0, 0, NULL, NULL, 0, e);
	}
	int n = o->objective == OBJ_CYCLES && (!o->no_fit_check || o->fit) ? NATTEMPTS : 1;
	int two = o->ownership == OWN_AUTO && batch_can_split(m, mc);
	Stop stop = { PTHREAD_MUTEX_INITIALIZER, NATTEMPTS };
	Own *w = xcalloc(2, sizeof *w);         /* [0]: batch (or the one ownership), [1]: tokens */
	for (int k = 0; k < 1 + two; k++) {
		w[k].m = m, w[k].mc = mc, w[k].o = *o, w[k].n = n, w[k].stop = &stop;
		w[k].explain = ex != NULL;
		w[k].memo = n > 1 ? planner_memo_new() : NULL;
	}
	if (w[0].o.ownership == OWN_AUTO)
		w[0].o.ownership = OWN_BATCH;
	w[1].o.ownership = OWN_TOKENS;
	pthread_t th;
	int threaded = two && pthread_create(&th, NULL, own_run, &w[1]) == 0;
	own_run(&w[0]);
	if (threaded)
		pthread_join(th, NULL);
	else if (two)
		own_run(&w[1]);

	/* Attempt by attempt, as if built one after the other: both failed
	 * is the batch ownership's error; else the better kept, done when it
	 * fits. Every attempt up to the first that fits was built by both. */
	int rc = -1, mi = -1, wi = 0;
	for (int i = 0; i < n && w[0].built[i] && (!two || w[1].built[i]); i++) {
		if (w[0].rc[i] && (!two || w[1].rc[i])) {
			*e = w[0].e[i];
			mi = -1;
			break;
		}
		mi = i, wi = 0;
		if (two && (w[0].rc[i] ? !w[1].rc[i] : !w[1].rc[i] && fit_better(&w[1].fit[i], &w[0].fit[i], o->objective)))
			wi = 1;
		if (planner_fit_ok(&w[wi].fit[i]))
			break;
	}
	if (mi >= 0) {
		Own *win = &w[wi];
		Fit fit = win->fit[mi];
		if (held)
			*held = (Held){ win->o.ownership, attempts[mi].margin, win->price[mi], fit.cycles };
		*pl = win->pl[mi];
		win->built[mi] = 0;             /* the caller's now */
		for (int i = 0; ex && i < m->nops; i++) {
			Explain x = ex[i];
			ex[i] = win->ex[mi][i], win->ex[mi][i] = x;
		}
		rc = 0;
		Err fe;
		if (planner_fit_error(pl, m, &fit, &fe)) {
			if (!o->no_fit_check) {
				*e = fe;
				plan_free(pl);
				rc = -1;
			} else if (o->fit) {
				*o->fit = fe;
			}
		} else if (o->fit) {
			o->fit->msg[0] = 0;
		}
	}
	for (int k = 0; k < 1 + two; k++)
		own_free(&w[k]);
	free(w);
	expand_release();               /* the copies and decisions both threads kept */
	trial_forget();
	return rc;
}

/* *pl (built: holds a plan) becomes src, and the ops' explanations
 * (when kept) src's: ex and sex swap, so the caller frees the old ones. */
static void take_plan(Plan *pl, int built, Plan *src, Explain *ex, Explain *sex, int nops)
{
	if (built)
		plan_free(pl);
	*pl = *src;
	for (int i = 0; ex && i < nops; i++) {
		Explain x = ex[i];
		ex[i] = sex[i], sex[i] = x;
	}
}

static int build_cut(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
		     Explain *ex, Err *e);

/* The model planned again with c's options (an alternative of the
 * cycles objective's plan *pl): the faster of the two plans that fit is
 * kept (ties: the first), with its explanations, fit and descent. Both
 * are judged as the programs amp-group writes by default, their phases
 * scheduled (FIT_SCHEDULED), not in record order as the trials and the
 * descent judge theirs. */
static int keep_faster(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o, PlanOpts c,
		       Explain *ex)
{
	int took = 0;
	Err fit2 = { 0 };
	int fell2 = 0;
	Descent d2 = { 0 };
	c.no_retry = 1;         /* an alternative that does not fit as built is no alternative */
	c.fit = o->fit ? &fit2 : NULL, c.fell_back = o->fell_back ? &fell2 : NULL;
	c.descent = o->descent ? &d2 : NULL;
	Plan p2;
	Err e2;
	Fit f1, f2;
	Explain *ex2 = ex ? xcalloc((size_t)m->nops + 1, sizeof *ex2) : NULL;
	if (!build_cut(&p2, m, mc, &c, ex2, &e2)) {
		plan_fit(pl, FIT_SCHEDULED, &f1);       /* the programs amp-group writes */
		plan_fit(&p2, FIT_SCHEDULED, &f2);
		if (planner_fit_ok(&f2) && (!planner_fit_ok(&f1) || f2.cycles < f1.cycles)) {
			take_plan(pl, 1, &p2, ex, ex2, m->nops);
			took = 1;
			if (o->fit)
				*o->fit = fit2;
			if (o->fell_back)
				*o->fell_back = fell2;
			if (o->descent) {
				descent_free(o->descent);
				*o->descent = d2, d2 = (Descent){ 0 };
			}
		} else {
			plan_free(&p2);
		}
	}
	descent_free(&d2);
	explain_free(ex2, ex2 ? m->nops : 0);
	free(ex2);
	return took;
}

/* Homes cut as their GEMMs want them. A GEMM of one row block keeps its
 * weights where they are (build_matmul's weight-stationary case) only
 * when its b blocks are its home's, and planner_param_home cuts a home into as
 * many shards as the tiles allow, which the GEMM's own choice (by exact
 * lowering) may not be. So when the plan has such a GEMM whose b, a
 * stacked parameter (a repeat's: moved every iteration) that no other op
 * reads, is cut otherwise, the model is planned again with that home
 * cut as the GEMM's grid cuts it (keep_faster). A weight moved once a
 * run is not worth a second plan. Returns the cuts when that plan was
 * kept (allocated), else NULL. */
static int64_t *home_cuts(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o, Explain *ex)
{
	int64_t *cut = xcalloc((size_t)(2 * m->nt + 2), sizeof *cut);
	int any = 0;
	for (int g = 0; g < pl->ng; g++) {
		const Gemm *G = &pl->g[g];
		int t = model_find(m, pl->t[G->b].name), home = -1, readers = 0;
		for (int i = 0; t >= 0 && i < m->nops; i++)
			for (int k = 0; k < m->ops[i].nin; k++)
				readers += m->ops[i].in[k] == t;
		for (int i = 0; i < pl->np && home < 0; i++)
			if (pl->p[i].tensor == G->b && plan_writer(pl, i) < 0)
				home = i;
		if (G->grid[0] != 1 || t < 0 || m->t[t].role != T_PARAM || readers != 1 || home < 0 ||
		    pl->t[G->b].count < 2 ||   /* moved once a run: not worth a second plan */
		    pl->p[home].layout != LAYOUT_TRANSPOSED_RIGHT ||
		    (pl->p[home].split[0] == G->grid[1] && pl->p[home].split[1] == G->grid[2]))
			continue;
		cut[2 * t] = G->grid[1], cut[2 * t + 1] = G->grid[2], any = 1;
	}
	PlanOpts c = *o;
	c.home_cut = cut;
	if (any && keep_faster(pl, m, mc, o, c, ex))
		return cut;
	free(cut);
	return NULL;
}

/* Do two adjacent matmuls of one repeat read the same a of more rows
 * than planner_zip_siblings zips by default? */
static int many_row_siblings(const Model *m, const Machine *mc)
{
	for (int i = 0; i + 1 < m->nops; i++) {
		const MOp *p = &m->ops[i], *q = p + 1;
		const MTensor *a = &m->t[p->in[0]];
		if (p->kind == OP_MATMUL && q->kind == OP_MATMUL && p->in[0] == q->in[0] && p->rep == q->rep &&
		    a->rank == 3 && a->shape[0] * a->shape[1] * WIDE_MIN_COLS > mc->tiles)
			return 1;
	}
	return 0;
}

/* Does some op of pl run attention in segments (several attention steps)? */
static int segmented(const Plan *pl)
{
	for (int s = 0; s < pl->ns; s++)
		for (int t = s + 1; pl->s[s].kind == STEP_COMPUTE && pl->s[s].compute == C_ATTENTION && t < pl->ns; t++)
			if (pl->s[t].kind == STEP_COMPUTE && pl->s[t].compute == C_ATTENTION &&
			    !strcmp(pl->s[t].op, pl->s[s].op))
				return 1;
	return 0;
}

/* The most blocks of positions per batch entry and kv head of a state's
 * home that an attention reads in place (home_blocks: its KB), or 0. */
static int64_t home_attention_blocks(const Plan *pl)
{
	int64_t kb = 0;
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind != STEP_COMPUTE || st->compute != C_ATTENTION || st->nin < 3 || st->in[1] != st->in[2])
			continue;
		if (plan_state_home(pl, st->in[1]) && pl->p[st->in[1]].split[1] > kb)
			kb = pl->p[st->in[1]].split[1];
	}
	return kb;
}

/* Attention on a cache's home runs on its blocks of positions, as many
 * as the tiles allow: at a decode step of one sequence, few positions a
 * tile and many partials to merge (Qwen2.5-0.5B at batch 1: 683 blocks
 * of 3 positions a kv head, 443,724 cycles a step). The model is planned
 * again with the homes cut into half as many blocks, and again while
 * that is faster (keep_faster); *cur keeps the last cut kept. */
static void fewer_state_blocks(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o, PlanOpts *cur,
			       Explain *ex)
{
	int64_t kb = o->state_blocks ? 0 : home_attention_blocks(pl);
	while (kb >= 2) {
		PlanOpts c = *cur;
		c.state_blocks = kb / 2;
		if (!keep_faster(pl, m, mc, o, c, ex))
			break;
		*cur = c;
		kb = home_attention_blocks(pl);         /* (0 when no attention reads it in place now) */
	}
}

/* The cycles objective's plan, then its alternatives, each kept when
 * faster and fitting (keep_faster), each built with the choices kept so
 * far: homes cut as their GEMMs want them (home_cuts); then caches'
 * homes in fewer blocks of positions (fewer_state_blocks); then, when the
 * plan folds an rmsnorm into the GEMMs that read it (fold_norm: their
 * reductions must then cut K), none folded; then, when sibling GEMMs
 * have many rows, all of them zipped (planner_zip_siblings); then, when
 * some attention runs in causal segments (attn_segments, chosen by its
 * trial, which does not see what its results' copy to their owners costs
 * later), none in segments. A fold saves the norm's own gather of its
 * sums, but can force a K split that costs more than it saves (Qwen's
 * 512-token prefill: gate and up cut K in two, 3,981,272 cycles folded
 * against 3,839,024 not). Zipped siblings share phases, but keep more
 * buffers live at once. */
int plan_build(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
	       Explain *ex, Err *e)
{
	int rc = build_cut(pl, m, mc, o, ex, e);
	if (rc || o->objective != OBJ_CYCLES)
		return rc;
	PlanOpts cur = *o, c;
	int64_t *cut = o->home_cut ? NULL : home_cuts(pl, m, mc, o, ex);
	if (cut)
		cur.home_cut = cut;
	fewer_state_blocks(pl, m, mc, o, &cur, ex);
	int folds = 0;
	for (int s = 0; s < pl->ns; s++)
		folds |= plan_norm_fold(pl, &pl->s[s]);
	if (folds && !o->no_fold) {
		c = cur, c.no_fold = 1;
		if (keep_faster(pl, m, mc, o, c, ex))
			cur = c;
	}
	if (!o->zip_all && many_row_siblings(m, mc)) {
		c = cur, c.zip_all = 1;
		if (keep_faster(pl, m, mc, o, c, ex))
			cur = c;
	}
	if (!o->no_segments && segmented(pl)) {
		c = cur, c.no_segments = 1;
		keep_faster(pl, m, mc, o, c, ex);
	}
	free(cut);
	return 0;
}

/* A retry of a cycles search that found no plan that fits, with wo's
 * options: its plan, when that search itself fits (not its memory
 * fallback), replaces *pl (built: crc == 0) and returns 0; else -1 and
 * *pl is as it was. */
static int retry(Plan *pl, const Model *m, const Machine *mc, PlanOpts wo, Explain *ex, int crc)
{
	Err wfit = { 0 }, we;
	int fell = 0;
	Plan pw;
	Explain *wex = ex ? xcalloc((size_t)m->nops + 1, sizeof *wex) : NULL;
	wo.no_fit_check = 1, wo.fit = &wfit, wo.fell_back = &fell;
	wo.descent = NULL;
	int rc = build_cut(&pw, m, mc, &wo, wex, &we), take = !rc && !fell && !wfit.msg[0];
	if (take)
		take_plan(pl, !crc, &pw, ex, wex, m->nops);
	else if (!rc)
		plan_free(&pw);
	explain_free(wex, wex ? m->nops : 0);
	free(wex);
	return take ? 0 : -1;
}

/* A cycles search at the default wide unit (WIDE_UNIT) that found no
 * plan that fits is tried again at WIDE_UNIT_WIDER, when the model has
 * wide tensors, and with every result returned to its canonical owners
 * (no maker's cuts): fewer, wider column blocks, so fewer fragments and
 * table bytes on the tiles that gather them (retry). */
static int wider_units(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o, Explain *ex, int crc)
{
	int *cls = xmalloc((size_t)(m->nt + 1) * sizeof *cls), any = 0;
	unsigned char *w = planner_wide_tensors(m, mc, WIDE_UNIT, cls, NULL);
	for (int t = 0; t < m->nt; t++)
		any |= w[t] != 0;
	free(w);
	free(cls);
	if (o->wide_unit || o->no_sibling || !any)      /* (no_sibling: siblings_apart's own, after this) */
		return -1;
	PlanOpts wo = *o;
	wo.wide_unit = WIDE_UNIT_WIDER;
	return retry(pl, m, mc, wo, ex, crc);
}

/* Then, when some matmul reads the a of the matmul just before it (a
 * decoder's gate and up), with no weights on a sibling's tiles: the homes
 * there leave the table budget free when they are placed, but the
 * activations and working buffers that come later are not counted then
 * (retry). */
static int siblings_apart(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o, Explain *ex, int crc)
{
	int any = 0;
	for (int i = 1; i < m->nops; i++)
		any |= m->ops[i].kind == OP_MATMUL && m->ops[i - 1].kind == OP_MATMUL &&
		       m->ops[i].in[0] == m->ops[i - 1].in[0];
	if (o->no_sibling || !any)
		return -1;
	PlanOpts wo = *o;
	wo.no_sibling = 1;
	return retry(pl, m, mc, wo, ex, crc);
}

/* Last, when the plan that did not fit folds an rmsnorm (or, none built
 * (crc), when the model has one): none folded into its GEMMs
 * (fold_norm), whose reductions then need not cut K (retry). */
static int unfolded(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o, Explain *ex, int crc)
{
	int any = 0;
	for (int i = 0; crc && i < m->nops; i++)
		any |= m->ops[i].kind == OP_RMSNORM;
	for (int s = 0; !crc && s < pl->ns; s++)
		any |= plan_norm_fold(pl, &pl->s[s]);
	if (o->no_fold || !any)
		return -1;
	PlanOpts wo = *o;
	wo.no_fold = 1;
	return retry(pl, m, mc, wo, ex, crc);
}

/* Under cycles, the trials rank by cycles and keep only the machine's
 * limits: when no plan they lead to fits (the whole plan's tables pass
 * what the trials saw at every attempt) or none is built (no candidate
 * of an op fits), the memory objective's plan, which keeps the most
 * headroom, is built, and kept when it fits: the fastest fitting plan
 * found. Without a fit verdict (--no-fit-check and no o->fit) there is
 * nothing to fall back on. */
static int build_cut(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
		     Explain *ex, Err *e)
{
	Err fit = { 0 };
	PlanOpts c = *o;
	if (o->fell_back)
		*o->fell_back = 0;
	if (o->descent)
		*o->descent = (Descent){ 0 };
	if (o->objective != OBJ_CYCLES || (o->no_fit_check && !o->fit))
		return build_objective(pl, m, mc, o, ex, NULL, e);
	c.no_fit_check = 1, c.fit = &fit;
	/* the descent's changes come with the ops' explanations */
	Explain *dex = ex ? ex : xcalloc((size_t)m->nops + 1, sizeof *dex);
	Held held;
	int crc = build_objective(pl, m, mc, &c, dex, &held, e);
	if (!crc && !fit.msg[0]) {
		plan_descend(pl, m, mc, o, &held, dex, o->descent);
		if (!ex) {
			explain_free(dex, m->nops);
			free(dex);
		}
		goto fits;
	}
	if (!ex) {
		explain_free(dex, m->nops);
		free(dex);
	}
	if (o->no_retry) {              /* an alternative: no plan that fits, none */
		if (!crc)
			plan_free(pl);
		*e = crc ? *e : fit;
		return -1;
	}
	if (!wider_units(pl, m, mc, o, ex, crc) || !siblings_apart(pl, m, mc, o, ex, crc) ||
	    !unfolded(pl, m, mc, o, ex, crc)) {
		fit.msg[0] = 0;
		goto fits;
	}
	Plan pm;
	Err me, mfit = { 0 };
	Explain *mex = ex ? xcalloc((size_t)m->nops + 1, sizeof *mex) : NULL;
	PlanOpts mo = c;
	mo.objective = OBJ_MEMORY, mo.fit = &mfit;
	int mrc = build_objective(&pm, m, mc, &mo, mex, NULL, &me);
	/* memory's plan when it fits, or when the cycles search built none
	 * (then with its verdict); else the cycles plan with its own. Both
	 * failing: memory's error. */
	int take = !mrc && (!mfit.msg[0] || crc);
	if (take) {
		take_plan(pl, !crc, &pm, ex, mex, m->nops);
		fit = mfit;
		if (o->fell_back && !fit.msg[0])
			*o->fell_back = 1;
	} else if (!mrc) {
		plan_free(&pm);
	}
	explain_free(mex, mex ? m->nops : 0);
	free(mex);
	if (crc && mrc) {
		*e = me;
		return -1;
	}
	if (fit.msg[0] && !o->no_fit_check) {
		*e = fit;
		plan_free(pl);
		return -1;
	}
fits:
	if (o->fit)
		*o->fit = fit;
	return 0;
}

void explain_free(Explain *ex, int n)
{
	for (int i = 0; i < n; i++) {
		free(ex[i].op);
		free(ex[i].best);
		free(ex[i].alt);
	}
}
