/* planner_descent.c: the cycles objective's descent.
 *
 * The greedy build chooses each op once, in model order, against what the
 * earlier ops left on the tiles, and a table price may have pushed an op
 * off its fastest trial so that the whole plan fits. Choices interact
 * (later ops' tables, phase merging), so the greedy plan is improved as a
 * whole. A GEMM's changes are its trials that fit with a formula estimate
 * below its choice's (Explain.alt, at most DESCENT_KEEP). The
 * DESCENT_TRIES that promise the most (the estimate's saving times the
 * op's runs; each op's first change before any op's second) are each
 * built with every other GEMM held at its choice (attention and the
 * row-local ops chosen again, at the kept attempt's margin and price),
 * and the whole plan lowered as amp-compose, amp-expand, amp-exchange and
 * amp-group --schedule record do, on two threads: its exact cycles and
 * the machine's limits judge. The fastest change that fits and beats the
 * greedy plan is kept; when changes of two or more ops beat it, all of
 * them together are built too and kept when faster still. One round:
 * each try is a whole build and lowering (about a second on the
 * 27-layer SigLIP). */
#include "planner/planner_int.h"

#define DESCENT_TRIES 2

enum { HELD = 2 };      /* MOp.pinned: held by the descent (not the model's pin) */

typedef struct {
	int op[DESCENT_TRIES];          /* model op indices */
	const Candidate *c[DESCENT_TRIES];
	int n;
	Plan q;
	int built;                      /* q holds a plan */
	Fit f;
	Err e;
} Try;

typedef struct {
	const Model *m;
	const Machine *mc;
	const PlanOpts *o;
	const Held *h;
	const Plan *pl;
	Try *t;
	int n, next;
	pthread_mutex_t mu;
} Work;

static const Gemm *gemm_of(const Plan *pl, const char *op)
{
	int k = plan_gemm_index(pl, op);
	return k >= 0 ? &pl->g[k] : NULL;
}

static void pin(MOp *op, const int64_t grid[3], CastOrder cast, Staging st, int unpack, int scatter)
{
	memcpy(op->grid, grid, sizeof op->grid);
	op->cast = cast, op->staging = st;
	op->out_staging = unpack + 1, op->reduce = scatter + 1;
	if (!op->pinned)
		op->pinned = HELD;
}

/* Builds t: every GEMM held at pl's choice but t's ops, at t's choices. */
static void try_build(const Work *w, Try *t)
{
	const Model *m = w->m;
	MOp *ops = xmalloc((size_t)m->nops * sizeof *ops);
	memcpy(ops, m->ops, (size_t)m->nops * sizeof *ops);
	for (int i = 0; i < m->nops; i++) {
		const Gemm *g = ops[i].kind == OP_MATMUL ? gemm_of(w->pl, ops[i].name) : NULL;
		if (g)
			pin(&ops[i], g->grid, g->cast, g->staging, g->unpack, g->scatter);
	}
	for (int k = 0; k < t->n; k++) {
		const Candidate *c = t->c[k];
		pin(&ops[t->op[k]], c->grid, c->cast, c->staging, c->unpack, c->scatter);
	}
	Model held = *m;
	held.ops = ops;
	PlanOpts o = *w->o;
	o.objective = OBJ_CYCLES, o.ownership = w->h->own, o.explain = 0;
	o.no_fit_check = 1, o.fit = NULL, o.fell_back = NULL, o.descent = NULL;
	o.progress = NULL;      /* the tries report themselves (try_run) */
	if (planner_build_one(&t->q, &held, w->mc, &o, NULL, w->h->margin, w->h->price, NULL, NULL, 0, &t->e) == 0) {
		t->built = 1;
		plan_fit(&t->q, FIT_CYCLES, &t->f);
	}
	free(ops);
}

static void *try_run(void *arg)
{
	Work *w = arg;
	for (;;) {
		pthread_mutex_lock(&w->mu);
		int i = w->next < w->n ? w->next++ : -1;
		pthread_mutex_unlock(&w->mu);
		if (i < 0)
			break;
		if (w->o->progress) {
			char *what = xasprintf("descent: %s", w->m->ops[w->t[i].op[0]].name);
			plan_progress(w->o, what, i + 1, w->n);
			free(what);
		}
		try_build(w, &w->t[i]);
	}
	table_release();
	expand_release_thread();
	trial_release();
	return NULL;
}

/* Builds w's tries on two threads (each alone, so the result does not
 * depend on which thread built it). */
static void try_all(Work *w)
{
	w->next = 0;
	pthread_t th;
	int threaded = w->n > 1 && pthread_create(&th, NULL, try_run, w) == 0;
	try_run(w);
	if (threaded)
		pthread_join(th, NULL);
}

static int64_t try_cycles(const Try *t)
{
	return t->built && planner_fit_ok(&t->f) ? t->f.cycles : -1;
}

/* A change: op i's candidate c, promising gain. */
typedef struct {
	int op;
	const Candidate *c;
	int64_t gain;
	int rank;               /* its place among the op's changes */
} Change;

