#include "stage/place.h"

#include <stdlib.h>
#include <string.h>

int uniform_ok(int64_t n, int64_t parts)
{
	if (parts < 1 || parts > n)
		return 0;
	return cdiv(n, cdiv(n, parts)) == parts;
}

int64_t place_shards(const Placement *p)
{
	int64_t n = 1;
	for (int a = 0; a < p->rank; a++)
		n *= p->split[a];
	return n;
}

int64_t place_replicas(const Placement *p)
{
	int64_t n = 1;
	for (int k = 0; k < p->nrep; k++)
		n *= p->rep[k];
	return n;
}

static Layout layout_of(const Placement *p, const int64_t *ext)
{
	Layout l = { p->layout, p->fmt, 1, 1 };
	for (int a = 0; a + 1 < p->rank; a++)
		l.rows *= ext[a];
	l.cols = ext[p->rank - 1];
	return l;
}

Layout place_layout(const Placement *p, const int64_t *idx)
{
	int64_t ext[MAX_RANK];
	for (int a = 0; a < p->rank; a++)
		ext[a] = place_extent(p, a, idx[a]);
	return layout_of(p, ext);
}

int64_t place_shard_bytes(const Placement *p, const int64_t *idx)
{
	Layout l = place_layout(p, idx);
	return layout_bytes(&l);
}

int64_t place_max_bytes(const Placement *p)
{
	int64_t idx[MAX_RANK] = { 0 };
	return place_shard_bytes(p, idx);
}

/* Per axis there are at most two part extents: full and clipped tail
 * (one when the tail is full too). Enumerate their combinations with
 * their multiplicities. */
int64_t place_total_bytes(const Placement *p)
{
	int64_t ext[MAX_RANK][2], mult[MAX_RANK][2], total = 0;
	int ne[MAX_RANK], n = 1;
	for (int a = 0; a < p->rank; a++) {
		int64_t tail = p->shape[a] - (p->split[a] - 1) * p->block[a];
		ne[a] = 0;
		if (tail == p->block[a]) {              /* every part full */
			ext[a][0] = tail, mult[a][0] = p->split[a], ne[a] = 1;
		} else {
			if (p->split[a] > 1)
				ext[a][ne[a]] = p->block[a], mult[a][ne[a]++] = p->split[a] - 1;
			ext[a][ne[a]] = tail, mult[a][ne[a]++] = 1;
		}
		n *= ne[a];
	}
	for (int i = 0; i < n; i++) {
		int64_t e[MAX_RANK], count = 1;
		for (int a = 0, q = i; a < p->rank; a++, q /= ne[a - 1]) {
			int k = q % ne[a];
			e[a] = ext[a][k], count *= mult[a][k];
		}
		Layout l = layout_of(p, e);
		total += count * layout_bytes(&l);
	}
	return total * place_replicas(p);
}

int64_t place_tile(const Placement *p, const int64_t *idx, const int64_t *rep, int64_t tiles)
{
	int64_t t = p->base;
	for (int a = 0; a < p->rank; a++)
		t += idx[a] * p->stride[a];
	for (int k = 0; k < p->nrep; k++)
		t += rep[k] * p->rstride[k];
	t %= tiles;
	return t < 0 ? t + tiles : t;
}

int place_each(const Placement *p, int64_t tiles, ShardFn fn, void *ctx)
{
	/* place_each_part's order (the last axis fastest, each shard's
	 * replicas the last fastest) with the indices and the tile sum carried
	 * from one to the next instead of made again */
	int64_t idx[MAX_RANK] = { 0 }, rep[MAX_REP] = { 0 };
	int64_t n = place_shards(p), r = place_replicas(p), at = p->base;
	for (int64_t s = 0; s < n; s++) {
		int64_t rat = 0;
		for (int64_t j = 0; j < r; j++) {
			int64_t t = (at + rat) % tiles;
			int rc = fn(ctx, p, idx, rep, t < 0 ? t + tiles : t);
			if (rc)
				return rc;
			for (int k = p->nrep - 1; k >= 0; k--) {
				if (++rep[k] < p->rep[k]) {
					rat += p->rstride[k];
					break;
				}
				rep[k] = 0;
				rat -= (p->rep[k] - 1) * p->rstride[k];
			}
		}
		for (int a = p->rank - 1; a >= 0; a--) {
			if (++idx[a] < p->split[a]) {
				at += p->stride[a];
				break;
			}
			idx[a] = 0;
			at -= (p->split[a] - 1) * p->stride[a];
		}
	}
	return 0;
}

