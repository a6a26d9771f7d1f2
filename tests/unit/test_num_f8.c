/* test_num_f8: lib/num's fp8 (F143) conversions against brute-force
 * references written here from the format definitions (docs/machine.md
 * §3, numref.h), never against num.c itself: decoding, round trips,
 * round to nearest even, specials, random values, scaled codes, every
 * rounding boundary at every scale, and the batch conversion. */
#include "base/num.h"
#include "numref.h"
#include "t.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_f8_decode(void)
{
	unsigned b, c;
	float v;

	t_case("f8 decodes all 256 codes by the field formula");
	for (b = 0; b < 256; b++) {
		v = f8_to_f32((uint8_t)b);
		if (b == 0x80)
			CHECK(isnan(v), "0x80 decodes to %g, want NaN", v);
		else
			CHECK(same(v, (float)v8[b]), "0x%02x decodes to %a, want %a",
			    b, v, v8[b]);
	}
	t_case("f8 special codes");
	CHECK(same(f8_to_f32(0x00), 0.0f), "0x00 is %a", f8_to_f32(0x00));
	CHECK(f8_to_f32(0x7f) == 240.0f, "0x7f is %g", f8_to_f32(0x7f));
	CHECK(f8_to_f32(0xff) == -240.0f, "0xff is %g", f8_to_f32(0xff));
	CHECK(F8_MAX == 240.0f && F8_NAN == 0x80, "constants");
	CHECK(f8_to_f32(0x01) == 0x1p-10f, "0x01 is %a", f8_to_f32(0x01));
	CHECK(f8_to_f32(0x08) == 0x1p-7f, "0x08 is %a", f8_to_f32(0x08));
	CHECK(f8_to_f32(0x40) == 1.0f, "0x40 is %a", f8_to_f32(0x40));
	for (b = 1; b < 256; b++)
		if (b != 0x80)
			CHECK(f8_to_f32((uint8_t)b) != 0, "0x%02x is zero", b);
	t_case("f8 positive codes are strictly increasing");
	for (c = 0; c < 0x7f; c++)
		CHECK(v8[c] < v8[c + 1], "0x%02x >= 0x%02x", c, c + 1);
}

static void test_f8_roundtrip(void)
{
	unsigned b, r;

	t_case("f8 every non-NaN code round trips");
	for (b = 0; b < 256; b++) {
		if (b == 0x80)
			continue;
		r = f32_to_f8(f8_to_f32((uint8_t)b));
		CHECK(r == b, "0x%02x -> 0x%02x", b, r);
	}
}

static void test_f8_rne(void)
{
	unsigned c, even, got;
	float lo, hi, mid;

	t_case("f8 midpoints round to even, near-midpoints to the nearer");
	for (c = 0; c < 0x7f; c++) {
		lo = (float)v8[c];
		hi = (float)v8[c + 1];
		mid = (lo + hi) / 2;	/* exact */
		CHECK((double)mid * 2 == v8[c] + v8[c + 1], "inexact mid %a", mid);
		even = c & 1 ? c + 1 : c;
		got = f32_to_f8(mid);
		CHECK(got == even, "mid %a -> 0x%02x, want 0x%02x", mid, got, even);
		got = f32_to_f8(-mid);
		CHECK(got == neg8(even), "-mid %a -> 0x%02x", mid, got);
		got = f32_to_f8(nextafterf(mid, lo));
		CHECK(got == c, "below mid %a -> 0x%02x, want 0x%02x", mid, got, c);
		got = f32_to_f8(nextafterf(mid, hi));
		CHECK(got == c + 1, "above mid %a -> 0x%02x", mid, got);
		got = f32_to_f8(-nextafterf(mid, lo));
		CHECK(got == neg8(c), "-below mid %a -> 0x%02x", mid, got);
		got = f32_to_f8(-nextafterf(mid, hi));
		CHECK(got == neg8(c + 1), "-above mid %a -> 0x%02x", mid, got);
	}
	t_case("f8 subnormal/normal boundary tie goes to the normal");
	CHECK(f32_to_f8(7.5f * 0x1p-10f) == 0x08, "7.5*2^-10 -> 0x%02x",
	    f32_to_f8(7.5f * 0x1p-10f));
	CHECK(f32_to_f8(6.5f * 0x1p-10f) == 0x06, "6.5*2^-10");
	CHECK(f32_to_f8(0x1p-11f) == 0x00, "2^-11 -> 0x%02x",
	    f32_to_f8(0x1p-11f));
	CHECK(f32_to_f8(1.5f * 0x1p-10f) == 0x02, "1.5*2^-10");
}

