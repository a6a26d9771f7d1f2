#include "table.h"

#include <stdlib.h>
#include <string.h>

int64_t instr_bytes(const Instr *ins, int i, int64_t prev_end)
{
	if (ins[i].kind == I_SEND)
		return SEND_BYTES(ins[i].len) + MOVING_BYTES(ins[i].iters);
	return ins[i].addr == prev_end ? 8 : 12;
}

int64_t row_bytes(const Instr *ins, int n)
{
	int64_t b = 8, prev_end = -1;
	for (int i = 0; i < n; i++) {
		b += instr_bytes(ins, i, prev_end);
		if (ins[i].kind == I_RECV)
			prev_end = ins[i].addr + ins[i].len;
	}
	return (b + 7) / 8 * 8;
}

/* ---- one walk over a phase's transfers ----
 *
 * A phase's rows and the row sizes without the rows are the same walk
 * over its transfers: each member puts a SEND on its sender's row and a
 * RECV on each receiver's, in transfer order. phase_walk makes those
 * instructions; a sink keeps them (phase_rows) or only adds them up
 * (phase_row_sums). */

typedef void (*PutFn)(void *sink, int64_t t, const Instr *in);

typedef struct {
	PutFn put;
	void *sink;
	int64_t tiles;
	int xfer;
	int64_t iters, istride;         /* of the current transfer's sends from a stacked home */
	int64_t hlo, hhi;               /* the home's first instance: addresses */
	const char *home;               /* and tiles (per tile: holds a shard) */
} Walk;

static int walk_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Walk *w = ctx;
	(void)m;
	/* A send from the stacked home moves each iteration; a forward of
	 * bytes received earlier in the phase does not. */
	int mv = w->iters && w->home[st] && sa >= w->hlo && sa < w->hhi;
	Instr s = { .len = x->len, .addr = sa, .istride = mv ? w->istride : 0, .peer = -1, .xfer = w->xfer,
		     .iters = mv ? (int32_t)w->iters : 0, .kind = I_SEND };
	w->put(w->sink, st, &s);
	Instr v = { .len = x->len, .addr = da, .peer = (int32_t)st, .xfer = w->xfer, .kind = I_RECV };
	int64_t step = tile_mod(x->recv_step, w->tiles);
	for (int64_t j = 0, t = dt; j < x->nrecv; j++) {      /* dt + j * recv_step, in [0, tiles) */
		w->put(w->sink, t, &v);
		t += step;
		t -= t >= w->tiles ? w->tiles : 0;
	}
	return 0;
}

static int mark(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	(void)p, (void)idx, (void)rep;
	((char *)ctx)[t] = 1;
	return 0;
}

/* Per-thread arrays kept from call to call (the planner walks every phase
 * of every trial); table_release() frees them. */
static _Thread_local char *kept_home;   /* the stacked home's tiles */
static _Thread_local int64_t kept_home_tiles;

static void phase_walk(const Plan *pl, int p, PutFn put, void *sink)
{
	int64_t T = pl->machine.tiles;
	int home_of = -1;
	if (kept_home_tiles != T) {
		free(kept_home);
		kept_home = xcalloc((size_t)T, 1);
		kept_home_tiles = T;
	}
	Walk w = { .put = put, .sink = sink, .tiles = T, .home = kept_home };
	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind != X_SEND || x->step < pl->ph[p].first || x->step > pl->ph[p].last)
			continue;
		w.xfer = i;
		int src = pl->nr ? pl->s[x->step].src : -1;       /* no repeat: nothing moves */
		w.iters = src >= 0 && plan_stacked(pl, src) ? plan_step_count(pl, x->step) : 0;
		w.istride = w.iters ? place_instance(&pl->p[src]) : 0;
		if (w.iters && src != home_of) {
			home_of = src;
			memset(kept_home, 0, (size_t)T);
			place_each(&pl->p[src], T, mark, kept_home);
		}
		w.hlo = src >= 0 ? pl->p[src].addr : 0;
		w.hhi = w.hlo + w.istride;
		xfer_each(x, T, walk_member, &w);
	}
}

