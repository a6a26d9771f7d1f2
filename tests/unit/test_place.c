/* test_place: lib/place against brute-force references written here from
 * the contract in place.h: shards and replicas enumerated with explicit
 * loops, tiles by the documented formula, cuts and panel boundaries by
 * walking elements and folded rows one at a time.
 *
 * Deterministic: a fixed-seed xorshift. FUZZ=1 runs 20x more placements.
 */
#include "stage/place.h"
#include "refplace.h"
#include "t.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int ref_mu[FMT_COUNT] = { 8, 16, 32, 8 };	/* fp32, fp16, fp8, int32 */
static const char *kind_str[LAYOUT_COUNT] = {
	"row-major", "amp-left", "transposed-right", "amp-output",
};

static char pname[] = "w@test";

/* ---- references ---- */

/* The uniform cut of n into p parts of ceil(n/p) gives exactly p non-empty
 * parts. The block is found by search, the parts by walking them. */
static int ref_uniform(int64_t n, int64_t p)
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
static int ref_cut_ok(int64_t n, int64_t split, int64_t block)
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
static int ref_valid(const Placement *p, int64_t tiles)
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
static int quanta(const Placement *p, int64_t *rowq, int64_t *colq)
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
static int ref_aligned(const Placement *p)
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
static void gen_axis(Placement *p, int a, int small)
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
static int64_t gen_tiles(Placement *p)
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

static void gen_shape(Placement *p)
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

static int64_t gen_valid(Placement *p)
{
	gen_shape(p);
	return gen_tiles(p);
}

/* ---- checks ---- */

typedef struct {
	RefVisit *v;
	int64_t n, cap, stop_at;
	int stop_rc;
} Rec;

static int record(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t tile)
{
	Rec *r = ctx;

	if (r->n < r->cap) {
		RefVisit *w = &r->v[r->n];
		memset(w, 0, sizeof *w);
		w->p = p;
		memcpy(w->idx, idx, (size_t)p->rank * sizeof *idx);
		memcpy(w->rep, rep, (size_t)p->nrep * sizeof *rep);
		w->tile = tile;
	}
	r->n++;
	return r->n == r->stop_at ? r->stop_rc : 0;
}

static void describe(const Placement *p, int64_t tiles, char *buf, size_t n)
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

