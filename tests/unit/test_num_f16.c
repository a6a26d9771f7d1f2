/* test_num_f16: lib/num's IEEE binary16 conversions against brute-force
 * references written here from the format definitions (docs/machine.md
 * §3, numref.h), never against num.c itself: decoding, round trips,
 * round to nearest even, random values, every rounding boundary, and the
 * batch conversions both ways. */
#include "base/num.h"
#include "numref.h"
#include "t.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_f16_decode(void)
{
	unsigned h;
	double r;
	float v;

	t_case("f16 decodes all 65536 codes by the field formula");
	for (h = 0; h < 0x10000; h++) {
		v = f16_to_f32((uint16_t)h);
		r = ref16(h);
		if (isnan(r))
			CHECK(isnan(v), "0x%04x is %a, want NaN", h, v);
		else
			CHECK(same(v, (float)r), "0x%04x is %a, want %a", h, v, r);
	}
	t_case("f16 known values");
	CHECK(f16_to_f32(0x3c00) == 1.0f, "1");
	CHECK(f16_to_f32(0x7bff) == 65504.0f, "max");
	CHECK(f16_to_f32(0x0001) == 0x1p-24f, "min subnormal");
	CHECK(f16_to_f32(0x0400) == 0x1p-14f, "min normal");
	CHECK(same(f16_to_f32(0x8000), -0.0f), "-0");
	CHECK(f16_to_f32(0x7c00) == INFINITY, "inf");
	CHECK(f16_to_f32(0xfc00) == -INFINITY, "-inf");
	t_case("f16 positive finite codes are strictly increasing");
	for (h = 0; h < 0x7bff; h++)
		CHECK(v16[h] < v16[h + 1], "0x%04x", h);
}

static void test_f16_roundtrip(void)
{
	unsigned h, r;

	t_case("f16 every non-NaN code round trips");
	for (h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
			continue;
		r = f32_to_f16(f16_to_f32((uint16_t)h));
		CHECK(r == h, "0x%04x -> 0x%04x", h, r);
	}
}

static void test_f16_rne(void)
{
	unsigned h, even, got;
	float lo, hi, mid;

	t_case("f16 midpoints round to even, near-midpoints to the nearer");
	for (h = 0; h < 0x7bff; h++) {
		lo = (float)v16[h];
		hi = (float)v16[h + 1];
		mid = (lo + hi) / 2;
		CHECK((double)mid * 2 == v16[h] + v16[h + 1], "inexact %a", mid);
		even = h & 1 ? h + 1 : h;
		got = f32_to_f16(mid);
		CHECK(got == even, "mid %a -> 0x%04x, want 0x%04x", mid, got, even);
		got = f32_to_f16(-mid);
		CHECK(got == (even | 0x8000), "-mid %a -> 0x%04x", mid, got);
		got = f32_to_f16(nextafterf(mid, lo));
		CHECK(got == h, "below mid %a -> 0x%04x", mid, got);
		got = f32_to_f16(nextafterf(mid, hi));
		CHECK(got == h + 1, "above mid %a -> 0x%04x", mid, got);
		got = f32_to_f16(-nextafterf(mid, hi));
		CHECK(got == ((h + 1) | 0x8000), "-above mid %a -> 0x%04x", mid,
		    got);
	}
	t_case("f16 overflow rounds to infinity");
	CHECK(f32_to_f16(65520.0f) == 0x7c00, "65520 -> 0x%04x",
	    f32_to_f16(65520.0f));
	CHECK(f32_to_f16(-65520.0f) == 0xfc00, "-65520");
	CHECK(f32_to_f16(65519.99f) == 0x7bff, "65519.99 -> 0x%04x",
	    f32_to_f16(65519.99f));
	CHECK(f32_to_f16(65504.0f) == 0x7bff, "65504");
	CHECK(f32_to_f16(1e30f) == 0x7c00, "1e30");
	CHECK(f32_to_f16(FLT_MAX) == 0x7c00, "FLT_MAX");
	CHECK(f32_to_f16(INFINITY) == 0x7c00, "inf");
	CHECK(f32_to_f16(-INFINITY) == 0xfc00, "-inf");
	t_case("f16 subnormals");
	CHECK(f32_to_f16(0x1p-24f) == 0x0001, "2^-24");
	CHECK(f32_to_f16(0x1p-25f) == 0x0000, "2^-25 ties to 0");
	CHECK(f32_to_f16(nextafterf(0x1p-25f, 1)) == 0x0001, "2^-25+");
	CHECK(f32_to_f16(3 * 0x1p-25f) == 0x0002, "1.5*2^-24 ties to 2");
	CHECK(f32_to_f16(1023 * 0x1p-24f) == 0x03ff, "largest subnormal");
	CHECK(f32_to_f16(1023.5f * 0x1p-24f) == 0x0400, "tie to min normal");
	CHECK(f32_to_f16(0x1p-14f) == 0x0400, "min normal");
	CHECK(f32_to_f16(-1e-30f) == 0x8000, "-tiny keeps sign");
	CHECK(f32_to_f16(FLT_TRUE_MIN) == 0x0000, "float min subnormal");
	CHECK(f32_to_f16(-0.0f) == 0x8000, "-0");
	t_case("f16 NaN stays NaN");
	CHECK(f32_to_f16(NAN) == 0x7e00, "NaN -> 0x%04x", f32_to_f16(NAN));
	CHECK(f32_to_f16(-NAN) == 0x7e00, "-NaN -> 0x%04x", f32_to_f16(-NAN));
	CHECK(f32_to_f16(bitsf(0x7f800001)) == 0x7e00, "sNaN");
	CHECK(isnan(f16_to_f32(f32_to_f16(NAN))), "NaN round trip");
	CHECK(isnan(f16_to_f32(0x7c01)) && isnan(f16_to_f32(0xfe00)), "codes");
}

