/* cost: the compute cost model (formats/machine.md, machine version 2).
 *
 * A compute step runs on every tile of its output placement, replicas
 * included; the machine is bulk-synchronous, so the step takes as long as
 * its slowest tile. One tile's cycles come from the shards it holds
 * (elements are logical, padding excluded):
 *
 *   matmul             ceil(rows x K x cols / amp_macs_per_cycle[format of a])
 *                      + matmul_call_cycles; rows and cols of the tile's
 *                      output shard (its partial when K is cut), K the
 *                      columns of its a shard
 *   attention          per group of the tile's heads that share a kv head
 *                      (r of them, stacked as r x rows query rows): two
 *                      products of ceil(r x rows x keys x D / fp16 rate)
 *                      + matmul_call_cycles each; and per head, rows x keys
 *                      scores x reduction_cycles_per_element; keys the
 *                      tile's key block, D the heads' width
 *   gelu, add, cast    output elements x elementwise_cycles_per_element
 *   layernorm, reduce  elements of its in[0] shard x reduction_cycles_per_element
 *   pack               ceil(output shard bytes, padding included
 *                      / local_copy_bytes_per_cycle)
 *   any other kind     as gelu, until cost.c gives it its own case
 *
 * A kind costed from its output shard alone is algebra on the placement:
 * the first shard is full on every axis, hence the largest, and its first
 * replica is the first tile place_each visits. Kinds that read an input
 * shard visit the output's shards and look up the input on the same tile.
 *
 * A local copy (Xfer kind local) costs ceil(bytes / local_copy_bytes_per_cycle)
 * on its tile; zero fills (kind zero) are not costed.
 */
#ifndef AMP_COST_H
#define AMP_COST_H

#include <stdint.h>

#include "stage/plan.h"

/* Cycles of compute step `step`: its slowest tile's. *worst_tile (may be
 * NULL) receives that tile, the first in place_each order among the
 * slowest. A copy step costs 0 here, with worst tile -1. */
int64_t step_cycles(const Plan *pl, int step, int64_t *worst_tile);
/* The same per tile: per[tiles] receives each tile's cycles (0 where the
 * step does not run); returns the slowest's. The trace's compute slices. */
int64_t step_cycles_tiles(const Plan *pl, int step, int64_t *per);
/* Tiles that run compute step `step`: its output's shards x replicas
 * (0 for a copy step). */
int64_t step_tiles(const Plan *pl, int step);
/* Local copies of the copy steps first..last: the cycles of the tile with
 * the most local bytes, 0 when there are none. *worst_tile (may be NULL)
 * receives that tile (the lowest-numbered among equals), or -1. */
int64_t local_copy_cycles(const Plan *pl, int first, int last, int64_t *worst_tile);

/* Compute sets: compute steps that run side by side, as one compute set
 * of the machine. Consecutive compute steps join one set while each
 * shares no tile with the set's steps before it (the tiles of its
 * output's shards and replicas) and touches no tensor one of them writes,
 * nor writes one they read; a repeat body's first step starts a set, and
 * so does every step after a copy step. lead[first..last] receives the
 * first step of each compute step's set, -1 for a copy step. */
void compute_sets(const Plan *pl, int first, int last, int *lead);
/* What each step of first..last adds to the run: a set takes as long as
 * its slowest step, so a step is charged the amount by which it raises
 * the largest cycles among its set's steps up to it (the first: its own
 * own[s]); a copy step its own[s]. */
void compute_charge(const int *lead, const int64_t *own, int first, int last, int64_t *charged);

#endif