static void check_valid(const Placement *p, int64_t tiles)
{
	char d[256];
	int64_t n, total = 0, max = 0;
	RefVisit *v;
	Rec rec = { 0 };
	Err e;

	describe(p, tiles, d, sizeof d);
	CHECK(ref_valid(p, tiles), "%s: generator made an invalid placement", d);

	for (int a = 0; a < p->rank; a++)
		for (int64_t i = 0; i < p->split[a]; i++)
			CHECK(place_extent(p, a, i) == ref_extent(p, a, i), "%s: extent axis %d part %lld = %lld, want %lld",
			      d, a, (long long)i, (long long)place_extent(p, a, i), (long long)ref_extent(p, a, i));

	n = ref_visits(p, tiles, NULL);
	v = malloc((size_t)n * sizeof *v);
	rec.v = malloc((size_t)n * sizeof *rec.v);
	if (!v || !rec.v)
		abort();
	ref_visits(p, tiles, v);
	CHECK(place_shards(p) * place_replicas(p) == n, "%s: %lld shards x %lld replicas, counted %lld", d,
	      (long long)place_shards(p), (long long)place_replicas(p), (long long)n);

	for (int64_t s = 0; s < n; s++) {
		Layout want = { p->layout, p->fmt, 1, 1 }, got = place_layout(p, v[s].idx);
		int64_t bytes;
		for (int a = 0; a < p->rank - 1; a++)
			want.rows *= ref_extent(p, a, v[s].idx[a]);
		want.cols = ref_extent(p, p->rank - 1, v[s].idx[p->rank - 1]);
		bytes = layout_bytes(&want);
		total += bytes;
		if (bytes > max)
			max = bytes;
		CHECK(got.kind == want.kind && got.fmt == want.fmt && got.rows == want.rows &&
		      got.cols == want.cols, "%s: shard %lld layout %lldx%lld, want %lldx%lld", d,
		      (long long)s, (long long)got.rows, (long long)got.cols,
		      (long long)want.rows, (long long)want.cols);
		CHECK(place_shard_bytes(p, v[s].idx) == bytes, "%s: shard %lld bytes %lld, want %lld", d,
		      (long long)s, (long long)place_shard_bytes(p, v[s].idx), (long long)bytes);
		CHECK(place_tile(p, v[s].idx, v[s].rep, tiles) == v[s].tile, "%s: visit %lld tile %lld, want %lld",
		      d, (long long)s, (long long)place_tile(p, v[s].idx, v[s].rep, tiles), (long long)v[s].tile);
	}
	CHECK(place_total_bytes(p) == total, "%s: total bytes %lld, want %lld", d,
	      (long long)place_total_bytes(p), (long long)total);
	CHECK(place_max_bytes(p) == max, "%s: max bytes %lld, want %lld", d,
	      (long long)place_max_bytes(p), (long long)max);

	rec.cap = n;
	CHECK(place_each(p, tiles, record, &rec) == 0, "%s: place_each returned non-zero", d);
	CHECK(rec.n == n, "%s: place_each made %lld calls, want %lld", d, (long long)rec.n, (long long)n);
	for (int64_t s = 0; s < n && s < rec.n; s++) {
		RefVisit *a = &rec.v[s], *b = &v[s];
		int same = a->p == p && a->tile == b->tile;
		for (int x = 0; x < p->rank; x++)
			same &= a->idx[x] == b->idx[x];
		for (int k = 0; k < p->nrep; k++)
			same &= a->rep[k] == b->rep[k];
		if (!same) {
			CHECK(0, "%s: place_each call %lld: idx %lld,%lld,%lld,%lld rep %lld,%lld tile %lld; "
			      "want idx %lld,%lld,%lld,%lld rep %lld,%lld tile %lld", d, (long long)s,
			      (long long)a->idx[0], (long long)a->idx[1], (long long)a->idx[2],
			      (long long)a->idx[3], (long long)a->rep[0], (long long)a->rep[1],
			      (long long)a->tile, (long long)b->idx[0], (long long)b->idx[1],
			      (long long)b->idx[2], (long long)b->idx[3], (long long)b->rep[0],
			      (long long)b->rep[1], (long long)b->tile);
			break;
		}
	}

	CHECK(place_check(p, tiles, &e) == 0, "%s: place_check rejected a valid placement: %s", d, e.msg);
	free(v);
	free(rec.v);
}

/* place_check must reject; the message names the placement before its
 * first ": ". */
static void check_rejects(const Placement *p, int64_t tiles, const char *why)
{
	char d[256], q[64];
	Err e;
	const char *at, *colon;

	describe(p, tiles, d, sizeof d);
	CHECK(!ref_valid(p, tiles), "%s (%s): the reference accepts it", d, why);
	memset(&e, 0, sizeof e);
	CHECK(place_check(p, tiles, &e) == -1, "%s (%s): place_check accepted it", d, why);
	snprintf(q, sizeof q, "'%s'", p->name);
	at = strstr(e.msg, q);
	colon = strstr(e.msg, ": ");
	CHECK(at && (!colon || at < colon), "%s (%s): message does not lead with the name: '%s'",
	      d, why, e.msg);
}

/* An axis with a split above 1, or -1. */
static int split_axis(const Placement *p)
{
	int a0 = (int)t_upto(p->rank);
	for (int i = 0; i < p->rank; i++) {
		int a = (a0 + i) % p->rank;
		if (p->split[a] > 1)
			return a;
	}
	return -1;
}

