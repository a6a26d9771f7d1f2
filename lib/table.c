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

typedef struct {
	Instr **ins;
	int *n, *cap;
	int64_t *touched;
	int64_t ntouched, tiles;
	int xfer;
	int64_t iters, istride;         /* of the current transfer's sends from a stacked home */
	int64_t hlo, hhi;               /* the home's first instance: addresses */
	const char *home;               /* and tiles (per tile: holds a shard) */
} Rows;

static void put(Rows *r, int64_t t, Instr in)
{
	if (r->n[t] == 0)
		r->touched[r->ntouched++] = t;
	if (r->n[t] == r->cap[t]) {
		r->cap[t] = r->cap[t] ? 2 * r->cap[t] : 16;
		r->ins[t] = xrealloc(r->ins[t], (size_t)r->cap[t] * sizeof **r->ins);
	}
	r->ins[t][r->n[t]++] = in;
}

static int member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Rows *r = ctx;
	(void)m;
	/* A send from the stacked home moves each iteration; a forward of
	 * bytes received earlier in the phase does not. */
	int mv = r->iters && r->home[st] && sa >= r->hlo && sa < r->hhi;
	Instr s = { .len = x->len, .addr = sa, .istride = mv ? r->istride : 0, .peer = -1, .xfer = r->xfer,
		     .iters = mv ? (int32_t)r->iters : 0, .kind = I_SEND };
	put(r, st, s);
	for (int64_t j = 0; j < x->nrecv; j++) {
		Instr v = { .len = x->len, .addr = da, .peer = (int32_t)st, .xfer = r->xfer, .kind = I_RECV };
		put(r, tile_mod(dt + j * x->recv_step, r->tiles), v);
	}
	return 0;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int mark(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	(void)p, (void)idx, (void)rep;
	((char *)ctx)[t] = 1;
	return 0;
}

/* phase_rows' per-tile lists, kept per thread from call to call (the
 * planner builds rows for every phase of every trial): only the tiles a
 * call touched are reset. */
static _Thread_local Rows kept;
static _Thread_local char *kept_home;

/* phase_row_sums' per-tile sums, kept the same way. A tile's row as it
 * grows: its bytes so far (before the 8-byte header and rounding),
 * instructions, and where its last RECV ended. */
typedef struct {
	int64_t bytes, n, prev_end;
} RowSum;

static _Thread_local RowSum *kept_sums;
static _Thread_local int64_t *kept_sum_touched, kept_sum_tiles;

static void rows_release(void);

static void rows_take(Rows *r, int64_t T)
{
	if (kept.tiles != T) {
		rows_release();
		kept.ins = xcalloc((size_t)T, sizeof *kept.ins);
		kept.n = xcalloc((size_t)T, sizeof *kept.n);
		kept.cap = xcalloc((size_t)T, sizeof *kept.cap);
		kept.touched = xmalloc((size_t)T * sizeof *kept.touched);
		kept_home = xcalloc((size_t)T, 1);
		kept.tiles = T;
	}
	*r = kept;
	r->ntouched = 0;
}

static void rows_give(Rows *r)
{
	for (int64_t k = 0; k < r->ntouched; k++)
		r->n[r->touched[k]] = 0;
	kept.ins = r->ins, kept.n = r->n, kept.cap = r->cap, kept.touched = r->touched;
	kept.tiles = r->tiles;
}

static void rows_release(void)
{
	for (int64_t t = 0; t < kept.tiles; t++)
		free(kept.ins[t]);
	free(kept.ins), free(kept.n), free(kept.cap), free(kept.touched), free(kept_home);
	memset(&kept, 0, sizeof kept);
	kept_home = NULL;
}

void table_release(void)
{
	rows_release();
	free(kept_sums);
	free(kept_sum_touched);
	kept_sums = NULL, kept_sum_touched = NULL, kept_sum_tiles = 0;
}

