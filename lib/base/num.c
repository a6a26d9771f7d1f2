/* num: strict number parsing and fp16 / fp8 (F143) conversion.
 *
 * The conversions are exact: a float widens to double without loss, scaling
 * by a power of two is exact, and rounding is done by hand on an integer
 * significand, so the result never depends on the FPU rounding mode.
 */
#include "base/num.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if LLONG_MAX != INT64_MAX || LLONG_MIN != INT64_MIN
#error "parse_i64 assumes long long is int64_t"
#endif

int parse_i64(const char *s, int64_t *out)
{
	const char *p;
	char *end;
	long long v;
	int saved;

	if (!s)
		return -1;
	p = s;
	if (*p == '-')
		p++;
	if (!*p)
		return -1;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	saved = errno;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end) {
		errno = saved;
		return -1;
	}
	errno = saved;
	*out = v;
	return 0;
}

/* The character check keeps strtod away from hex floats, inf, nan and
 * leading spaces. A result that underflows to zero or a subnormal is finite
 * and accepted; one that overflows is rejected. Assumes the "C" numeric
 * locale ('.' as the decimal point). */
int parse_f64(const char *s, double *out)
{
	const char *p;
	char *end;
	double v;
	int saved;

	if (!s || !*s)
		return -1;
	for (p = s; *p; p++)
		if (!strchr("0123456789.eE+-", *p))
			return -1;
	saved = errno;
	v = strtod(s, &end);
	errno = saved;
	if (end == s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* Round a >= 0 (finite) to a format with p mantissa bits and least normal
 * exponent emin, to nearest even. Returns the magnitude code
 * (biased exponent << p | mantissa); a carry out of the mantissa moves into
 * the exponent, so the largest finite code + 1 means "overflowed". */
static long rne(double a, int p, int emin)
{
	double n, f;
	long k;
	int e;

	if (a == 0)
		return 0;
	frexp(a, &e);
	e--;			/* floor(log2 a) */
	if (e < emin)
		e = emin;	/* subnormal: fixed quantum 2^(emin-p) */
	n = ldexp(a, p - e);	/* exact, in [0, 2^(p+1)) */
	f = floor(n);
	k = (long)f;
	n -= f;			/* exact fraction */
	if (n > 0.5 || (n == 0.5 && (k & 1)))
		k++;
	return ((long)(e - emin) << p) + k;
}

/* fp16. Every NaN encodes to the one quiet NaN 0x7e00 with the sign bit
 * clear (the sign of a NaN carries no meaning here, and one code keeps the
 * output deterministic). Zeros and infinities keep their sign, as IEEE. */
uint16_t f32_to_f16(float x)
{
	uint32_t u, a, r, rem;
	memcpy(&u, &x, sizeof u);
	uint16_t s = (uint16_t)(u >> 16 & 0x8000);
	a = u & 0x7fffffff;
	if (a > 0x7f800000)
		return 0x7e00;                  /* NaN */
	if (a >= 0x47800000)
		return s | 0x7c00;              /* 2^16 and beyond, infinity: overflows */
	if (a < 0x38800000) {                   /* below 2^-14: a multiple of 2^-24 */
		if (a <= 0x33000000)
			return s;               /* at most 2^-25 (a tie with 0: even) */
		uint32_t m = (a & 0x7fffff) | 0x800000, sh = 126 - (a >> 23);   /* 14..23 */
		r = m >> sh, rem = m & ((1u << sh) - 1);
		uint32_t half = 1u << (sh - 1);
		r += rem > half || (rem == half && (r & 1));
		return s | (uint16_t)r;
	}
	r = (a - 0x38000000) >> 13, rem = a & 0x1fff;       /* the exponent rebiased */
	r += rem > 0x1000 || (rem == 0x1000 && (r & 1));    /* a carry moves into the exponent */
	return s | (uint16_t)(r > 0x7c00 ? 0x7c00 : r);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("avx2,f16c")))
static int64_t f16c_run(const float *v, int64_t n, uint16_t *h)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps(v + i);
		__m128i r = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		__m128i nan = _mm256_castsi256_si128(_mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
		nan = _mm_packs_epi32(nan, _mm256_extractf128_si256(_mm256_castps_si256(
				_mm256_cmp_ps(x, x, _CMP_UNORD_Q)), 1));
		r = _mm_or_si128(_mm_andnot_si128(nan, r), _mm_and_si128(nan, _mm_set1_epi16(0x7e00)));
		_mm_storeu_si128((__m128i *)(void *)(h + i), r);
	}
	return i;
}

