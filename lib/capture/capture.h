/* capture: what every exchange and compute step costs, as JSON
 * (formats/capture.md).
 *
 * Everything is computed from the grouped stage: rows and footprints from
 * lib/table, exchange cycles from lib/replay, compute and local-copy
 * cycles from lib/cost, the phases' and the program's floors from
 * lib/floor, movement classes from the transfers of each copy step (a
 * class is the transfers of one phase that serve one operand of one op
 * with one source and destination placement). capture_metrics leaves the
 * floors 0 (the planner calls it on every trial); capture_write computes
 * them.
 *
 * Every step and phase runs `count` times (1 today; a Repeat body will run
 * its iterations' count): the summary and the per-op figures add each
 * entry's cycles x count.
 */
#ifndef AMP_CAPTURE_H
#define AMP_CAPTURE_H

#include "base/json.h"
#include "stage/plan.h"

#define CAPTURE_VERSION 8        /* written; 7 (compute steps one after the other), 6 (summary.floor, no bound), 5 (no clock), 4 (no floors) and 3 (no provenance) are still read */
#define CAPTURE_VERSION_OLDEST 3
#define TILES_VERSION 2          /* amp-capture --tiles; 2 adds busy_cycles */

/* The one metrics type: a phase's, a step's, an op's or the whole
 * program's figures. */
typedef struct {
	int64_t count;              /* times it runs (steps and phases; 1 until Repeat) */
	int64_t phases;
	int64_t transfers;          /* send fragments */
	int64_t bytes;              /* bytes sent, each fragment once */
	int64_t max_row_bytes;      /* largest row of one tile in one phase, before sharing */
	int64_t max_table_bytes;    /* largest tile's tables, all phases, after sharing */
	int64_t median_table_bytes; /* summary: the median over every tile of the machine */
	int64_t max_fragments;      /* largest tile's SEND + RECV count */
	int64_t cycles;             /* modelled exchange cycles (replay) */
	int64_t sync_cycles;
	int64_t local_copy_cycles;  /* on-tile copies of copy steps (lib/cost) */
	int64_t compute_cycles;     /* a step: its slowest tile's (lib/cost); an op, the summary:
				   their steps' charged_cycles (compute sets) */
	int64_t charged_cycles;     /* a compute step: what it adds to the run (compute_charge) */
	int set;                    /* a compute step: the first step of its compute set */
	int64_t compute_tiles;      /* tiles that run a compute step */
	int64_t total_cycles;       /* compute + exchange + sync + local copies */
	int64_t floor_cycles;       /* a phase's floor (lib/floor); summary: floors x count */
	int64_t floor_tile;         /* a phase's: the tile of its floor, -1 when none */
	int64_t worst_table_tile, worst_fragment_tile, worst_compute_tile;
	int worst_table_phase, worst_fragment_phase;
	int64_t max_tensor_bytes;   /* summary: largest tile's tensors at their peak (plan_memory) */
	int64_t worst_tensor_tile;
	int worst_tensor_step;
	int64_t max_sram_bytes;     /* summary: largest tile's tensors at their peak + its tables */
	int64_t worst_sram_tile;
} Metrics;

/* Per-phase metrics (ph[nph]), per-step metrics (st[ns], or NULL: compute
 * steps, and copy steps whose local copies are in no phase) and the
 * summary. */
void capture_metrics(const Plan *pl, Metrics *ph, Metrics *st, Metrics *sum);
/* The same, and the per-tile figures behind the summary (each array of
 * tiles entries, or NULL): table bytes after sharing, tensor bytes at
 * their peak and the step of that peak. */
void capture_metrics_tiles(const Plan *pl, Metrics *ph, Metrics *st, Metrics *sum, int64_t *table,
			   int64_t *peak, int *peak_step);
int capture_write(const Plan *pl, Output *out, Err *e);
/* capture_write's `memory` object (capture_memory.c); sum is the summary
 * capture_metrics made. */
void capture_memory_write(Json *j, const Plan *pl, const Metrics *sum);
/* The per-tile figures as TSV (formats/capture.md, "Per tile"): a line
 * per tile that holds anything (phase 'all': bytes sent and received over
 * every run, fragments, table bytes, SRAM peak), then a line per tile and
 * phase with a row (bytes sent and received per run, fragments, row
 * bytes, and its busy cycles: its last issue or port time in the phase's
 * replay). Defined in capture_tiles.c. */
int capture_tiles_write(const Plan *pl, Output *out, Err *e);

#endif
