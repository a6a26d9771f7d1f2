#include "trial.h"

#include <stdlib.h>
#include <string.h>

#include "compose.h"
#include "cost.h"
#include "exchange.h"
#include "expand.h"
#include "group.h"
#include "replay.h"
#include "table.h"

/* Does every shard of dst sit where src holds the same region, on every
 * tile both use (lib/alloc.h's condition for one buffer)? */
typedef struct {
	const Placement *src;
	int64_t *src_at;
} Share;

static int differs(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
		   int64_t tile)
{
	Share *sh = ctx;
	int64_t sidx[MAX_RANK], lin = sh->src_at[tile];
	(void)rep;
	if (lin < 0)
		return 0;
	place_shard_idx(sh->src, lin, sidx);
	return !place_same_region(sh->src, sidx, p, idx);
}

static int can_share(const Plan *q, int src, int dst)
{
	int64_t T = q->machine.tiles;
	Share sh = { &q->p[src], xmalloc((size_t)T * sizeof *sh.src_at) };
	place_shard_at(&q->p[src], T, sh.src_at);
	int ok = !place_each(&q->p[dst], T, differs, &sh);
	free(sh.src_at);
	return ok;
}

int plan_trial(const Plan *pl, int first, int last, int weights, int64_t *table,
	       int64_t *frags, int64_t *cycles, Err *e)
{
	Plan q;
	int rc = -1;

	/* The steps first..last alone, over copies of every placement, as
	 * amp-compose would leave them. Tensors are shared (read only). */
	memset(&q, 0, sizeof q);
	q.machine = pl->machine;
	q.model = pl->model;
	q.t = pl->t, q.nt = pl->nt;
	q.np = pl->np;
	q.p = xmalloc((size_t)(q.np + 1) * sizeof *q.p);
	for (int i = 0; i < q.np; i++) {
		q.p[i] = pl->p[i];
		q.p[i].name = xstrdup(pl->p[i].name);
	}
	q.ns = last - first + 1;
	q.s = xmalloc((size_t)(q.ns + 1) * sizeof *q.s);
	for (int i = 0; i < q.ns; i++) {
		q.s[i] = pl->s[first + i];
		q.s[i].op = xstrdup(pl->s[first + i].op);
	}
	q.r = xmalloc((size_t)(pl->nr + 1) * sizeof *q.r);
	for (int i = 0; i < pl->nr; i++) {
		int f = pl->r[i].first > first ? pl->r[i].first : first;
		int l = pl->r[i].last < last ? pl->r[i].last : last;
		if (f > l)
			continue;
		q.r[q.nr] = pl->r[i];
		q.r[q.nr].first = f - first, q.r[q.nr].last = l - first;
		q.nr++;
	}
	plan_compose(&q);

	int np = q.np;
	int *fi = xmalloc((size_t)(np + 1) * sizeof *fi), *la = xmalloc((size_t)(np + 1) * sizeof *la);
	int *alias = xmalloc((size_t)(np + 1) * sizeof *alias);
	plan_lifetimes(&q, fi, la, alias);
	for (int i = 0; i < np; i++)
		q.p[i].addr = (int64_t)i << 32;         /* far from every other buffer */
	for (int s = 0; s < q.ns; s++) {
		const Step *st = &q.s[s];
		if (st->kind == STEP_COPY && alias[st->dst] == st->src &&
		    q.p[st->src].layout == q.p[st->dst].layout && can_share(&q, st->src, st->dst))
			q.p[st->dst].addr = q.p[st->src].addr;
	}
	free(fi);
	free(la);
	free(alias);
	q.stage = STAGE_EXPAND;
	if (plan_expand_steps(&q, 0, q.ns - 1, e) || plan_exchange(&q, e) ||
	    plan_group(&q, weights, e))
		goto out;
	for (int p = 0; p < q.nph; p++)
		phase_row_sums(&q, p, table, frags);    /* row_bytes of every row, without the rows */
	if (cycles) {
		*cycles = local_copy_cycles(&q, 0, q.ns - 1, NULL);
		for (int p = 0; p < q.nph; p++)
			*cycles += phase_cycles(&q, p) + q.machine.sync_cycles;
		for (int s = first; s <= last; s++)
			if (pl->s[s].kind == STEP_COMPUTE)
				*cycles += step_cycles(pl, s, NULL);
	}
	rc = 0;
out:
	for (int p = 0; p < q.nph; p++)
		free(q.ph[p].label);
	for (int i = 0; i < q.np; i++)
		free(q.p[i].name);
	for (int i = 0; i < q.ns; i++)
		free(q.s[i].op);
	free(q.ph);
	free(q.x);
	free(q.p);
	free(q.s);
	free(q.r);
	return rc;
}