/* Each op's most promising change first (by promise), then each op's
 * second, and so on. */
static int by_gain(const void *a, const void *b)
{
	const Change *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->gain != y->gain)
		return x->gain > y->gain ? -1 : 1;
	if (x->op != y->op)
		return x->op < y->op ? -1 : 1;
	return x->c < y->c ? -1 : x->c > y->c;      /* the op's own order */
}

static void log_try(Descent *log, const Model *m, const Try *t, int64_t gain, int taken)
{
	if (!log)
		return;
	for (int k = 0; k < t->n; k++) {
		log->t = xrealloc(log->t, (size_t)(log->n + 1) * sizeof *log->t);
		DescentTry *d = &log->t[log->n++];
		memset(d, 0, sizeof *d);
		d->op = xstrdup(m->ops[t->op[k]].name);
		d->c = *t->c[k];
		d->gain = t->n == 1 ? gain : -1;
		d->cycles = t->built ? t->f.cycles : -1;
		d->fits = t->built && planner_fit_ok(&t->f);
		d->taken = taken;
		d->together = t->n > 1;
		char why[sizeof t->e.msg] = "";
		if (!t->built)
			snprintf(why, sizeof why, "%s", t->e.msg);
		else
			planner_fit_why(&t->f, why, sizeof why);
		size_t n = strlen(why) < sizeof d->why ? strlen(why) : sizeof d->why - 1;
		memcpy(d->why, why, n);         /* cut to the log's room */
		d->why[n] = 0;
	}
}

void plan_descend(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o, const Held *h,
		  const Explain *ex, Descent *log)
{
	int64_t base = h->cycles;
	if (base <= 0) {
		Fit f;
		plan_fit(pl, FIT_CYCLES, &f);
		if (!planner_fit_ok(&f))
			return;
		base = f.cycles;
	}
	if (log)
		log->before = log->after = base;

	/* the changes, most promising first */
	Change *ch = NULL;
	int nch = 0;
	for (int i = 0; i < m->nops; i++) {
		const Explain *x = &ex[i];
		int64_t runs = m->ops[i].rep >= 0 ? m->rep[m->ops[i].rep].count : 1;
		for (int k = 0; x->op && k < x->nalt; k++) {
			ch = xrealloc(ch, (size_t)(nch + 1) * sizeof *ch);
			ch[nch++] = (Change){ i, &x->alt[k], (x->choice_cycles - x->alt[k].cycles) * runs, k };
		}
	}
	if (!nch)
		return;
	qsort(ch, (size_t)nch, sizeof *ch, by_gain);
	if (nch > DESCENT_TRIES)
		nch = DESCENT_TRIES;

	Work w = { m, mc, o, h, pl, xcalloc((size_t)nch, sizeof *w.t), nch, 0, PTHREAD_MUTEX_INITIALIZER };
	for (int i = 0; i < nch; i++)
		w.t[i].op[0] = ch[i].op, w.t[i].c[0] = ch[i].c, w.t[i].n = 1;
	try_all(&w);

	/* the fastest single change; and the changes that beat the greedy
	 * plan, each op's first, together */
	int best = -1;
	Try all = { 0 };        /* all.n: the ops whose change beat it */
	for (int i = 0; i < nch; i++) {
		int64_t cy = try_cycles(&w.t[i]);
		if (cy < 0 || cy >= base)
			continue;
		if (best < 0 || cy < try_cycles(&w.t[best]))
			best = i;
		int k = 0;
		while (k < all.n && all.op[k] != ch[i].op)
			k++;
		if (k == all.n)
			all.op[all.n] = ch[i].op, all.c[all.n++] = ch[i].c;
	}
	int64_t kept = best >= 0 ? try_cycles(&w.t[best]) : base;
	int together = 0;
	if (all.n > 1) {
		Work both = { m, mc, o, h, pl, &all, 1, 0, PTHREAD_MUTEX_INITIALIZER };
		try_all(&both);
		int64_t cy = try_cycles(&all);
		together = cy >= 0 && cy < kept;
		if (together)
			kept = cy;
	}
	for (int i = 0; i < nch; i++)
		log_try(log, m, &w.t[i], ch[i].gain, !together && i == best);
	if (all.n > 1)
		log_try(log, m, &all, -1, together);
	if (log)
		log->after = kept;

	Try *win = together ? &all : best >= 0 ? &w.t[best] : NULL;
	if (win) {              /* its held ops are no pins of the model (pinned: false) */
		plan_free(pl);
		*pl = win->q;
		win->built = 0;
	}
	for (int i = 0; i < nch; i++)
		if (w.t[i].built)
			plan_free(&w.t[i].q);
	if (all.built)
		plan_free(&all.q);
	free(w.t);
	free(ch);
	table_release();
	expand_release();
	trial_forget();
}

void descent_free(Descent *d)
{
	for (int i = 0; d && i < d->n; i++)
		free(d->t[i].op);
	if (d)
		free(d->t);
}
