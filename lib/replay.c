#include "replay.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	int64_t lo, hi, end;
} Write;

typedef struct {
	const Machine *m;
	int64_t *issue, *sfree, *rfree;
	Write **w;
	int *nw, *cw;
	int64_t last;
} Replay;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int frag(void *ctx, const Xfer *x, int64_t m, int64_t s, int64_t sa, int64_t dt, int64_t da)
{
	Replay *r = ctx;
	int64_t T = r->m->tiles, start, dep = 0, end;
	(void)m;

	r->issue[s] += r->m->send_control_cycles;
	start = max64(r->issue[s], r->sfree[s]);
	for (int i = 0; i < r->nw[s]; i++)          /* forwards wait for their data */
		if (r->w[s][i].lo < sa + x->len && sa < r->w[s][i].hi)
			dep = max64(dep, r->w[s][i].end);
	start = max64(start, dep);
	for (int64_t j = 0; j < x->nrecv; j++) {
		int64_t t = tile_mod(dt + j * x->recv_step, T);
		r->issue[t] += r->m->receive_control_cycles;
		start = max64(start, max64(r->issue[t], r->rfree[t]));
	}
	end = start + cdiv(x->len, r->m->exchange_bytes_per_cycle);
	r->sfree[s] = end;
	r->last = max64(r->last, max64(end, r->issue[s]));
	for (int64_t j = 0; j < x->nrecv; j++) {
		int64_t t = tile_mod(dt + j * x->recv_step, T);
		r->rfree[t] = end;
		r->last = max64(r->last, r->issue[t]);
		if (r->nw[t] == r->cw[t]) {
			r->cw[t] = r->cw[t] ? 2 * r->cw[t] : 8;
			r->w[t] = xrealloc(r->w[t], (size_t)r->cw[t] * sizeof **r->w);
		}
		r->w[t][r->nw[t]++] = (Write){ da, da + x->len, end };
	}
	r->last = max64(r->last, end);
	return 0;
}

int64_t phase_cycles(const Plan *pl, int p)
{
	int64_t T = pl->machine.tiles;
	Replay r = { &pl->machine, xcalloc((size_t)T, 8), xcalloc((size_t)T, 8), xcalloc((size_t)T, 8),
		     xcalloc((size_t)T, sizeof *r.w), xcalloc((size_t)T, sizeof *r.nw),
		     xcalloc((size_t)T, sizeof *r.cw), 0 };

	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind == X_SEND && x->step >= pl->ph[p].first && x->step <= pl->ph[p].last)
			xfer_each(x, T, frag, &r);
	}
	for (int64_t t = 0; t < T; t++)
		free(r.w[t]);
	free(r.issue);
	free(r.sfree);
	free(r.rfree);
	free(r.w);
	free(r.nw);
	free(r.cw);
	return r.last;
}
