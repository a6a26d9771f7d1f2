/* run.c: the machine model's numbers (lib/run/run.h): values quantized into
 * their formats, encoded into the bytes the tiles hold and decoded back
 * (fp16 a run at a time, fp8 by table or by vector), and the timing. The
 * rest of the module is in lib/run_*.c; run_int.h says what the parts
 * share and which file holds what. */
#include "run/run.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/num.h"
#include "run/run_int.h"

int64_t tensor_count(const PTensor *t)
{
	int64_t n = 1;
	for (int a = 0; a < t->rank; a++)
		n *= t->shape[a];
	return n;
}

int64_t tensor_values(const PTensor *t)
{
	return tensor_count(t) * t->count;
}

static float f16_table[65536];

/* An int32 element's value: x rounded to the nearest integer (ties to
 * even), saturated to the int32 range, as a float (exact up to 2^24,
 * which positions and token ids stay under). */
static float i32_value(float x)
{
	if (x != x)
		return 0;
	double r = nearbyint((double)x);
	return (float)(r > 2147483520.0 ? 2147483520.0 : r < -2147483648.0 ? -2147483648.0 : r);
}
float run_f8_table[256], run_f8_pow2[253];

/* v[i] = quantize(v[i]), and its code into enc (little-endian; NULL: not
 * kept): one encoding per value, the decoding from the codes (F16C, or
 * fp8's table times the scale's power of two, as f8s_to_f32 multiplies). */
void run_quantize_encode(float *v, int64_t n, Format f, int scale, uint8_t *enc)
{
	run_tables();
	if (f == FMT_FP16) {
		uint16_t h[256];
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			int64_t k = n - i0 < 256 ? n - i0 : 256;
			f32_to_f16_n(v + i0, k, h);
			for (int64_t i = 0; enc && i < k; i++)
				enc[2 * (i0 + i)] = (uint8_t)h[i], enc[2 * (i0 + i) + 1] = (uint8_t)(h[i] >> 8);
			f16_to_f32_n(h, k, v + i0);
		}
		return;
	}
	if (f == FMT_I32) {                     /* the nearest integer, saturated */
		for (int64_t i = 0; i < n; i++) {
			v[i] = i32_value(v[i]);
			int32_t x = (int32_t)v[i];
			if (enc)
				memcpy(enc + 4 * i, &x, 4);
		}
		return;
	}
	if (f != FMT_FP8) {                     /* fp32: as it is */
		if (enc)
			memcpy(enc, v, (size_t)n * sizeof *v);
		return;
	}
	int table = scale >= -126 && scale <= 126;
	float p = table ? run_f8_pow2[scale + 126] : 0;
	uint8_t b[256];
	for (int64_t i0 = 0; i0 < n; i0 += 256) {
		int64_t k = n - i0 < 256 ? n - i0 : 256;
		f32_to_f8s_n(v + i0, k, scale, b);
		if (enc)
			memcpy(enc + i0, b, (size_t)k);
		for (int64_t i = 0; i < k; i++)
			v[i0 + i] = table ? run_f8_table[b[i]] * p : f8s_to_f32(b[i], scale);
	}
}

void quantize_n(float *v, int64_t n, Format f, int scale)
{
	run_quantize_encode(v, n, f, scale, NULL);
}

float quantize(float x, Format f, int scale)
{
	run_tables();
	switch (f) {
	case FMT_FP16: return f16_to_f32(f32_to_f16(x));
	case FMT_FP8: return f8s_to_f32(f32_to_f8s(x, scale), scale);
	case FMT_I32: return i32_value(x);
	default: return x;
	}
}

/* Codes decoded once (fp16: all 65536; fp8: 256, and the powers of two
 * of every scale): a scale is a multiplication by a power of two, exact,
 * as f8s_to_f32's ldexpf is. Built once, before any thread reads them. */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
	for (int i = 0; i < 65536; i++)
		f16_table[i] = f16_to_f32((uint16_t)i);
	for (int i = 0; i < 256; i++)
		run_f8_table[i] = f8_to_f32((uint8_t)i);
	for (int i = 0; i < 253; i++)
		run_f8_pow2[i] = ldexpf(1.0f, i - 126);
}

