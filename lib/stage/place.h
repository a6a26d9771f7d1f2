/* place: placements, the one description of where a tensor's shards live.
 *
 * A placement cuts each axis a of a tensor into split[a] parts of block[a]
 * elements (the last part takes the clipped tail; no part is empty) and
 * stores every shard in one layout and format. Shard (i_0..i_{n-1}) and
 * replica (j_0..j_{r-1}) sit on tile
 *
 *     (base + sum_a i_a*stride[a] + sum_k j_k*rstride[k]) mod tiles
 *
 * with 0 <= base < tiles, and every (shard, replica) must land on a distinct
 * tile. The shard's
 * logical region is [i_a*block[a], min((i_a+1)*block[a], shape[a])) on each
 * axis; as a matrix it has rows = product of the leading extents and
 * cols = the last extent, and lib/layout maps it to bytes.
 *
 * Everything here is algebra on (split, block): totals count full and
 * clipped parts per axis instead of visiting shards.
 */
#ifndef AMP_PLACE_H
#define AMP_PLACE_H

#include <stdint.h>

#include "base/diag.h"
#include "model/layout.h"
#include "model/model.h"

#define MAX_REP 2

typedef struct {
	char *name;
	int tensor;                     /* index into the plan's tensors */
	LayoutKind layout;
	Format fmt;
	int rank;
	int64_t shape[MAX_RANK];        /* the window's extent: the tensor's shape unless windowed */
	int64_t off[MAX_RANK];          /* the window's offset in the tensor (0: whole tensor) */
	int64_t whole[MAX_RANK];        /* the tensor's shape when windowed (0: same as shape) */
	int64_t split[MAX_RANK];
	int64_t block[MAX_RANK];
	int64_t base;
	int64_t stride[MAX_RANK];
	int nrep;
	int64_t rep[MAX_REP];
	int64_t rstride[MAX_REP];
	int64_t addr;                   /* SRAM address on every tile (lowered stages) */
} Placement;

/* Extent of part i on axis a. */
static inline int64_t place_extent(const Placement *p, int a, int64_t i)
{
	int64_t lo = i * p->block[a], hi = lo + p->block[a];
	if (hi > p->shape[a])
		hi = p->shape[a];
	return hi - lo;
}
int64_t place_shards(const Placement *p);
/* Writes a key of everything about p but its name, tensor and address
 * (at most PLACE_KEY_MAX entries; returns how many): two placements with
 * equal keys put the same shapes of shards on the same tiles. */
#define PLACE_KEY_MAX (5 + 6 * MAX_RANK + 2 * MAX_REP)
int place_key(const Placement *p, int64_t *k);       /* product of split */
int64_t place_replicas(const Placement *p);     /* product of rep */
/* Layout of shard idx (R x C as above). */
Layout place_layout(const Placement *p, const int64_t *idx);
int64_t place_shard_bytes(const Placement *p, const int64_t *idx);
int64_t place_max_bytes(const Placement *p);    /* the first, full shard */
int64_t place_total_bytes(const Placement *p);  /* all shards x replicas */
int64_t place_tile(const Placement *p, const int64_t *idx, const int64_t *rep, int64_t tiles);

/* Calls fn for every (shard, replica) in order: shard index major (axis 0
 * slowest), replica minor (replica axis 0 slowest). Returns the first
 * non-zero fn result. */
typedef int (*ShardFn)(void *ctx, const Placement *p, const int64_t *idx,
		       const int64_t *rep, int64_t tile);
int place_each(const Placement *p, int64_t tiles, ShardFn fn, void *ctx);
/* The same over the shards s with s % parts == part, in order. */
int place_each_part(const Placement *p, int64_t tiles, ShardFn fn, void *ctx, int part, int parts);

/* at[tiles]: the linear index (axis 0 slowest) of the shard p holds on
 * each tile, -1 where it holds none; place_shard_idx turns one back into
 * per-axis indices. */
void place_shard_at(const Placement *p, int64_t tiles, int64_t *at);
void place_shard_idx(const Placement *p, int64_t lin, int64_t *idx);

/* Structural checks: parts cover the shape, none empty, tiles distinct and
 * the count within the machine. Messages start with the placement name. */
int place_check(const Placement *p, int64_t tiles, Err *e);
/* Do shard ia of a and shard ib of b cover the same region of the tensor,
 * in the same layout and format? */
int place_same_region(const Placement *a, const int64_t *ia, const Placement *b, const int64_t *ib);
/* Is p a window of its tensor (some offset, or an extent short of it)? */
int place_windowed(const Placement *p);
/* Do windows a and b of one tensor hold no element in common? */
int place_apart(const Placement *a, const Placement *b);
/* Same geometry (everything but the name). */
int place_same(const Placement *a, const Placement *b);
/* Whole panels: every part boundary on a panel boundary of the layout. */
int place_panel_aligned(const Placement *p);

/* Uniform cut of n units into parts: block = ceil(n/parts); valid only when
 * that gives exactly `parts` non-empty parts. */
int uniform_ok(int64_t n, int64_t parts);

/* Every SRAM address and placement size is a multiple of ALLOC_ALIGN bytes
 * (alloc.h); a placement's instance is its largest shard so rounded up, and
 * instance k of a stacked placement sits at addr + k * place_instance(). */
#define ALLOC_ALIGN 32
int64_t place_instance(const Placement *p);

#endif
