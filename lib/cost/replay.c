#include "cost/replay.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	int64_t lo, hi, end;
} Write;

/* The writes a tile received in the phase, found by address: SRAM cut
 * into buckets of 2^shift bytes, each listing the writes that touch it, so
 * a forward looks only at the writes near the bytes it sends. The buckets
 * are 4 KiB (BUCKET_BITS), wider on a machine whose SRAM would need more
 * than MAX_BUCKETS of them: a tile's index costs memory in proportion to
 * the bucket count, not to SRAM (a 4 GiB study machine would otherwise
 * take 16 MB a tile). The width only changes which writes a search looks
 * at, never its answer. */
#define BUCKET_BITS 12
#define MAX_BUCKETS 1024

typedef struct {
	int *w;                 /* indices into the tile's writes */
	int n, cap;
} Bucket;

typedef struct {
	Write *w;
	int nw, cw;
	int64_t lo, hi;         /* the bytes every write lies in */
	Bucket *b;              /* nb buckets, made when a send first reads within [lo, hi) */
} TileWrites;

struct Replay {
	const Machine *m;
	int64_t *issue, *sfree, *rfree;
	int64_t *rlo, *rhi;     /* per tile, when declared: the bytes its sends read (lo >= hi: none) */
	TileWrites *tw;
	int64_t nb;
	int shift;              /* a bucket holds 2^shift bytes */
	int64_t last;
	int64_t *busy;          /* NULL, or per tile: end, send and receive cycles (3 x tiles) */
};

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static int64_t bucket_of(const Replay *r, int64_t addr)
{
	int64_t k = addr >> r->shift;
	return k < 0 ? 0 : k >= r->nb ? r->nb - 1 : k;
}

static void bucket_add(const Replay *r, TileWrites *tw, int i)
{
	const Write *w = &tw->w[i];
	for (int64_t k = bucket_of(r, w->lo), kh = bucket_of(r, w->hi - 1); k <= kh; k++) {
		Bucket *b = &tw->b[k];
		if (b->n == b->cap) {
			b->cap = b->cap ? 2 * b->cap : 4;
			b->w = xrealloc(b->w, (size_t)b->cap * sizeof *b->w);
		}
		b->w[b->n++] = i;
	}
}

/* The latest end of a write on tile t that overlaps [lo, hi). Most sends
 * read bytes far from every write of the phase on their tile (a source
 * is not a destination): those need no search. */
static int64_t written(const Replay *r, int64_t t, int64_t lo, int64_t hi)
{
	TileWrites *tw = &r->tw[t];
	int64_t dep = 0;
	if (!tw->nw || hi <= lo || hi <= tw->lo || tw->hi <= lo)
		return 0;
	if (!tw->b) {
		tw->b = xcalloc((size_t)r->nb, sizeof *tw->b);
		for (int i = 0; i < tw->nw; i++)
			bucket_add(r, tw, i);
	}
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
	if (tw->nw == tw->cw) {
		tw->cw = tw->cw ? 2 * tw->cw : 8;
		tw->w = xrealloc(tw->w, (size_t)tw->cw * sizeof *tw->w);
	}
	if (!tw->nw || w.lo < tw->lo)
		tw->lo = w.lo;
	if (!tw->nw || w.hi > tw->hi)
		tw->hi = w.hi;
	tw->w[tw->nw] = w;
	if (tw->b)
		bucket_add(r, tw, tw->nw);
	tw->nw++;
}

Replay *replay_new(const Machine *m)
{
	int64_t T = m->tiles, sram = m->sram_bytes;
	Replay *r = xcalloc(1, sizeof *r);
	r->m = m;
	r->issue = xcalloc((size_t)T, sizeof *r->issue);
	r->sfree = xcalloc((size_t)T, sizeof *r->sfree);
	r->rfree = xcalloc((size_t)T, sizeof *r->rfree);
	r->tw = xcalloc((size_t)T, sizeof *r->tw);
	r->rlo = r->rhi = NULL;
	r->shift = BUCKET_BITS;
	while (((sram > 0 ? sram - 1 : 0) >> r->shift) + 1 > MAX_BUCKETS)
		r->shift++;
	r->nb = ((sram > 0 ? sram - 1 : 0) >> r->shift) + 1;
	r->last = 0;
	return r;
}

static int note_read(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Replay *r = ctx;
	(void)m, (void)dt, (void)da;
	if (r->rlo[st] >= r->rhi[st])
		r->rlo[st] = sa, r->rhi[st] = sa + x->len;
	else
		r->rlo[st] = sa < r->rlo[st] ? sa : r->rlo[st], r->rhi[st] = max64(r->rhi[st], sa + x->len);
	return 0;
}

void replay_reads(Replay *r, const Xfer *x, int n)
{
	int64_t T = r->m->tiles;
	if (!r->rlo) {
		r->rlo = xcalloc((size_t)T, sizeof *r->rlo);
		r->rhi = xcalloc((size_t)T, sizeof *r->rhi);
	}
	for (int i = 0; i < n; i++)
		if (x[i].kind == X_SEND)
			xfer_each(&x[i], T, note_read, r);
}

