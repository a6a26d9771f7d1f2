/* floor: how far each exchange phase and the whole program are from what
 * the machine allows (formats/capture.md, "Floors").
 *
 * Phase floor. Over the phase's fragments (every member of every send
 * transfer whose step lies in the phase; a multicast counts once for its
 * sender and once for each receiver, loopback included), per tile t:
 *
 *   S_t = sum over fragments t sends of ceil(len / exchange_bytes_per_cycle)
 *   R_t = the same over fragments t receives
 *   C_t = send_control_cycles x (fragments t sends)
 *         + receive_control_cycles x (fragments t receives)
 *   floor_t = max(C_t, send_control_cycles + S_t if t sends,
 *                      receive_control_cycles + R_t if t receives)
 *
 * and the phase's floor is the largest floor_t, its tile the lowest one
 * attaining it (-1 when the phase moves nothing). It bounds the replay
 * (lib/cost/replay.h) from below for any order of the phase's transfers: a
 * tile's issue pipeline takes C_t, and each port's fragments serialize
 * after at least one control.
 *
 * The plan's movement floor, an efficiency figure of this plan (not a
 * bound on the model: lib/cost/bound.h is that). compute: the essential
 * compute (essential_compute); movement: the plan's receiver payload over
 * every run spread over every tile's receive port, so a plan that moves
 * more raises it; sync: one barrier per run of each op with a matmul or
 * attention step. Each is rounded up once; total is their sum.
 *
 * One pass over each phase's members; nothing walks bytes.
 */
#ifndef AMP_FLOOR_H
#define AMP_FLOOR_H

#include <stdint.h>

#include "stage/plan.h"

/* The floor of phase p; *tile (may be NULL) receives its tile. */
int64_t phase_floor(const Plan *pl, int p, int64_t *tile);
/* Every phase's floor at once: cycles[nph] and tile[nph] (tile may be
 * NULL). */
void phase_floors(const Plan *pl, int64_t *cycles, int64_t *tile);

typedef struct {
	int64_t compute, movement, sync, total;
} PlanFloor;

void plan_movement_floor(const Plan *pl, PlanFloor *f);

/* The essential compute (matmul from the GEMM records, attention, norms,
 * gelu, silu, rope, add, mul, append's new rows) of whole tensors at the
 * machine's rates, over every run, spread over all tiles and rounded up
 * once. It depends on the model alone, not on the plan. */
int64_t essential_compute(const Plan *pl);

#endif
