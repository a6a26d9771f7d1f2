/* trial: the exact exchange cost of a range of plan steps, per tile, by the
 * lowering itself (amp-plan's costing; docs/machine.md §5 "one geometry").
 *
 * plan_trial lowers copy steps first..last of a plan under construction
 * the way amp-expand, amp-exchange and amp-group do (the same functions,
 * not a second formula): every copy expanded into transfers, cut into
 * fragments, phases grouped, parameters delivered as amp-group --weights
 * (WEIGHTS_FORWARD, WEIGHTS_DIRECT or WEIGHTS_AUTO, lib/lower/group.h).
 * It then builds every tile's rows (lib/stage/table.h) and adds, per tile, the
 * rows' encoded bytes to table[] and their instructions to frags[].
 * cycles (may be NULL) receives the steps' modelled cycles, once each
 * (not times a repeat's count): every phase's replay (lib/replay) and
 * sync_cycles, the local copies (lib/cost) and the compute steps' slowest
 * tiles (lib/cost), as amp-capture counts them.
 *
 * Addresses: the plan has none yet, so each placement gets its own
 * synthetic buffer, apart from every other; a copy destination that may
 * alias its source (plan_lifetimes) takes the source's, as amp-expand's
 * allocator gives it when it can. The figures therefore equal the
 * emitted program's, except that (a) a receive that happens to continue
 * a receive into a neighbouring buffer costs 4 B less there, (b) rows a
 * tile already holds are counted again (no sharing), and (c) phases of
 * this range that amp-group merges with a neighbouring op's phase cost
 * their 8 B row once there. Each difference makes the trial an upper
 * bound of the program's figure.
 */
#ifndef AMP_TRIAL_H
#define AMP_TRIAL_H

#include <stdint.h>

#include "stage/plan.h"

int plan_trial(const Plan *pl, int first, int last, int weights, int64_t *table,
	       int64_t *frags, int64_t *cycles, Err *e);
/* plan_trial with cycles (required) a lower bound of plan_trial's: each
 * phase's replay bounded below by its busiest tile's sends, receives or
 * control cycles (lib/cost/replay.h), without replaying it. */
int plan_trial_bound(const Plan *pl, int first, int last, int weights, int64_t *table,
		     int64_t *frags, int64_t *cycles, Err *e);
/* plan_group(pl, weights, e) on a plan just through plan_exchange (one
 * phase per copy step, transfers in step order), as plan_trial groups: the
 * same result, with amp-group's auto decision for each copy kept by the
 * shapes of its two placements (lib/planner/trial.c) and used again without its
 * replays. */
int trial_group(Plan *pl, int weights, Err *e);
/* plan_trial keeps, per thread, each phase it lowered (its rows, the lower
 * bound of its cycles and, once replayed, its cycles) by the shapes of its
 * copies' placements; trial_release frees the calling thread's. The
 * decisions trial_group kept are for all threads; trial_forget frees them
 * (no thread may be in plan_trial or trial_group then). */
void trial_release(void);
void trial_forget(void);

#endif
