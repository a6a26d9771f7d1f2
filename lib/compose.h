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
 * Returns the number of pairs joined.
 */
#ifndef AMP_COMPOSE_H
#define AMP_COMPOSE_H

#include "plan.h"

int plan_compose(Plan *pl);

#endif
