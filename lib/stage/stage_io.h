/* stage_io: reading and writing the four stage formats (formats/plan.md,
 * formats/expand.md, formats/exchange.md, formats/group.md).
 *
 * The formats build on each other: amp-plan (what amp-plan and amp-compose
 * write) has provenance, tensors, host, gemms, placements, steps and
 * repeats; amp-expand adds each placement's address and the transfers;
 * amp-exchange and amp-group add the phases. One Plan holds any of them,
 * with pl->stage saying which.
 *
 * stage_read reads the stage k from path (NULL or "-": standard input; zstd
 * is recognised), checks it whole (plan_check.h) and fills pl, which the
 * caller frees with plan_free; on error pl is empty and e names
 * file:line:col. stage_read_input takes over in (and closes it).
 * stage_write writes pl as the format of pl->stage.
 */
#ifndef AMP_STAGE_IO_H
#define AMP_STAGE_IO_H

#include "base/io.h"
#include "stage/plan.h"

int stage_read(Plan *pl, const char *path, StageKind k, Err *e);
int stage_read_input(Plan *pl, Input *in, StageKind k, Err *e);
int stage_write(const Plan *pl, Output *out, Err *e);

#endif
