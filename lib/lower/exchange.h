/* exchange: expanded stage -> exchange stage (docs/machine.md §6, amp-exchange).
 *
 * Every copy step that sends anything becomes one exchange phase. Each
 * multicast request family becomes SEND/RECEIVE fragments: first,
 * members that continue each other on the sender and on every receiver
 * (innermost loop stepping by exactly len, on the same tiles) are joined
 * into one span; then every span longer than max_transfer_bytes is cut
 * into max_transfer_bytes fragments and a shorter tail. A change of
 * receivers or a gap stops a join. Joining cannot make runs that
 * expansion split apart contiguous: expansion already emits maximal runs.
 * Local copies and zero padding pass through unchanged.
 */
#ifndef AMP_EXCHANGE_H
#define AMP_EXCHANGE_H

#include "stage/plan.h"

int plan_exchange(Plan *pl, Err *e);
/* Joins and cuts one family; writes 1 or 2 records to out (body, tail). */
int xfer_fragment(const Xfer *x, int64_t max_bytes, Xfer out[2]);
/* The phase label of copy step s: "op.operand", in a new string. */
char *step_label(const Plan *pl, int s);

#endif