static void rejections(int n)
{
	Placement p;
	int64_t tiles;
	int made;

	t_case("place_check rejects two shards on one tile");
	for (made = 0; made < n;) {
		int a;
		tiles = gen_valid(&p);
		if ((a = split_axis(&p)) < 0)
			continue;
		switch (made % 3) {
		case 0: p.stride[a] = 0; break;
		case 1: p.stride[a] = t_upto(2) ? tiles : -tiles; break;
		default: {	/* two axes, or an axis and a replica, on one weight */
			int b = (a + 1 + (int)t_upto(p.rank)) % p.rank;
			if (b != a && p.split[b] > 1)
				p.stride[b] = p.stride[a];
			else if (p.nrep && p.rep[0] > 1)
				p.rstride[0] = p.stride[a];
			else
				p.stride[a] = 0;
		}
		}
		check_rejects(&p, tiles, "tile collision");
		made++;
	}

	t_case("place_check rejects a replica on its own shard's tile");
	for (made = 0; made < n;) {
		tiles = gen_valid(&p);
		if (!p.nrep || p.rep[p.nrep - 1] < 2)
			continue;
		p.rstride[p.nrep - 1] = t_upto(2) ? 0 : tiles * (1 + t_upto(2));
		check_rejects(&p, tiles, "replica collision");
		made++;
	}

	t_case("place_check rejects a base that is not a tile");
	for (made = 0; made < n; made++) {
		tiles = gen_valid(&p);
		p.base = t_upto(2) ? -1 - t_upto(tiles) : tiles + t_upto(tiles);
		check_rejects(&p, tiles, "base outside the machine");
	}

	t_case("place_check rejects more shards than tiles");
	for (made = 0; made < n;) {
		int64_t count;
		tiles = gen_valid(&p);
		count = ref_visits(&p, tiles, NULL);
		if (count < 2)
			continue;
		tiles = made % 5 ? count - 1 - t_upto(count - 1) : 0;	/* or none at all */
		p.base = tiles ? t_upto(tiles) : 0;
		check_rejects(&p, tiles, "too few tiles");
		made++;
	}

	t_case("place_check rejects parts that do not cover the axis");
	for (made = 0; made < n;) {
		int a = (int)t_upto(MAX_RANK);
		gen_shape(&p);
		if (a >= p.rank || p.shape[a] < 2)
			continue;
		if (p.split[a] > 1 && t_upto(2))
			p.split[a]--;		/* one part short */
		else if (p.block[a] > 1)
			p.block[a]--;		/* parts one short */
		else
			continue;
		tiles = gen_tiles(&p);
		check_rejects(&p, tiles, "not covered");
		made++;
	}

	t_case("place_check rejects an empty last part");
	for (made = 0; made < n;) {
		int a = (int)t_upto(MAX_RANK);
		gen_shape(&p);
		if (a >= p.rank)
			continue;
		if (t_upto(2)) {
			p.split[a]++;		/* one part too many */
		} else {
			if (p.split[a] < 2)
				continue;
			p.block[a] = (p.shape[a] + p.split[a] - 2) / (p.split[a] - 1) + t_upto(3);	/* too wide */
		}
		tiles = gen_tiles(&p);
		check_rejects(&p, tiles, "empty part");
		made++;
	}

	t_case("place_check rejects bad rank, replication, split and block");
	for (made = 0; made < n; made++) {
		tiles = gen_valid(&p);
		switch (made % 7) {
		case 0: p.rank = 0; break;
		case 1: p.rank = MAX_RANK + 1; break;
		case 2: p.nrep = MAX_REP + 1; break;
		case 3: p.nrep = -1; break;
		case 4:
			if (!p.nrep)
				p.nrep = 1, p.rstride[0] = 1;
			p.rep[t_upto(p.nrep)] = 0;
			break;
		case 5: p.split[t_upto(p.rank)] = 0; break;
		default: p.block[t_upto(p.rank)] = 0; break;
		}
		if (p.rank > MAX_RANK || p.nrep > MAX_REP || p.nrep < 0) {
			/* the reference cannot walk these; place_check must still say no */
			Err e;
			CHECK(place_check(&p, tiles, &e) == -1, "rank %d nrep %d accepted", p.rank, p.nrep);
			continue;
		}
		check_rejects(&p, tiles, "bad field");
	}
}

