/* trial: the exact exchange cost of a range of plan steps, per tile, by the
 * lowering itself (amp-plan's costing; docs/machine.md §5 "one geometry").
 *
 * plan_trial lowers copy steps first..last of a plan under construction
 * the way amp-expand, amp-exchange and amp-group do (the same functions,
 * not a second formula): every copy expanded into transfers, cut into
 * fragments, phases grouped, parameters delivered as amp-group --weights
 * (WEIGHTS_FORWARD, WEIGHTS_DIRECT or WEIGHTS_AUTO, lib/group.h).
 * It then builds every tile's rows (lib/table.h) and adds, per tile, the
 * rows' encoded bytes to table[] and their instructions to frags[].
 * cycles (may be NULL) receives the steps' modelled cycles, once each
 * (not times a repeat's count): every phase's replay (lib/replay) and
 * sync_cycles, the local copies (lib/cost) and the compute steps' slowest
 * tiles (lib/cost), as amp-capture counts them.
 *
 * Addresses: the plan has none yet, so each placement gets its own
 * synthetic address, far from every other; a copy destination that may
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

#include "plan.h"

int plan_trial(const Plan *pl, int first, int last, int weights, int64_t *table,
	       int64_t *frags, int64_t *cycles, Err *e);

#endif
