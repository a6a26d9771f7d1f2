#include "lower/lower.h"

#include "lower/compose.h"
#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/group.h"
#include "stage/alloc.h"

Lowering lowering_default(void)
{
	Lowering lw = { 1, WEIGHTS_DEFAULT, 1, SCHEDULE_CYCLES_PER_RECORD, NULL, NULL, NULL };
	return lw;
}

/* The sequence's tail, amp-group's part: group (by group, or plan_group),
 * then, with schedule, the schedule at per_record. */
static int group_schedule(Plan *pl, int (*group)(Plan *, int, Err *), int weights, int schedule, double per_record,
			  ScheduleStats *stats, Err *e)
{
	if ((group ? group : plan_group)(pl, weights, e))
		return -1;
	return schedule ? plan_schedule(pl, per_record, stats, e) : 0;
}

int lower_group(Plan *pl, int weights, int schedule, ScheduleStats *stats, Err *e)
{
	return group_schedule(pl, NULL, weights, schedule, SCHEDULE_CYCLES_PER_RECORD, stats, e);
}

int lower_plan(Plan *pl, const Lowering *lw, Err *e)
{
	Lowering d = lowering_default();
	if (!lw)
		lw = &d;
	if (lw->compose)
		plan_compose(pl);
	if ((lw->alloc ? lw->alloc : plan_alloc)(pl, e))
		return -1;
	pl->stage = STAGE_EXPAND;
	if (plan_expand_steps(pl, 0, pl->ns - 1, e) || plan_exchange(pl, e))
		return -1;
	return group_schedule(pl, lw->group, lw->weights, lw->schedule, lw->per_record, lw->stats, e);
}
