#include "stage/alloc.h"
#include "stage/plan_memory.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	int64_t addr, end;
	int first, last, placement;
} Block;

typedef struct {
	Block *b;
	int n, cap;
} TileBlocks;

typedef struct {
	int64_t *tiles;
	int64_t n;
} TileList;

static int collect(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
		   int64_t tile)
{
	TileList *l = ctx;
	(void)p, (void)idx, (void)rep;
	l->tiles[l->n++] = tile;
	return 0;
}

/* The shard index of p on tile t, or 0 when p has none there. */
typedef struct {
	int64_t tile, idx[MAX_RANK];
	int found;
} Finder;

static int find(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Finder *f = ctx;
	(void)rep;
	if (t != f->tile)
		return 0;
	memcpy(f->idx, idx, (size_t)p->rank * sizeof *idx);
	f->found = 1;
	return 1;
}

static int shard_on(const Plan *pl, const Placement *p, int64_t tile, int64_t *idx)
{
	Finder f = { tile, { 0 }, 0 };
	place_each(p, pl->machine.tiles, find, &f);
	if (f.found)
		memcpy(idx, f.idx, sizeof f.idx);
	return f.found;
}

int place_aliases(const Plan *pl, int src, int dst, const int64_t *dst_idx, int64_t tile)
{
	const Placement *s = &pl->p[src], *d = &pl->p[dst];
	int64_t idx[MAX_RANK];
	if (s->addr != d->addr || !shard_on(pl, s, tile, idx))
		return 0;
	return place_same_region(s, idx, d, dst_idx);
}

int64_t *place_r0_shards(const Plan *pl, int src)
{
	const Placement *S = &pl->p[src];
	int64_t T = pl->machine.tiles, z[MAX_REP] = { 0 }, n = place_shards(S), sidx[MAX_RANK];
	int64_t *at = xmalloc((size_t)(T + 1) * sizeof *at);
	for (int64_t t = 0; t < T; t++)
		at[t] = -1;
	for (int64_t q = 0; q < n; q++) {
		place_shard_idx(S, q, sidx);
		int64_t t = place_tile(S, sidx, z, T);
		if (at[t] < 0)
			at[t] = q;
	}
	return at;
}

int place_alias0_at(const Plan *pl, int src, int dst, const int64_t *dst_idx, int64_t tile, const int64_t *r0)
{
	const Placement *S = &pl->p[src], *D = &pl->p[dst];
	int64_t sidx[MAX_RANK];
	if (S->addr != D->addr || S->layout != D->layout || !r0 || r0[tile] < 0)
		return 0;
	place_shard_idx(S, r0[tile], sidx);
	return place_same_region(S, sidx, D, dst_idx);
}

int place_alias0(const Plan *pl, int src, int dst, const int64_t *dst_idx, int64_t tile)
{
	const Placement *S = &pl->p[src], *D = &pl->p[dst];
	if (S->addr != D->addr || S->layout != D->layout)
		return 0;
	int64_t *r0 = place_r0_shards(pl, src);
	int a = place_alias0_at(pl, src, dst, dst_idx, tile, r0);
	free(r0);
	return a;
}

/* at[t]: the first shard of p (in place_each's order, as shard_on finds
 * it) on tile t, linear, or -1. */
static int first_at(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	int64_t *at = ctx, lin = 0;
	(void)rep;
	for (int a = 0; a < p->rank; a++)
		lin = lin * p->split[a] + idx[a];
	if (at[t] < 0)
		at[t] = lin;
	return 0;
}

static void shards_at(const Plan *pl, const Placement *p, int64_t *at)
{
	for (int64_t t = 0; t < pl->machine.tiles; t++)
		at[t] = -1;
	place_each(p, pl->machine.tiles, first_at, at);
}

/* Every tile both hold: the same region there. at: 2 x tiles scratch. */
static int can_alias(const Plan *pl, int q, int i, const TileList *ti, int64_t *at)
{
	const Placement *a = &pl->p[q], *b = &pl->p[i];
	int64_t ia[MAX_RANK], ib[MAX_RANK], T = pl->machine.tiles;
	if (a->layout != b->layout)
		return 0;
	shards_at(pl, a, at);
	shards_at(pl, b, at + T);
	for (int64_t k = 0; k < ti->n; k++) {
		int64_t t = ti->tiles[k];
		if (at[t] >= 0) {
			if (at[T + t] < 0)
				return 0;
			place_shard_idx(a, at[t], ia);
			place_shard_idx(b, at[T + t], ib);
			if (!place_same_region(a, ia, b, ib))
				return 0;
		}
	}
	return 1;
}

static int overlaps(const Block *b, int64_t addr, int64_t end, int first, int last)
{
	return b->addr < end && addr < b->end && b->first <= last && first <= b->last;
}

/* Lowest address >= addr free on all tiles (ignoring placement skip);
 * *blame is the tile whose block pushed it last. */