void run_tables(void)
{
	pthread_once(&tables_once, build_tables);
}

atomic_int run_gemm_pin;        /* run_gemm_width's limit (the fp8 decoding's too); 0: none */

/* n fp8 codes decoded and multiplied by k (a scale's power of two):
 * run_f8_table[b] * k, computed 16 (AVX-512) or 8 (AVX2) at a time from the
 * code's fields: 1.m * 2^(e - 8), m * 2^-10 where e is 0, the sign, and
 * F8_NAN's quiet NaN. tests/unit/test_run.c compares every code at every
 * scale with f8s_to_f32. Each returns how many it decoded. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define F8_VECTORS 1
__attribute__((target("avx512f"))) static int64_t f8_decode16(const uint8_t *b, int64_t n, float k, float *v,
							     uint32_t nanbits)
{
	const __m512i e15 = _mm512_set1_epi32(15), m7 = _mm512_set1_epi32(7), bias = _mm512_set1_epi32(119);
	const __m512i sign = _mm512_set1_epi32(0x80), nan = _mm512_set1_epi32((int)nanbits);
	const __m512i nancode = _mm512_set1_epi32(F8_NAN), zero = _mm512_setzero_si512();
	const __m512 kk = _mm512_set1_ps(k), tiny = _mm512_set1_ps(0x1p-10f);
	int64_t i = 0;
	for (; i + 16 <= n; i += 16) {
		__m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(b + i)));
		__m512i e = _mm512_and_si512(_mm512_srli_epi32(x, 3), e15), m = _mm512_and_si512(x, m7);
		__m512i u = _mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(e, bias), 23), _mm512_slli_epi32(m, 20));
		__m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(m), tiny);
		u = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(e, zero), u, _mm512_castps_si512(sub));
		u = _mm512_or_si512(u, _mm512_slli_epi32(_mm512_and_si512(x, sign), 24));
		u = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(x, nancode), u, nan);
		_mm512_storeu_ps(v + i, _mm512_mul_ps(_mm512_castsi512_ps(u), kk));
	}
	return i;
}

__attribute__((target("avx2"))) static int64_t f8_decode8(const uint8_t *b, int64_t n, float k, float *v,
							uint32_t nanbits)
{
	const __m256i e15 = _mm256_set1_epi32(15), m7 = _mm256_set1_epi32(7), bias = _mm256_set1_epi32(119);
	const __m256i sign = _mm256_set1_epi32(0x80), nan = _mm256_set1_epi32((int)nanbits);
	const __m256i nancode = _mm256_set1_epi32(F8_NAN), zero = _mm256_setzero_si256();
	const __m256 kk = _mm256_set1_ps(k), tiny = _mm256_set1_ps(0x1p-10f);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(b + i)));
		__m256i e = _mm256_and_si256(_mm256_srli_epi32(x, 3), e15), m = _mm256_and_si256(x, m7);
		__m256i u = _mm256_or_si256(_mm256_slli_epi32(_mm256_add_epi32(e, bias), 23), _mm256_slli_epi32(m, 20));
		__m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(m), tiny);
		u = _mm256_blendv_epi8(u, _mm256_castps_si256(sub), _mm256_cmpeq_epi32(e, zero));
		u = _mm256_or_si256(u, _mm256_slli_epi32(_mm256_and_si256(x, sign), 24));
		u = _mm256_blendv_epi8(u, nan, _mm256_cmpeq_epi32(x, nancode));
		_mm256_storeu_ps(v + i, _mm256_mul_ps(_mm256_castsi256_ps(u), kk));
	}
	return i;
}

/* 16, 8 or 0: the vectors run_f8_decode uses (what the CPU has). */
static int f8_width(void)
{
	static atomic_int known = -1;
	int w = atomic_load_explicit(&known, memory_order_relaxed);
	if (w < 0) {
		__builtin_cpu_init();
		w = __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") ? 8 : 0;
		atomic_store_explicit(&known, w, memory_order_relaxed);
	}
	return w;
}
#endif

