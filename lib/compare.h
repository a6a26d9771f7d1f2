/* compare: the capture reader of amp-compare (formats/capture.md): a
 * capture read whole and checked for the figures compared.
 *
 * Versions 3 to 5 are read. Every summary figure is an integer, except in
 * version 5 a ratio (a key ending in "_ratio": a non-negative number or
 * null) and the `floor` object (integer figures and its `ratio`). The
 * figures compared are the summary's integers in order, the floor's
 * flattened in at its place; ratios are left out (they derive from the
 * integers). */
#ifndef AMP_COMPARE_H
#define AMP_COMPARE_H

#include "diag.h"
#include "yio.h"

#define COMPARE_VERSION 1       /* formats/compare.md */

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
	const Val *summary, *ops, *phases;
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

#endif