static int64_t first_fit(TileBlocks *tb, const TileList *tl, int64_t addr, int64_t size,
			 int first, int last, int skip, int64_t *blame)
{
	for (int moved = 1; moved;) {
		moved = 0;
		for (int64_t k = 0; k < tl->n; k++) {
			TileBlocks *t = &tb[tl->tiles[k]];
			for (int j = 0; j < t->n; j++)
				if (t->b[j].placement != skip &&
				    overlaps(&t->b[j], addr, addr + size, first, last)) {
					addr = t->b[j].end;
					*blame = tl->tiles[k];
					moved = 1;
				}
		}
	}
	return addr;
}

static void reserve(TileBlocks *tb, const TileList *tl, int64_t addr, int64_t size, int first,
		    int last, int placement)
{
	for (int64_t k = 0; k < tl->n; k++) {
		TileBlocks *t = &tb[tl->tiles[k]];
		if (t->n == t->cap) {
			t->cap = t->cap ? 2 * t->cap : 8;
			t->b = xrealloc(t->b, (size_t)t->cap * sizeof *t->b);
		}
		Block b = { addr, addr + size, first, last, placement };
		t->b[t->n++] = b;
	}
}

int plan_alloc(Plan *pl, Err *e)
{
	int np = pl->np, rc = -1;
	int64_t T = pl->machine.tiles, avail = machine_avail(&pl->machine);
	int *first = xmalloc((size_t)np * sizeof *first), *last = xmalloc((size_t)np * sizeof *last);
	int *alias = xmalloc((size_t)np * sizeof *alias), *order = xmalloc((size_t)np * sizeof *order);
	char *done = xcalloc((size_t)np, 1);
	TileBlocks *tb = xcalloc((size_t)T, sizeof *tb);
	TileList tl = { xmalloc((size_t)T * sizeof *tl.tiles), 0 };
	int64_t *at = xmalloc((size_t)(2 * T) * sizeof *at);

	plan_lifetimes(pl, first, last, alias);
	for (int i = 0; i < np; i++)
		order[i] = i;
	for (int i = 1; i < np; i++)            /* stable insertion sort by first use */
		for (int j = i; j > 0 && first[order[j - 1]] > first[order[j]]; j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int oi = 0; oi < np; oi++) {
		int i = order[oi], q = alias[i];
		Placement *p = &pl->p[i];
		int64_t size = place_instance(p), blame = -1, addr;
		if (plan_stacked(pl, i))        /* every instance, place_instance apart */
			size = place_instance(p) * pl->t[p->tensor].count;

		tl.n = 0;
		place_each(p, T, collect, &tl);
		addr = -1;
		if (q >= 0 && done[q] && can_alias(pl, q, i, &tl, at)) {
			int64_t b2 = -1;
			int64_t a = first_fit(tb, &tl, pl->p[q].addr, size, first[i], last[i], q, &b2);
			if (a == pl->p[q].addr)
				addr = a;
		}
		if (addr < 0)
			addr = first_fit(tb, &tl, 0, size, first[i], last[i], -1, &blame);
		if (addr + size > avail) {
			int s = first[i] < pl->ns ? first[i] : pl->ns - 1;
			errf(e, "tile %lld, step %d (op '%s'): placement '%s' needs SRAM bytes %lld..%lld; "
			     "%lld are available (sram_bytes - reserved_bytes)",
			     (long long)(blame >= 0 ? blame : tl.tiles[0]), s, pl->ns ? pl->s[s].op : "-",
			     p->name, (long long)addr, (long long)(addr + size), (long long)avail);
			goto out;
		}
		p->addr = addr;
		done[i] = 1;
		reserve(tb, &tl, addr, size, first[i], last[i], i);
	}
	/* A step's scratch (attention's row of scores), on the tiles of its
	 * output, for that step alone. */
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind != STEP_COMPUTE || !st->scratch)
			continue;
		int64_t size = cdiv(st->scratch, ALLOC_ALIGN) * ALLOC_ALIGN, blame = -1, addr;
		tl.n = 0;
		place_each(&pl->p[st->out], T, collect, &tl);
		addr = first_fit(tb, &tl, 0, size, s, s, -1, &blame);
		if (addr + size > avail) {
			errf(e, "tile %lld, step %d (op '%s'): the step's scratch needs SRAM bytes %lld..%lld; "
			     "%lld are available (sram_bytes - reserved_bytes)",
			     (long long)(blame >= 0 ? blame : tl.tiles[0]), s, st->op, (long long)addr,
			     (long long)(addr + size), (long long)avail);
			goto out;
		}
		reserve(tb, &tl, addr, size, s, s, -1);
	}
	rc = 0;
out:
	for (int64_t t = 0; t < T; t++)
		free(tb[t].b);
	free(tb);
	free(tl.tiles);
	free(at);
	free(first);
	free(last);
	free(alias);
	free(order);
	free(done);
	return rc;
}