/* Random strides, bases and tile counts: place_check agrees with the
 * brute-force reference either way. */
static void random_strides(int n)
{
	int acc = 0, rej = 0;

	t_case("place_check agrees with the reference on random strides");
	for (int i = 0; i < n; i++) {
		Placement p;
		int64_t count, tiles;
		Err e;
		int want, got;
		char d[256];

		gen_shape(&p);
		count = ref_visits(&p, 1, NULL);
		if (count > 4000) {
			i--;
			continue;
		}
		tiles = count + t_upto(count + 2) - (t_upto(8) ? 0 : t_upto(count));
		if (tiles < 1)
			tiles = 1;
		for (int a = 0; a < p.rank; a++)
			p.stride[a] = t_upto(2 * tiles + 1) - tiles;
		for (int k = 0; k < p.nrep; k++)
			p.rstride[k] = t_upto(2 * tiles + 1) - tiles;
		p.base = t_upto(4 * tiles + 1) - 2 * tiles;
		want = ref_valid(&p, tiles);
		got = place_check(&p, tiles, &e) == 0;
		acc += want, rej += !want;
		describe(&p, tiles, d, sizeof d);
		CHECK(got == want, "%s: place_check %s, reference %s", d,
		      got ? "accepts" : "rejects", want ? "accepts" : "rejects");
	}
	CHECK(acc > 0 && rej > 0, "generator made %d valid and %d invalid placements", acc, rej);
}

static void early_stop(int n)
{
	t_case("place_each stops at the first non-zero result and returns it");
	for (int i = 0; i < n; i++) {
		Placement p;
		int64_t tiles = gen_valid(&p), count = ref_visits(&p, tiles, NULL);
		Rec rec = { 0 };
		int rc;

		rec.stop_at = 1 + t_upto(count);
		rec.stop_rc = (int)t_upto(2) ? -3 : 7;
		rc = place_each(&p, tiles, record, &rec);
		CHECK(rc == rec.stop_rc, "place_each returned %d, want %d", rc, rec.stop_rc);
		CHECK(rec.n == rec.stop_at, "place_each made %lld calls, want %lld",
		      (long long)rec.n, (long long)rec.stop_at);
	}
}

static void uniform(void)
{
	char name[96];

	for (int64_t n0 = 0; n0 <= 300; n0 += 50) {
		int64_t n1 = n0 + 49 < 300 ? n0 + 49 : 300;
		snprintf(name, sizeof name, "uniform_ok agrees with the reference for n %lld..%lld, p 1..300",
			 (long long)n0, (long long)n1);
		t_case(name);
		for (int64_t n = n0; n <= n1; n++)
			for (int64_t p = 1; p <= 300; p++)
				CHECK(!!uniform_ok(n, p) == ref_uniform(n, p), "uniform_ok(%lld, %lld) = %d",
				      (long long)n, (long long)p, uniform_ok(n, p));
	}

	t_case("uniform_ok by hand");
	CHECK(uniform_ok(10, 4), "10 into 4 parts of 3 is 3,3,3,1");
	CHECK(!uniform_ok(9, 4), "9 into 4 parts of 3 leaves the last empty");
	CHECK(!uniform_ok(10, 6), "10 into 6 parts of 2 gives 5 parts");
	CHECK(uniform_ok(7, 7), "7 into 7 parts of 1");
	CHECK(!uniform_ok(7, 8), "7 into 8 parts");
	CHECK(uniform_ok(1, 1), "1 into 1 part");
	CHECK(!uniform_ok(0, 1), "0 into 1 part is empty");
	CHECK(!uniform_ok(5, 0), "0 parts");
	CHECK(!uniform_ok(5, -1), "negative parts");
}