__attribute__((target("avx2,f16c")))
static int64_t f16c_widen(const uint16_t *h, int64_t n, float *v)
{
	int64_t i = 0;
	const __m256i expo = _mm256_set1_epi32(0x7c00), sign = _mm256_set1_epi32(0x8000);
	for (; i + 8 <= n; i += 8) {
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(h + i));
		__m256 x = _mm256_cvtph_ps(c);
		__m256i w = _mm256_cvtepu16_epi32(c);
		/* NaN codes (exponent 31, fraction nonzero): the quiet NaN, signed */
		__m256i nan = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3ff)),
								     _mm256_setzero_si256()),
						  _mm256_cmpeq_epi32(_mm256_and_si256(w, expo), expo));
		__m256i q = _mm256_or_si256(_mm256_set1_epi32(0x7fc00000),
					    _mm256_slli_epi32(_mm256_and_si256(w, sign), 16));
		x = _mm256_blendv_ps(x, _mm256_castsi256_ps(q), _mm256_castsi256_ps(nan));
		_mm256_storeu_ps(v + i, x);
	}
	return i;
}

static int have_f16c(void)
{
	static atomic_int known = -1;   /* every thread that asks stores the same */
	int k = atomic_load_explicit(&known, memory_order_relaxed);
	if (k < 0) {
		unsigned a, b, c, d;             /* F16C: CPUID leaf 1, ECX (clang's builtin lacks the name) */
		__builtin_cpu_init();
		k = __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
		atomic_store_explicit(&known, k, memory_order_relaxed);
	}
	return k;
}
#endif

void f16_to_f32_n(const uint16_t *h, int64_t n, float *v)
{
	int64_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
	if (have_f16c())
		i = f16c_widen(h, n, v);
#endif
	for (; i < n; i++)
		v[i] = f16_to_f32(h[i]);
}

void f32_to_f16_n(const float *v, int64_t n, uint16_t *h)
{
	int64_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
	if (have_f16c())
		i = f16c_run(v, n, h);
#endif
	for (; i < n; i++)
		h[i] = f32_to_f16(v[i]);
}

/* Every NaN code decodes to a quiet NaN with the code's sign; the payload
 * is not kept. */
float f16_to_f32(uint16_t h)
{
	uint32_t e = h >> 10 & 31, m = h & 0x3ff, u;
	float v;
	if (e == 31)
		return h & 0x8000 ? -(m ? NAN : INFINITY) : (m ? NAN : INFINITY);
	if (e) {
		u = (e + 112) << 23 | m << 13;  /* rebias 15 -> 127 */
		memcpy(&v, &u, sizeof v);
	} else {
		v = (float)m * 0x1p-24f;        /* exact */
	}
	return h & 0x8000 ? -v : v;
}

/* fp8 F143 from a non-NaN double: beyond 240 (infinity included)
 * saturates, and anything that rounds to zero is the one zero 0x00. */
static uint8_t enc8(double d)
{
	double a = fabs(d);
	long k;

	k = a > F8_MAX ? 0x7f : rne(a, 3, -7);
	if (k == 0)
		return 0;
	return (uint8_t)(signbit(d) ? k | 0x80 : k);
}

uint8_t f32_to_f8(float x)
{
	return f32_to_f8s(x, 0);
}

float f8_to_f32(uint8_t b)
{
	uint32_t e = b >> 3 & 15, m = b & 7, u;
	float v;
	if (b == F8_NAN)
		return NAN;
	if (e) {
		u = (e + 119) << 23 | m << 20;  /* 1.m * 2^(e - 8) */
		memcpy(&v, &u, sizeof v);
	} else {
		v = (float)m * 0x1p-10f;
	}
	return b & 0x80 ? -v : v;
}

/* Same as f32_to_f8(ldexpf(x, -scale)), except that the scaling is done in
 * double: a finite x never turns into infinity (and so NaN) on the way,
 * it saturates. Scales beyond +-4096 behave as +-4096 (same result). */
