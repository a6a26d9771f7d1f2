/* group: exchange stage -> grouped stage (docs/machine.md §6, amp-group).
 *
 * Adjacent phases merge when no compute step lies between them: nothing
 * needs the first phase's data before the second runs, so one barrier
 * serves both. Every tile keeps its transfer order: transfers stay in
 * record order, which is program order, so a tile's instructions follow
 * the memory dependencies of its ordered accesses (a read after an
 * overlapping write, a write after an overlapping read or write). Nothing
 * sorts a phase.
 *
 * Parameter delivery: a multicast of a parameter from its home goes to
 * every receiver (weights_direct, amp-group's default), or to the first
 * tile of its receivers, which forwards it to the rest in the same phase
 * (receive, then forward: the forward family follows the delivery it
 * depends on). Forwarding adds a send per fragment on that tile and a
 * dependency to the replay: on every model measured it costs more table
 * bytes, fragments and cycles, so it is kept for comparison.
 */
#ifndef AMP_GROUP_H
#define AMP_GROUP_H

#include "stage/plan.h"

/* Parameter delivery: forwarded by the first receiver, direct to every
 * receiver, or chosen per phase (auto: forwarded where that phase's
 * modelled cycles are fewer and its largest table row no larger). */
enum { WEIGHTS_FORWARD, WEIGHTS_DIRECT, WEIGHTS_AUTO };
/* amp-group's default, and what amp-plan costs with. */
#define WEIGHTS_DEFAULT WEIGHTS_AUTO

const char *weights_name(int mode);
int plan_group(Plan *pl, int weights, Err *e);
/* Checks that no tile reads bytes of a copy step before the transfer of
 * the same step that writes them (a forward before its receive). Across
 * steps record order is program order, so a read before a later write is
 * the intended write-after-read order, not a hazard. */
int group_check_order(const Plan *pl, Err *e);

#endif