static void test_f8_special(void)
{
	static const float big[] = { 241.0f, 248.0f, 1e6f, 1e30f, FLT_MAX };
	unsigned i;

	t_case("f8 saturates beyond 240");
	for (i = 0; i < sizeof big / sizeof big[0]; i++) {
		CHECK(f32_to_f8(big[i]) == 0x7f, "%g -> 0x%02x", big[i],
		    f32_to_f8(big[i]));
		CHECK(f32_to_f8(-big[i]) == 0xff, "-%g -> 0x%02x", big[i],
		    f32_to_f8(-big[i]));
	}
	CHECK(f32_to_f8(nextafterf(240, INFINITY)) == 0x7f, "240+ulp");
	CHECK(f32_to_f8(247.99f) == 0x7f, "247.99");
	CHECK(f32_to_f8(240.0f) == 0x7f && f32_to_f8(-240.0f) == 0xff, "240");
	CHECK(f32_to_f8(224.0f) == 0x7e, "224");
	CHECK(f32_to_f8(232.0f) == 0x7e, "232 ties to even 224");
	CHECK(f32_to_f8(232.5f) == 0x7f, "232.5 nearer 240");
	t_case("f8 NaN and infinities encode to 0x80");
	CHECK(f32_to_f8(NAN) == 0x80, "NaN -> 0x%02x", f32_to_f8(NAN));
	CHECK(f32_to_f8(-NAN) == 0x80, "-NaN");
	CHECK(f32_to_f8(bitsf(0x7f800001)) == 0x80, "sNaN");
	CHECK(f32_to_f8(INFINITY) == 0x80, "inf -> 0x%02x",
	    f32_to_f8(INFINITY));
	CHECK(f32_to_f8(-INFINITY) == 0x80, "-inf -> 0x%02x",
	    f32_to_f8(-INFINITY));
	t_case("f8 has one zero");
	CHECK(f32_to_f8(0.0f) == 0x00, "0.0");
	CHECK(f32_to_f8(-0.0f) == 0x00, "-0.0 -> 0x%02x", f32_to_f8(-0.0f));
	CHECK(f32_to_f8(-1e-30f) == 0x00, "-1e-30");
	CHECK(f32_to_f8(-0x1p-11f) == 0x00, "-2^-11");
	CHECK(f32_to_f8(-0x1p-12f) == 0x00, "-2^-12");
	CHECK(f32_to_f8(-FLT_TRUE_MIN) == 0x00, "-min subnormal");
	CHECK(f32_to_f8(FLT_TRUE_MIN) == 0x00, "min subnormal");
	CHECK(f32_to_f8(-nextafterf(0x1p-11f, 1)) == 0x81, "-(2^-11+ulp)");
}

static void check8(float x)
{
	unsigned got = f32_to_f8(x), want = near8(x);

	CHECK(got == want, "%a -> 0x%02x, want 0x%02x", x, got, want);
}

static void test_f8_random(void)
{
	int i;

	/* One case per 10,000 random values. */
	for (i = 0; i < 200000; i++) {
		if (i % 10000 == 0)
			t_case("f8 random value in [-300, 300] rounds to the nearest code");
		check8(unif(300));
	}
	t_case("f8 random tiny value rounds to the nearest code");
	for (i = 0; i < 50000; i++)
		check8(unif(0x1p-6));
	t_case("f8 random bit pattern rounds to the nearest code");
	for (i = 0; i < 50000; i++)
		check8(bitsf(rnd()));
}

/* Every fp8 rounding boundary at every scale from -140 to 140 (each
 * code's value, the midpoint to the next code, 248 past the largest, the
 * floats beside it, both signs), where the scaled float is exact; and
 * floats over every bit pattern at random scales. */