uint8_t f32_to_f8s(float x, int scale)
{
	uint32_t u, a;
	memcpy(&u, &x, sizeof u);
	a = u & 0x7fffffff;
	if (a >= 0x7f800000)
		return F8_NAN;                  /* NaN, infinity */
	if (a < 0x00800000) {                   /* zero, or an fp32 subnormal: the double path */
		if (scale > 4096)
			scale = 4096;
		if (scale < -4096)
			scale = -4096;
		return enc8(ldexp((double)x, -scale));
	}
	if (scale > 4096)
		scale = 4096;
	if (scale < -4096)
		scale = -4096;
	/* x * 2^-scale = m * 2^(E - 23), m = 1.f in 24 bits */
	int32_t E = (int32_t)(a >> 23) - 127 - scale;
	uint32_t m = (a & 0x7fffff) | 0x800000, k, rem, half;
	uint8_t sg = u >> 31 ? 0x80 : 0;
	if (E > 7 || (E == 7 && m > 0xf00000))
		return sg | 0x7f;               /* beyond 240: saturates */
	if (E >= -7) {                          /* normal: 3 fraction bits */
		k = m >> 20, rem = m & 0xfffff, half = 0x80000;
		k += rem > half || (rem == half && (k & 1));
		return sg | (uint8_t)(((uint32_t)(E + 7) << 3) + k);   /* k 8..16: the carry moves up */
	}
	int32_t sh = 13 - E;                    /* subnormal: multiples of 2^-10; sh >= 21 */
	if (sh > 25)
		return 0;                       /* below 2^-11: rounds to the one zero */
	k = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
	k += rem > half || (rem == half && (k & 1));
	return k ? (uint8_t)(sg | k) : 0;
}

/* One code of f32_to_f8s for |scale| <= 100 with no branch, for the
 * vectorizer: NaN and infinity give 0x80; an fp32 zero or subnormal times
 * 2^-scale is below 2^-26 and so rounds to the one zero; the rest is
 * f32_to_f8s's integer path, both of its roundings computed and the right
 * one selected. */
static inline uint8_t f8_lane(uint32_t u, int32_t scale)
{
	uint32_t a = u & 0x7fffffff, m = (a & 0x7fffff) | 0x800000, sg = u >> 31 ? 0x80 : 0;
	int32_t E = (int32_t)(a >> 23) - 127 - scale;
	uint32_t kn = m >> 20, rn = m & 0xfffff;
	kn += rn > 0x80000 || (rn == 0x80000 && (kn & 1));
	uint32_t normal = sg | (((uint32_t)(E + 7) << 3) + kn);
	int32_t sh = 13 - E;
	uint32_t s = (uint32_t)(sh < 21 ? 21 : sh > 25 ? 25 : sh);
	uint32_t ks = m >> s, rs = m & ((1u << s) - 1), hs = 1u << (s - 1);
	ks += rs > hs || (rs == hs && (ks & 1));
	uint32_t sub = sh > 25 || !ks ? 0 : sg | ks;
	uint32_t r = E > 7 || (E == 7 && m > 0xf00000) ? sg | 0x7f : E >= -7 ? normal : sub;
	r = a < 0x00800000 ? 0 : r;
	return (uint8_t)(a >= 0x7f800000 ? F8_NAN : r);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default"), optimize("O3")))
#endif
static void f8_lanes(const float *v, int64_t n, int32_t scale, uint8_t *b)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &v[i], sizeof u);
		b[i] = f8_lane(u, scale);
	}
}

void f32_to_f8s_n(const float *v, int64_t n, int scale, uint8_t *b)
{
	if (scale >= -100 && scale <= 100) {
		f8_lanes(v, n, scale, b);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		b[i] = f32_to_f8s(v[i], scale);
}

float f8s_to_f32(uint8_t b, int scale)
{
	if (scale < -126 || scale > 127)
		return ldexpf(f8_to_f32(b), scale);
	uint32_t u = (uint32_t)(scale + 127) << 23;    /* 2^scale, a normal float */
	float k;
	memcpy(&k, &u, sizeof k);
	return f8_to_f32(b) * k;        /* rounds as ldexpf does: one correctly rounded product */
}
