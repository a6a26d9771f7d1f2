/* compare_match: lines up the exchange phases of two captures by their
 * labels (formats/compare.md, "Phases").
 *
 * A phase is the set of its labels (`op.operand` of each copy in it),
 * interned to integers. Two phases are partners when they share a label.
 * The alignment keeps each capture's order and works in two levels:
 *
 *   groups  the finest partition of both phase sequences into
 *           consecutive blocks, in order, such that every pair of
 *           partners lies in one block (so every label both captures
 *           have pairs all its phases). Partners that cross (A has x
 *           before y, B y before x) share one block. A phase with no
 *           partner forms a block of its own where order allows,
 *           A's before B's.
 *   lines   inside a group, the order-keeping one-to-one pairing of
 *           partners with the largest weight: exact label-set
 *           equality first, then the most shared labels (see
 *           match_weight). Ties go to the pairing met first from the
 *           front, pairs before skips, A's skips before B's.
 *
 * Every phase of both sides is on exactly one line, lines in group
 * order; within a group, an unpaired phase comes before the next pair,
 * A's before B's. Deterministic: the same sets give the same lines.
 * Pure computation: no I/O, no errors. */
#ifndef AMP_COMPARE_MATCH_H
#define AMP_COMPARE_MATCH_H

#include <stdint.h>

/* One phase's labels: n ids, ascending, no repeats. */
typedef struct {
	const int *lab;
	int n;
} LabelSet;

typedef enum {
	LINE_SAME,              /* paired, the same labels */
	LINE_CHANGED,           /* paired, labels overlap but differ */
	LINE_REGROUPED,         /* unpaired, but it shares a label with a phase of its group on the other side */
	LINE_REMOVED,           /* A only: none of its labels is in B */
	LINE_ADDED,             /* B only: none of its labels is in A */
} LineKind;

typedef struct {
	int a, b;               /* phase indices, -1 for the side without one */
	int group;              /* 0, 1, ... in order */
	LineKind kind;
} PhaseLine;

/* Labels shared by x and y (both ascending). */
int match_overlap(const LabelSet *x, const LabelSet *y);

/* The weight of pairing x with y inside a group whose sets hold `total`
 * labels in all (both sides): 0 when they share nothing, else the shared
 * labels, plus total + 1 when the sets are equal, so that one more exact
 * pair outweighs any overlap. */
int64_t match_weight(const LabelSet *x, const LabelSet *y, int64_t total);

/* The groups: ga[i] for A's phase i, gb[j] for B's phase j; returns the
 * number of groups. */
int match_groups(const LabelSet *a, int na, const LabelSet *b, int nb, int *ga, int *gb);

/* The lines (na + nb at most), into *out (freed by the caller); returns
 * their number. */
int match_phases(const LabelSet *a, int na, const LabelSet *b, int nb, PhaseLine **out);

const char *line_kind_name(LineKind k);  /* "same", "changed", "regrouped", "removed", "added" */

#endif
