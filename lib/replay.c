#include "replay.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	int64_t lo, hi, end;
} Write;

/* The writes a tile received in the phase, found by address: SRAM cut
 * into buckets of 2^BUCKET_BITS bytes, each listing the writes that touch
 * it, so a forward looks only at the writes near the bytes it sends. */
#define BUCKET_BITS 12

typedef struct {
	int *w;                 /* indices into the tile's writes */
	int n, cap;
} Bucket;

typedef struct {
	Write *w;
	int nw, cw;
	Bucket *b;              /* nb buckets, made on the first write */
} TileWrites;

typedef struct {
	const Machine *m;
	int64_t *issue, *sfree, *rfree;
	TileWrites *tw;
	int64_t nb;
	int64_t last;
} Replay;

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t bucket_of(const Replay *r, int64_t addr)
{
	int64_t k = addr >> BUCKET_BITS;
	return k < 0 ? 0 : k >= r->nb ? r->nb - 1 : k;
}

/* The latest end of a write on tile t that overlaps [lo, hi). */
static int64_t written(const Replay *r, int64_t t, int64_t lo, int64_t hi)
{
	const TileWrites *tw = &r->tw[t];
	int64_t dep = 0;
	if (!tw->nw || hi <= lo)
		return 0;
	for (int64_t k = bucket_of(r, lo), kh = bucket_of(r, hi - 1); k <= kh; k++)
		for (int i = 0; i < tw->b[k].n; i++) {
			const Write *w = &tw->w[tw->b[k].w[i]];
			if (w->lo < hi && lo < w->hi)
				dep = max64(dep, w->end);
		}
	return dep;
}

static void add_write(Replay *r, int64_t t, Write w)
{
	TileWrites *tw = &r->tw[t];
	if (w.hi <= w.lo)
		return;
	if (!tw->b)
		tw->b = xcalloc((size_t)r->nb, sizeof *tw->b);
	if (tw->nw == tw->cw) {
		tw->cw = tw->cw ? 2 * tw->cw : 8;
		tw->w = xrealloc(tw->w, (size_t)tw->cw * sizeof *tw->w);
	}
	tw->w[tw->nw] = w;
	for (int64_t k = bucket_of(r, w.lo), kh = bucket_of(r, w.hi - 1); k <= kh; k++) {
		Bucket *b = &tw->b[k];
		if (b->n == b->cap) {
			b->cap = b->cap ? 2 * b->cap : 4;
			b->w = xrealloc(b->w, (size_t)b->cap * sizeof *b->w);
		}
		b->w[b->n++] = tw->nw;
	}
	tw->nw++;
}

static int frag(void *ctx, const Xfer *x, int64_t m, int64_t s, int64_t sa, int64_t dt, int64_t da)
{
	Replay *r = ctx;
	int64_t T = r->m->tiles, start, end;
	(void)m;

	r->issue[s] += r->m->send_control_cycles;
	start = max64(r->issue[s], r->sfree[s]);
	start = max64(start, written(r, s, sa, sa + x->len));    /* forwards wait for their data */
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
		add_write(r, t, (Write){ da, da + x->len, end });
	}
	r->last = max64(r->last, end);
	return 0;
}

int64_t phase_cycles(const Plan *pl, int p)
{
	int64_t T = pl->machine.tiles, sram = pl->machine.sram_bytes;
	Replay r = { &pl->machine, xcalloc((size_t)T, 8), xcalloc((size_t)T, 8), xcalloc((size_t)T, 8),
		     xcalloc((size_t)T, sizeof *r.tw), (sram > 0 ? sram - 1 : 0) / (1 << BUCKET_BITS) + 1, 0 };

	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind == X_SEND && x->step >= pl->ph[p].first && x->step <= pl->ph[p].last)
			xfer_each(x, T, frag, &r);
	}
	for (int64_t t = 0; t < T; t++) {
		for (int64_t k = 0; r.tw[t].b && k < r.nb; k++)
			free(r.tw[t].b[k].w);
		free(r.tw[t].b);
		free(r.tw[t].w);
	}
	free(r.issue);
	free(r.sfree);
	free(r.rfree);
	free(r.tw);
	return r.last;
}
