#include "lower/group.h"

#include "cost/replay.h"
#include "stage/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The delivery to the first receiver, and the forward from it to the rest,
 * reading what it received (same addresses). */
static void split_forward(const Xfer *x, Xfer *deliver, Xfer *fwd)
{
	*deliver = *x;
	deliver->nrecv = 1;
	deliver->recv_step = 0;
	*fwd = *x;
	fwd->src_tile = x->dst_tile;
	fwd->src_addr = x->dst_addr;
	for (int k = 0; k < x->nloop; k++) {
		fwd->loop[k].src_tile = x->loop[k].dst_tile;
		fwd->loop[k].src_addr = x->loop[k].dst_addr;
	}
	fwd->dst_tile = x->dst_tile + x->recv_step;
	fwd->nrecv = x->nrecv - 1;
	if (fwd->nrecv == 1)
		fwd->recv_step = 0;
}

/* Does any member's first receiver coincide with its sender? Then the
 * sender is its own forwarder, and forwarding equals the multicast. */
static int self_first(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt,
		      int64_t da)
{
	(void)ctx, (void)x, (void)m, (void)sa, (void)da;
	return st == dt;
}

static int forwardable(const Plan *pl, const Xfer *x)
{
	return x->kind == X_SEND && x->nrecv > 1 && pl->s[x->step].move == MOVE_PARAMETER &&
	       !xfer_each(x, pl->machine.tiles, self_first, NULL);
}

/* Appends x to pl, split into a delivery and a forward when fwd is set. */
static void add_xfer(Plan *pl, const Xfer *x, int fwd)
{
	if (!fwd) {
		plan_add_xfer(pl, x);
		return;
	}
	Xfer d, f;
	split_forward(x, &d, &f);
	d.dst_tile = tile_mod(d.dst_tile, pl->machine.tiles);
	f.dst_tile = tile_mod(f.dst_tile, pl->machine.tiles);
	plan_add_xfer(pl, &d);
	plan_add_xfer(pl, &f);
}

/* Phase p's records [lo, hi) of old, parameters forwarded or not, as a
 * plan of its own (free its x). */
static Plan phase_variant(const Plan *pl, const Xfer *old, int lo, int hi, int fwd)
{
	Plan q = *pl;
	q.x = NULL;
	q.nx = 0;
	for (int i = lo; i < hi; i++)
		add_xfer(&q, &old[i], fwd && forwardable(pl, &old[i]));
	return q;
}

/* Forward phase p's parameters when that takes fewer modelled cycles and
 * no larger a row; the rows are built only when the cycles favour it. */
static int forward_wins(const Plan *pl, const Xfer *old, int lo, int hi, int p)
{
	Plan d = phase_variant(pl, old, lo, hi, 0), f = phase_variant(pl, old, lo, hi, 1);
	int win = phase_cycles(&f, p) < phase_cycles(&d, p) && phase_max_row(&f, p) <= phase_max_row(&d, p);
	free(d.x);
	free(f.x);
	return win;
}

const char *weights_name(int mode)
{
	static const char *n[] = { "forward", "direct", "auto" };
	return n[mode];
}

int plan_group(Plan *pl, int weights, Err *e)
{
	if (weights != WEIGHTS_DIRECT) {
		Xfer *old = pl->x;
		int nold = pl->nx, p = 0;
		pl->x = NULL;
		pl->nx = 0;
		for (int i = 0; i < nold;) {
			while (p < pl->nph && pl->ph[p].last < old[i].step)
				p++;
			int hi = i + 1, any = forwardable(pl, &old[i]);
			if (p < pl->nph && pl->ph[p].first <= old[i].step)      /* the phase's records */
				for (; hi < nold && old[hi].step <= pl->ph[p].last; hi++)
					any |= forwardable(pl, &old[hi]);
			int fwd = any && weights == WEIGHTS_FORWARD;
			if (any && weights == WEIGHTS_AUTO)
				fwd = forward_wins(pl, old, i, hi, p);
			for (; i < hi; i++)
				add_xfer(pl, &old[i], fwd && forwardable(pl, &old[i]));
		}
		free(old);
	}
	/* Merge phases with no compute between them. */
	int n = 0;
	for (int i = 0; i < pl->nph; i++) {
		if (n) {
			Phase *p = &pl->ph[n - 1];
			int compute = 0;
			for (int s = p->last + 1; s < pl->ph[i].first; s++)
				compute |= pl->s[s].kind == STEP_COMPUTE;
			compute |= plan_repeat_of(pl, p->first) != plan_repeat_of(pl, pl->ph[i].first);
			if (!compute) {
				size_t len = strlen(p->label) + strlen(pl->ph[i].label) + 2;
				char *l = xmalloc(len);
				snprintf(l, len, "%s+%s", p->label, pl->ph[i].label);
				free(p->label);
				free(pl->ph[i].label);
				p->label = l;
				p->last = pl->ph[i].last;
				continue;
			}
		}
		pl->ph[n++] = pl->ph[i];
	}
	pl->nph = n;
	pl->stage = STAGE_GROUP;
	return group_check_order(pl, e);
}

