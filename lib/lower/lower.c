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

int lower_group(Plan *pl, int weights, int schedule, ScheduleStats *stats, Err *e)
{
	if (plan_group(pl, weights, e))
		return -1;
	return schedule ? plan_schedule(pl, SCHEDULE_CYCLES_PER_RECORD, stats, e) : 0;
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
	if ((lw->group ? lw->group : plan_group)(pl, lw->weights, e))
		return -1;
	return lw->schedule ? plan_schedule(pl, lw->per_record, lw->stats, e) : 0;
}
