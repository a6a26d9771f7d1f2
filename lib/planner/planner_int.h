/* planner_int.h: what the parts of the planner share (lib/planner/planner.h is
 * the planner's contract).
 *
 * The parts, highest first; each calls only those below it (never back):
 *
 *   planner.c       plan_build: both ownerships, the attempts with their
 *                   margins and table prices, the best fit kept
 *   planner_descent.c  the cycles objective's descent: the greedy plan's
 *                   ops re-chosen one at a time, each change judged by
 *                   the whole plan lowered exactly
 *   planner_build.c one build of the whole model: homes, every op in
 *                   order, the checks that the machine holds it
 *   planner_ops.c   row-local ops (and folded rmsnorms), broadcasts and a
 *                   repeat's carry
 *   planner_attention.c  attention: its blocks and staging, costed exactly
 *   planner_gemm.c  a matmul's GEMM plan: its candidates ranked by the
 *                   formula, the short list lowered exactly, the one chosen
 *                   built with its casts and deliveries
 *   planner_cost.c  exact costing of one choice of an op: build it, lower
 *                   it against every tile's load (lib/planner/trial.h), take it
 *                   back; the trials kept for the cycles objective's margins
 *   trial.c         the lowering itself (lib/lower/) run on a range of steps
 *   planner_fit.c   does the machine hold a plan (the lowering and the
 *                   capture's limits), the refusal's "Next:", progress
 *   planner_zip.c   steps zipped run by run: sibling GEMMs', causal
 *                   segments'
 *   planner_homes.c  parameter and state homes, norm vectors resident
 *                   beside wide rows, each op's tile load
 *   planner_owners.c  canonical ownership: wide classes and their cuts,
 *                   a class's claim by its maker, fused casts
 *   planner_records.c  the plan's records: tensors, placements, steps
 *
 * The planner sits above the lowering it precedes in the pipeline: it
 * judges candidates by running compose, expand, exchange and group on
 * them (trial.c), the same functions the tools run, not a second formula.
 */
#ifndef AMP_PLANNER_INT_H
#define AMP_PLANNER_INT_H

#include "planner/planner.h"

#include "capture/capture.h"
#include "lower/compose.h"
#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/group.h"
#include "stage/limits.h"
#include "stage/table.h"
#include "planner/trial.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A choice of an op, as the memo and the choices made so far name it: a
 * GEMM candidate's grid, cast order, staging, out staging and reduction;
 * an attention's blocks and key and value staging. */
typedef struct {
	int64_t v[7];
} OpChoice;

/* Trials already lowered (planner_cost.c): under the cycles objective the
 * plan is built again at a larger margin, and up to the first op whose
 * choice changes, the state each trial starts from is the same. */
typedef struct Memo Memo;

/* One plan under construction. */
typedef struct {
	Plan *pl;
	const Model *m;
	const Machine *mc;
	const PlanOpts *o;
	int *canon;             /* plan tensor -> its canonical/home placement */
	int64_t *base;          /* per tile: bytes of homes */
	int64_t next_tile;      /* rotating pointer for homes */
	int *last_use;          /* model tensor -> last op reading it */
	unsigned char *wide;    /* model tensor -> its canonical owners split its columns too, in
				   units of this many wunit columns; 0: whole rows (planner_wide_tensors) */
	int64_t wunit;          /* a wide tensor's least unit of columns (PlanOpts.wide_unit) */
	int maker_cuts;         /* results written where their readers want them (planner_class_claim,
				   reduce_at_class); off at a retry's wider unit: the plans before them */
	int *cls;               /* model tensor -> its class when it may take its maker's cut
				   (planner_wide_tensors), else -1 */
	int *cls_place;         /* class -> the placement its first maker wrote (planner_class_claim),
				   or -1 */
	int *wroot;             /* model tensor -> its class, free or not (planner_wide_tensors): wide_base */
	int *fold_pre;          /* plan tensor -> when it is a folded rmsnorm's result (fold_norm),
				   the tensor its GEMMs read instead (x times the norm's scale), else -1 */
	int *fold_part;         /* plan tensor -> that norm's sums of squares (their placement), else -1 */
	int *fused;             /* plan tensor -> its cast, when its maker writes that instead (a fused
				   cast: planner_ops.c, fused_cast), else -1 */
	int body;               /* first step of the repeat being built */
	int64_t *tab, *frg;     /* per tile: table bytes and fragments of the ops built so far
				   (trial lowering; memory and cycles objectives) */
	double margin;          /* a trial fits within (1 - margin) of every limit */
	double price;           /* cycles objective: cycles one table byte on the worst tile
				 * costs a candidate (Candidate.x_score); 0: tables are free */
	Memo *memo;             /* or NULL */
	int prefix;             /* the choices made so far (the memo's name for them) */
	/* The best trial of the op being chosen so far (planner_trial_build),
	 * by candidate_cmp under the objective, and when op_have its tables:
	 * the op's own trial when that choice is built (planner_trial_op). */
	Candidate op_best;
	OpChoice op_key;
	int op_set, op_have, op_first, op_last;
	int64_t *op_tab, *op_frg, *scratch;     /* per tile; scratch: 3 x tiles */
	int64_t *by, nby;                       /* planner_trial_build's per-placement bytes */
} Builder;

