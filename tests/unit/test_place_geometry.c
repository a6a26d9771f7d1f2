/* test_place_geometry: lib/place's geometry against brute-force
 * references written here and in placegen.h from the contract in
 * place.h: uniform_ok against cuts walked part by part, place_same
 * against every geometry field changed one at a time, and
 * place_panel_aligned on hand-made placements and against panel
 * boundaries found by walking folded rows and columns one at a time.
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