void replay_free(Replay *r)
{
	if (!r)
		return;
	for (int64_t t = 0; t < r->m->tiles; t++) {
		for (int64_t k = 0; r->tw[t].b && k < r->nb; k++)
			free(r->tw[t].b[k].w);
		free(r->tw[t].b);
		free(r->tw[t].w);
	}
	free(r->rlo);
	free(r->rhi);
	free(r->issue);
	free(r->sfree);
	free(r->rfree);
	free(r->tw);
	free(r);
}

int64_t replay_last(const Replay *r)
{
	return r->last;
}

int64_t replay_start_at(const Replay *r, const Frag *f, int64_t *tile)
{
	const Machine *m = r->m;
	int64_t T = m->tiles, s = f->src, is = r->issue[s] + m->send_control_cycles;
	int64_t start = max64(is, r->sfree[s]), at = s;
	start = max64(start, written(r, s, f->src_addr, f->src_addr + f->len));  /* forwards wait for their data */
	for (int64_t j = 0; j < f->nrecv; j++) {
		int64_t t = tile_mod(f->dst_tile + j * f->recv_step, T);
		int64_t it = max64((t == s ? is : r->issue[t]) + m->receive_control_cycles, r->rfree[t]);
		if (it > start)
			start = it, at = t;
	}
	if (tile)
		*tile = at;
	return start;
}

int64_t replay_start(const Replay *r, const Frag *f)
{
	return replay_start_at(r, f, NULL);
}

int64_t replay_issue(Replay *r, const Frag *f)
{
	const Machine *m = r->m;
	int64_t T = m->tiles, s = f->src, start = replay_start(r, f), end;

	r->issue[s] += m->send_control_cycles;
	for (int64_t j = 0; j < f->nrecv; j++)
		r->issue[tile_mod(f->dst_tile + j * f->recv_step, T)] += m->receive_control_cycles;
	end = start + cdiv(f->len, m->exchange_bytes_per_cycle);
	if (r->busy) {          /* the ports' moving cycles, per tile */
		r->busy[T + s] += end - start;
		for (int64_t j = 0; j < f->nrecv; j++)
			r->busy[2 * T + tile_mod(f->dst_tile + j * f->recv_step, T)] += end - start;
	}
	r->sfree[s] = end;
	r->last = max64(r->last, max64(end, r->issue[s]));
	for (int64_t j = 0; j < f->nrecv; j++) {
		int64_t t = tile_mod(f->dst_tile + j * f->recv_step, T);
		r->rfree[t] = end;
		r->last = max64(r->last, r->issue[t]);
		if (!r->rlo || (f->dst_addr < r->rhi[t] && r->rlo[t] < f->dst_addr + f->len))
			add_write(r, t, (Write){ f->dst_addr, f->dst_addr + f->len, end });
	}
	return end;
}

static int frag(void *ctx, const Xfer *x, int64_t m, int64_t s, int64_t sa, int64_t dt, int64_t da)
{
	(void)m;
	Frag f = { s, sa, dt, da, x->len, x->nrecv, x->recv_step };
	replay_issue(ctx, &f);
	return 0;
}

/* The replay of records x[0..n) whose step lies in first..last, in order;
 * with busy (NULL or 3 x tiles), each tile's end, send-port and
 * receive-port cycles. */
static int64_t replay_range(const Plan *pl, const Xfer *x, int n, int first, int last, int64_t *busy)
{
	Replay *r = replay_new(&pl->machine);
	int lo = 0, hi = n;             /* the sends that may read what the phase writes */
	while (lo < n && (x[lo].step < first || x[lo].step > last))
		lo++;
	while (hi > lo && (x[hi - 1].step < first || x[hi - 1].step > last))
		hi--;
	replay_reads(r, x + lo, hi - lo);
	r->busy = busy;
	if (busy)
		memset(busy, 0, 3 * (size_t)pl->machine.tiles * sizeof *busy);
	for (int i = 0; i < n; i++)
		if (x[i].kind == X_SEND && x[i].step >= first && x[i].step <= last)
			xfer_each(&x[i], pl->machine.tiles, frag, r);
	if (busy)
		for (int64_t t = 0, T = pl->machine.tiles; t < T; t++)
			busy[t] = max64(r->issue[t], max64(r->sfree[t], r->rfree[t]));
	int64_t end = r->last;
	replay_free(r);
	return end;
}

int64_t replay_records(const Plan *pl, const Xfer *x, int n)
{
	return replay_range(pl, x, n, INT32_MIN, INT32_MAX, NULL);
}

int64_t phase_cycles(const Plan *pl, int p)
{
	return replay_range(pl, pl->x, pl->nx, pl->ph[p].first, pl->ph[p].last, NULL);
}

int64_t phase_cycles_tiles(const Plan *pl, int p, int64_t *busy)
{
	return replay_range(pl, pl->x, pl->nx, pl->ph[p].first, pl->ph[p].last, busy);
}
