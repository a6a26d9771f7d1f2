#include "stage/table.h"

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

static inline int walk_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
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

/* Sets w for record i of pl (a send): its sends from a stacked home. */
static void walk_record(Walk *w, const Plan *pl, int i, int *home_of)
{
	const Xfer *x = &pl->x[i];
	int64_t T = pl->machine.tiles;
	w->xfer = i;
	int src = pl->nr ? pl->s[x->step].src : -1;       /* no repeat: nothing moves */
	w->iters = src >= 0 && plan_stacked(pl, src) ? plan_step_count(pl, x->step) : 0;
	w->istride = w->iters ? place_instance(&pl->p[src]) : 0;
	if (w->iters && src != *home_of) {
		*home_of = src;
		memset(kept_home, 0, (size_t)T);
		place_each(&pl->p[src], T, mark, kept_home);
	}
	w->hlo = src >= 0 ? pl->p[src].addr : 0;
	w->hhi = w->hlo + w->istride;
}

static void walk_start(const Plan *pl, Walk *w)
{
	int64_t T = pl->machine.tiles;
	if (kept_home_tiles != T) {
		free(kept_home);
		kept_home = xcalloc((size_t)T, 1);
		kept_home_tiles = T;
	}
	memset(w, 0, sizeof *w);
	w->tiles = T;
	w->home = kept_home;
}

/* Is record x one of phase p's sends? */
static int in_phase(const Plan *pl, int p, const Xfer *x)
{
	return x->kind == X_SEND && x->step >= pl->ph[p].first && x->step <= pl->ph[p].last;
}

