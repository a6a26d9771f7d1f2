/* stage_read: reads any of the four stage formats into a Plan
 * (formats/plan.md): the frame (stage.c), provenance, amp-plan's sections
 * (their records in stage_read_plan.c), amp-exchange's phases and
 * amp-expand's transfers, then the cross-record checks (plan_check.c). */
#include "stage/stage_read.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "stage/plan_check.h"
#include "stage/stage.h"

static int read_phase(Plan *pl, const char *f, const Val *r, int version, Err *e)
{
	(void)version;                  /* no field of this record changed with the version */
	static const char *keys[] = { "phase", "steps", "label", NULL };
	int64_t id, st[2];
	int n;
	const char *label;
	const Val *v;

	if (map_keys(f, r, keys, e) || get_int(f, r, "phase", 0, INT64_C(1) << 30, &id, e))
		return -1;
	if (id != pl->nph)
		return val_err(f, map_get(r, "phase"), e, "expected phase %d, found %lld",
			       pl->nph, (long long)id);
	if (map_need(f, r, "steps", &v, e) || val_ints(f, v, 2, 0, pl->ns - 1, st, &n, e))
		return -1;
	if (n != 2 || st[0] > st[1] || (pl->nph && st[0] <= pl->ph[pl->nph - 1].last))
		return val_err(f, v, e, "steps must be [first, last], after the previous phase");
	if (get_str(f, r, "label", &label, e))
		return -1;
	for (int64_t k = st[0]; k <= st[1]; k++)
		if (pl->s[k].kind != STEP_COPY)
			return val_err(f, v, e, "phase %lld holds step %lld, a compute step; a phase holds "
				       "copies only", (long long)id, (long long)k);
	pl->ph = xrealloc(pl->ph, (size_t)(pl->nph + 1) * sizeof *pl->ph);
	pl->ph[pl->nph].first = (int)st[0];
	pl->ph[pl->nph].last = (int)st[1];
	pl->ph[pl->nph].label = xstrdup(label);
	pl->nph++;
	return 0;
}

/* An embed host record: ids [B, T, 1] int32, a rank 2 table, out [B, T, C] fp16. */
static int read_xfer(Plan *pl, const char *f, const Val *r, int version, Err *e)
{
	(void)version;                  /* no field of this record changed with the version */
	Xfer x;
	if (xfer_read(f, r, pl->ns, pl->machine.tiles, pl->machine.sram_bytes, pl->machine.fragment_limit, &x, e))
		return -1;
	if (pl->s[x.step].kind != STEP_COPY)
		return val_err(f, map_get(r, "step"), e, "step %d is not a copy", x.step);
	if (pl->nx && x.step < pl->x[pl->nx - 1].step)
		return val_err(f, map_get(r, "step"), e, "transfers must follow step order");
	if (pl->stage >= STAGE_EXCHANGE && x.kind == X_SEND) {
		int in = 0;
		for (int p = 0; p < pl->nph && !in; p++)
			in = x.step >= pl->ph[p].first && x.step <= pl->ph[p].last;
		if (!in)
			return val_err(f, map_get(r, "step"), e, "a send on step %d, which no phase holds",
				       x.step);
	}
	plan_add_xfer(pl, &x);
	return 0;
}

static int read_from(Plan *pl, YReader *r, StageKind kind, Err *e);

int stage_read(Plan *pl, const char *path, StageKind kind, Err *e)
{
	YReader r;
	memset(pl, 0, sizeof *pl);
	if (yr_open(&r, path, e)) {
		yr_close(&r);
		return -1;
	}
	return read_from(pl, &r, kind, e);
}

int stage_read_input(Plan *pl, Input *in, StageKind kind, Err *e)
{
	YReader r;
	memset(pl, 0, sizeof *pl);
	if (yr_open_input(&r, in, e)) {
		yr_close(&r);
		return -1;
	}
	return read_from(pl, &r, kind, e);
}

/* One section: its key, then every record through fn. */
static int read_section(Plan *pl, YReader *r, const StageSection *s, int version, Err *e)
{
	Val *rec;
	int more;
	if (stage_section(r, s->key, e))
		return -1;
	while ((more = stage_record(r, &rec, e)) > 0) {
		if (s->fn(pl, r->name, rec, version, e))
			return -1;
		yr_reset(r);
	}
	return more < 0 ? -1 : 0;
}

static int read_from(Plan *pl, YReader *r, StageKind kind, Err *e)
{
	/* What the later formats add, after amp-plan's sections. */
	static const StageSection later[] = {
		{ "phases", read_phase, STAGE_EXCHANGE },       /* amp-exchange, amp-group */
		{ "transfers", read_xfer, STAGE_EXPAND },       /* amp-expand onwards */
	};
	int rc = -1, version;

	pl->stage = kind;
	if (stage_read_header(r, stage_format(kind), PLAN_VERSION_OLDEST, PLAN_VERSION, &version, &pl->machine,
			      &pl->model, e))
		goto out;
	if (version >= 5 && read_section(pl, r, &stage_provenance, version, e))
		goto out;
	for (int i = 0; i < stage_plan_nsections; i++)
		if (read_section(pl, r, &stage_plan_sections[i], version, e))
			goto out;
	for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
		if (kind >= later[i].from && read_section(pl, r, &later[i], version, e))
			goto out;
	if (yr_end(r, e) || plan_check(pl, r->name, e))
		goto out;
	rc = 0;
out:
	yr_close(r);
	if (rc)
		plan_free(pl);
	return rc;
}
