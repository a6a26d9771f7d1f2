/* capture: what every exchange costs, as JSON (formats/capture.md).
 *
 * Everything is computed from the grouped stage: rows and footprints from
 * lib/table, cycles from lib/replay, movement classes from the transfers
 * of each copy step (a class is the transfers of one phase that serve one
 * operand of one op with one source and destination placement).
 */
#ifndef AMP_CAPTURE_H
#define AMP_CAPTURE_H

#include "plan.h"

/* The one metrics type: a phase's figures, or the whole program's. */
typedef struct {
	int64_t phases;
	int64_t transfers;          /* send fragments */
	int64_t bytes;              /* bytes sent, each fragment once */
	int64_t max_row_bytes;      /* largest row of one tile in one phase, before sharing */
	int64_t max_table_bytes;    /* largest tile's tables, all phases, after sharing */
	int64_t max_fragments;      /* largest tile's SEND + RECV count */
	int64_t cycles;             /* modelled exchange cycles (replay) */
	int64_t sync_cycles;
	int64_t worst_table_tile, worst_fragment_tile;
	int worst_table_phase, worst_fragment_phase;
} Metrics;

/* Per-phase metrics (ph[nph]) and the summary. */
void capture_metrics(const Plan *pl, Metrics *ph, Metrics *sum);
int capture_write(const Plan *pl, Output *out, Err *e);

#endif
