/* compose: amp-compose's rewrite of a plan (docs/machine.md §5).
 *
 * A copy X -> S immediately followed by a copy S -> Y that replicates
 * (Y has more replicas than S) becomes one copy X -> Y, and S disappears,
 * when all of these hold:
 *   - the first copy is an identity-layout or native-panel mapping (a
 *     conversion that needs packing keeps its pack-once staging);
 *   - S is read by nothing else (an intermediate with other uses stays);
 *   - neither copy is a reduction, and the second is not a relay;
 *   - nothing runs between them (no compute boundary: the two steps are
 *     adjacent), and S is not a placement of an output tensor.
 * A precision cast is compute, so no copy pair can straddle one.
 * That is plan_join; plan_compose joins, then hoists (plan_hoist).
 * Both return the number of pairs joined.
 */
#ifndef AMP_COMPOSE_H
#define AMP_COMPOSE_H

#include "stage/plan.h"

int plan_compose(Plan *pl);
int plan_join(Plan *pl);

/* Fewer supersteps: a run of copies that follows compute steps moves
 * ahead of them when every copy in it moves a parameter vector (rank 1:
 * a layernorm's scale or bias, a GEMM's bias; its source a parameter
 * placement, its destination one of the same tensor) and none of those
 * computes reads or writes a placement of that tensor, and a
 * copy step precedes the computes in the same repeat region (never across
 * a body's boundary). The run then joins the copies before it in one
 * exchange phase (amp-group merges phases with no compute between), one
 * sync fewer; the parameters' buffers live from their earlier copy on,
 * which the allocator and every memory figure see (a vector's shard is
 * a few KiB at most; weight matrices, whose buffers would raise a tile's
 * peak, stay where they are). So do copies of an activation (a decode
 * step's q beside the new keys and values; a prefill's keys and values
 * for attention beside their rows for the cache's append) when none of
 * those computes writes their source placement or reads or writes their
 * destination: their buffers too live from the earlier copy on, which the
 * planner's fit check sees (it lowers through this). Returns the number
 * of copy steps moved. */
int plan_hoist(Plan *pl);

#endif