/* ---- order check ---- */

typedef struct {
	int64_t tile, lo, hi, seq;
	int step;
} Access;

typedef struct {
	Access *a;
	int64_t n, cap, seq;
	int writes;             /* collecting writes (1) or reads (0) */
	int64_t tiles;
	int step;
} Acc;

static void add(Acc *c, int64_t t, int64_t lo, int64_t hi)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 1024;
		c->a = xrealloc(c->a, (size_t)c->cap * sizeof *c->a);
	}
	Access x = { t, lo, hi, c->seq, c->step };
	c->a[c->n++] = x;
}

static int note(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Acc *c = ctx;
	(void)m;
	if (c->writes) {
		for (int64_t j = 0; j < x->nrecv; j++)
			add(c, tile_mod(dt + j * x->recv_step, c->tiles), da, da + x->len);
	} else if (x->kind != X_ZERO) {
		add(c, st, sa, sa + x->len);
	}
	c->seq++;
	return 0;
}

static int by_tile(const void *a, const void *b)
{
	const Access *x = a, *y = b;
	if (x->tile != y->tile)
		return x->tile < y->tile ? -1 : 1;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

int group_check_order(const Plan *pl, Err *e)
{
	int rc = 0;
	/* Within a step only a read of the step's own destination (a forward)
	 * can depend on a write of the same step: check the steps that have
	 * such a read, and only those reads. */
	for (int st = 0; st < pl->ns && !rc; st++) {
		if (pl->s[st].kind != STEP_COPY)
			continue;
		const Placement *D = &pl->p[pl->s[st].dst];
		int64_t dlo = D->addr, dhi = D->addr + place_max_bytes(D);
		int any = 0;
		for (int i = 0; i < pl->nx && !any; i++) {
			int64_t lo, hi;
			if (pl->x[i].step != st || pl->x[i].kind != X_SEND)
				continue;
			xfer_span(&pl->x[i], 0, &lo, &hi);
			any = lo < dhi && dlo < hi;
		}
		if (!any)
			continue;
		Acc w = { NULL, 0, 0, 0, 1, pl->machine.tiles, st };
		Acc r = { NULL, 0, 0, 0, 0, pl->machine.tiles, st };
		for (int i = 0; i < pl->nx; i++)
			if (pl->x[i].step == st) {
				xfer_each(&pl->x[i], pl->machine.tiles, note, &w);
				xfer_each(&pl->x[i], pl->machine.tiles, note, &r);
			}
		qsort(w.a, (size_t)w.n, sizeof *w.a, by_tile);
		for (int64_t i = 0; i < r.n && !rc; i++) {
			const Access *q = &r.a[i];
			int64_t lo = 0, hi = w.n;
			while (lo < hi) {
				int64_t mid = (lo + hi) / 2;
				if (w.a[mid].tile < q->tile)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (int64_t k = lo; k < w.n && w.a[k].tile == q->tile && w.a[k].lo < q->hi; k++)
				if (w.a[k].hi > q->lo && w.a[k].seq > q->seq) {
					int p = 0;
					while (p + 1 < pl->nph && pl->ph[p].last < st)
						p++;
					rc = errf(e, "phase %d (%s), tile %lld: bytes %lld..%lld are read before "
						  "the transfer that writes them in this phase (a forward before "
						  "its receive)", p, pl->nph ? pl->ph[p].label : "-",
						  (long long)q->tile, (long long)q->lo, (long long)q->hi);
					break;
				}
		}
		free(w.a);
		free(r.a);
	}
	return rc;
}
