/* lower: the lowering sequence, written once (docs/machine.md §5-§6).
 *
 * A plan becomes the program's stage by amp-compose, amp-expand,
 * amp-exchange and amp-group, in that order: plan_compose (join and
 * hoist), SRAM addresses (plan_alloc), plan_expand_steps, plan_exchange,
 * plan_group and, as amp-group does by default, plan_schedule. Every
 * in-process user (the planner's fit check and trials, the benches, the
 * tests) lowers through lower_plan, so what they judge is what the tools
 * write; the tools run one stage each, and amp-group's two steps are
 * lower_group. Two steps may be swapped for ones that give the same
 * stage by another route: the planner's trials place buffers apart
 * themselves (no figure they read depends on where a buffer sits) and
 * group through a cache of amp-group's per-phase decisions
 * (lib/planner/trial.h). Scheduling is optional: it only ever makes a
 * phase faster, never a fitting plan unfit (lib/lower/schedule.h), so a
 * lowering without it bounds the program's cycles from above, and the
 * planner's trials skip it (with it, amp-plan on the 1-layer SigLIP took
 * 167 s instead of 5 s, for a plan 0.4% faster).
 */
#ifndef AMP_LOWER_H
#define AMP_LOWER_H

#include "lower/schedule.h"
#include "stage/plan.h"

typedef struct {
	int compose;            /* amp-compose's rewrite first (a pipeline may leave that stage out) */
	int weights;            /* plan_group's parameter delivery (WEIGHTS_*; 0 is forward) */
	int schedule;           /* order every phase (plan_schedule), or keep record order */
	double per_record;      /* the schedule's price of a record it adds, in cycles */
	int (*alloc)(Plan *pl, Err *e);                 /* NULL: plan_alloc */
	int (*group)(Plan *pl, int weights, Err *e);    /* NULL: plan_group */
	ScheduleStats *stats;   /* or NULL: the schedule's */
} Lowering;

/* The pipeline's defaults: composed, WEIGHTS_DEFAULT, scheduled at
 * SCHEDULE_CYCLES_PER_RECORD as amp-group does, the stages' own allocator
 * and grouping. Callers change fields of this, never build one whole. */
Lowering lowering_default(void);

/* A plan (stage plan) lowered to the grouped stage. Fails with the first
 * stage's error. */
int lower_plan(Plan *pl, const Lowering *lw, Err *e);

/* amp-group's work: phases grouped with weights, then (schedule) ordered. */
int lower_group(Plan *pl, int weights, int schedule, ScheduleStats *stats, Err *e);

#endif
