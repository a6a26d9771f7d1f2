/* placegen.h: what the lib/stage/place tests share: references written
 * from the contract in place.h (uniform cuts, covering cuts, the whole
 * structural check of place_check, panel boundaries by walking folded
 * rows), random valid placements from t.h's t_rnd, and a placement's
 * one-line description. */
#ifndef AMP_PLACEGEN_H
#define AMP_PLACEGEN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stage/place.h"
#include "refplace.h"
#include "t.h"

static const int ref_mu[FMT_COUNT] = { 8, 16, 32, 8 };	/* fp32, fp16, fp8, int32 */
static const char *kind_str[LAYOUT_COUNT] = {
	"row-major", "amp-left", "transposed-right", "amp-output",
};

static char pname[] = "w@test";

/* ---- references ---- */

/* The uniform cut of n into p parts of ceil(n/p) gives exactly p non-empty
 * parts. The block is found by search, the parts by walking them. */
static inline int ref_uniform(int64_t n, int64_t p)
{
	int64_t b = 0, nonempty = 0;

	if (p < 1)
		return 0;
	while (b * p < n)
		b++;
	for (int64_t i = 0; i < p; i++) {
		int64_t lo = i * b, hi = lo + b < n ? lo + b : n;
		nonempty += lo < hi;
	}
	return n >= 1 && nonempty == p;
}

/* Axis a is cut into split parts of block that cover it, none empty. */
static inline int ref_cut_ok(int64_t n, int64_t split, int64_t block)
{
	if (split < 1 || block < 1)
		return 0;
	for (int64_t i = 0; i < split; i++) {
		int64_t len = 0;
		for (int64_t x = i * block; x < (i + 1) * block && x < n; x++)
			len++;
		if (!len)
			return 0;
	}
	for (int64_t x = 0; x < n; x++)
		if (x / block >= split)
			return 0;
	return 1;
}

/* The whole structural contract of place_check, by brute force. */
static inline int ref_valid(const Placement *p, int64_t tiles)
{
	int64_t n;
	RefVisit *v;
	unsigned char *seen;
	int ok = 1;

	if (p->rank < 1 || p->rank > MAX_RANK || p->nrep < 0 || p->nrep > MAX_REP)
		return 0;
	if (p->base < 0 || p->base >= tiles)	/* 0 <= base < tiles */
		return 0;
	for (int a = 0; a < p->rank; a++)
		if (!ref_cut_ok(p->shape[a], p->split[a], p->block[a]))
			return 0;
	for (int k = 0; k < p->nrep; k++)
		if (p->rep[k] < 1)
			return 0;
	n = ref_visits(p, tiles, NULL);
	if (n > tiles)
		return 0;
	v = malloc((size_t)n * sizeof *v);
	seen = calloc((size_t)tiles, 1);
	if (!v || !seen)
		abort();
	ref_visits(p, tiles, v);
	for (int64_t i = 0; i < n && ok; i++)
		if (seen[v[i].tile]++)
			ok = 0;
	free(v);
	free(seen);
	return ok;
}

/* Panel/strip quanta of the folded matrix: 0 when the layout has none. */
static inline int quanta(const Placement *p, int64_t *rowq, int64_t *colq)
{
	int64_t mu = ref_mu[p->fmt];

	switch (p->layout) {
	case LAYOUT_AMP_LEFT: *rowq = 1; *colq = mu; return 1;
	case LAYOUT_TRANSPOSED_RIGHT: *rowq = mu; *colq = 16; return 1;
	case LAYOUT_AMP_OUTPUT: *rowq = 1; *colq = 16; return 1;
	default: return 0;
	}
}

/* Every boundary between two parts of the folded matrix (rows = leading
 * axes row-major, cols = last axis) on a panel/strip boundary. Folded row x
 * belongs to the row part named by the part index of each leading axis; a
 * boundary is where consecutive rows (columns) belong to different parts. */
static inline int ref_aligned(const Placement *p)
{
	int64_t rowq, colq, rows = 1, last = p->rank - 1;

	if (!quanta(p, &rowq, &colq))
		return 0;
	for (int64_t c = 1; c < p->shape[last]; c++)
		if (c / p->block[last] != (c - 1) / p->block[last] && c % colq)
			return 0;
	for (int a = 0; a < last; a++)
		rows *= p->shape[a];
	for (int64_t x = 1; x < rows; x++) {
		int64_t u = x, w = x - 1, differ = 0;
		for (int a = (int)last - 1; a >= 0; a--) {
			differ |= u % p->shape[a] / p->block[a] != w % p->shape[a] / p->block[a];
			u /= p->shape[a];
			w /= p->shape[a];
		}
		if (differ && x % rowq)
			return 0;
	}
	return 1;
}

