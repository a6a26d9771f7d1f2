/* compare: the capture reader of amp-compare (formats/capture.md): a
 * capture read whole and checked for the figures compared.
 *
 * Versions 3 to 7 are read. Every summary figure is an integer, except
 * from version 5 a ratio (a key ending in "_ratio": a non-negative number
 * or null) and the `floor` object (versions 5 and 6), `bound` and
 * `plan_floor` (version 7): integer figures and a `ratio`; version 6's
 * microseconds and throughput are checked and left out. The figures
 * compared are the summary's integers in order, each object's flattened in
 * at its place; ratios are left out (they derive from the integers).
 *
 * Beside the figures, the two captures are lined up (formats/compare.md):
 * their phases by label (cmp_phases, through lib/study/compare_match.h) and
 * their movement classes (`phase_traffic`, optional: a capture without
 * it has no classes) summed over every run by (op, operand, movement)
 * (cmp_classes). */
#ifndef AMP_COMPARE_H
#define AMP_COMPARE_H

#include "study/compare_match.h"
#include "study/compare_tiles.h"
#include "base/diag.h"
#include "base/yio.h"

#define COMPARE_VERSION 2       /* formats/compare.md */

/* A summary figure compared: its key and its integer value. */
typedef struct {
	const char *key;
	int64_t v;
} CapFig;

/* One capture, read whole: the parts compared (pointers into r's tree). */
typedef struct {
	YReader r;
	Val *root;
	const char *model, *machine;
	int64_t tiles;          /* machine.tiles; 0 when the capture has none */
	const Val *summary, *ops, *phases;
	const Val *traffic;     /* phase_traffic, or NULL */
	CapFig *figs;           /* the summary's figures compared, in order */
	int nfigs;
} Cap;

/* The figure named key, or NULL. */
const CapFig *cap_fig(const Cap *c, const char *key);

/* Reads the capture at path (NULL or "-": standard input); in: another
 * source instead (taken over). 0 ok; -1 with e naming file:line:col. c
 * must be freed with cap_free either way. */
int cap_load(Cap *c, const char *path, Err *e);
int cap_load_input(Cap *c, Input *in, Err *e);
void cap_free(Cap *c);

/* The phases of a and b lined up by label (lib/study/compare_match.h): the
 * lines into *out (freed by the caller), their number returned. */
int cmp_phases(const Cap *a, const Cap *b, PhaseLine **out);

/* A movement class's figures over every run (× its phase's count). */
enum { CLS_SENDS, CLS_BYTES, CLS_RECEIVED, CLS_FIGS };
extern const char *const cls_fig_name[CLS_FIGS];  /* "sends", "bytes", "received_bytes" */

/* The classes of both captures summed by (op, operand, movement): sends,
 * source_payload_bytes and receiver_payload_bytes, each × the count of
 * its phase. in[0] and in[1]: whether A and B have it. Rows in order of
 * first appearance in A (phase order, then class order), then those B
 * alone has, in B's order. */
typedef struct {
	const char *op, *operand, *movement;
	int in[2];
	int64_t v[2][CLS_FIGS];
} ClassRow;

/* The rows into *out (freed by the caller); their number returned. */
int cmp_classes(const Cap *a, const Cap *b, ClassRow **out);

/* An op matched by name: A's and B's record, NULL on a side without it. */
typedef struct {
	const char *op;
	const Val *v[2];
} OpRow;

/* What amp-compare writes: the two captures lined up. */
typedef struct {
	const Cap *side[2];
	const char *name[2];       /* the column names */
	OpRow *ops;                /* A's in A's order, then those only B has */
	int nops;
	PhaseLine *ph;             /* the phases lined up (cmp_phases) */
	int nph;
	ClassRow *cl;              /* the movement classes (cmp_classes) */
	int ncl, classes;          /* classes: both captures have phase_traffic */
	const TileFigs *tiles[2];  /* with --tiles, else NULL */
} Compare;

void cmp_build(Compare *m, const Cap *a, const Cap *b, const char *na, const char *nb);
void cmp_free(Compare *m);      /* what cmp_build allocated */

/* "both", "removed" (A only) or "added" (B only), from whether A and B
 * have the row. */
const char *cmp_status(const int in[2]);

/* Phase i's figures as compared: transfers, bytes and cycles over every
 * run (× count), so each column adds up to its summary's figure; the
 * largest row and fragments per run. */
enum { PF_COUNT, PF_TRANSFERS, PF_BYTES, PF_MAX_ROW, PF_MAX_FRAG, PF_CYCLES, PF_N };
extern const char *const cmp_phase_fig_name[PF_N];  /* count, transfers, bytes, max_row_bytes, ... */
void cmp_phase_figs(const Cap *c, int i, int64_t f[PF_N]);

/* Writes comparison m to o (compare_write.c, formats/compare.md): the
 * text tables, the JSON document or the TSV rows. -1 with *e on a write
 * that failed (o is then the caller's to abort). */
typedef enum { COMPARE_TEXT, COMPARE_JSON, COMPARE_TSV } CompareOut;
int compare_write(Output *o, const Compare *m, CompareOut form, Err *e);

#endif
