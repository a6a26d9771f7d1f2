/* plan_memory: what a plan keeps in each tile's SRAM, step by step.
 *
 * amp-plan's fitting, amp-expand's addresses (alloc.h), the capture's
 * memory figures and the trace's counters all read this one walk.
 */
#ifndef AMP_PLAN_MEMORY_H
#define AMP_PLAN_MEMORY_H

#include "stage/plan.h"

/* Per-tile memory: live placement bytes at each step, aliases counted once.
 * Placements of inputs and parameters that no step writes are live for the
 * whole program, outputs to its end, everything else from the step that
 * writes it to the last step that reads it. tile_peak[tiles] (and the
 * step of each, tile_step[tiles]) and step_peak[steps] receive the peaks
 * (any may be NULL). Returns the largest; *worst is its tile, *at its step. */
int64_t plan_memory(const Plan *p, int64_t *tile_peak, int *tile_step, int64_t *step_peak,
		    int64_t *worst, int *at);

/* The same walk, calling fn(ctx, step, cur) at every step with cur[tiles],
 * each tile's live bytes then (the trace's memory counters). */
typedef void (*MemoryFn)(void *ctx, int step, const int64_t *cur);
void plan_memory_each(const Plan *p, MemoryFn fn, void *ctx);
/* What tile's live bytes at step are made of: part[np + 1] receives each
 * placement's bytes on the tile as counted (0 where not live, or where it
 * shares its source's buffer), and part[np] the step's scratch; they add
 * up to that tile's figure in the walk. */
void plan_memory_parts(const Plan *p, int64_t tile, int step, int64_t *part);

/* Live range of every placement, in steps (first written .. last read; the
 * whole program for initial placements, to the end for outputs), and for
 * each copy destination the source it may alias (-1 otherwise). */
void plan_lifetimes(const Plan *p, int *first, int *last, int *alias);

#endif
