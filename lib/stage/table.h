/* table: per-tile exchange instruction lists (rows) and their footprint.
 *
 * A row is one tile's ordered instructions for one phase. Every member of
 * a send transfer in the phase puts one SEND on its sender and one RECV on
 * each receiver (a loopback sender gets both, SEND first); a tile's
 * instructions follow record order, member order (lib/stage/xfer.h). Local and
 * zero transfers are on-tile work, not exchange instructions.
 *
 * Footprint (docs/machine.md §2; the program encoding has exactly these sizes):
 * 8 B per row (entry and return); 8 B per SEND, +4 B when it moves more
 * than 256 B; 8 B per RECV, +4 B when its address does not continue the
 * previous RECV of the row; the row's total rounded up to 8 B. A SEND in a
 * repeat body whose source moves each iteration (a stacked parameter's
 * home, plan_stacked) carries one address per iteration: +4 B for each
 * iteration beyond the first.
 */
#ifndef AMP_TABLE_H
#define AMP_TABLE_H

#include <stdint.h>

#include "stage/plan.h"

typedef enum { I_SEND, I_RECV } IKind;

typedef struct {
	int64_t len;
	int64_t addr;           /* SEND: source address; RECV: destination */
	int64_t istride;        /* SEND whose source moves: how far each iteration */
	int32_t peer;           /* RECV: the sending tile; SEND: -1 */
	int32_t xfer;           /* the transfer record it comes from */
	int32_t iters;          /* SEND in a repeat whose source moves: addresses carried (0, 1: one) */
	uint8_t kind;
} Instr;                        /* 40 bytes */

#define SEND_BYTES(len) ((len) > 256 ? 12 : 8)
/* A SEND whose source moves each iteration of its repeat carries one
 * address per iteration: 4 B for each beyond the first. */
#define MOVING_BYTES(iters) ((iters) > 1 ? 4 * ((iters) - 1) : 0)

int64_t row_bytes(const Instr *ins, int n);
/* Bytes of instruction i in its row (needs the previous RECV's end). */
int64_t instr_bytes(const Instr *ins, int i, int64_t prev_recv_end);

/* Calls fn for every tile with a non-empty row in phase p, tiles ascending;
 * a non-zero return stops the walk and is returned. */
typedef int (*RowFn)(void *ctx, int64_t tile, const Instr *ins, int n);
int phase_rows(const Plan *pl, int phase, RowFn fn, void *ctx);
/* What phase_rows' rows would add to each tile's table bytes (row_bytes)
 * and fragments, without making the rows: table and frags (tiles
 * entries, either NULL) are added to. */
void phase_row_sums(const Plan *pl, int phase, int64_t *table, int64_t *frags);
/* The same, and in *cycles a lower bound of the phase's replay
 * (phase_cycles, lib/cost/replay.h), from the same walk: the most cycles any
 * tile spends sending (its send port, one fragment after another),
 * receiving (its receive port) or issuing (its control cycles). */
void phase_row_sums_bound(const Plan *pl, int phase, int64_t *table, int64_t *frags, int64_t *cycles);
/* The same, tile by tile: for each of the n tiles with a row (returned;
 * arrays of tiles entries), its tile, row_bytes and fragments. */
int64_t phase_row_list(const Plan *pl, int phase, int64_t *tiles, int64_t *table, int64_t *frags,
		       int64_t *cycles);
/* The largest row_bytes of any tile's row in the phase (0: none). */
int64_t phase_max_row(const Plan *pl, int phase);
/* phase_rows keeps its per-tile lists per thread between calls (fn must
 * not call phase_rows); a thread that built rows frees them with this
 * before it ends. */
void table_release(void);

/* Per-tile totals over all phases: table bytes after row sharing (a row
 * identical to one the tile already holds costs nothing) and fragments
 * (SEND + RECV). Arrays of tiles entries; either may be NULL. Also the
 * largest row of each phase before sharing (max_row[nph], may be NULL). */
void table_totals(const Plan *pl, int64_t *table, int64_t *frags, int64_t *max_row);

#endif
