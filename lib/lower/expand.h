/* expand: plan -> transfers (docs/machine.md §6, amp-expand).
 *
 * For each copy and each destination shard, the shard's region is
 * intersected with the source shards (per-axis index ranges, never a search)
 * and each intersection is mapped to bytes through both layouts as runs:
 * the region is cut into cells where both layouts are affine (at each
 * side's own strip or panel boundaries, so fp8 strips keep their 32-byte
 * lanes), each cell gives its runs algebraically, and the runs are merged
 * in destination order wherever both sides continue. Each destination
 * shard is traversed on its own, so a clipped shard never changes how
 * another is moved.
 *
 * A destination shard that is made of whole panels, and meets only source
 * shards made of whole panels of the same layout, moves whole panels: where
 * it ends at the tensor's edge the runs extend over the padding, which
 * travels (padding in panel layouts is zero: homes are stored so, packing,
 * zero fills and products keep it). Every other destination in a panel
 * layout (amp-left, transposed-right) gets its padding written with zeros by
 * the receiver, once. The choice is per destination: a clipped destination
 * never changes how another destination of the same copy moves. All replicas of a destination shard receive the same
 * runs, so each run is one multicast request; a replica that aliases the
 * source (lib/stage/alloc.h) receives nothing; a request whose only receiver is
 * its sender is a local copy. A replicated source sends from replica 0.
 * Requests are folded into regular families (lib/stage/xfer.h).
 */
#ifndef AMP_EXPAND_H
#define AMP_EXPAND_H

#include "stage/plan.h"

/* Allocates addresses, expands every copy into pl->x, sets the stage. */
int plan_expand(Plan *pl, Err *e);
/* Expands copy steps first..last into pl->x with the placements' current
 * addresses (no allocation): plan_expand's second half, and the planner's
 * trial lowering (lib/planner/trial.h). */
int plan_expand_steps(Plan *pl, int first, int last, Err *e);
/* plan_expand_steps keeps each copy's requests by the shape of its two
 * placements (everything but names and addresses), for every thread: a
 * copy of the same shapes again is the same requests moved by the address
 * differences. expand_release frees them, and the calling thread's
 * scratch; no other thread may be in plan_expand_steps then.
 * expand_release_thread frees only the calling thread's scratch (a thread
 * that ends while others expand). */
void expand_release(void);
void expand_release_thread(void);

/* One run of a shard-to-shard mapping, in bytes from each shard's start. */
typedef struct {
	int64_t src, dst, len;
} Run;

/* Runs moving box [lo, hi) (tensor coordinates) from src shard sidx to dst
 * shard didx, merged and in destination order; whole extends them over
 * edge padding. Returns the count; *runs is reallocated as needed. */
int64_t shard_runs(const Placement *src, const int64_t *sidx, const Placement *dst,
		   const int64_t *didx, const int64_t *lo, const int64_t *hi, int whole,
		   Run **runs, int64_t *cap);
/* Is shard idx made of whole panels of its layout (every region boundary
 * on a panel boundary or at the tensor's edge)? */
int shard_whole(const Placement *p, const int64_t *idx);
/* shard_runs, with the runs of each geometry kept per thread: they are
 * offsets from each shard's start, so they depend on the two layouts and
 * formats, both shards' extents and the box relative to each shard's
 * origin alone, and uniform cuts meet the same few over and over.
 * runs_forget drops the calling thread's (a new copy); runs_release frees
 * them. */
int64_t shard_runs_kept(const Placement *src, const int64_t *sidx, const Placement *dst,
			const int64_t *didx, const int64_t *lo, const int64_t *hi, int whole,
			Run **runs, int64_t *cap);
void runs_forget(void);
void runs_release(void);

#endif
