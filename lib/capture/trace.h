/* trace: the program's modelled timeline as Chrome trace-event JSON
 * (formats/capture.md, "Trace"), which Perfetto and chrome://tracing open.
 *
 * The program runs its steps in order, repeat bodies unrolled (each
 * iteration again), bulk-synchronously: a compute step takes its slowest
 * tile's cycles (lib/cost), an exchange phase its sync, then its replay
 * (lib/replay), then its local copies. Process 0, "program", has one
 * lane of those spans, the critical path, which adds up to the capture's
 * total_cycles. Each sampled tile is a process of its own with one lane:
 * a compute slice as long as that tile's cycles, a sync slice, and an
 * exchange slice from the phase's start to the tile's last issue or port
 * time (its send and receive port cycles in args), and a counter track
 * "SRAM" with its tensors live at each step and its table bytes.
 *
 * Times are microseconds at the machine's clock (machine.clock_hz), or
 * one cycle per microsecond when the machine has no clock (the metadata
 * says which). Deterministic: the same stage gives the same bytes.
 */
#ifndef AMP_TRACE_H
#define AMP_TRACE_H

#include "stage/plan.h"

/* Parses a tile list such as "0-45,775" (ascending or not, each tile
 * below tiles) into sel[tiles] (1 for a chosen tile). */
int trace_tiles_parse(const char *spec, int64_t tiles, char *sel, Err *e);
/* Writes the trace of the tiles sel[tiles] chooses; sel NULL: the default
 * sample, tile 0 and every step's slowest tile and phase's busiest tile. */
int trace_write(const Plan *pl, const char *sel, Output *out, Err *e);

#endif
