/* sim: the machine model's memory, and the byte-exact movement check.
 *
 * Each tile has its own SRAM, all in one mapping of ordinary pages (a page
 * is mapped when first written, so one a plan never uses costs nothing). Transfers
 * (lib/stage/xfer.h) execute member by member in their order; a send reads the
 * sender's bytes once and writes every receiver. With counting on, every
 * byte written is counted, so a check can tell a missing byte (0 writes),
 * a byte written twice, and a stray write outside every destination.
 *
 * Reference data: element e of tensor t has the bytes ref_byte(t, e, k),
 * never zero, so zero padding is told apart from data.
 */
#ifndef AMP_SIM_H
#define AMP_SIM_H

#include <stdint.h>

#include "stage/plan.h"

/* The bytes elements elem .. elem + n - 1 of tensor t should have, packed
 * (n x fmt_bytes of its format). */
typedef void (*ElemFn)(void *ctx, int tensor, int64_t elem, int64_t n, uint8_t *out);

typedef struct {
	int64_t tiles, sram;
	uint8_t **mem;
	uint8_t **count;        /* per byte write counts, when counting */
	int counting;
	int64_t writes;         /* bytes written, when counting */
	ElemFn elem;            /* expected data: ref_byte unless set */
	void *elem_ctx;
	int64_t iter;           /* the repeat iteration: which instance of a stacked tensor */
	const Plan *plan;       /* the plan of the last fill or check */
	uint8_t *map, *cmap;    /* every tile's SRAM and counts, a mapping each (sim.c; NULL: calloc per tile) */
	size_t map_len;
} Sim;

/* Threads the machine model uses: 2, or 1 when the environment has
 * AMP_THREADS=1. Every result is the same either way. */
int sim_threads(void);
/* fn over placement p's shards, on two threads (alternate shards; ctx0
 * and ctx1 are each thread's context) or on one (ctx0) when AMP_THREADS=1:
 * every shard of a placement sits at the same address, so fn may write
 * its shard's tiles. Tiles are allocated first. The result is the first
 * thread's non-zero fn result, else the second's (not the first in shard
 * order: use it for work that cannot fail). */
int sim_each2(Sim *s, const Placement *p, ShardFn fn, void *ctx0, void *ctx1);
void sim_init(Sim *s, const Machine *m, int counting);
void sim_free(Sim *s);
uint8_t *sim_tile(Sim *s, int64_t tile);
uint8_t *sim_count(Sim *s, int64_t tile);
void sim_clear_counts(Sim *s);
/* Executes one transfer; out-of-range addresses are an error naming the
 * tile and address (the reader rejects them first). */
int sim_xfer(Sim *s, const Xfer *x, Err *e);

static inline uint8_t ref_byte(int tensor, int64_t elem, int k)
{
	uint64_t h = (uint64_t)elem * 0x9E3779B97F4A7C15u + (uint64_t)tensor * 0xBF58476D1CE4E5B9u +
		     (uint64_t)k * 0x94D049BB133111EBu;
	h ^= h >> 31;
	h *= 0xD6E8FEB86659FD93u;
	h ^= h >> 32;
	return (uint8_t)(h % 255 + 1);
}

/* Writes the expected bytes (s->elem) of pl->p[i]'s tensor into every
 * shard and replica (padding zero); a stacked placement gets every
 * instance. Elsewhere, a stacked tensor's data is instance s->iter. */
void sim_fill(Sim *s, const Plan *pl, int placement);
/* Element index, in the whole tensor, of shard-local (r, c). */
int64_t shard_elem(const Placement *p, const int64_t *idx, int64_t r, int64_t c);
/* Checks the valid bytes of every shard and replica of placement i against
 * s->elem, and that panel-layout padding is zero (no write counts): the
 * first difference names tile, phase, offset, tensor, expected and found. */
int sim_check_placement(Sim *s, const Plan *pl, int placement, int phase, Err *e);
/* The part of a copy's destination shard idx that the copy writes, when
 * its source's window holds only part of the shard (a causal segment's
 * results into their owners, formats/plan.md "Windows"): a map of the
 * shard's bytes, 1 where the copy writes (the caller frees it); NULL when
 * the copy writes all of it. Only row-major destinations take parts
 * (plan_check). */
uint8_t *sim_copy_part(const Plan *pl, int src, int dst, const int64_t *idx);
/* The same check of the bytes a copy from src writes (src -1: all). */
int sim_check_part(Sim *s, const Plan *pl, int placement, int src, int phase, Err *e);
/* The same check a shard replica at a time, for a caller that checks a
 * tile's bytes as soon as they are written: one SimCheck per thread
 * (its shard's expected image kept while the replicas that follow are
 * checked); sim_check_one returns 0 when tile t's replica of the shard
 * idx matches, -1 otherwise (sim_check_placement then names the first
 * difference). Tiles are allocated beforehand. */
typedef struct SimCheck SimCheck;
SimCheck *sim_check_begin(Sim *s, const Plan *pl, int placement, int src, int phase);
int sim_check_one(SimCheck *c, const int64_t *idx, int64_t t);
void sim_check_end(SimCheck *c);
/* Checks every (non-aliased) destination shard of copy step `step`: each
 * valid byte holds the reference and was written exactly once; padding of
 * amp-left and transposed-right shards is zero and written once; that of
 * an amp-output shard is written all (whole strips carry it) or not at
 * all, zero and once. The first problem names the tile, step, offset and
 * tensor. */
int sim_check_copy(Sim *s, const Plan *pl, int step, Err *e);
/* The movement check of a whole lowered stage. Each unit (a phase, or a
 * copy step outside every phase) runs on its own: the sources it does not
 * write itself get reference data, then its steps' transfers run in record
 * order and each copy destination is checked as by sim_check_copy when its
 * step ends (a placement that dies inside a phase may be reused later in
 * it). */
int sim_check_stage(const Plan *pl, Err *e);

#endif
