/* test_num: lib/num against brute-force references written here from the
 * format definitions (docs/machine.md §3), never against num.c itself. */
#include "base/num.h"
#include "t.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double v8[256];		/* reference fp8 values, by code */
static double v16[0x7c00];	/* reference positive finite fp16 values */

/* fp8 F143 from its fields: bias 8, field 0 subnormal, 0x80 NaN. */
static double ref8(unsigned b)
{
	unsigned s = b >> 7, e = b >> 3 & 15, m = b & 7;
	double v;

	if (b == 0x80)
		return NAN;
	v = e ? ldexp(1.0 + m / 8.0, (int)e - 8) : ldexp(m / 8.0, -7);
	return s ? -v : v;
}

/* IEEE binary16 from its fields. */
static double ref16(unsigned h)
{
	unsigned s = h >> 15, e = h >> 10 & 31, m = h & 1023;
	double v;

	if (e == 31)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m / 1024.0, -14);
	else
		v = ldexp(1.0 + m / 1024.0, (int)e - 15);
	return s ? -v : v;
}

static int same(float a, float b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

static float bitsf(uint32_t u)
{
	float x;

	memcpy(&x, &u, sizeof x);
	return x;
}

/* Nearest fp8 code by scanning all 255 finite codes; ties go to the even
 * mantissa (low code bit 0). The double distances are exact whenever it
 * matters: for |x| >= 2^-20 the difference spans at most 51 bits, and below
 * that code 0x00 wins by far. */
static unsigned near8(float x)
{
	unsigned c, best = 0;
	double d, bd = fabs((double)x);

	if (isnan(x) || isinf(x))
		return 0x80;
	if (x > 240)
		return 0x7f;
	if (x < -240)
		return 0xff;
	for (c = 1; c < 256; c++) {
		if (c == 0x80)
			continue;
		d = fabs((double)x - v8[c]);
		if (d < bd || (d == bd && !(c & 1))) {
			bd = d;
			best = c;
		}
	}
	return best;
}

/* Nearest fp16 code by bisecting the sorted table of positive finite codes
 * and comparing against the exact midpoint; ties to even; >= 65520 is inf. */
static unsigned near16(float x)
{
	unsigned s = signbit(x) ? 0x8000 : 0, lo = 0, hi = 0x7bff, mid;
	double a = fabs((double)x), m;

	if (isnan(x))
		return 0x7e00;
	if (a >= 65520)
		return s | 0x7c00;
	while (lo < hi) {	/* largest code with value <= a */
		mid = (lo + hi + 1) / 2;
		if (v16[mid] <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (v16[lo] == a || lo == 0x7bff)
		return s | lo;
	m = (v16[lo] + v16[lo + 1]) / 2;
	if (a < m || (a == m && !(lo & 1)))
		return s | lo;
	return s | (lo + 1);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

/* A float uniform in [-r, r]. */
static float unif(double r)
{
	return (float)(rnd() / 4294967296.0 * 2 * r - r);
}

static unsigned neg8(unsigned c)
{
	return c ? c | 0x80 : 0;
}

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

static void test_parse_i64(void)
{
	static const char *bad[] = { "", "+1", " 1", "1 ", "12x", "0x10",
	    "9223372036854775808", "-9223372036854775809", "-", "1.0", "--1",
	    "1e3", "\t1", "99999999999999999999999" };
	unsigned i;
	int64_t v;

	t_case("parse_i64 accepts decimal integers");
	CHECK(parse_i64("0", &v) == 0 && v == 0, "0");
	CHECK(parse_i64("-5", &v) == 0 && v == -5, "-5");
	CHECK(parse_i64("42", &v) == 0 && v == 42, "42");
	CHECK(parse_i64("007", &v) == 0 && v == 7, "007");
	CHECK(parse_i64("-0", &v) == 0 && v == 0, "-0");
	CHECK(parse_i64("9223372036854775807", &v) == 0 && v == INT64_MAX,
	    "INT64_MAX");
	CHECK(parse_i64("-9223372036854775808", &v) == 0 && v == INT64_MIN,
	    "INT64_MIN");
	t_case("parse_i64 rejects anything else");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(parse_i64(bad[i], &v) == -1, "accepted \"%s\"", bad[i]);
}

static void test_parse_f64(void)
{
	static const char *bad[] = { "", "1e", "inf", "nan", "0x1p3", "1.0x",
	    "1e999", "-1e999", "infinity", "NAN", "-inf", "0x10", " 1", "1 ",
	    ".", "-", "e5", "1e5e5", "--1", "1,5" };
	unsigned i;
	double v;

	t_case("parse_f64 accepts finite decimal floats");
	CHECK(parse_f64("1e-6", &v) == 0 && v == 1e-6, "1e-6");
	CHECK(parse_f64("0.5", &v) == 0 && v == 0.5, "0.5");
	CHECK(parse_f64("-3", &v) == 0 && v == -3, "-3");
	CHECK(parse_f64(".5", &v) == 0 && v == 0.5, ".5");
	CHECK(parse_f64("1E+3", &v) == 0 && v == 1000, "1E+3");
	CHECK(parse_f64("-1.5e-3", &v) == 0 && v == -1.5e-3, "-1.5e-3");
	t_case("parse_f64 rejects anything else");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK(parse_f64(bad[i], &v) == -1, "accepted \"%s\"", bad[i]);
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
	unsigned i;

	for (i = 0; i < 256; i++)
		v8[i] = ref8(i);
	for (i = 0; i < 0x7c00; i++)
		v16[i] = ref16(i);
	test_f8_decode();
	test_f8_roundtrip();
	test_f8_rne();
	test_f8_special();
	test_f8_random();
	test_f16_decode();
	test_f16_roundtrip();
	test_f16_rne();
	test_f16_random();
	test_f16_batch();
	test_f8_batch();
	test_f16_widen();
	test_scaled();
	test_f16_boundaries();
	test_f8_boundaries();
	test_parse_i64();
	test_parse_f64();
	return t_summary();
}