static void test_f16_random(void)
{
	unsigned got, want;
	float x;
	int i;

	for (i = 0; i < 150000; i++) {
		x = i % 3 == 0 ? unif(70000) : i % 3 == 1 ? unif(0x1p-13) :
		    bitsf(rnd());
		got = f32_to_f16(x);
		want = near16(x);
		if (i % 10000 == 0)
			t_case("f16 random value rounds to the nearest code");
		CHECK(got == want, "%a -> 0x%04x, want 0x%04x", x, got, want);
	}
}

/* Every fp16 rounding boundary: each positive finite code's value, the
 * midpoint to the next code (2^16 past the largest: the overflow tie),
 * one float either side of it, both signs; and floats spread over every
 * bit pattern (stride 4099). */
static void test_f16_boundaries(void)
{
	unsigned h, got, want;
	float in[5];
	int k;

	t_case("f16: every code, every midpoint and the floats beside it round as the bisection says");
	for (h = 0; h < 0x7c00; h++) {
		double next = h + 1 < 0x7c00 ? v16[h + 1] : 65536.0;
		float mid = (float)((v16[h] + next) / 2);      /* exact: 12 significant bits */
		in[0] = (float)v16[h], in[1] = mid, in[2] = nextafterf(mid, 0), in[3] = nextafterf(mid, INFINITY);
		in[4] = nextafterf((float)v16[h], INFINITY);
		for (k = 0; k < 10; k++) {
			float x = k < 5 ? in[k] : -in[k - 5];
			got = f32_to_f16(x);
			want = near16(x);
			CHECK(got == want, "%a -> 0x%04x, want 0x%04x", x, got, want);
		}
	}
	t_case("f16: floats over every bit pattern (stride 4099) round as the bisection says");
	for (uint64_t u = 0; u < 0x100000000u; u += 4099) {
		float x = bitsf((uint32_t)u);
		got = f32_to_f16(x);
		want = near16(x);
		CHECK(got == want, "%a -> 0x%04x, want 0x%04x", x, got, want);
	}
}

/* f32_to_f16_n (F16C where the CPU has it) gives f32_to_f16's code for
 * every value: every fp16 code's value, the midpoints to the next code
 * and their neighbours, both signs; NaNs with payloads; floats over every
 * bit pattern (stride 4099, from 13 starting points). Runs of odd length
 * put each value in every vector lane and the scalar tail. */