int phase_rows(const Plan *pl, int p, RowFn fn, void *ctx)
{
	int64_t T = pl->machine.tiles;
	Rows r;
	int rc = 0, home_of = -1;

	rows_take(&r, T);
	char *home = kept_home;
	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind != X_SEND || x->step < pl->ph[p].first || x->step > pl->ph[p].last)
			continue;
		r.xfer = i;
		int src = pl->nr ? pl->s[x->step].src : -1;       /* no repeat: nothing moves */
		r.iters = src >= 0 && plan_stacked(pl, src) ? plan_step_count(pl, x->step) : 0;
		r.istride = r.iters ? place_instance(&pl->p[src]) : 0;
		if (r.iters && src != home_of) {
			home_of = src;
			memset(home, 0, (size_t)T);
			place_each(&pl->p[src], T, mark, home);
		}
		r.home = home;
		r.hlo = src >= 0 ? pl->p[src].addr : 0;
		r.hhi = r.hlo + r.istride;
		xfer_each(x, T, member, &r);
	}
	qsort(r.touched, (size_t)r.ntouched, sizeof *r.touched, cmp64);
	for (int64_t k = 0; k < r.ntouched && !rc; k++) {
		int64_t t = r.touched[k];
		rc = fn(ctx, t, r.ins[t], r.n[t]);
	}
	rows_give(&r);
	return rc;
}

/* ---- row sizes without the rows ---- */


typedef struct {
	RowSum *rs;
	int64_t *touched, ntouched, tiles;
	int64_t iters, istride, hlo, hhi;
	const char *home;
} Sums;


static void sum_put(Sums *u, int64_t t, int send, int64_t len, int64_t addr, int64_t iters)
{
	RowSum *r = &u->rs[t];
	if (r->n == 0) {
		u->touched[u->ntouched++] = t;
		r->prev_end = -1;
	}
	if (send) {
		r->bytes += SEND_BYTES(len) + MOVING_BYTES(iters);
	} else {
		r->bytes += addr == r->prev_end ? 8 : 12;
		r->prev_end = addr + len;
	}
	r->n++;
}

static int sum_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Sums *u = ctx;
	(void)m;
	int mv = u->iters && u->home[st] && sa >= u->hlo && sa < u->hhi;   /* as member() */
	sum_put(u, st, 1, x->len, sa, mv ? u->iters : 0);
	for (int64_t j = 0; j < x->nrecv; j++)
		sum_put(u, tile_mod(dt + j * x->recv_step, u->tiles), 0, x->len, da, 0);
	return 0;
}

void phase_row_sums(const Plan *pl, int p, int64_t *table, int64_t *frags)
{
	int64_t T = pl->machine.tiles;
	int home_of = -1;
	if (kept_sum_tiles != T) {
		free(kept_sums), free(kept_sum_touched);
		kept_sums = xcalloc((size_t)T, sizeof *kept_sums);
		kept_sum_touched = xmalloc((size_t)T * sizeof *kept_sum_touched);
		kept_sum_tiles = T;
	}
	if (kept.tiles != T) {                  /* the home marks' array */
		Rows tmp;
		rows_take(&tmp, T);
	}
	Sums u = { kept_sums, kept_sum_touched, 0, T, 0, 0, 0, 0, kept_home };
	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (x->kind != X_SEND || x->step < pl->ph[p].first || x->step > pl->ph[p].last)
			continue;
		int src = pl->nr ? pl->s[x->step].src : -1;
		u.iters = src >= 0 && plan_stacked(pl, src) ? plan_step_count(pl, x->step) : 0;
		u.istride = u.iters ? place_instance(&pl->p[src]) : 0;
		if (u.iters && src != home_of) {
			home_of = src;
			memset(kept_home, 0, (size_t)T);
			place_each(&pl->p[src], T, mark, kept_home);
		}
		u.hlo = src >= 0 ? pl->p[src].addr : 0;
		u.hhi = u.hlo + u.istride;
		xfer_each(x, T, sum_member, &u);
	}
	for (int64_t k = 0; k < u.ntouched; k++) {
		int64_t t = u.touched[k];
		if (table)
			table[t] += (8 + u.rs[t].bytes + 7) / 8 * 8;
		if (frags)
			frags[t] += u.rs[t].n;
		memset(&u.rs[t], 0, sizeof u.rs[t]);
	}
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
