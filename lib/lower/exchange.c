#include "lower/exchange.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *step_label(const Plan *pl, int s)
{
	return xasprintf("%s.%s", pl->s[s].op, operand_name(pl->s[s].operand));
}

static void drop_inner(Xfer *x)
{
	memmove(&x->loop[0], &x->loop[1], (size_t)(x->nloop - 1) * sizeof *x->loop);
	x->nloop--;
}

int xfer_fragment(const Xfer *in, int64_t max, Xfer out[2])
{
	Xfer x = *in;

	if (x.kind != X_SEND) {
		out[0] = x;
		return 1;
	}
	/* Join: the innermost loop continues both spans on the same tiles. */
	while (x.nloop && x.loop[0].src_tile == 0 && x.loop[0].dst_tile == 0 &&
	       x.loop[0].src_addr == x.len && x.loop[0].dst_addr == x.len) {
		x.len *= x.loop[0].count;
		drop_inner(&x);
	}
	if (x.len <= max) {
		out[0] = x;
		return 1;
	}
	/* Cut: q fragments of max bytes, then the tail. */
	int64_t q = x.len / max, r = x.len % max;
	Xfer body = x, tail = x;
	int n = 0;
	if (q > 1) {
		if (body.nloop == XFER_LOOPS)
			return -1;
		memmove(&body.loop[1], &body.loop[0], (size_t)body.nloop * sizeof *body.loop);
		body.nloop++;
		body.loop[0] = (XLoop){ q, 0, max, 0, max };
	}
	body.len = max;
	out[n++] = body;
	if (r) {
		tail.len = r;
		tail.src_addr += q * max;
		tail.dst_addr += q * max;
		out[n++] = tail;
	}
	return n;
}

int plan_exchange(Plan *pl, Err *e)
{
	Xfer *old = pl->x;
	int nold = pl->nx;

	pl->x = NULL;
	pl->nx = 0;
	for (int i = 0; i < nold; i++) {
		Xfer out[2];
		int n = xfer_fragment(&old[i], pl->machine.max_transfer_bytes, out);
		if (n < 0) {
			int step = old[i].step;
			free(old);
			return errf(e, "step %d: a transfer family has too many loops to cut", step);
		}
		for (int k = 0; k < n; k++)
			plan_add_xfer(pl, &out[k]);
	}
	free(old);
	/* One phase per copy step that sends. */
	for (int i = 0, s = -1; i < pl->nx; i++) {
		if (pl->x[i].kind != X_SEND || pl->x[i].step == s)
			continue;
		s = pl->x[i].step;
		pl->ph = xrealloc(pl->ph, (size_t)(pl->nph + 1) * sizeof *pl->ph);
		pl->ph[pl->nph].first = pl->ph[pl->nph].last = s;
		pl->ph[pl->nph].label = step_label(pl, s);
		pl->nph++;
	}
	pl->stage = STAGE_EXCHANGE;
	return 0;
}