static void phase_walk(const Plan *pl, int p, PutFn put, void *sink)
{
	int home_of = -1;
	Walk w;
	walk_start(pl, &w);
	w.put = put, w.sink = sink;
	for (int i = 0; i < pl->nx; i++)
		if (in_phase(pl, p, &pl->x[i])) {
			walk_record(&w, pl, i, &home_of);
			xfer_each_inline(&pl->x[i], w.tiles, walk_member, &w);
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
	/* the tiles' turns come far apart: the row's next line, fetched now */
	__builtin_prefetch(&r->ins[t][r->n[t] + 1 < r->cap[t] ? r->n[t] + 1 : r->cap[t] - 1], 1);
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

/* ---- row sizes without the rows ----
 *
 * The same walk with the sink inline: a tile's row as it grows is its
 * bytes so far (before the 8-byte header and rounding), instructions, and
 * where its last RECV ended (the sizes row_bytes() gives for the row
 * phase_rows builds), and for table_totals a hash of its instructions. */
typedef struct {
	int64_t bytes, n, prev_end;
} RowSum;

/* Two independent 64-bit hashes of a row, made as its instructions come
 * (the row itself is never kept): rows a tile already holds are
 * recognised by both (a false match needs a 128-bit collision). */
typedef struct {
	uint64_t a, b;
} Hash2;

static const Hash2 hash_start = { 1469598103934665603u, 0x9E3779B97F4A7C15u };

static inline void hash_instr(Hash2 *h, const Instr *in)
{
	/* the instruction's fields, one to one in four words (its kind in
	 * len's low bit) */
	uint64_t v[4] = { (uint64_t)in->len << 1 | in->kind, (uint64_t)in->addr,
			  (uint64_t)(uint32_t)in->peer | (uint64_t)(uint32_t)in->iters << 32,
			  (uint64_t)in->istride };
	for (int k = 0; k < 4; k++) {
		h->a = (h->a ^ v[k]) * 1099511628211u;
		h->a ^= h->a >> 29;
		h->b += v[k] * 0xBF58476D1CE4E5B9u + 0x94D049BB133111EBu;
		h->b = (h->b ^ (h->b >> 31)) * 0xD6E8FEB86659FD93u;
	}
}

typedef struct {
	RowSum r;
	Hash2 h;
	int64_t sdur, rdur, iss;        /* phase_row_sums_bound: port and pipeline cycles */
} RowTot;

typedef struct {
	Walk w;
	RowTot *rt;
	int64_t *touched, ntouched;
	int hash;               /* also hash the rows */
	const Machine *busy;    /* also add up each tile's busy cycles (phase_row_sums_bound) */
} Sums;

static inline RowTot *sum_row(Sums *u, int64_t t)
{
	RowTot *r = &u->rt[t];
	if (r->r.n == 0) {
		u->touched[u->ntouched++] = t;
		r->r.prev_end = -1;
		r->h = hash_start;
	}
	r->r.n++;
	return r;
}

/* walk_member with the sums for its sink. */
static int sum_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Sums *u = ctx;
	const Walk *w = &u->w;
	(void)m;
	int mv = w->iters && w->home[st] && sa >= w->hlo && sa < w->hhi;
	int32_t iters = mv ? (int32_t)w->iters : 0;
	RowTot *r = sum_row(u, st);
	r->r.bytes += SEND_BYTES(x->len) + MOVING_BYTES(iters);
	int64_t dur = u->busy ? cdiv(x->len, u->busy->exchange_bytes_per_cycle) : 0;
	if (u->busy)
		r->sdur += dur, r->iss += u->busy->send_control_cycles;
	if (u->hash) {
		Instr s = { .len = x->len, .addr = sa, .istride = mv ? w->istride : 0, .peer = -1,
			     .xfer = w->xfer, .iters = iters, .kind = I_SEND };
		hash_instr(&r->h, &s);
	}
	Instr v = { .len = x->len, .addr = da, .peer = (int32_t)st, .xfer = w->xfer, .kind = I_RECV };
	int64_t step = tile_mod(x->recv_step, w->tiles), end = da + x->len;
	for (int64_t j = 0, t = dt; j < x->nrecv; j++) {      /* dt + j * recv_step, in [0, tiles) */
		r = sum_row(u, t);
		r->r.bytes += da == r->r.prev_end ? 8 : 12;
		r->r.prev_end = end;
		if (u->busy)
			r->rdur += dur, r->iss += u->busy->receive_control_cycles;
		if (u->hash)
			hash_instr(&r->h, &v);
		t += step;
		t -= t >= w->tiles ? w->tiles : 0;
	}
	return 0;
}

static _Thread_local RowTot *kept_sums;
static _Thread_local int64_t *kept_sum_touched, kept_sum_tiles;

/* Phase p's rows summed into u (u->ntouched tiles, each to be reset). */
static void sums_walk(const Plan *pl, int p, Sums *u)
{
	int64_t T = pl->machine.tiles;
	int home_of = -1;
	if (kept_sum_tiles != T) {
		free(kept_sums), free(kept_sum_touched);
		kept_sums = xcalloc((size_t)T, sizeof *kept_sums);
		kept_sum_touched = xmalloc((size_t)T * sizeof *kept_sum_touched);
		kept_sum_tiles = T;
	}
	walk_start(pl, &u->w);
	u->rt = kept_sums, u->touched = kept_sum_touched, u->ntouched = 0;
	for (int i = 0; i < pl->nx; i++) {
		const Xfer *x = &pl->x[i];
		if (!in_phase(pl, p, x))
			continue;
		walk_record(&u->w, pl, i, &home_of);
		xfer_each_inline(x, T, sum_member, u);
	}
}

void phase_row_sums(const Plan *pl, int p, int64_t *table, int64_t *frags)
{
	phase_row_sums_bound(pl, p, table, frags, NULL);
}

/* The walk's rows: each tile's row bytes and fragments to fn, and the
 * busy bound (cycles, when not NULL). */
typedef void (*SumFn)(void *ctx, int64_t k, int64_t tile, int64_t bytes, int64_t frags);

static void row_sums(const Plan *pl, int p, SumFn fn, void *ctx, int64_t *cycles)
{
	Sums u;
	u.hash = 0;
	u.busy = cycles ? &pl->machine : NULL;
	sums_walk(pl, p, &u);
	if (cycles)
		*cycles = 0;
	for (int64_t k = 0; k < u.ntouched; k++) {
		int64_t t = u.touched[k];
		const RowTot *r = &u.rt[t];
		fn(ctx, k, t, (8 + r->r.bytes + 7) / 8 * 8, r->r.n);
		if (cycles) {
			int64_t c = r->sdur > r->rdur ? r->sdur : r->rdur;
			c = r->iss > c ? r->iss : c;
			*cycles = c > *cycles ? c : *cycles;
		}
		memset(&u.rt[t], 0, sizeof u.rt[t]);
	}
}

typedef struct {
	int64_t *table, *frags;
} AddTo;

static void add_to(void *ctx, int64_t k, int64_t t, int64_t bytes, int64_t frags)
{
	AddTo *a = ctx;
	(void)k;
	if (a->table)
		a->table[t] += bytes;
	if (a->frags)
		a->frags[t] += frags;
}

void phase_row_sums_bound(const Plan *pl, int p, int64_t *table, int64_t *frags, int64_t *cycles)
{
	AddTo a = { table, frags };
	row_sums(pl, p, add_to, &a, cycles);
}

typedef struct {
	int64_t *tiles, *table, *frags, n;
} List;

static void list_one(void *ctx, int64_t k, int64_t t, int64_t bytes, int64_t frags)
{
	List *l = ctx;
	l->tiles[k] = t, l->table[k] = bytes, l->frags[k] = frags;
	l->n = k + 1;
}

int64_t phase_row_list(const Plan *pl, int p, int64_t *tiles, int64_t *table, int64_t *frags,
		       int64_t *cycles)
{
	List l = { tiles, table, frags, 0 };
	row_sums(pl, p, list_one, &l, cycles);
	return l.n;
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

void table_totals(const Plan *pl, int64_t *table, int64_t *frags, int64_t *max_row)
{
	int64_t T = pl->machine.tiles;
	Hash2 **seen = xcalloc((size_t)T, sizeof *seen);        /* per tile: hashes of rows it holds */
	int *nseen = xcalloc((size_t)T, sizeof *nseen);
	if (table)
		memset(table, 0, (size_t)T * sizeof *table);
	if (frags)
		memset(frags, 0, (size_t)T * sizeof *frags);
	if (max_row)
		memset(max_row, 0, (size_t)pl->nph * sizeof *max_row);
	for (int p = 0; p < pl->nph; p++) {
		Sums u;
		u.hash = 1;
		u.busy = NULL;
		sums_walk(pl, p, &u);
		for (int64_t k = 0; k < u.ntouched; k++) {
			int64_t t = u.touched[k], n = u.rt[t].r.n, b = (8 + u.rt[t].r.bytes + 7) / 8 * 8;
			Hash2 h = u.rt[t].h;
			h.a = (h.a ^ (uint64_t)n) * 1099511628211u;     /* the row's length */
			h.b = (h.b ^ (uint64_t)n) * 0xD6E8FEB86659FD93u;
			memset(&u.rt[t], 0, sizeof u.rt[t]);
			if (max_row && b > max_row[p])
				max_row[p] = b;
			if (frags)
				frags[t] += n;
			int i = 0;
			while (i < nseen[t] && !(seen[t][i].a == h.a && seen[t][i].b == h.b))
				i++;
			if (i < nseen[t])
				continue;               /* the tile holds this row already */
			if ((nseen[t] & (nseen[t] - 1)) == 0)
				seen[t] = xrealloc(seen[t], (size_t)(nseen[t] ? 2 * nseen[t] : 1) * sizeof **seen);
			seen[t][nseen[t]++] = h;
			if (table)
				table[t] += b;
		}
	}
	for (int64_t t = 0; t < T; t++)
		free(seen[t]);
	free(seen);
	free(nseen);
}
