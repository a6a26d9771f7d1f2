/* stage_read.h: what the two parts of the stage reader share (stage_io.h is
 * the reader's contract): stage_read.c reads the frame and the later
 * formats' sections, stage_read_plan.c the records of amp-plan's sections,
 * which every stage carries.
 */
#ifndef AMP_STAGE_READ_H
#define AMP_STAGE_READ_H

#include "base/yio.h"
#include "stage/stage_io.h"

/* Reads one record of a section into pl; version is the file's. */
typedef int (*StageRecordFn)(Plan *pl, const char *file, const Val *rec, int version, Err *e);

/* A section: its key, its record reader, and the first stage that has it. */
typedef struct {
	const char *key;
	StageRecordFn fn;
	StageKind from;
} StageSection;

/* provenance (file versions 5 and later) */
extern const StageSection stage_provenance;
/* amp-plan's sections in file order: tensors, host, gemms, placements,
 * steps, repeats */
extern const StageSection stage_plan_sections[];
extern const int stage_plan_nsections;

#endif