static void test_f8_boundaries(void)
{
	unsigned c, got, want;
	int s, k;

	t_case("f8: every code, midpoint and neighbour at every scale -140..140 rounds to the nearest code");
	for (s = -140; s <= 140; s++)
		for (c = 0; c < 0x80; c++) {
			double next = c + 1 < 0x80 ? v8[c + 1] : 248.0;
			float mid = (float)((v8[c] + next) / 2), in[5];
			in[0] = (float)v8[c], in[1] = mid, in[2] = nextafterf(mid, 0);
			in[3] = nextafterf(mid, INFINITY), in[4] = nextafterf((float)v8[c], INFINITY);
			for (k = 0; k < 10; k++) {
				float u = k < 5 ? in[k] : -in[k - 5], x = ldexpf(u, s);
				if (x == 0 || !isfinite(x) || ldexpf(x, -s) != u || fabsf(x) < FLT_MIN)
					continue;       /* the scaled value is not exact in fp32 */
				got = f32_to_f8s(x, s);
				want = near8(u);
				CHECK(got == want, "%a scale %d -> 0x%02x, want 0x%02x", x, s, got, want);
			}
		}
	t_case("f8: every code decodes at every scale -150..150 to value * 2^scale rounded once to fp32");
	for (s = -150; s <= 150; s++)
		for (c = 0; c < 256; c++) {
			if (c == 0x80)
				continue;
			float got8 = f8s_to_f32((uint8_t)c, s), want8 = (float)ldexp(v8[c], s);
			CHECK(same(got8, want8), "0x%02x scale %d: %a, want %a", c, s, got8, want8);
		}
	t_case("f8: floats over every bit pattern (stride 4099) at scales -140..140 round to the nearest code");
	for (uint64_t u = 0; u < 0x100000000u; u += 4099) {
		float x = bitsf((uint32_t)u);
		s = (int)(rnd() % 281) - 140;
		double y = ldexp((double)x, -s);        /* exact in double */
		got = f32_to_f8s(x, s);
		if (isnan(x) || isinf(x))
			want = 0x80;
		else if (fabs(y) > 240)
			want = signbit(y) ? 0xff : 0x7f;
		else if (fabs(y) < 0x1p-12)
			want = 0;
		else
			want = near8((float)y);         /* |y| in [2^-12, 240]: exact in fp32 */
		CHECK(got == want, "%a scale %d -> 0x%02x, want 0x%02x", x, s, got, want);
	}
}

static void test_scaled(void)
{
	static const int sc[] = { -20, -8, -3, 0, 1, 5, 12 };
	unsigned i, b, got, want;
	float x, u;
	int s, j;

	for (i = 0; i < sizeof sc / sizeof sc[0]; i++) {
		s = sc[i];
		t_case("f8 scaled codes decode to value * 2^scale and round trip");
		for (b = 0; b < 256; b++) {
			if (b == 0x80) {
				CHECK(isnan(f8s_to_f32(0x80, s)), "NaN scale %d", s);
				continue;
			}
			x = f8s_to_f32((uint8_t)b, s);
			CHECK(same(x, (float)ldexp(v8[b], s)), "0x%02x scale %d: %a",
			    b, s, x);
			got = f32_to_f8s(x, s);
			CHECK(got == b, "0x%02x scale %d -> 0x%02x", b, s, got);
		}
		t_case("f8 scaled saturation and NaN");
		CHECK(f32_to_f8s(ldexpf(241, s), s) == 0x7f, "241 scale %d", s);
		CHECK(f32_to_f8s(ldexpf(-241, s), s) == 0xff, "-241 scale %d", s);
		CHECK(f32_to_f8s(NAN, s) == 0x80, "NaN scale %d", s);
		CHECK(f32_to_f8s(INFINITY, s) == 0x80, "inf scale %d", s);
		CHECK(f32_to_f8s(-INFINITY, s) == 0x80, "-inf scale %d", s);
		CHECK(f32_to_f8s(-0.0f, s) == 0x00, "-0 scale %d", s);
		t_case("f8 scaled random value rounds to the nearest code");
		for (j = 0; j < 2000; j++) {
			u = unif(300);
			x = ldexpf(u, s);	/* exact for these scales */
			got = f32_to_f8s(x, s);
			want = near8(u);
			CHECK(got == want, "%a scale %d -> 0x%02x, want 0x%02x", x,
			    s, got, want);
		}
	}
	t_case("f8 scaled finite values saturate, never become NaN");
	CHECK(f32_to_f8s(FLT_MAX, -10) == 0x7f, "FLT_MAX scale -10 -> 0x%02x",
	    f32_to_f8s(FLT_MAX, -10));
	CHECK(f32_to_f8s(-1.0f, -200) == 0xff, "-1 scale -200");
	CHECK(f32_to_f8s(1.0f, -1000000) == 0x7f, "1 scale -1e6");
	CHECK(f32_to_f8s(FLT_TRUE_MIN, 10) == 0x00, "tiny scale 10");
	CHECK(f32_to_f8s(-FLT_TRUE_MIN, 10) == 0x00, "-tiny scale 10");
	CHECK(f32_to_f8s(1.0f, 1000000) == 0x00, "1 scale 1e6");
	CHECK(f32_to_f8s(0x1p100f, 100) == 0x40, "2^100 scale 100");
	CHECK(f32_to_f8s(0x1p-100f, -100) == 0x40, "2^-100 scale -100");
}