/* Builds one choice of op (a GEMM candidate, an attention's staging). */
typedef void (*BuildFn)(Builder *b, const MOp *op, const void *arg);

/* A lower bound on a choice's rank under the memory objective (planner_cost.c). */
typedef struct {
	int64_t excess, bytes;  /* the worst tile's excess in 1% steps; bytes, all tiles */
} Bound;

/* The whole plan lowered as amp-compose, amp-expand, amp-exchange and
 * amp-group do, and checked as amp-emit does: the worst tiles' figures. */
typedef struct {
	int lowered;                    /* 0: the lowering failed (why) */
	Limits lim;                     /* the worst tiles' figures (lib/stage/limits.h) */
	LimitKind over;                 /* the first limit over; LIMIT_NONE: it fits */
	double excess;                  /* worst ratio of a figure to its limit (to rank the unfitting) */
	int64_t cycles;                 /* total modelled cycles (when asked for) */
	/* over the SRAM: the largest placement on tile lim.sram_tile at its peak step,
	 * and the op that writes it. The planner names a placement
	 * tensor@op.what from the model's names, each at most MODEL_NAME_MAX
	 * bytes (model_name_ok), and its own suffixes, so these hold it whole. */
	int64_t big_bytes, big_step;
	char big[2 * MODEL_NAME_MAX + 64], big_op[MODEL_NAME_MAX + 16];
	char why[sizeof ((Err *)0)->msg];      /* the lowering's error, or the limit over */
} Fit;

/* How the cycles objective's kept plan was built: its ownership, and its
 * attempt's margin and table price (lib/planner/planner.c); its whole-plan
 * cycles when they were measured, else 0. */
typedef struct {
	Ownership own;
	double margin, price;
	int64_t cycles;
} Held;

/* What the ownerships' builds share: the first attempt at which one of
 * them fits (none yet: the number of attempts). Each build stops past it. */
typedef struct Stop {
	pthread_mutex_t mu;
	int stop;
} Stop;

/* planner_records.c: records; planner_owners.c: canonical ownership; planner_homes.c: homes, loads */
int planner_add_tensor(Plan *pl, const char *name, PRole role, int rank, const int64_t *shape,
		       Format fmt, int scale);
int planner_add_place(Plan *pl, Placement *p, int tensor, const char *name, int *existed);
/* planner_add_place under the name op.what (op's own: any length). */
int planner_add_place_of(Plan *pl, Placement *p, int tensor, const char *op, const char *what, int *existed);
void planner_add_copy(Plan *pl, const char *op, Operand opd, Movement mv, int src, int dst);
int planner_add_compute(Plan *pl, const char *op, ComputeKind k, const int *in, int nin,
			int out, double eps);
void planner_canonical_of(const Builder *b, const PTensor *t, Placement *p);
/* Which of the model's activations are owned wide (by token rows and
 * column blocks): see planner_owners.c. The result has m->nt entries. */
unsigned char *planner_wide_tensors(const Model *m, const Machine *mc, int64_t unit, int *cls, int *root);
/* The cut a free class's members take once a maker claimed it, or NULL. */
const Placement *planner_class_placement(const Builder *b, int t);
/* Is t's class free, its cut not claimed, and none of it placed yet? */
int planner_class_open(const Builder *b, int t);
/* Placement pi (of tensor t, which a reduction or a merge just wrote)
 * becomes the canonical cut of t's class when the class is free, nothing
 * of it is placed yet, and pi is whole rows and column blocks without
 * replicas; then t's canonical placement is pi itself. Returns 1 then. */