void run_f8_decode(const uint8_t *b, int64_t n, float k, float *v)
{
	int64_t i = 0;
#ifdef F8_VECTORS
	float qnan = NAN;
	uint32_t nanbits;
	memcpy(&nanbits, &qnan, sizeof nanbits);
	int w = f8_width();
	if (w > 8 && atomic_load_explicit(&run_gemm_pin, memory_order_relaxed) == 8)
		w = 8;                          /* run_gemm_width(8): tests, AMP_GEMM_WIDTH=8 */
	switch (w) {
	case 16: i = f8_decode16(b, n, k, v, nanbits); break;
	case 8: i = f8_decode8(b, n, k, v, nanbits); break;
	}
#endif
	for (; i < n; i++)
		v[i] = run_f8_table[b[i]] * k;
}

void run_decode_fp8(const uint8_t *b, int64_t n, int scale, float *v)
{
	run_tables();
	run_f8_decode(b, n, run_f8_pow2[scale + 126], v);
}

/* n values at byte offsets off[i] * esz of mem, decoded into v (fmt,
 * scale); off NULL: consecutive. */
void run_decode_run(const uint8_t *mem, const int64_t *off, int64_t n, Format f, int scale, float *v)
{
	switch (f) {
	case FMT_FP16: {
		uint16_t h[256];
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			int64_t k = n - i0 < 256 ? n - i0 : 256;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			if (!off) {                     /* the codes as they lie */
				memcpy(h, mem + i0 * 2, (size_t)k * 2);
				f16_to_f32_n(h, k, v + i0);
				continue;
			}
#endif
			for (int64_t i = 0; i < k; i++) {       /* little-endian bytes */
				const uint8_t *b = mem + (off ? off[i0 + i] : i0 + i) * 2;
				h[i] = (uint16_t)(b[0] | b[1] << 8);
			}
			f16_to_f32_n(h, k, v + i0);
		}
		return;
	}
	case FMT_FP8: {
		float k = run_f8_pow2[scale + 126];
		if (!off) {
			run_f8_decode(mem, n, k, v);
			return;
		}
		for (int64_t i = 0; i < n; i++)
			v[i] = run_f8_table[mem[off[i]]] * k;
		return;
	}
	case FMT_I32:
		for (int64_t i = 0; i < n; i++) {
			int32_t x;
			memcpy(&x, mem + (off ? off[i] : i) * 4, 4);
			v[i] = (float)x;
		}
		return;
	default:
		for (int64_t i = 0; i < n; i++)
			memcpy(v + i, mem + (off ? off[i] : i) * 4, 4);
	}
}

/* The inverse: n values of v encoded at off[i] * esz (NULL: consecutive). */
void run_encode_run(const float *v, const int64_t *off, int64_t n, Format f, int scale, uint8_t *mem)
{
	switch (f) {
	case FMT_FP16: {
		uint16_t h[256];
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			int64_t k = n - i0 < 256 ? n - i0 : 256;
			f32_to_f16_n(v + i0, k, h);
			for (int64_t i = 0; i < k; i++) {       /* little-endian bytes */
				uint8_t *b = mem + (off ? off[i0 + i] : i0 + i) * 2;
				b[0] = (uint8_t)h[i], b[1] = (uint8_t)(h[i] >> 8);
			}
		}
		return;
	}
	case FMT_FP8:
		if (!off) {
			f32_to_f8s_n(v, n, scale, mem);
			return;
		}
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			uint8_t b[256];
			int64_t k = n - i0 < 256 ? n - i0 : 256;
			f32_to_f8s_n(v + i0, k, scale, b);
			elems_scatter(mem, off + i0, b, k, 1);
		}
		return;
	case FMT_I32:
		for (int64_t i = 0; i < n; i++) {
			int32_t x = (int32_t)i32_value(v[i]);
			memcpy(mem + (off ? off[i] : i) * 4, &x, 4);
		}
		return;
	default:
		for (int64_t i = 0; i < n; i++)
			memcpy(mem + (off ? off[i] : i) * 4, v + i, 4);
	}
}

RunStats run_totals;

double run_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The calling thread's CPU seconds: what a step got of a core while
 * other threads (the reference's, another process's) shared them. */
double run_thread_cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void run_stats(RunStats *s)
{
	*s = run_totals;
}