static void same(int n)
{
	t_case("place_same ignores the name and compares every geometry field");
	for (int i = 0; i < n; i++) {
		Placement a, b;
		char other[] = "other@name";
		int f;

		gen_valid(&a);
		b = a;
		b.name = other;
		CHECK(place_same(&a, &b) && place_same(&b, &a), "a renamed copy differs");
		for (f = 0; f < 12; f++) {
			int x = (int)t_upto(a.rank), k = a.nrep ? (int)t_upto(a.nrep) : -1;
			b = a;
			switch (f) {
			case 0: b.tensor++; break;
			case 1: b.layout = (LayoutKind)((b.layout + 1 + t_upto(LAYOUT_COUNT - 1)) % LAYOUT_COUNT); break;
			case 2: b.fmt = (Format)((b.fmt + 1 + t_upto(FMT_COUNT - 1)) % FMT_COUNT); break;
			case 3: b.rank = b.rank > 1 ? b.rank - 1 : 2; break;
			case 4: b.base += 1 + t_upto(5); break;
			case 5: b.nrep = b.nrep ? b.nrep - 1 : 1; break;
			case 6: b.split[x]++; break;
			case 7: b.block[x]++; break;
			case 8: b.stride[x] += t_upto(2) ? 1 : -1; break;
			case 9: if (k < 0) continue; b.rep[k]++; break;
			case 10: if (k < 0) continue; b.rstride[k]--; break;
			default: continue;	/* shape: its own case below */
			}
			CHECK(!place_same(&a, &b) && !place_same(&b, &a), "field %d changed, still the same", f);
		}
	}

	t_case("place_same tells different shapes apart");
	for (int i = 0; i < n; i++) {
		Placement a, b;
		int x;

		gen_valid(&a);
		b = a;
		x = (int)t_upto(a.rank);
		b.shape[x] = a.shape[x] + 1;	/* keep it cut by the same split and block */
		if (!ref_cut_ok(b.shape[x], b.split[x], b.block[x]))
			b.shape[x] = a.shape[x] - 1;
		if (b.shape[x] < 1 || !ref_cut_ok(b.shape[x], b.split[x], b.block[x])) {
			i--;
			continue;
		}
		CHECK(!place_same(&a, &b), "shape axis %d %lld vs %lld, still the same", x,
		      (long long)a.shape[x], (long long)b.shape[x]);
	}
}

static int64_t mk(Placement *p, LayoutKind k, Format f, int rank, const int64_t *shape, const int64_t *split)
{
	memset(p, 0, sizeof *p);
	p->name = pname;
	p->layout = k;
	p->fmt = f;
	p->rank = rank;
	for (int a = 0; a < rank; a++) {
		p->shape[a] = shape[a];
		p->split[a] = split[a];
		p->block[a] = (shape[a] + split[a] - 1) / split[a];
	}
	return gen_tiles(p);
}