/* ---- the rows ---- */

typedef struct {
	Instr **ins;
	int *n, *cap;
	int64_t *touched;
	int64_t ntouched, tiles;
} Rows;

static _Thread_local Rows kept;         /* only the tiles a call touched are reset */

static void rows_put(void *sink, int64_t t, const Instr *in)
{
	Rows *r = sink;
	if (r->n[t] == 0)
		r->touched[r->ntouched++] = t;
	if (r->n[t] == r->cap[t]) {
		r->cap[t] = r->cap[t] ? 2 * r->cap[t] : 16;
		r->ins[t] = xrealloc(r->ins[t], (size_t)r->cap[t] * sizeof **r->ins);
	}
	r->ins[t][r->n[t]++] = *in;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void rows_release(void)
{
	for (int64_t t = 0; t < kept.tiles; t++)
		free(kept.ins[t]);
	free(kept.ins), free(kept.n), free(kept.cap), free(kept.touched);
	memset(&kept, 0, sizeof kept);
}

int phase_rows(const Plan *pl, int p, RowFn fn, void *ctx)
{
	int64_t T = pl->machine.tiles;
	int rc = 0;
	if (kept.tiles != T) {
		rows_release();
		kept.ins = xcalloc((size_t)T, sizeof *kept.ins);
		kept.n = xcalloc((size_t)T, sizeof *kept.n);
		kept.cap = xcalloc((size_t)T, sizeof *kept.cap);
		kept.touched = xmalloc((size_t)T * sizeof *kept.touched);
		kept.tiles = T;
	}
	Rows *r = &kept;
	r->ntouched = 0;
	phase_walk(pl, p, rows_put, r);
	qsort(r->touched, (size_t)r->ntouched, sizeof *r->touched, cmp64);
	for (int64_t k = 0; k < r->ntouched && !rc; k++) {
		int64_t t = r->touched[k];
		rc = fn(ctx, t, r->ins[t], r->n[t]);
	}
	for (int64_t k = 0; k < r->ntouched; k++)
		r->n[r->touched[k]] = 0;
	return rc;
}

/* ---- row sizes without the rows ---- */

/* A tile's row as it grows: its bytes so far (before the 8-byte header
 * and rounding), instructions, and where its last RECV ended. The same
 * sizes as row_bytes() gives for the row phase_rows builds. */
typedef struct {
	int64_t bytes, n, prev_end;
} RowSum;

typedef struct {
	RowSum *rs;
	int64_t *touched, ntouched;
} Sums;

static _Thread_local RowSum *kept_sums;
static _Thread_local int64_t *kept_sum_touched, kept_sum_tiles;

static void sum_put(void *sink, int64_t t, const Instr *in)
{
	Sums *u = sink;
	RowSum *r = &u->rs[t];
	if (r->n == 0) {
		u->touched[u->ntouched++] = t;
		r->prev_end = -1;
	}
	if (in->kind == I_SEND) {
		r->bytes += SEND_BYTES(in->len) + MOVING_BYTES(in->iters);
	} else {
		r->bytes += in->addr == r->prev_end ? 8 : 12;
		r->prev_end = in->addr + in->len;
	}
	r->n++;
}

void phase_row_sums(const Plan *pl, int p, int64_t *table, int64_t *frags)
{
	int64_t T = pl->machine.tiles;
	if (kept_sum_tiles != T) {
		free(kept_sums), free(kept_sum_touched);
		kept_sums = xcalloc((size_t)T, sizeof *kept_sums);
		kept_sum_touched = xmalloc((size_t)T * sizeof *kept_sum_touched);
		kept_sum_tiles = T;
	}
	Sums u = { kept_sums, kept_sum_touched, 0 };
	phase_walk(pl, p, sum_put, &u);
	for (int64_t k = 0; k < u.ntouched; k++) {
		int64_t t = u.touched[k];
		if (table)
			table[t] += (8 + u.rs[t].bytes + 7) / 8 * 8;
		if (frags)
			frags[t] += u.rs[t].n;
		memset(&u.rs[t], 0, sizeof u.rs[t]);
	}
}

void table_release(void)
{
	rows_release();
	free(kept_home);
	kept_home = NULL, kept_home_tiles = 0;
	free(kept_sums);
	free(kept_sum_touched);
	kept_sums = NULL, kept_sum_touched = NULL, kept_sum_tiles = 0;
}

int64_t phase_max_row(const Plan *pl, int p)
{
	int64_t T = pl->machine.tiles, *b = xcalloc((size_t)T, sizeof *b), m = 0;
	phase_row_sums(pl, p, b, NULL);
	for (int64_t t = 0; t < T; t++)
		m = b[t] > m ? b[t] : m;
	free(b);
	return m;
}

/* ---- totals with sharing ---- */

/* Two independent 64-bit hashes of a row: rows a tile already holds are
 * recognised by both (a false match needs a 128-bit collision). */
typedef struct {
	uint64_t a, b;
} Hash2;

static Hash2 row_hash(const Instr *ins, int n)
{
	Hash2 h = { 1469598103934665603u, 0x9E3779B97F4A7C15u ^ (uint64_t)n };
	for (int i = 0; i < n; i++) {
		uint64_t v[6] = { ins[i].kind, (uint64_t)ins[i].len, (uint64_t)ins[i].addr, (uint64_t)ins[i].peer,
				  (uint64_t)ins[i].iters, (uint64_t)ins[i].istride };
		for (int k = 0; k < 6; k++) {
			h.a = (h.a ^ v[k]) * 1099511628211u;
			h.a ^= h.a >> 29;
			h.b += v[k] * 0xBF58476D1CE4E5B9u + 0x94D049BB133111EBu;
			h.b = (h.b ^ (h.b >> 31)) * 0xD6E8FEB86659FD93u;
		}
	}
	return h;
}

typedef struct {
	const Plan *pl;
	int64_t *table, *frags, *max_row;
	int phase;
	Hash2 **seen;           /* per tile: hashes of rows it holds */
	int *nseen;
} Tot;

static int total_row(void *ctx, int64_t t, const Instr *ins, int n)
{
	Tot *c = ctx;
	int64_t b = row_bytes(ins, n);
	Hash2 h = row_hash(ins, n);
	if (c->max_row && b > c->max_row[c->phase])
		c->max_row[c->phase] = b;
	if (c->frags)
		c->frags[t] += n;
	for (int i = 0; i < c->nseen[t]; i++)
		if (c->seen[t][i].a == h.a && c->seen[t][i].b == h.b)
			return 0;               /* the tile holds this row already */
	c->seen[t] = xrealloc(c->seen[t], (size_t)(c->nseen[t] + 1) * sizeof **c->seen);
	c->seen[t][c->nseen[t]++] = h;
	if (c->table)
		c->table[t] += b;
	return 0;
}

void table_totals(const Plan *pl, int64_t *table, int64_t *frags, int64_t *max_row)
{
	int64_t T = pl->machine.tiles;
	Tot c = { pl, table, frags, max_row, 0, xcalloc((size_t)T, sizeof *c.seen),
		  xcalloc((size_t)T, sizeof *c.nseen) };
	if (table)
		memset(table, 0, (size_t)T * sizeof *table);
	if (frags)
		memset(frags, 0, (size_t)T * sizeof *frags);
	if (max_row)
		memset(max_row, 0, (size_t)pl->nph * sizeof *max_row);
	for (int p = 0; p < pl->nph; p++) {
		c.phase = p;
		phase_rows(pl, p, total_row, &c);
	}
	for (int64_t t = 0; t < T; t++)
		free(c.seen[t]);
	free(c.seen);
	free(c.nseen);
}
