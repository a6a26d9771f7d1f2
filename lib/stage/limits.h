/* limits: does a lowered plan fit its machine? The one rule that
 * amp-emit, the planner (plan_fit) and the scheduler (plan_schedule's
 * fallback) all apply.
 *
 * A plan fits when on every tile (formats/machine.md, "Limits"):
 * - its exchange tables, rows shared as the program stores them
 *   (table_totals), are within table_budget_bytes;
 * - its send and receive fragments are within fragment_limit;
 * - its tensors at their peak (plan_memory) plus its tables are within
 *   the SRAM planned data may use: sram_bytes - reserved_bytes, or a
 *   study's smaller --sram-limit.
 * The limits are the Plan's machine's (a study's --table-budget and
 * --fragment-limit are set there). They are checked in that order; the
 * first one over is the one reported.
 */
#ifndef AMP_LIMITS_H
#define AMP_LIMITS_H

#include <stdint.h>

#include "base/diag.h"
#include "stage/plan.h"

typedef enum { LIMIT_NONE, LIMIT_TABLE, LIMIT_FRAGMENTS, LIMIT_SRAM } LimitKind;

typedef struct {
	int64_t avail;                  /* SRAM bytes for tensors and tables */
	int64_t table, table_tile;      /* the most table bytes on a tile, and the first such tile */
	int64_t frags, frag_tile;       /* the most fragments */
	int64_t sram, sram_tile;        /* the most tensors at their peak + tables */
	int64_t peak, peak_tables;      /* that tile's tensors at their peak, and its tables */
	int peak_step;                  /* the step of that peak */
} Limits;

/* Measures pl against avail (< 0: machine_avail). Each per-tile array
 * (tiles entries) may be NULL: table bytes, fragments, tensors at their
 * peak and the step of it. */
void limits_measure(const Plan *pl, int64_t avail, Limits *l, int64_t *table, int64_t *frags, int64_t *peak,
		    int *peak_step);

/* The first limit l is over, or LIMIT_NONE. */
LimitKind limits_over(const Plan *pl, const Limits *l);

/* 0 when l is within every limit; else -1 and e names the tile, the phase
 * (the one with that tile's largest row or most fragments, or the phase
 * at or after its tensors' peak), the bytes and the limit, and for the
 * SRAM what bounds it (avail_what: "sram_bytes - reserved_bytes" when
 * NULL). With options (amp-emit's), the phase's label too, and each limit
 * names the option that overrides it (--table-budget, --fragment-limit);
 * without (the planner's), no label: its message goes on to what no plan
 * avoids, and a merged phase's label can be long. */
int limits_error(const Plan *pl, const Limits *l, const char *avail_what, int options, Err *e);

#endif