/* f32_to_f8s_n gives f32_to_f8s's code for every value at every scale
 * tried: for scales -100..100 (the branch-free lanes) and beyond (the
 * value-by-value path), every fp8 code's value times 2^scale, the
 * midpoints to the next code and their neighbours, both signs; zeros,
 * fp32 subnormals, infinities, NaNs; and floats over every bit pattern
 * (stride 65537). Runs of odd length put each value in every lane and
 * the scalar tail. */
static void test_f8_batch(void)
{
	int64_t cap = 1 << 17;
	float *v = malloc((size_t)cap * sizeof *v);
	uint8_t *got = malloc((size_t)cap);
	static const int scales[] = { 0, -1, 1, -7, 9, -10, -30, 45, -100, 100, -101, 101, -126, 127, -4096, 5000 };
	t_case("f32_to_f8s_n gives f32_to_f8s's code for every value and scale");
	int bad = 0;
	for (size_t si = 0; si < sizeof scales / sizeof *scales && !bad; si++) {
		int sc = scales[si];
		int64_t n = 0;
		for (unsigned c = 0; c < 0x7f; c++) {
			float lo = ldexpf(f8_to_f32((uint8_t)c), sc), hi = ldexpf(f8_to_f32((uint8_t)(c + 1)), sc);
			float mid = (float)(((double)lo + (double)hi) / 2);
			float k[] = { lo, -lo, mid, -mid, nextafterf(mid, lo), nextafterf(mid, hi), -nextafterf(mid, hi),
				      hi * 1.0625f, -hi * 1.5f };
			for (size_t j = 0; j < sizeof k / sizeof *k; j++)
				v[n++] = k[j];
		}
		float sp[] = { 0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1p-127f, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
			       INFINITY, -INFINITY, NAN, -NAN };
		for (size_t j = 0; j < sizeof sp / sizeof *sp; j++)
			v[n++] = sp[j];
		for (uint64_t u = (uint64_t)si * 977; u < 0x100000000u && n < cap; u += 65537) {
			uint32_t w = (uint32_t)u;
			memcpy(&v[n++], &w, 4);
		}
		for (int64_t run = 1; run <= 37 && !bad; run += 6) {
			for (int64_t i = 0; i < n; i += run)
				f32_to_f8s_n(v + i, i + run <= n ? run : n - i, sc, got + i);
			for (int64_t i = 0; i < n && !bad; i++) {
				uint8_t want = f32_to_f8s(v[i], sc);
				if (got[i] != want) {
					uint32_t u;
					memcpy(&u, &v[i], 4);
					CHECK(0, "scale %d, runs of %lld: 0x%08x gives 0x%02x, f32_to_f8s 0x%02x", sc,
					      (long long)run, u, got[i], want);
					bad = 1;
				}
			}
		}
	}
	CHECK(!bad, "every scale");
	free(v);
	free(got);
}

int main(void)
{
	numref_init();
	test_f8_decode();
	test_f8_roundtrip();
	test_f8_rne();
	test_f8_special();
	test_f8_random();
	test_f8_batch();
	test_scaled();
	test_f8_boundaries();
	return t_summary();
}