int planner_class_claim(Builder *b, int t, int pi);
#define WIDE_UNIT 16            /* a wide owner's columns: a GEMM's column group, so that a reduction's
				   blocks can be its result's canonical ones */
#define WIDE_UNIT_WIDER 32      /* when no plan at WIDE_UNIT fits: whole fp8 strips, fewer fragments */
#define WIDE_MIN_COLS 16        /* tiles per token row of a few-row GEMM (a decode step's): its weights
				   stay home, sibling GEMMs zip, norm parameters stay beside the rows */
#define WIDE_MIN_PARTS 2        /* tiles per token row a wide tensor needs: at least two column blocks */
#define ATTN_KB_TRIES 5         /* key-block counts attention tries: the fewest that fit, then at least x1.5, x2, x3, x4 */
#define ATTN_HOME_MARGIN 1.5    /* beside a state's home, more key blocks must beat its trial by this */
#define ATTN_HOME_CHUNKS 4       /* merge chunk widths attention on a state's home tries: 8, 4, 2, 1 columns and up */
#define ATTN_SEGS 2              /* causal segment counts attention tries: 2 and 4 */
#define ATTN_CHUNK_MIN 8        /* columns of a head's chunk of attention partials, at least (a home's
				 * merge also tries narrower: home_tries) */
int planner_canonical(Builder *b, int tensor);
/* *p: cols columns of x's rows (a placement of whole rows and column
 * blocks) whole on each of the row's tiles, replicated over its column
 * blocks, row-major. */
void planner_beside_rows(const Placement *x, int64_t cols, Placement *p);
/* The plan tensor a matmul op reads as a: a folded norm's pre-scaled
 * rows (Builder.fold_pre), a's cast when its maker writes that
 * (Builder.fused), else the model's a. */
int planner_matmul_a(const Builder *b, const MOp *op);
/* Plan tensor src's cast to format to, '<src>.<to>' with src's fp8 scale
 * from the scales (0 without one); made once, placed by its caller. */
int planner_cast_tensor(Builder *b, int src, Format to);
/* The format F whose cast of op's result op writes in its place (a
 * fused cast, formats/plan.md: its result read only by matmuls of b in
 * F, as a), or -1. */
int planner_fused_cast(const Builder *b, const MOp *op);
void planner_tile_load(Builder *b, int op, int64_t *acc);
int64_t planner_base_load(Builder *b, int op);
/* The largest divisor of n that is at most limit. */
int64_t planner_largest_uniform(int64_t n, int64_t limit);
/* Parameter tensor's home (panels: consumed as a GEMM's b); a state's
 * home from tile top on, returning the next free tile; is parameter t read
 * by the host alone; is it some GEMM's b? */
int planner_param_home(Builder *b, int tensor, int panels);
int planner_norm_resident(const Builder *b, int t, Placement *p);
void planner_owners_vector(const Placement *o, int64_t n, Placement *p);
int64_t planner_state_home(Builder *b, int tensor, int64_t top);
int planner_param_host_only(const Model *m, int t);
int planner_param_consumed_as_b(const Model *m, int t);

/* planner_fit.c: the whole plan's lowering and check */
/* want_cycles: FIT_LIMITS (0) the limits alone; FIT_CYCLES (1) also the
 * plan's total cycles (f->cycles, amp-capture's) in record order;
 * FIT_CYCLES_IF_FITS those only when it fits (one lowering for both);
 * FIT_SCHEDULED the cycles of the program amp-group writes by default
 * (its phases scheduled), which plan_build's alternatives compare. */
enum { FIT_LIMITS, FIT_CYCLES, FIT_CYCLES_IF_FITS, FIT_SCHEDULED };
/* " Next: ..." for a "does not fit" message, allocated (the caller frees
 * it): pin op (or NULL), a smaller batch, a machine file with more tiles. */
char *plan_next_steps(const Plan *pl, const char *op);
void plan_fit(const Plan *pl, int want_cycles, Fit *f);
int planner_fit_ok(const Fit *f);
/* 1 and why (size bytes) when f does not fit: the lowering's error, or
 * the limit over as limits_error words it; else 0 */
