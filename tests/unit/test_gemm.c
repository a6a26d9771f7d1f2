/* test_gemm: staging spread's pieces (lib/stage/gemm.h) against a brute force.
 *
 * On random shapes and grids, gemm_stage_pieces must say C exactly when
 * a brute force over every K block and column finds each block's K range
 * cut into C pieces of whole strips, none empty; and then the stage
 * placement that gemm_placements writes must put piece j of block (r, k)
 * on tile (r, k, j), cover the tensor once, and, in amp-left, land every
 * element of a piece in one contiguous span of its block: the span the
 * piece's own amp-left offsets give, shifted by the piece's first strip.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stage/gemm.h"
#include "t.h"

/* The brute force: C pieces of sub = strips-per-block / C strips each,
 * piece j of block k covering K columns [k*bk + j*sub*mu, ...) clipped at
 * the block's and the tensor's end; valid when C > 1, the strips divide,
 * and no piece is empty. */
static int64_t brute_pieces(const GemmShape *s, const int64_t g[3])
{
	int64_t mu = fmt_mu(s->fmt), strips = (s->k + mu - 1) / mu;
	int64_t sk = (strips + g[1] - 1) / g[1], bk = sk * mu, C = g[2];
	if (C < 2 || sk % C)
		return 1;
	int64_t sub = sk / C * mu;
	for (int64_t k = 0; k < g[1]; k++)
		for (int64_t j = 0; j < C; j++) {
			int64_t lo = k * bk + j * sub, hi = lo + sub;
			if (hi > (k + 1) * bk)
				hi = (k + 1) * bk;
			if (hi > s->k)
				hi = s->k;
			if (lo >= hi)
				return 1;
		}
	return C;
}

static int spread_cases;         /* cases whose grid spreads */

static void spread_case(uint64_t i)
{
	GemmShape s;
	memset(&s, 0, sizeof s);
	s.batch = t_pick(1, 3);
	s.tokens = t_pick(1, 40);
	s.fmt = t_upto(2) ? FMT_FP8 : FMT_FP16;
	s.a_fmt = t_upto(3) ? s.fmt : FMT_FP16;
	s.k = t_pick(1, 700);
	s.n = t_pick(1, 300);
	int64_t mu = fmt_mu(s.fmt), strips = (s.k + mu - 1) / mu, groups = (s.n + 15) / 16;
	int64_t g[3] = { t_pick(1, s.tokens < 6 ? s.tokens : 6), t_pick(1, strips < 8 ? strips : 8),
			 t_pick(1, groups < 12 ? groups : 12) };
	Err e;
	char name[96];
	snprintf(name, sizeof name, "spread %llu: k %lld %s grid [%lld, %lld, %lld]", (unsigned long long)i,
		 (long long)s.k, fmt_name(s.fmt), (long long)g[0], (long long)g[1], (long long)g[2]);
	if (gemm_grid_ok(&s, g, 1472, &e))
		return;
	t_case(name);
	int64_t P = gemm_stage_pieces(&s, g), want = brute_pieces(&s, g);
	CHECK(P == want, "pieces %lld, brute force %lld", (long long)P, (long long)want);
	if (P == 1)
		return;
	spread_cases++;

	Candidate c;
	memset(&c, 0, sizeof c);
	memcpy(c.grid, g, sizeof c.grid);
	c.cast = s.a_fmt != s.fmt ? (t_upto(2) ? CAST_LATE : CAST_EARLY) : CAST_AUTO;
	c.staging = STAGING_SPREAD;
	Placement pl[GP_COUNT], whole[GP_COUNT];
	gemm_placements(&s, &c, pl);
	c.staging = STAGING_PACK_ONCE;
	gemm_placements(&s, &c, whole);
	const Placement *st = &pl[GP_A_STAGE], *pk = &pl[GP_A_PACKED], *blk = &whole[GP_A_PACKED];
	CHECK(st->layout == LAYOUT_ROW_MAJOR && pk->layout == LAYOUT_AMP_LEFT, "layouts");
	CHECK(!memcmp(st->split, pk->split, sizeof st->split) && !memcmp(st->block, pk->block, sizeof st->block) &&
	      !memcmp(st->stride, pk->stride, sizeof st->stride) && st->base == pk->base,
	      "the pack must keep the stage's shards on the same tiles");
	int64_t R = g[0], K = g[1], C = g[2], bk = blk->block[2], sub = st->block[2];
	int64_t covered = 0, moved_mu = fmt_mu(pk->fmt);
	for (int64_t r = 0; r < R; r++)
		for (int64_t kk = 0; kk < K * P; kk++) {
			int64_t k = kk / P, j = kk % P, idx[3] = { 0, r, kk }, bidx[3] = { 0, r, k };
			int64_t tile = place_tile(st, idx, NULL, 1472);
			CHECK(tile == (st->base + r * K * C + k * C + j) % 1472, "piece (%lld, %lld) on tile %lld",
			      (long long)r, (long long)kk, (long long)tile);
			int64_t lo = kk * sub, hi = lo + place_extent(st, 2, kk);
			CHECK(hi > lo && lo >= k * bk && hi <= (k + 1) * bk && hi <= s.k,
			      "piece (%lld, %lld) covers [%lld, %lld) outside block %lld", (long long)r,
			      (long long)kk, (long long)lo, (long long)hi, (long long)k);
			covered += (hi - lo) * place_extent(st, 1, r);
			/* amp-left: every element of the piece at the block's offset
			 * = the piece's first strip's start + its own offset */
			Layout pl_l = place_layout(pk, idx), bl_l = place_layout(blk, bidx);
			int64_t start = (j * sub / moved_mu) * bl_l.rows * moved_mu;
			for (int64_t row = 0; row < pl_l.rows; row++)
				for (int64_t col = 0; col < pl_l.cols; col++) {
					int64_t want_off = layout_offset(&bl_l, row, j * sub + col);
					int64_t got = start + layout_offset(&pl_l, row, col);
					if (want_off != got) {
						CHECK(0, "piece (%lld, %lld) element (%lld, %lld): block offset %lld, "
						      "span offset %lld", (long long)r, (long long)kk, (long long)row,
						      (long long)col, (long long)want_off, (long long)got);
						row = pl_l.rows;
						break;
					}
				}
		}
	CHECK(covered == s.tokens * s.k, "pieces cover %lld of %lld elements per batch entry",
	      (long long)covered, (long long)(s.tokens * s.k));
}

int main(void)
{
	t_rng = 0x5eed5eedc0ffee11u;
	for (uint64_t i = 0; i < 4000; i++)
		spread_case(i);
	t_case("spread cases drawn");
	CHECK(spread_cases >= 200, "only %d random grids spread", spread_cases);
	return t_summary();
}
