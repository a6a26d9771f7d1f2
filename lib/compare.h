/* compare: the capture reader of amp-compare (formats/capture.md): a
 * capture read whole and checked for the figures compared. */
#ifndef AMP_COMPARE_H
#define AMP_COMPARE_H

#include "diag.h"
#include "yio.h"

#define COMPARE_VERSION 1       /* formats/compare.md */

/* One capture, read whole: the parts compared (pointers into r's tree). */
typedef struct {
	YReader r;
	Val *root;
	const char *model, *machine;
	const Val *summary, *ops, *phases;
} Cap;

/* Reads the capture at path (NULL or "-": standard input); in: another
 * source instead (taken over). 0 ok; -1 with e naming file:line:col. c
 * must be freed with cap_free either way. */
int cap_load(Cap *c, const char *path, Err *e);
int cap_load_input(Cap *c, Input *in, Err *e);
void cap_free(Cap *c);

#endif
