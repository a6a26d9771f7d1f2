/* program_int.h: what the two parts of the program share (program.h is
 * the program's contract):
 *
 *   program_file.c  the file: its sections written and read back, the
 *                   TABLE's address sequences, the check of the rows and
 *                   table against the STAGE text
 *   program.c       the rows: encoded, shared in the row table, decoded,
 *                   listed
 *
 * program_file.c calls program.c, never back.
 */
#ifndef AMP_PROGRAM_INT_H
#define AMP_PROGRAM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "lower/program.h"

/* A growable byte buffer, written little-endian. */
typedef struct {
	uint8_t *b;
	size_t n, cap;
} Buf;

/* Room for more bytes after b->n. */
void program_grow(Buf *b, size_t more);
/* The n-byte little-endian number at p. */
uint64_t program_get(const uint8_t *p, int n);

#endif
