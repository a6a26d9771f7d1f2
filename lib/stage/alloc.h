/* alloc: SRAM addresses for a plan's placements (amp-expand's first step).
 *
 * Each placement gets one address, the same on every tile that holds one
 * of its shards, for its live range (plan_lifetimes), sized by its largest
 * shard rounded up to 32 bytes. Placements are taken in order of first use
 * and put at the lowest address that overlaps no live allocation on any of
 * their tiles. A copy destination that may alias its source (same region,
 * layout and format on a tile) takes the source's address when that is free
 * on its other tiles, and then no bytes move there. The top of every
 * allocation stays within sram_bytes - reserved_bytes, else an error names
 * the placement, the tile, the step and the bytes.
 */
#ifndef AMP_ALLOC_H
#define AMP_ALLOC_H

#include "stage/plan.h"

int plan_alloc(Plan *pl, Err *e);
/* Does dst's shard on tile t alias src's (same region, layout, format and
 * address)? Needs addresses. */
int place_aliases(const Plan *pl, int src, int dst, const int64_t *dst_idx, int64_t tile);
/* Does copy src -> dst send dst's shard dst_idx on tile nothing, its
 * bytes being there already: the source shard whose replica 0 sits on
 * tile holds the same region at the same address, in the same layout
 * (amp-expand then skips that receiver; sim_check_stage and amp-run
 * expect no write there, and amp-expand zeroes no padding there)? */
int place_alias0(const Plan *pl, int src, int dst, const int64_t *dst_idx, int64_t tile);
/* The same, for many tiles: r0[t] (tiles entries, place_r0_shards; the
 * caller frees it) is the first source shard, linear, whose replica 0
 * sits on tile t, or -1 (r0 NULL: no tile aliases). */
int64_t *place_r0_shards(const Plan *pl, int src);
int place_alias0_at(const Plan *pl, int src, int dst, const int64_t *dst_idx, int64_t tile, const int64_t *r0);

#endif