int planner_fit_why(const Fit *f, char *why, size_t size);
/* The parameters' homes fit; the SRAM walk fits (errors name the model). */
int planner_fit_check_params(Builder *b, Err *e);
int planner_fit_check_memory(Builder *b, Err *e);
/* The refusal of a plan f says does not fit: the tile, the figure, Next. */
int planner_fit_error(const Plan *pl, const Model *m, const Fit *f, Err *e);

/* planner_build.c: one build (stop may be NULL); is attempt i past the
 * first that fit? planner_zip_siblings: two adjacent GEMMs reading the same a
 * share their phases (op i's steps are [op_first[i], op_end[i]), a
 * repeat's carries outside every op's). */
void planner_zip_siblings(Builder *b, const int *op_first, const int *op_end);
/* Steps [f0, f1) and [f1, f2) zipped run by run: the computes of both,
 * then the copies of both; each keeps its order, and a step of the second
 * waits for any step of the first it depends on. */
void planner_zip_steps(Plan *pl, int f0, int f1, int f2);
int planner_past_stop(Stop *stop, int i);
int planner_build_one(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
		      Explain *ex, double margin, double price, Memo *memo, Stop *stop, int attempt, Err *e);

/* planner_descent.c: each GEMM's best trials kept for the descent */
#define DESCENT_KEEP 6
void plan_descend(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o, const Held *h,
		  const Explain *ex, Descent *log);

/* planner_gemm.c */
int64_t planner_op_start(const Builder *b, const MOp *op);
/* planner_gemm_trial.c: a matmul's GEMM plan, chosen and built */
int plan_matmul(Builder *b, const MOp *op, Explain *ex, Err *e);
/* planner_gemm.c's parts the trials (planner_gemm_trial.c) share: every
 * candidate its pins allow, scored, to fn in one fixed order (may, when
 * not NULL, says which cannot matter to fn: neither scored nor given;
 * returns how many there are); the formula's choice; the build of one
 * candidate. */
typedef void (*MatmulEachFn)(void *ctx, const Candidate *c);
typedef int (*MatmulMayFn)(void *ctx, const Candidate *c);
int64_t planner_matmul_each(const Builder *b, const MOp *op, const GemmShape *gs, MatmulEachFn fn, MatmulMayFn may,
			    void *ctx);
int planner_matmul_choose(Builder *b, const MOp *op, const GemmShape *gs, Candidate *best, Explain *ex, Err *e);
void planner_matmul_build(Builder *b, const MOp *op, const GemmShape *gs, const Candidate *c);

/* planner_cost.c */
double planner_limit_excess(const Machine *mc, int64_t table, int64_t frags, int64_t sram);
int planner_cannot_beat(Bound bd, const Candidate *beat);
/* The cycles objective's rank of a trial of op that took cycles (-1:
 * unknown, then -1) and left the worst tile with table bytes: cycles
 * times the op's runs plus b->price times table (Candidate.x_score). */
int64_t planner_trial_score(const Builder *b, const MOp *op, int64_t cycles, int64_t table);
Memo *planner_memo_new(void);
void planner_memo_free(Memo *mm);
/* Before an op's trials: no best trial yet. */
void planner_trial_reset(Builder *b);
/* k (a choice of op) was lowered by planner_trial_build (or by none) and is now
 * built: the choices made so far include it. */
void planner_trial_decide(Builder *b, const MOp *op, const OpChoice *k);
/* The steps first.. of op, built, lowered (plan_trial) and added to every
 * tile's tables and fragments (b->tab, b->frg); the op's best trial's
 * figures when they are those steps' (the same plan, lowered the same
 * way). */
int planner_trial_op(Builder *b, const MOp *op, int first, Err *e);
void planner_trial_build(Builder *b, const MOp *op, BuildFn build, const void *arg, const OpChoice *k,
			 const int64_t *load, Bound *bound, int64_t *lb, Candidate *c);

/* planner_ops.c */
void plan_rowlocal(Builder *b, const MOp *op);
void plan_broadcast(Builder *b, const MOp *op);
/* planner_attention.c */
int plan_attention(Builder *b, const MOp *op, Err *e);
/* planner_ops.c */
void plan_append(Builder *b, const MOp *op);
void plan_last(Builder *b, const MOp *op);
void plan_carry(Builder *b, const char *op, int from, int to);

#endif
