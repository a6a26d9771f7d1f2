/* stage: the common frame of every stage file.
 *
 *   format: amp-<stage>
 *   version: N
 *   machine: {name: ..., tiles: ..., ...}      (lib/model/machine.h)
 *   model: NAME
 *   provenance:                                (version 5; lib/stage/plan.h Prov)
 *   - {tool: amp-plan, version: V, options: '...', files: [{role: model, name: x.yaml, fnv1a: 16 hex}]}
 *   <section>:
 *   - {record}
 *   ...
 *
 * The header keys come in this order. Readers reject another format or an
 * unknown version, naming file:line:col. Sections follow in the order the
 * stage's spec gives; each is a block sequence of flow mappings, one per
 * line.
 */
#ifndef AMP_STAGE_H
#define AMP_STAGE_H

#include "model/machine.h"
#include "base/yio.h"

void stage_write_header(YWriter *w, const char *format, int version, const Machine *m,
			const char *model);
/* Reads the header of a stage of versions oldest..newest (*version). */
int stage_read_header(YReader *r, const char *format, int oldest, int newest, int *version, Machine *m,
		      char **model, Err *e);
int stage_section(YReader *r, const char *key, Err *e);
/* 1 and *rec for the next record, 0 at the section's end, -1 on error. */
int stage_record(YReader *r, Val **rec, Err *e);

#endif
