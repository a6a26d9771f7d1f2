/* planner: model + machine -> plan (docs/machine.md §5).
 *
 * Inputs are owned canonically (token rows, batch kept together); every
 * parameter gets a compact home (each byte once, tiles assigned by a
 * rotating pointer so memory stays balanced) in its consumer's layout;
 * row-local ops run on the owners; each matmul gets one GEMM plan, pinned
 * or chosen by enumerating every valid grid, cast order and staging and
 * ranking them (lib/stage/gemm.h). The plan is emitted uncomposed: every operand
 * delivery that replicates is a conversion into a stage on the first
 * replica followed by a replication (amp-compose merges what it may).
 */
#ifndef AMP_PLANNER_H
#define AMP_PLANNER_H

#include "stage/gemm.h"
#include "model/model.h"
#include "stage/plan.h"
#include "model/scales.h"

/* Canonical ownership: token rows with the batch kept together (tokens),
 * or the batch split across owners as far as the tiles left over allow
 * (batch). auto: under the memory and cycles objectives, when the batch
 * can split, both are planned and lowered whole and the better kept
 * (fitting first; cycles: fewer modelled cycles; memory: more headroom on
 * the worst tile, then less SRAM there; ties: batch); the capacity
 * baseline keeps tokens. */
typedef enum { OWN_AUTO, OWN_TOKENS, OWN_BATCH } Ownership;

/* The cycles objective's descent (lib/planner/planner_descent.c): one GEMM's
 * choice changed in the greedy plan, the others held, the whole plan
 * lowered again. */
typedef struct {
	char *op;
	Candidate c;            /* the new choice, with its trial's figures from the greedy build */
	int64_t gain;           /* what the formula promised: its estimate below the choice's, times
				 * the op's runs (-1: tried together) */
	int64_t cycles;         /* the whole plan's modelled cycles with it; -1: it was not built */
	int fits;               /* the whole plan within the machine's limits */
	int together;           /* tried with the other ops' changes that beat the greedy plan */
	int taken;
	char why[160];          /* when not built or not fitting: why */
} DescentTry;

typedef struct {
	int64_t before, after;  /* the whole plan's cycles: greedy, and kept */
	DescentTry *t;
	int n;
} Descent;

void descent_free(Descent *d);

/* Progress, for a tool to show on a terminal: what the planner is at
 * (e.g. "attempt 1: mlp_up"), done of total. Called from the planner's
 * threads, at most one call at a time. */
typedef void (*PlanProgress)(void *ctx, const char *what, int done, int total);

typedef struct {
	Objective objective;
	int explain;            /* candidates to keep per GEMM for explain */
	const Scales *scales;   /* fp8 scale exponents by tensor name, or NULL */
	Ownership ownership;
	int no_fit_check;       /* memory, cycles: write the plan even when the machine cannot hold it */
	Err *fit;               /* with no_fit_check, when set: the fit check's error (msg "" when it fits) */
	int *fell_back;         /* cycles, when set: 1 when the plan is the memory objective's
				 * (the cycles search found none that fits, and it fits), else 0 */
	Descent *descent;       /* cycles, when set: the descent's tries (descent_free) */
	PlanProgress progress;  /* or NULL */
	void *progress_ctx;
	/* plan_build's own second pass (NULL from its callers): per model
	 * tensor t, home_cut[2t] and [2t + 1] the K and column cut of a GEMM
	 * operand b's home (0: planner_param_home's own) */
	const int64_t *home_cut;
	/* build_cut's own retry (0 from its callers: WIDE_UNIT): the columns
	 * of a wide tensor's unit */
	int wide_unit;
	/* build_cut's own retry (0 from its callers): no few-row GEMM's
	 * weights placed on its sibling's tiles (least_loaded_base) */
	int no_sibling;
	/* build_cut's own retry (0 from its callers): no rmsnorm folded into
	 * the reductions of the GEMMs that read it (fold_norm) */
	int no_fold;
	/* plan_build's own alternative (0 from its callers): sibling GEMMs
	 * zipped whatever their rows, not only few-row ones
	 * (planner_zip_siblings) */
	int zip_all;
	/* plan_build's alternatives (0 from its callers): a cycles search
	 * that finds no plan that fits fails, with no retry or fallback */
	int no_retry;
	/* no causal attention cut into segments (attn_segments): amp-plan
	 * --no-segments, and plan_build's alternative */
	int no_segments;
	/* a state's home cut into at most this many blocks of positions per
	 * batch entry and kv head (0: as many as the tiles allow,
	 * planner_state_home): amp-plan --state-blocks, and plan_build's
	 * alternative */
	int64_t state_blocks;
} PlanOpts;

/* Calls o->progress (when set) under a lock: the planner's threads share it. */
void plan_progress(const PlanOpts *o, const char *what, int done, int total);

typedef struct {
	char *op;
	int64_t considered, fitting;
	Candidate *best;        /* up to PlanOpts.explain, best first */
	int nbest;
	int64_t avail, base;    /* bytes per tile available, and already in use */
	int exact;              /* candidates lowered exactly (memory and cycles objectives) */
	double price, margin;   /* cycles: the attempt's table price (cycles per byte on the
				 * worst tile) and margin (lib/planner/planner.c) */
	/* cycles: the descent's changes (lib/planner/planner_descent.c): the trials
	 * that fit and whose formula estimate is below the choice's
	 * (choice_cycles), lowest first, at most DESCENT_KEEP; the same with
	 * or without --explain */
	Candidate *alt;
	int nalt;
	int64_t choice_cycles;
} Explain;

/* Builds pl from the model; fills ex[nops] (NULL to skip) for matmuls.
 * Errors about pins and ops carry the model file's line and column. */
int plan_build(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
	       Explain *ex, Err *e);
void explain_free(Explain *ex, int n);
/* Lowers pl as amp-compose, amp-expand, amp-exchange and amp-group (weights
 * direct) do and checks it as amp-emit does: 0 when every tile is within
 * the table budget, the fragment limit and SRAM with its tables; else -1
 * naming the tile and figure, and the parameter bytes no plan avoids, at
 * the model's params mark. plan_build runs it for the memory and cycles
 * objectives unless no_fit_check. */
int plan_check_fit(const Plan *pl, const Model *m, Err *e);
/* 1 when the planner built the plan with ownership batch (its activations'
 * canonical owners split the batch), else 0 (and for a plan read from a
 * stage). */
int plan_batch_split(const Plan *pl);

#endif