static void aligned_fixed(void)
{
	Placement p;

	t_case("place_panel_aligned on hand-made placements");
	{
		int64_t sh[] = { 40, 32 }, sp[] = { 1, 2 };
		mk(&p, LAYOUT_TRANSPOSED_RIGHT, FMT_FP16, 2, sh, sp);
		CHECK(place_panel_aligned(&p), "tr fp16 40x32 split 1x2");
		sp[0] = 2, sp[1] = 1;	/* K cut at 20 */
		mk(&p, LAYOUT_TRANSPOSED_RIGHT, FMT_FP16, 2, sh, sp);
		CHECK(!place_panel_aligned(&p), "tr fp16 40x32 split 2x1 cuts K at 20");
		mk(&p, LAYOUT_AMP_LEFT, FMT_FP16, 2, sh, sp);
		CHECK(place_panel_aligned(&p), "amp-left fp16 40x32 split 2x1");
		mk(&p, LAYOUT_ROW_MAJOR, FMT_FP16, 2, sh, sp);
		CHECK(!place_panel_aligned(&p), "row-major is never panel aligned");
	}
	{
		int64_t sh[] = { 5, 70 }, sp[] = { 1, 2 };	/* columns cut at 35 */
		mk(&p, LAYOUT_AMP_LEFT, FMT_FP8, 2, sh, sp);
		CHECK(!place_panel_aligned(&p), "amp-left fp8 5x70 split 1x2");
		sh[1] = 64;
		mk(&p, LAYOUT_AMP_LEFT, FMT_FP8, 2, sh, sp);
		CHECK(place_panel_aligned(&p), "amp-left fp8 5x64 split 1x2");
	}
	{
		int64_t sh[] = { 7, 48 }, sp[] = { 7, 3 };
		mk(&p, LAYOUT_AMP_OUTPUT, FMT_FP32, 2, sh, sp);
		CHECK(place_panel_aligned(&p), "amp-output fp32 7x48 split 7x3");
	}

	/* Rank 3, K folded from two axes: splitting the inner leading axis at
	 * 16 also cuts at 31, where batch 1 starts: folded row parts are
	 * [0,16) [16,31) [31,47) [47,62), and 31 is inside a 16-row panel. */
	t_case("place_panel_aligned: an inner K cut over an unsplit batch must fit the batch");
	{
		int64_t sh[] = { 2, 31, 32 }, sp[] = { 1, 2, 1 };
		mk(&p, LAYOUT_TRANSPOSED_RIGHT, FMT_FP16, 3, sh, sp);
		CHECK(p.block[1] == 16, "block %lld", (long long)p.block[1]);
		CHECK(!place_panel_aligned(&p), "tr fp16 shape 2x31x32 split 1x2x1 (block 16): "
		      "folded K boundaries 16, 31, 47 are not all multiples of 16");
	}

	/* Splitting the batch of a K that is a whole number of panels cuts the
	 * folded rows at 16 only. */
	t_case("place_panel_aligned: a batch cut between whole K panels is aligned");
	{
		int64_t sh[] = { 2, 16, 32 }, sp[] = { 2, 1, 1 };
		mk(&p, LAYOUT_TRANSPOSED_RIGHT, FMT_FP16, 3, sh, sp);
		CHECK(place_panel_aligned(&p), "tr fp16 shape 2x16x32 split 2x1x1: folded K boundary 16");
	}
}

int main(void)
{
	const char *fz = getenv("FUZZ");
	int scale = fz && *fz ? 20 : 1;
	char name[128];
	Placement p;

	t_rng = 0x2545f4914f6cdd1du;
	uniform();

	for (int g = 0; g < 20 * scale; g++) {
		snprintf(name, sizeof name, "valid placements agree with the reference, group %d", g);
		t_case(name);
		for (int i = 0; i < 50; i++) {
			int64_t tiles = gen_valid(&p);
			check_valid(&p, tiles);
		}
	}

	rejections(50 * scale);
	for (int g = 0; g < 4 * scale; g++)
		random_strides(50);
	early_stop(50 * scale);
	same(50 * scale);

	aligned_fixed();
	for (int k = 0; k < LAYOUT_COUNT; k++)
		for (int g = 0; g < 5 * scale; g++) {
			snprintf(name, sizeof name, "place_panel_aligned %s agrees with the boundary reference, group %d",
				 kind_str[k], g);
			t_case(name);
			for (int i = 0; i < 50; i++) {
				int want, got;
				char d[256];
				int64_t tiles = gen_valid(&p);
				p.layout = (LayoutKind)k;
				want = ref_aligned(&p);
				got = !!place_panel_aligned(&p);
				describe(&p, tiles, d, sizeof d);
				CHECK(got == want, "%s: place_panel_aligned %d, reference %d", d, got, want);
			}
		}

	return t_summary();
}
