/* refplace.h: the brute-force placement walk the unit tests share, written
 * from the contract in lib/stage/place.h and independent of lib/stage/place.c: part
 * extents by subtraction, tiles by the documented formula, and every
 * (shard, replica) by explicit loops. */
#ifndef AMP_REFPLACE_H
#define AMP_REFPLACE_H

#include <stdint.h>

#include "stage/place.h"

static inline int64_t ref_extent(const Placement *p, int a, int64_t i)
{
	int64_t rest = p->shape[a] - i * p->block[a];
	return p->block[a] < rest ? p->block[a] : rest;
}

static inline int64_t ref_mod(int64_t x, int64_t m)
{
	return (x % m + m) % m;
}

static inline int64_t ref_tile(const Placement *p, const int64_t *idx, const int64_t *rep, int64_t tiles)
{
	int64_t t = p->base;
	for (int a = 0; a < p->rank; a++)
		t += idx[a] * p->stride[a];
	for (int k = 0; k < p->nrep; k++)
		t += rep[k] * p->rstride[k];
	return ref_mod(t, tiles);
}

typedef struct {
	const Placement *p;
	int64_t idx[MAX_RANK], rep[MAX_REP], tile;
} RefVisit;

/* Every (shard, replica) by explicit loops, axis 0 slowest, replica minor
 * with replica axis 0 slowest. Returns the count; fills v when non-NULL. */
static inline int64_t ref_visits(const Placement *p, int64_t tiles, RefVisit *v)
{
	int64_t S[MAX_RANK], RP[MAX_REP], n = 0;

	for (int a = 0; a < MAX_RANK; a++)
		S[a] = a < p->rank ? p->split[a] : 1;
	for (int k = 0; k < MAX_REP; k++)
		RP[k] = k < p->nrep ? p->rep[k] : 1;
	for (int64_t i0 = 0; i0 < S[0]; i0++)
	for (int64_t i1 = 0; i1 < S[1]; i1++)
	for (int64_t i2 = 0; i2 < S[2]; i2++)
	for (int64_t i3 = 0; i3 < S[3]; i3++)
	for (int64_t j0 = 0; j0 < RP[0]; j0++)
	for (int64_t j1 = 0; j1 < RP[1]; j1++) {
		if (v) {
			RefVisit *w = &v[n];
			w->p = p;
			w->idx[0] = i0, w->idx[1] = i1, w->idx[2] = i2, w->idx[3] = i3;
			w->rep[0] = j0, w->rep[1] = j1;
			w->tile = ref_tile(p, w->idx, w->rep, tiles);
		}
		n++;
	}
	return n;
}

#endif
