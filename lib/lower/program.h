/* program: the binary program amp-emit writes (formats/program.md).
 *
 * It carries the grouped stage it came from (the one description of
 * tensors, placements, steps, phases and transfers, for amp-run and
 * amp-capture) and every tile's encoded exchange rows. Rows identical once
 * their addresses are masked are stored once; each (tile, phase) entry
 * names its row and carries the addresses that patch it. Every row's
 * encoding has exactly the footprint of lib/stage/table.h.
 */
#ifndef AMP_PROGRAM_H
#define AMP_PROGRAM_H

#include <stdint.h>
#include <stdio.h>

#include "stage/plan.h"
#include "stage/table.h"

#define PROGRAM_MAGIC "AMPPROG"     /* 8 bytes with the NUL */
#define PROGRAM_VERSION 3

typedef struct {
	int64_t tile;
	int phase, row;
	int npatch[3];          /* SEND addresses, RECV peers, RECV addresses */
	int64_t patch;          /* index of its first value in patches */
} Entry;

typedef struct {
	uint8_t **row;          /* masked encodings */
	int64_t *row_len;
	int nrow;
	Entry *ent;
	int nent;
	uint32_t *patches;
	int64_t npatches;
	char *stage;            /* the grouped stage, as text */
	size_t stage_len;
	char *name;             /* the file it was read from, for errors */
	char *model, *scales;   /* the model and fp8 scales files embedded (amp-emit
				 * --model/--scales), as text, or NULL */
	size_t model_len, scales_len;
} Program;

int program_build(const Plan *pl, Program *prog, Err *e);
int program_write(const Program *prog, Output *out, Err *e);
/* Reads a program (zstd or not); pl receives its stage (may be NULL). */
int program_read(const char *path, Program *prog, Plan *pl, Err *e);
void program_free(Program *prog);
/* Reads a grouped stage or a program (zstd or not, a path or standard
 * input read once), told apart by the magic number. With prog, a program
 * is kept there and *is_prog says which it was. */
int program_or_stage(Plan *pl, Program *prog, int *is_prog, const char *path, Err *e);
/* Decodes entry i into instructions (caller frees *ins). */
int program_row(const Program *prog, int i, Instr **ins, int *n, Err *e);

/* The deterministic listing of a program, or of the rows a grouped stage
 * implies: the same text for a program and the stage it came from. */
int program_list(const Program *prog, const Plan *pl, FILE *f, Err *e);
int stage_list(const Plan *pl, FILE *f, Err *e);

#endif
