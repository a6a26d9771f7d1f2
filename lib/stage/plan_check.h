/* plan_check: the cross-record checks of a stage (names resolve,
 * placements are valid, copies keep their tensor, steps read only what was
 * written before them). stage_read runs them on every file it reads; the
 * planner and the composer run them on what they build.
 */
#ifndef AMP_PLAN_CHECK_H
#define AMP_PLAN_CHECK_H

#include "stage/plan.h"

/* The whole plan; errors name file (and the record's position when the
 * plan was read). */
int plan_check(const Plan *p, const char *file, Err *e);
/* The checks of one step that need only what precedes it. */
int plan_check_step(const Plan *p, int step, Err *e);

#endif
