/* test_place_check: lib/place against brute-force references written
 * here and in placegen.h from the contract in place.h: valid random
 * placements' extents, layouts, bytes and tiles, and their shards and
 * replicas enumerated with explicit loops (place_each, early stops
 * included); place_check's rejections of tile collisions, bases outside
 * the machine, too few tiles, cuts that do not cover an axis or leave a
 * part empty, and bad fields, and its verdict on random strides.
 *
 * Deterministic: a fixed-seed xorshift. FUZZ=1 runs 20x more placements.
 */
#include "stage/place.h"
#include "placegen.h"
#include "t.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	const char *fz = getenv("FUZZ");
	int scale = fz && *fz ? 20 : 1;
	char name[128];
	Placement p;

	t_rng = 0x2545f4914f6cdd1du;
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

	return t_summary();
}