static void test_f16_batch(void)
{
	int64_t cap = 1 << 23, n = 0;
	float *v = malloc((size_t)cap * sizeof *v);
	uint16_t *got = malloc((size_t)cap * sizeof *got);
	t_case("f32_to_f16_n gives f32_to_f16's code for every value");
	for (unsigned h = 0; h < 0x7c00; h++) {
		float lo = f16_to_f32((uint16_t)h), hi = f16_to_f32((uint16_t)(h + 1));
		float mid = (float)(((double)lo + (double)hi) / 2);
		float c[] = { lo, -lo, mid, -mid, nextafterf(mid, lo), nextafterf(mid, hi), -nextafterf(mid, hi) };
		for (size_t k = 0; k < sizeof c / sizeof *c; k++)
			v[n++] = c[k];
	}
	for (uint32_t p = 0; p < 64; p++) {     /* NaNs: quiet and signalling, payloads, signs */
		uint32_t u[] = { 0x7fc00000u | p, 0x7f800001u + p * 4099u, 0xffc00000u | p << 10, 0xff800001u + p };
		for (size_t k = 0; k < 4; k++)
			memcpy(&v[n++], &u[k], 4);
	}
	v[n++] = INFINITY, v[n++] = -INFINITY, v[n++] = FLT_MAX, v[n++] = -FLT_MAX;
	v[n++] = 0x1p-149f, v[n++] = -0x1p-149f, v[n++] = 0.0f, v[n++] = -0.0f;
	for (uint64_t s = 0; s < 13; s++)
		for (uint64_t u = s * 317; u < 0x100000000u && n < cap; u += 4099) {
			uint32_t w = (uint32_t)u;
			memcpy(&v[n++], &w, 4);
		}
	int bad = 0;
	for (int64_t run = 1; run <= 23 && !bad; run += 2) {  /* every alignment of lanes and tail */
		for (int64_t i = 0; i < n; i += run)
			f32_to_f16_n(v + i, i + run <= n ? run : n - i, got + i);
		for (int64_t i = 0; i < n && !bad; i++) {
			uint16_t want = f32_to_f16(v[i]);
			if (got[i] != want) {
				uint32_t u;
				memcpy(&u, &v[i], 4);
				CHECK(0, "runs of %lld: 0x%08x gives 0x%04x, f32_to_f16 0x%04x", (long long)run, u, got[i],
				      want);
				bad = 1;
			}
		}
	}
	CHECK(!bad, "%lld values", (long long)n);
	free(v);
	free(got);
}

/* f16_to_f32_n gives f16_to_f32's bits for every code, NaNs included, in
 * runs that put each code in every vector lane and the scalar tail. */
static void test_f16_widen(void)
{
	static uint16_t h[0x10000];
	static float v[0x10000];
	t_case("f16_to_f32_n gives f16_to_f32's bits for every code");
	for (unsigned i = 0; i < 0x10000; i++)
		h[i] = (uint16_t)(i * 40503u);          /* every code, in a scattered order */
	int bad = 0;
	for (int64_t run = 1; run <= 23 && !bad; run += 2) {
		for (int64_t i = 0; i < 0x10000; i += run)
			f16_to_f32_n(h + i, i + run <= 0x10000 ? run : 0x10000 - i, v + i);
		for (unsigned i = 0; i < 0x10000 && !bad; i++) {
			float want = f16_to_f32(h[i]);
			if (memcmp(&want, &v[i], 4)) {
				CHECK(0, "runs of %lld: 0x%04x gives %a, f16_to_f32 %a", (long long)run, h[i], v[i], want);
				bad = 1;
			}
		}
	}
}

int main(void)
{
	numref_init();
	test_f16_decode();
	test_f16_roundtrip();
	test_f16_rne();
	test_f16_random();
	test_f16_batch();
	test_f16_widen();
	test_f16_boundaries();
	return t_summary();
}