/* ---- generators ---- */

/* One axis: a uniform cut with block = ceil(n/split). Half the time the
 * block is chosen first, often a multiple of 8, 16 or 32, and n in
 * (split*block - min(split, block), split*block] so the cut stays uniform. */
static inline void gen_axis(Placement *p, int a, int small)
{
	int64_t n, s, b;

	if (small) {
		n = 1 + t_upto(6);
	} else if (t_upto(2)) {
		static const int64_t qs[] = { 8, 16, 32 };
		b = t_upto(3) ? qs[t_upto(3)] * (1 + t_upto(3)) : 1 + t_upto(40);
		s = 1 + t_upto(5);
		n = s * b - t_upto(s < b ? s : b);
		p->shape[a] = n, p->split[a] = s, p->block[a] = b;
		return;
	} else {
		switch (t_upto(4)) {
		case 0: n = 1; break;
		case 1: n = 16 * (1 + t_upto(6)) + t_upto(3) - 1; break;
		default: n = 1 + t_upto(140); break;
		}
	}
	s = 1;
	if (t_upto(3))
		for (int tries = 0; tries < 8; tries++) {
			int64_t t = 1 + t_upto(n < 8 ? n : 8);
			if (ref_uniform(n, t)) {
				s = t;
				break;
			}
		}
	p->shape[a] = n, p->split[a] = s, p->block[a] = (n + s - 1) / s;
}

/* Tiles for the current split and rep counts: a mixed-radix numbering of
 * the digits (axes and replica axes) in a random order, radices at least
 * the counts, each weight with a random sign, and a random base tile. Distinct
 * digit tuples give distinct integers within a span below the product of
 * radices, so distinct tiles modulo anything at least that product. */
static inline int64_t gen_tiles(Placement *p)
{
	int nd = p->rank + p->nrep, perm[MAX_RANK + MAX_REP];
	int64_t w = 1, tiles;

	for (int d = 0; d < nd; d++)
		perm[d] = d;
	for (int d = nd - 1; d > 0; d--) {
		int e = (int)t_upto(d + 1), t = perm[d];
		perm[d] = perm[e], perm[e] = t;
	}
	for (int d = 0; d < nd; d++) {
		int x = perm[d];
		int64_t count = x < p->rank ? p->split[x] : p->rep[x - p->rank];
		int64_t radix = count + (t_upto(4) ? 0 : t_upto(3));
		int64_t sw = t_upto(3) ? w : -w;
		if (x < p->rank)
			p->stride[x] = sw;
		else
			p->rstride[x - p->rank] = sw;
		w *= radix;
	}
	tiles = w + (t_upto(2) ? 0 : t_upto(6));
	p->base = t_upto(tiles);
	return tiles;
}

static inline void gen_shape(Placement *p)
{
	memset(p, 0, sizeof *p);
	p->name = pname;
	p->tensor = (int)t_upto(5);
	p->layout = (LayoutKind)t_upto(LAYOUT_COUNT);
	p->fmt = (Format)t_upto(FMT_COUNT);
	p->rank = 1 + (int)t_upto(MAX_RANK);
	for (int a = 0; a < p->rank; a++)
		gen_axis(p, a, p->rank >= 3 && a < p->rank - 2);
	p->nrep = (int)t_upto(MAX_REP + 1);
	for (int k = 0; k < p->nrep; k++)
		p->rep[k] = 1 + t_upto(3);
}

static inline int64_t gen_valid(Placement *p)
{
	gen_shape(p);
	return gen_tiles(p);
}

static inline void describe(const Placement *p, int64_t tiles, char *buf, size_t n)
{
	int k = snprintf(buf, n, "%s fp%d shape", kind_str[p->layout],
			 p->fmt == FMT_FP32 ? 32 : p->fmt == FMT_FP16 ? 16 : 8);
	for (int a = 0; a < p->rank && k > 0 && (size_t)k < n; a++)
		k += snprintf(buf + k, n - (size_t)k, "%s%lld", a ? "x" : " ", (long long)p->shape[a]);
	for (int a = 0; a < p->rank && k > 0 && (size_t)k < n; a++)
		k += snprintf(buf + k, n - (size_t)k, "%s%lld", a ? "x" : " split ", (long long)p->split[a]);
	for (int a = 0; a < p->rank && k > 0 && (size_t)k < n; a++)
		k += snprintf(buf + k, n - (size_t)k, "%s%lld", a ? "x" : " block ", (long long)p->block[a]);
	if (k > 0 && (size_t)k < n)
		snprintf(buf + k, n - (size_t)k, " rep %d tiles %lld", p->nrep, (long long)tiles);
}

#endif