int place_each_part(const Placement *p, int64_t tiles, ShardFn fn, void *ctx, int part, int parts)
{
	int64_t idx[MAX_RANK] = { 0 }, rep[MAX_REP] = { 0 };
	int64_t n = place_shards(p), r = place_replicas(p);

	for (int64_t s = part; s < n; s += parts) {
		int64_t q = s;
		for (int a = p->rank - 1; a >= 0; a--) {
			idx[a] = q % p->split[a];
			q /= p->split[a];
		}
		for (int64_t j = 0; j < r; j++) {
			int64_t u = j;
			for (int k = p->nrep - 1; k >= 0; k--) {
				rep[k] = u % p->rep[k];
				u /= p->rep[k];
			}
			int rc = fn(ctx, p, idx, rep, place_tile(p, idx, rep, tiles));
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int mark_tile(void *ctx, const Placement *p, const int64_t *idx,
		     const int64_t *rep, int64_t tile)
{
	unsigned char *seen = ctx;
	(void)p, (void)idx, (void)rep;
	if (seen[tile])
		return 1;
	seen[tile] = 1;
	return 0;
}

int place_check(const Placement *p, int64_t tiles, Err *e)
{
	if (p->rank < 1 || p->rank > MAX_RANK || p->nrep < 0 || p->nrep > MAX_REP)
		return errf(e, "placement '%s': bad rank or replication", p->name);
	if (p->base < 0 || p->base >= tiles)
		return errf(e, "placement '%s': base tile %lld is not a tile of this machine (0..%lld)",
			    p->name, (long long)p->base, (long long)tiles - 1);
	for (int a = 0; a < p->rank; a++) {
		if (p->split[a] < 1 || p->block[a] < 1 ||
		    p->split[a] * p->block[a] < p->shape[a] ||
		    (p->split[a] - 1) * p->block[a] >= p->shape[a])
			return errf(e, "placement '%s': axis %d of extent %lld is not cut into %lld "
				    "non-empty parts of %lld", p->name, a, (long long)p->shape[a],
				    (long long)p->split[a], (long long)p->block[a]);
	}
	for (int k = 0; k < p->nrep; k++)
		if (p->rep[k] < 1)
			return errf(e, "placement '%s': replication count must be positive", p->name);
	if (place_windowed(p)) {
		if (p->layout != LAYOUT_ROW_MAJOR)
			return errf(e, "placement '%s': only a row-major placement may be a window", p->name);
		for (int a = 0; a < p->rank; a++)
			if (p->off[a] < 0 || p->off[a] + p->shape[a] > p->whole[a])
				return errf(e, "placement '%s': window %lld..%lld on axis %d is outside the "
					    "tensor's %lld", p->name, (long long)p->off[a],
					    (long long)(p->off[a] + p->shape[a]), a, (long long)p->whole[a]);
	}
	if (place_shards(p) * place_replicas(p) > tiles)
		return errf(e, "placement '%s': %lld shards and replicas do not fit on %lld tiles",
			    p->name, (long long)(place_shards(p) * place_replicas(p)), (long long)tiles);
	unsigned char *seen = xcalloc((size_t)tiles, 1);
	int dup = place_each(p, tiles, mark_tile, seen);
	free(seen);
	if (dup)
		return errf(e, "placement '%s': two shards map to the same tile", p->name);
	return 0;
}

int place_same_region(const Placement *a, const int64_t *ia, const Placement *b, const int64_t *ib)
{
	if (a->layout != b->layout || a->fmt != b->fmt || a->rank != b->rank)
		return 0;
	for (int k = 0; k < a->rank; k++)
		if (a->off[k] + ia[k] * a->block[k] != b->off[k] + ib[k] * b->block[k] ||
		    place_extent(a, k, ia[k]) != place_extent(b, k, ib[k]))
			return 0;
	return 1;
}

int place_windowed(const Placement *p)
{
	for (int a = 0; a < p->rank; a++)
		if (p->off[a] || (p->whole[a] && p->whole[a] != p->shape[a]))
			return 1;
	return 0;
}

int place_apart(const Placement *a, const Placement *b)
{
	for (int i = 0; i < a->rank && a->rank == b->rank; i++)
		if (a->off[i] + a->shape[i] <= b->off[i] || b->off[i] + b->shape[i] <= a->off[i])
			return 1;
	return 0;
}

int place_same(const Placement *a, const Placement *b)
{
	for (int i = 0; i < a->rank && a->rank == b->rank; i++)
		if (a->shape[i] != b->shape[i] || a->off[i] != b->off[i] || a->whole[i] != b->whole[i])
			return 0;
	if (a->tensor != b->tensor || a->layout != b->layout || a->fmt != b->fmt ||
	    a->rank != b->rank || a->base != b->base || a->nrep != b->nrep)
		return 0;
	for (int i = 0; i < a->rank; i++)
		if (a->split[i] != b->split[i] || a->block[i] != b->block[i] ||
		    a->stride[i] != b->stride[i])
			return 0;
	for (int k = 0; k < a->nrep; k++)
		if (a->rep[k] != b->rep[k] || a->rstride[k] != b->rstride[k])
			return 0;
	return 1;
}

/* Do the folded rows of every shard come in runs that start and end on
 * multiples of q (a run may also end at the last row)? Rows fold the
 * leading axes 0..L row-major; a shard's box is a set of runs of the
 * innermost axis j that it does not cover whole, one per index of the axes
 * outside j. The runs of all shards are disjoint, so this visits at most
 * one run per row. */
static int rows_aligned(const Placement *p, int64_t q)
{
	int L = p->rank - 2;
	int64_t inner[MAX_RANK], total = 1, nshard = 1;

	if (q == 1 || L < 0)
		return 1;
	for (int a = L; a >= 0; a--) {
		inner[a] = total;
		total *= p->shape[a];
		nshard *= p->split[a];
	}
	for (int64_t s = 0; s < nshard; s++) {
		int64_t lo[MAX_RANK], hi[MAX_RANK], idx[MAX_RANK], u = s;
		for (int a = L; a >= 0; a--) {
			int64_t i = u % p->split[a];
			u /= p->split[a];
			lo[a] = i * p->block[a];
			hi[a] = lo[a] + place_extent(p, a, i);
		}
		int j = L;
		while (j >= 0 && lo[j] == 0 && hi[j] == p->shape[j])
			j--;
		if (j < 0)
			continue;               /* one run: all rows */
		for (int a = 0; a < j; a++)
			idx[a] = lo[a];
		for (;;) {
			int64_t off = 0;
			for (int a = 0; a < j; a++)
				off += idx[a] * inner[a];
			int64_t start = off + lo[j] * inner[j], end = off + hi[j] * inner[j];
			if (start % q || (end % q && end != total))
				return 0;
			int a = j - 1;
			while (a >= 0 && ++idx[a] == hi[a]) {
				idx[a] = lo[a];
				a--;
			}
			if (a < 0)
				break;
		}
	}
	return 1;
}

int place_panel_aligned(const Placement *p)
{
	int64_t mu = fmt_mu(p->fmt), rowq, colq;
	int last = p->rank - 1;

	switch (p->layout) {
	case LAYOUT_AMP_LEFT: rowq = 1; colq = mu; break;
	case LAYOUT_TRANSPOSED_RIGHT: rowq = mu; colq = 16; break;
	case LAYOUT_AMP_OUTPUT: rowq = 1; colq = 16; break;
	default: return 0;
	}
	if (p->split[last] > 1 && p->block[last] % colq)
		return 0;
	return rows_aligned(p, rowq);
}

static int note_at(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t tile)
{
	int64_t *at = ctx, lin = 0;
	(void)rep;
	for (int a = 0; a < p->rank; a++)
		lin = lin * p->split[a] + idx[a];
	at[tile] = lin;
	return 0;
}

void place_shard_at(const Placement *p, int64_t tiles, int64_t *at)
{
	for (int64_t t = 0; t < tiles; t++)
		at[t] = -1;
	place_each(p, tiles, note_at, at);
}

void place_shard_idx(const Placement *p, int64_t lin, int64_t *idx)
{
	for (int a = p->rank - 1; a >= 0; a--) {
		idx[a] = lin % p->split[a];
		lin /= p->split[a];
	}
}

int place_key(const Placement *p, int64_t *k)
{
	int n = 0;
	k[n++] = p->layout, k[n++] = p->fmt, k[n++] = p->rank, k[n++] = p->base, k[n++] = p->nrep;
	for (int a = 0; a < p->rank; a++) {
		k[n++] = p->shape[a], k[n++] = p->off[a], k[n++] = p->whole[a];
		k[n++] = p->split[a], k[n++] = p->block[a], k[n++] = p->stride[a];
	}
	for (int r = 0; r < p->nrep; r++)
		k[n++] = p->rep[r], k[n++] = p->rstride[r];
	return n;
}

int64_t place_instance(const Placement *p)
{
	return cdiv(place_max_bytes(p), ALLOC_ALIGN) * ALLOC_ALIGN;
}
