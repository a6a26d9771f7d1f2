#include "run.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc.h"
#include "npy.h"
#include "num.h"
#include "sim.h"
#include "table.h"

static void tables(void);

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

static float f16_table[65536], f8_table[256], pow2[253];

/* v[i] = quantize(v[i]), and its code into enc (little-endian; NULL: not
 * kept): one encoding per value, the decoding from the codes (F16C, or
 * fp8's table times the scale's power of two, as f8s_to_f32 multiplies). */
static void quantize_encode(float *v, int64_t n, Format f, int scale, uint8_t *enc)
{
	tables();
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
	if (f != FMT_FP8) {                     /* fp32: as it is */
		if (enc)
			memcpy(enc, v, (size_t)n * sizeof *v);
		return;
	}
	int table = scale >= -126 && scale <= 126;
	float p = table ? pow2[scale + 126] : 0;
	uint8_t b[256];
	for (int64_t i0 = 0; i0 < n; i0 += 256) {
		int64_t k = n - i0 < 256 ? n - i0 : 256;
		f32_to_f8s_n(v + i0, k, scale, b);
		if (enc)
			memcpy(enc + i0, b, (size_t)k);
		for (int64_t i = 0; i < k; i++)
			v[i0 + i] = table ? f8_table[b[i]] * p : f8s_to_f32(b[i], scale);
	}
}

void quantize_n(float *v, int64_t n, Format f, int scale)
{
	quantize_encode(v, n, f, scale, NULL);
}

float quantize(float x, Format f, int scale)
{
	tables();
	switch (f) {
	case FMT_FP16: return f16_to_f32(f32_to_f16(x));
	case FMT_FP8: return f8s_to_f32(f32_to_f8s(x, scale), scale);
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
		f8_table[i] = f8_to_f32((uint8_t)i);
	for (int i = 0; i < 253; i++)
		pow2[i] = ldexpf(1.0f, i - 126);
}

static void tables(void)
{
	pthread_once(&tables_once, build_tables);
}

static atomic_int gemm_pin;     /* run_gemm_width's limit (the fp8 decoding's too); 0: none */

/* n fp8 codes decoded and multiplied by k (a scale's power of two):
 * f8_table[b] * k, computed 16 (AVX-512) or 8 (AVX2) at a time from the
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

/* 16, 8 or 0: the vectors f8_decode uses (what the CPU has). */
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

static void f8_decode(const uint8_t *b, int64_t n, float k, float *v)
{
	int64_t i = 0;
#ifdef F8_VECTORS
	float qnan = NAN;
	uint32_t nanbits;
	memcpy(&nanbits, &qnan, sizeof nanbits);
	int w = f8_width();
	if (w > 8 && atomic_load_explicit(&gemm_pin, memory_order_relaxed) == 8)
		w = 8;                          /* run_gemm_width(8): tests, AMP_GEMM_WIDTH=8 */
	switch (w) {
	case 16: i = f8_decode16(b, n, k, v, nanbits); break;
	case 8: i = f8_decode8(b, n, k, v, nanbits); break;
	}
#endif
	for (; i < n; i++)
		v[i] = f8_table[b[i]] * k;
}

void run_decode_fp8(const uint8_t *b, int64_t n, int scale, float *v)
{
	tables();
	f8_decode(b, n, pow2[scale + 126], v);
}

/* n values at byte offsets off[i] * esz of mem, decoded into v (fmt,
 * scale); off NULL: consecutive. */
static void decode_run(const uint8_t *mem, const int64_t *off, int64_t n, Format f, int scale, float *v)
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
		float k = pow2[scale + 126];
		if (!off) {
			f8_decode(mem, n, k, v);
			return;
		}
		for (int64_t i = 0; i < n; i++)
			v[i] = f8_table[mem[off[i]]] * k;
		return;
	}
	default:
		for (int64_t i = 0; i < n; i++)
			memcpy(v + i, mem + (off ? off[i] : i) * 4, 4);
	}
}

/* The inverse: n values of v encoded at off[i] * esz (NULL: consecutive). */
static void encode_run(const float *v, const int64_t *off, int64_t n, Format f, int scale, uint8_t *mem)
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
	default:
		for (int64_t i = 0; i < n; i++)
			memcpy(mem + (off ? off[i] : i) * 4, v + i, 4);
	}
}

static RunStats stats;

double run_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The calling thread's CPU seconds: what a step got of a core while
 * other threads (the reference's, another process's) shared them. */
static double thread_cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void run_stats(RunStats *s)
{
	*s = stats;
}

/* ---- data ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30, x *= 0xBF58476D1CE4E5B9u;
	x ^= x >> 27, x *= 0x94D049BB133111EBu;
	return x ^ (x >> 31);
}

/* Normal values from a seed and a name (Box-Muller): value i depends only
 * on (seed, name, i) (pair i & ~1 gives its cosine and sine halves), so
 * any range, split any way, gives the same values. Values lo .. hi - 1
 * into v[lo - base ..], then quantized into fmt when asked. */
typedef struct {
	float *v;
	uint8_t *enc;           /* also encoded here, in fmt (NULL: no) */
	int64_t base, lo, hi;
	uint64_t s;
	double mean, sd;
	Format fmt;
	int scale, quantized;
} Gen;

static void *gen_part(void *arg)
{
	const Gen *g = arg;
	for (int64_t i = g->lo & ~(int64_t)1; i < g->hi; i += 2) {
		double u1 = ((mix(g->s + 2 * (uint64_t)i) >> 11) + 1.0) / 9007199254740993.0;
		double u2 = (mix(g->s + 2 * (uint64_t)i + 1) >> 11) / 9007199254740992.0;
		double r = sqrt(-2 * log(u1)), th = 6.283185307179586 * u2;
		double c = cos(th), s = sin(th);        /* one sincos call (GCC joins them; same bits) */
		if (i >= g->lo)
			g->v[i - g->base] = (float)(g->mean + g->sd * r * c);
		if (i + 1 < g->hi)
			g->v[i + 1 - g->base] = (float)(g->mean + g->sd * r * s);
	}
	uint8_t *enc = g->enc ? g->enc + (g->lo - g->base) * fmt_bytes(g->fmt) : NULL;
	if (g->quantized)
		quantize_encode(g->v + (g->lo - g->base), g->hi - g->lo, g->fmt, g->scale, enc);
	else if (enc)
		encode_run(g->v + (g->lo - g->base), NULL, g->hi - g->lo, g->fmt, g->scale, enc);
	return NULL;
}

/* Values first .. first + n - 1 into v, on two threads; encoded into enc
 * too unless it is NULL. */
static void normals(float *v, uint8_t *enc, int64_t first, int64_t n, uint64_t seed, const char *name, double mean,
		    double sd, Format fmt, int scale, int quantized)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15u;
	for (const char *c = name; *c; c++)
		s = mix(s ^ (uint8_t)*c);
	int64_t mid = n >= 1 << 16 ? first + n / 2 : first + n;
	Gen a = { v, enc, first, first, mid, s, mean, sd, fmt, scale, quantized }, b = a;
	pthread_t th;
	b.lo = mid, b.hi = first + n;
	if (mid < first + n && sim_threads() > 1 && pthread_create(&th, NULL, gen_part, &b) == 0) {
		gen_part(&a);
		pthread_join(th, NULL);
	} else {
		a.hi = first + n;
		gen_part(&a);
	}
}

/* How a tensor's values are made when no --data file holds them: normal
 * with this mean and deviation. How a parameter is used decides its
 * realistic scale: a matmul's weight 1/sqrt(K), its bias 0.02, a
 * layernorm's scale around 1, anything else 0.02; an input 1. */
typedef struct {
	double mean, sd;
} Dist;

static Dist plan_dist(const Plan *pl, int t)
{
	if (pl->t[t].role == R_INPUT)
		return (Dist){ 0, 1 };
	for (int g = 0; g < pl->ng; g++) {
		if (pl->g[g].b == t)
			return (Dist){ 0, 1 / sqrt((double)pl->g[g].k) };
		if (pl->g[g].bias == t)
			return (Dist){ 0, 0.02 };
	}
	for (int s = 0; s < pl->ns; s++)
		if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].compute == C_LAYERNORM &&
		    pl->p[pl->s[s].in[1]].tensor == t)
			return (Dist){ 1, 0.1 };
	return (Dist){ 0, 0.02 };
}

/* The same from the model's ops alone. */
static Dist model_dist(const Model *m, int t)
{
	if (m->t[t].role == T_INPUT)
		return (Dist){ 0, 1 };
	for (int k = 0; k < m->nops; k++) {
		const MOp *op = &m->ops[k];
		if (op->kind == OP_MATMUL && op->in[1] == t)
			return (Dist){ 0, 1 / sqrt((double)m->t[t].shape[0]) };
		if (op->kind == OP_MATMUL && op->in[2] == t)
			return (Dist){ 0, 0.02 };
	}
	for (int k = 0; k < m->nops; k++)
		if (m->ops[k].kind == OP_LAYERNORM && m->ops[k].in[1] == t)
			return (Dist){ 1, 0.1 };
	return (Dist){ 0, 0.02 };
}

/* What makes one input's or parameter's values: equal descriptions give
 * equal values, so the model's reference shares the program's arrays. */
typedef struct {
	const char *name;
	int rank;
	const int64_t *shape;
	int64_t count;          /* stacked instances */
	Format fmt;
	int scale;
	Dist d;
} DataSpec;

static int same_spec(const DataSpec *a, const DataSpec *b)
{
	if (strcmp(a->name, b->name) || a->rank != b->rank || a->count != b->count || a->fmt != b->fmt ||
	    (a->fmt == FMT_FP8 && a->scale != b->scale) || a->d.mean != b->d.mean || a->d.sd != b->d.sd)
		return 0;
	for (int k = 0; k < a->rank; k++)
		if (a->shape[k] != b->shape[k])
			return 0;
	return 1;
}

static int64_t spec_values(const DataSpec *x)
{
	int64_t n = x->count;
	for (int k = 0; k < x->rank; k++)
		n *= x->shape[k];
	return n;
}

/* Whether --data has DIR/<name>.npy for x (its path in path). */
static int data_file(const DataSpec *x, const RunOpts *o, char *path, size_t n)
{
	struct stat st;
	snprintf(path, n, "%s/%s.npy", o->data_dir ? o->data_dir : "", x->name);
	return o->data_dir && stat(path, &st) == 0;
}

/* A stacked parameter made from the seed is kept by no one whole: each
 * user makes the instance it needs (instance_data), so 27 layers of
 * weights never sit in memory as floats. */
static int lazy(const DataSpec *x, const RunOpts *o)
{
	char path[4096];
	return x->count > 1 && o->quantized && !data_file(x, o, path, sizeof path);
}

/* Instance iter of a lazy tensor: its values iter * size .. */
static void instance_data(const DataSpec *x, const RunOpts *o, int64_t iter, float *v, uint8_t *enc)
{
	int64_t size = spec_values(x) / x->count;
	normals(v, enc, iter * size, size, o->seed, x->name, x->d.mean, x->d.sd, x->fmt, x->scale, o->quantized);
}

/* ---- the machine's encoded instances, for the reference ---- */

typedef struct {
	DataSpec d;             /* name and shape: copies */
	uint64_t seed;
	uint8_t *enc;           /* every instance, encoded in d.fmt */
} CacheEnt;

struct RunCache {
	CacheEnt *e;
	int n, cap;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int filling;            /* run_cache_expect until run_program marks it filled */
};

RunCache *run_cache_new(void)
{
	RunCache *c = xcalloc(1, sizeof(RunCache));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	return c;
}

void run_cache_expect(RunCache *c)
{
	pthread_mutex_lock(&c->mu);
	c->filling = 1;
	pthread_mutex_unlock(&c->mu);
}

static void cache_filled(RunCache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->filling = 0;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

void run_cache_free(RunCache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	for (int i = 0; i < c->n; i++) {
		free((char *)c->e[i].d.name);
		free((int64_t *)c->e[i].d.shape);
		free(c->e[i].enc);
	}
	free(c->e);
	free(c);
}

/* Decoding gives quantize()'s bits: fp16 always, fp8 where the scale's
 * power of two is a normal float (decode_run's table). */
static int cacheable(const DataSpec *x)
{
	return x->fmt != FMT_FP8 || (x->scale >= -126 && x->scale <= 126);
}

/* c takes enc (every instance of x, encoded). */
static void cache_put(RunCache *c, const DataSpec *x, uint64_t seed, uint8_t *enc)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 16;
		c->e = xrealloc(c->e, (size_t)c->cap * sizeof *c->e);
	}
	CacheEnt *e = &c->e[c->n++];
	e->d = *x;
	e->d.name = xstrdup(x->name);
	int64_t *sh = xmalloc((size_t)(x->rank + 1) * sizeof *sh);
	memcpy(sh, x->shape, (size_t)x->rank * sizeof *sh);
	e->d.shape = sh;
	e->seed = seed;
	e->enc = enc;
}

static const uint8_t *cache_get(RunCache *c, const DataSpec *x, uint64_t seed)
{
	if (c) {                        /* entries are added only while filling */
		pthread_mutex_lock(&c->mu);
		while (c->filling)
			pthread_cond_wait(&c->cv, &c->mu);
		pthread_mutex_unlock(&c->mu);
	}
	for (int i = 0; c && i < c->n; i++)
		if (c->e[i].seed == seed && same_spec(&c->e[i].d, x) && c->e[i].d.scale == x->scale)
			return c->e[i].enc;
	return NULL;
}

static int cache_holds(const RunCache *c, const uint8_t *enc)
{
	for (int i = 0; c && enc && i < c->n; i++)
		if (c->e[i].enc == enc)
			return 1;
	return 0;
}

/* Per tensor, the one instance of a lazy tensor made last (by index). */
typedef struct {
	float **buf;
	int64_t *at;
	int n;
} Lazy;

static void lazy_init(Lazy *z, int n)
{
	z->n = n;
	z->buf = xcalloc((size_t)n + 1, sizeof *z->buf);
	z->at = xmalloc(((size_t)n + 1) * sizeof *z->at);
	for (int i = 0; i < n; i++)
		z->at[i] = -1;
}

static float *lazy_get(Lazy *z, int t, const DataSpec *x, const RunOpts *o, int64_t iter)
{
	if (z->at[t] != iter) {
		int64_t size = spec_values(x) / x->count;
		if (!z->buf[t])
			z->buf[t] = xmalloc((size_t)size * sizeof *z->buf[t]);
		const uint8_t *enc = cacheable(x) ? cache_get(o->cache, x, o->seed) : NULL;
		if (enc)
			decode_run(enc + iter * size * fmt_bytes(x->fmt), NULL, size, x->fmt, x->scale, z->buf[t]);
		else
			instance_data(x, o, iter, z->buf[t], NULL);
		z->at[t] = iter;
	}
	return z->buf[t];
}

static void lazy_free(Lazy *z)
{
	for (int i = 0; i < z->n; i++)
		free(z->buf[i]);
	free(z->buf);
	free(z->at);
	memset(z, 0, sizeof *z);
}

/* v: x's values from DIR/<name>.npy when --data has it, else generated
 * from the seed; quantized into x's format when o asks. */
static int tensor_data(const DataSpec *x, const RunOpts *o, float *v, Err *e)
{
	int64_t n = spec_values(x);
	char path[4096];
	if (data_file(x, o, path, sizeof path)) {
		Npy a;
		float *f;
		if (npy_read(path, &a, e))
			return -1;
		int stk = x->count > 1;     /* stacked: [count, shape...] */
		int same = a.rank == x->rank + stk && (!stk || a.shape[0] == x->count);
		for (int k = 0; same && k < x->rank; k++)
			same = a.shape[k + stk] == x->shape[k];
		if (!same) {
			npy_free(&a);
			return errf(e, "'%s': shape does not match tensor '%s' of the model%s", path, x->name,
				    stk ? " (a stacked parameter: [count, ...])" : "");
		}
		if (npy_floats(&a, &f, e)) {
			char why[sizeof e->msg];
			memcpy(why, e->msg, sizeof why);
			npy_free(&a);
			return errf(e, "'%s': %s (tensor '%s' needs floats)", path, why, x->name);
		}
		memcpy(v, f, (size_t)n * sizeof *f);
		free(f);
		npy_free(&a);
		if (o->quantized)
			quantize_n(v, n, x->fmt, x->scale);
	} else {
		normals(v, NULL, 0, n, o->seed, x->name, x->d.mean, x->d.sd, x->fmt, x->scale, o->quantized);
	}
	return 0;
}

static DataSpec plan_spec(const Plan *pl, int t)
{
	const PTensor *x = &pl->t[t];
	return (DataSpec){ x->name, x->rank, x->shape, x->count, x->fmt, x->scale, plan_dist(pl, t) };
}

/* Image [B, C, H, W] to patches [B, cls + (H/p)(W/p), C*p*p]: cls zero
 * rows, then patch (i, j) in row-major order, its features ordered
 * channel, row, column (a convolution weight's order). Values move
 * unchanged. */
static void patchify(const float *x, int64_t B, int64_t C, int64_t H, int64_t W, int64_t p, int64_t cls,
		     float *y)
{
	int64_t gw = W / p, n = 0;
	for (int64_t b = 0; b < B; b++) {
		for (int64_t z = 0; z < cls * C * p * p; z++)
			y[n++] = 0;             /* the class token slots */
		for (int64_t pi = 0; pi < H / p; pi++)
			for (int64_t pj = 0; pj < gw; pj++)
				for (int64_t c = 0; c < C; c++)
					for (int64_t r = 0; r < p; r++)
						for (int64_t q = 0; q < p; q++)
							y[n++] = x[((b * C + c) * H + pi * p + r) * W + pj * p + q];
	}
}

static int data_dir_ok(const RunOpts *o, Err *e)
{
	struct stat dir;
	if (o->data_dir && (stat(o->data_dir, &dir) != 0 || !S_ISDIR(dir.st_mode)))
		return errf(e, "cannot read data directory '%s'", o->data_dir);
	return 0;
}

int run_data(const Plan *pl, const RunOpts *o, float **val, Err *e)
{
	if (data_dir_ok(o, e))
		return -1;
	for (int t = 0; t < pl->nt; t++) {
		const PTensor *x = &pl->t[t];
		val[t] = NULL;
		if (x->role != R_INPUT && x->role != R_PARAM)
			continue;
		int host = 0;
		for (int h = 0; h < pl->nh; h++)
			host |= pl->h[h].out == t;
		if (host)
			continue;               /* made from its host op's input below */
		DataSpec d = plan_spec(pl, t);
		if (lazy(&d, o))
			continue;               /* made an instance at a time by its users */
		val[t] = xmalloc((size_t)tensor_values(x) * sizeof **val);
		if (tensor_data(&d, o, val[t], e))
			return -1;
	}
	for (int h = 0; h < pl->nh; h++) {
		const PTensor *img = &pl->t[pl->h[h].in];
		patchify(val[pl->h[h].in], img->shape[0], img->shape[1], img->shape[2], img->shape[3],
			 pl->h[h].patch, pl->h[h].cls,
			 val[pl->h[h].out] = xmalloc((size_t)tensor_count(&pl->t[pl->h[h].out]) * sizeof **val));
	}
	return 0;
}

/* ---- the machine ---- */

/* The values the movement check expects: each tensor's values encoded in
 * its format once (every instance), re-encoded when a compute step
 * replaces them, so a check copies bytes instead of encoding. */
typedef struct {
	const Plan *pl;
	const RunOpts *o;
	float *const *val;
	uint8_t **enc;
} Values;

static void enc_update(Values *v, int t)
{
	const PTensor *x = &v->pl->t[t];
	int64_t n = tensor_values(x), size = tensor_count(x);
	int esz = fmt_bytes(x->fmt);
	DataSpec d = plan_spec(v->pl, t);
	int lz = !v->val[t] && (x->role == R_PARAM || x->role == R_INPUT) && lazy(&d, v->o);
	if (!v->val[t] && !lz)
		return;
	if (!v->enc[t])
		v->enc[t] = xmalloc((size_t)(n * esz));
	if (!lz) {
		encode_run(v->val[t], NULL, n, x->fmt, x->scale, v->enc[t]);
		return;
	}
	float *buf = xmalloc((size_t)size * sizeof *buf);
	for (int64_t i = 0; i < x->count; i++)          /* encoded on the generating threads */
		instance_data(&d, v->o, i, buf, v->enc[t] + i * size * esz);
	free(buf);
	if (v->o->cache && cacheable(&d))       /* the reference decodes these */
		cache_put(v->o->cache, &d, v->o->seed, v->enc[t]);
}

static void elem_bytes(void *ctx, int t, int64_t e, int64_t n, uint8_t *out)
{
	const Values *v = ctx;
	int esz = fmt_bytes(v->pl->t[t].fmt);
	memcpy(out, v->enc[t] + e * esz, (size_t)(n * esz));
}

/* Shard index on each tile of a placement (-1: none), replicas included. */
typedef struct {
	int64_t *shard;
} TileShards;

/* What a decoded operand was made from: a tile whose bytes are the same
 * (its replica of the same shard, in the same run of a step) uses it as
 * it is, since the same bytes decode to the same floats. */
typedef struct {
	int64_t exec;           /* the compute step's run it was made in (-1: none) */
	const uint8_t *raw;
	int64_t bytes, key;     /* key: what else shapes it (rows rounded up) */
	Layout l;
} Made;

/* An attention operand's panels, and what they were made from. */
typedef struct {
	Made from;
	float *p;
	int64_t cap;
} KvPanels;

typedef struct {
	Sim s;
	const Plan *pl;
	float **val;
	TileShards *ts;         /* per placement, built on first use */
	Values *vs;
	Err *e;
	float *scr[2][4];       /* per compute thread: buffers kept from step to step */
	int64_t scap[2][4];
	KvPanels kv[2][2];      /* per compute thread: an attention's keys and values, as last made */
	int64_t exec;           /* compute steps run so far */
} Machine_;

/* Is what c records made from the shard at mem (layout l, key) in this run? */
static int made_same(const Made *c, int64_t exec, const uint8_t *mem, const Layout *l, int64_t key)
{
	int64_t bytes = layout_bytes(l);
	return c->exec == exec && c->bytes == bytes && c->key == key && c->l.kind == l->kind &&
	       c->l.fmt == l->fmt && c->l.rows == l->rows && c->l.cols == l->cols &&
	       (c->raw == mem || memcmp(c->raw, mem, (size_t)bytes) == 0);     /* inputs do not change while a step runs */
}

static void made_set(Made *c, int64_t exec, const uint8_t *mem, const Layout *l, int64_t key)
{
	*c = (Made){ exec, mem, layout_bytes(l), key, *l };
}

/* Compute thread part's buffer i, at least n floats (its contents lost when it grows). */
static float *scratch(Machine_ *m, int part, int i, int64_t n)
{
	if (n > m->scap[part][i]) {
		free(m->scr[part][i]);
		m->scr[part][i] = xmalloc((size_t)n * sizeof **m->scr + 64);
		m->scap[part][i] = n;
	}
	return m->scr[part][i];
}

static const int64_t *shards_of(Machine_ *m, int p)
{
	if (!m->ts[p].shard) {
		m->ts[p].shard = xmalloc((size_t)m->pl->machine.tiles * sizeof *m->ts[p].shard);
		place_shard_at(&m->pl->p[p], m->pl->machine.tiles, m->ts[p].shard);
	}
	return m->ts[p].shard;
}

/* A full fp8 panel's codes (16 columns of 32 rows, a column's rows
 * consecutive) in row order: rows[r * 16 + j] = panel[j * 32 + r] for
 * the first nr rows. SSE2 (every x86-64) moves a 16 x 16 block in four
 * rounds of byte interleaving, each a perfect shuffle of the 16 rows. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
#endif
static void transpose_codes(const uint8_t *panel, int64_t nr, uint8_t *rows)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (nr == 32) {
		for (int h = 0; h < 2; h++) {
			__m128i a[16], b[16];
			for (int i = 0; i < 16; i++)
				a[i] = _mm_loadu_si128((const __m128i *)(const void *)(panel + i * 32 + h * 16));
			for (int round = 0; round < 4; round++) {
				for (int i = 0; i < 8; i++) {
					b[2 * i] = _mm_unpacklo_epi8(a[i], a[i + 8]);
					b[2 * i + 1] = _mm_unpackhi_epi8(a[i], a[i + 8]);
				}
				memcpy(a, b, sizeof a);
			}
			for (int i = 0; i < 16; i++)
				_mm_storeu_si128((__m128i *)(void *)(rows + (h * 16 + i) * 16), a[i]);
		}
		return;
	}
#endif
	for (int64_t r = 0; r < nr; r++)
		for (int64_t j = 0; j < 16; j++)
			rows[r * 16 + j] = panel[j * 32 + r];
}

/* A transposed-right shard (R x C, mu = fmt_mu) decoded in storage
 * order: each panel holds mu rows of 16 columns, a column's mu rows
 * consecutive, so a row's 16 values are read mu apart within one panel
 * (L1-resident) and written consecutively, element (r, c) to
 * v[(c / 16) * ps + r * rs + c % 16]: row-major with rs = C and ps = 16,
 * run_gemm_strips's B panels with rs = 16 and ps = R * 16.
 * layout_offset's formula, a panel at a time. */
static void decode_tr(const uint8_t *mem, const Layout *l, Format f, int sc, float *v, int64_t rs, int64_t ps)
{
	int64_t R = l->rows, C = l->cols, mu = fmt_mu(f), rp = cdiv(R, mu);
	int esz = fmt_bytes(f);
	for (int64_t cp = 0; cp * 16 < C; cp++) {
		int64_t nj = C - cp * 16 < 16 ? C - cp * 16 : 16;
		for (int64_t kb = 0; kb < rp; kb++) {
			const uint8_t *panel = mem + (cp * rp + kb) * mu * 16 * esz;
			int64_t nr = R - kb * mu < mu ? R - kb * mu : mu;
			if (f == FMT_FP8 && rs == 16 && nj == 16) {     /* panels: the codes in row order, decoded at once */
				uint8_t rows[32 * 16];
				transpose_codes(panel, nr, rows);
				f8_decode(rows, nr * 16, pow2[sc + 126], v + cp * ps + kb * mu * 16);
				continue;
			}
			for (int64_t r = 0; r < nr; r++) {
				float *d = v + cp * ps + (kb * mu + r) * rs;
				if (f == FMT_FP8) {
					float k = pow2[sc + 126];
					for (int64_t j = 0; j < nj; j++)
						d[j] = f8_table[panel[j * mu + r]] * k;
				} else if (f == FMT_FP16) {
					uint16_t h[16];
					for (int64_t j = 0; j < nj; j++) {
						const uint8_t *b = panel + (j * mu + r) * 2;
						h[j] = (uint16_t)(b[0] | b[1] << 8);
					}
					f16_to_f32_n(h, nj, d);
				} else {
					for (int64_t j = 0; j < nj; j++)
						memcpy(d + j, panel + (j * mu + r) * 4, 4);
				}
			}
		}
	}
}

/* Placement p's shard on tile t: its bytes (a stacked home's: this
 * iteration's instance) and its layout. */
static const uint8_t *shard_mem(Machine_ *m, int p, int64_t t, Layout *l)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK];
	place_shard_idx(pp, shards_of(m, p)[t], idx);
	*l = place_layout(pp, idx);
	const uint8_t *mem = sim_tile(&m->s, t) + pp->addr;
	if (plan_stacked(m->pl, p))     /* a stacked home read in place: this iteration's instance */
		mem += m->s.iter * place_instance(pp);
	return mem;
}

/* Layouts of strips: element (r, c) at (c / w) * R * w + r * w + c % w,
 * w = layout_run (amp-left: mu; amp-output: 16), every strip whole. */
static int strip_layout(const Layout *l)
{
	return l->kind == LAYOUT_AMP_LEFT || l->kind == LAYOUT_AMP_OUTPUT;
}

/* The shard at mem (layout l, in fmt and scale sc) decoded into v, row-major. */
static void decode_shard(const uint8_t *mem, const Layout *l, Format fmt, int sc, float *v)
{
	if (l->kind == LAYOUT_ROW_MAJOR) {      /* offset = r * cols + c */
		decode_run(mem, NULL, l->rows * l->cols, fmt, sc, v);
		return;
	}
	if (strip_layout(l)) {                  /* decoded as it lies, in one run, then its rows gathered */
		int64_t w = layout_run(l), R = l->rows, C = l->cols, ns = cdiv(C, w);
		float *tmp = xmalloc((size_t)(ns * R * w) * sizeof *tmp);
		decode_run(mem, NULL, ns * R * w, fmt, sc, tmp);
		for (int64_t st = 0; st < ns; st++) {
			int64_t n = C - st * w < w ? C - st * w : w;
			for (int64_t r = 0; r < R; r++)
				memcpy(v + r * C + st * w, tmp + (st * R + r) * w, (size_t)n * sizeof *v);
		}
		free(tmp);
		return;
	}
	int64_t w = layout_run(l), esz = fmt_bytes(fmt);
	if (w > 1) {                            /* a row: runs of w consecutive elements */
		for (int64_t r = 0; r < l->rows; r++)
			for (int64_t c = 0; c < l->cols; c += w)
				decode_run(mem + layout_offset(l, r, c) * esz, NULL, l->cols - c < w ? l->cols - c : w,
					   fmt, sc, v + r * l->cols + c);
		return;
	}
	if (l->kind == LAYOUT_TRANSPOSED_RIGHT) {
		decode_tr(mem, l, fmt, sc, v, l->cols, 16);
		return;
	}
	int64_t *off = xmalloc((size_t)l->cols * sizeof *off);
	layout_row(l, 0, off);                  /* row r's: row 0's, from its first */
	for (int64_t r = 0; r < l->rows; r++)
		decode_run(mem + layout_offset(l, r, 0) * esz, off, l->cols, fmt, sc, v + r * l->cols);
	free(off);
}

/* A shard as a float matrix (rows x cols), and back with zero padding. */
/* Shard p of tile t decoded into floats, row-major. */
static float *read_shard(Machine_ *m, int p, int64_t t, Layout *l)
{
	const uint8_t *mem = shard_mem(m, p, t, l);
	float *v = xmalloc((size_t)(l->rows * l->cols) * sizeof *v);
	decode_shard(mem, l, m->pl->p[p].fmt, m->pl->t[m->pl->p[p].tensor].scale, v);
	return v;
}

static void write_shard(Machine_ *m, int p, int64_t t, const float *v)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK];
	place_shard_idx(pp, shards_of(m, p)[t], idx);
	Layout l = place_layout(pp, idx);
	uint8_t *mem = sim_tile(&m->s, t) + pp->addr;
	int sc = m->pl->t[pp->tensor].scale;
	if (strip_layout(&l)) {                 /* rows laid out as strips (zeros past the columns), encoded in one run */
		int64_t w = layout_run(&l), R = l.rows, C = l.cols, ns = cdiv(C, w);
		float *tmp = xmalloc((size_t)(ns * R * w) * sizeof *tmp);
		for (int64_t st = 0; st < ns; st++) {
			int64_t n = C - st * w < w ? C - st * w : w;
			for (int64_t r = 0; r < R; r++) {
				float *d = tmp + (st * R + r) * w;
				memcpy(d, v + r * C + st * w, (size_t)n * sizeof *d);
				memset(d + n, 0, (size_t)(w - n) * sizeof *d);
			}
		}
		encode_run(tmp, NULL, ns * R * w, pp->fmt, sc, mem);
		free(tmp);
		return;
	}
	memset(mem, 0, (size_t)layout_bytes(&l));
	if (l.kind == LAYOUT_ROW_MAJOR) {
		encode_run(v, NULL, l.rows * l.cols, pp->fmt, sc, mem);
		return;
	}
	int64_t w = layout_run(&l), esz = fmt_bytes(pp->fmt);
	if (w > 1) {
		for (int64_t r = 0; r < l.rows; r++)
			for (int64_t c = 0; c < l.cols; c += w)
				encode_run(v + r * l.cols + c, NULL, l.cols - c < w ? l.cols - c : w, pp->fmt, sc,
					   mem + layout_offset(&l, r, c) * esz);
		return;
	}
	int64_t *off = xmalloc((size_t)l.cols * sizeof *off);
	layout_row(&l, 0, off);
	for (int64_t r = 0; r < l.rows; r++)
		encode_run(v + r * l.cols, off, l.cols, pp->fmt, sc, mem + layout_offset(&l, r, 0) * esz);
	free(off);
}

/* acc[n] += x * b[n]: the inner loop of every GEMM here, vectorized (no
 * contraction to FMA: -ffp-contract=off keeps one rounding per step, the
 * machine's definition). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("avx2", "default")))
#endif
static void axpy(float *restrict acc, const float *restrict b, float x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		acc[i] += x * b[i];
}

/* C[M x N] += A[M x K] B[K x N], all row-major and dense: each element
 * summed in K order, one rounding per multiply and per add
 * (-ffp-contract=off), so any blocking gives the plain loop's bits (the
 * machine's definition; tests/unit/test_run.c compares them). Blocked
 * for the caches as BLAS kernels are: K in slices of GEMM_KC (a C
 * element's sum goes on in the next slice from where it stopped, so K
 * stays in order), B's slice packed in 16-column panels (k-major), A in
 * strips of GEMM_S columns (each row's GEMM_S values consecutive, the
 * rows one after another), a block of GEMM_MC rows at a time (a shard's
 * whole); a register tile of GK_MR rows by one or two panels runs over
 * them. Rows past M and columns past N are zeros in the packed copies
 * and are not stored. A matmul step decodes its shards straight into
 * this form (run_gemm_strips). */
#define GEMM_KC 256
#define GEMM_MC 120
#define GEMM_S RUN_GEMM_S       /* run_gemm_strips's strip width (GEMM_KC a multiple of it) */
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));

/* A (M x K, row r at A + r * lda) into d in the strips of
 * run_gemm_strips, mp rows each (zeros past M and past K). */
static void pack_strips(const float *A, int64_t lda, int64_t M, int64_t K, int64_t mp, float *d)
{
	int64_t ns = (K + GEMM_S - 1) / GEMM_S;
	for (int64_t s = 0; s < ns; s++) {
		int64_t w = K - s * GEMM_S < GEMM_S ? K - s * GEMM_S : GEMM_S;
		float *st = d + s * mp * GEMM_S;
		for (int64_t r = 0; r < M; r++) {
			memcpy(st + r * GEMM_S, A + r * lda + s * GEMM_S, (size_t)w * sizeof *d);
			memset(st + r * GEMM_S + w, 0, (size_t)(GEMM_S - w) * sizeof *d);
		}
		memset(st + M * GEMM_S, 0, (size_t)((mp - M) * GEMM_S) * sizeof *d);
	}
}

/* The machine's product, 8 wide: AVX2 where the CPU has it. */
#define GK(x) x##_8
#define GK_MR 6
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define GK_ATTR __attribute__((target_clones("avx2", "default")))
#else
#define GK_ATTR
#endif
#include "gemm_kernel.h"
#undef GK
#undef GK_MR
#undef GK_ATTR

/* The rest are built for their targets with GCC and chosen at run time
 * by what the CPU has: the machine's product 16 wide (AVX-512), and the
 * FP32 reference's with every multiply-add fused (one rounding each),
 * each element still summed in K order, so it gives the bits of the plain
 * loop of fmaf, 8 wide (AVX2 and FMA) or 16 wide; where the CPU has
 * neither (or the compiler is not GCC), that loop itself.
 * tests/unit/test_run.c compares every copy the CPU can run. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define GEMM_TARGETS 1
#define GK_ATTR
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#define GK(x) x##_16
#define GK_MR 12
#include "gemm_kernel.h"
#undef GK
#undef GK_MR
#pragma GCC optimize("fp-contract=fast")
#define GK(x) x##_fma16
#define GK_MR 6
#define GK_NP 2
#include "gemm_kernel.h"
#undef GK
#undef GK_MR
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("fp-contract=fast")
#define GK(x) x##_fma8
#define GK_MR 6
#include "gemm_kernel.h"
#undef GK
#undef GK_MR
#pragma GCC pop_options
#undef GK_ATTR

/* What the CPU has: 0 nothing more, 8 AVX2 and FMA, 16 AVX-512 too. */
static int cpu_width(void)
{
	static atomic_int known = -1;
	int k = atomic_load_explicit(&known, memory_order_relaxed);
	if (k < 0) {
		__builtin_cpu_init();
		k = !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) ? 0 :
		    __builtin_cpu_supports("avx512f") ? 16 : 8;
		atomic_store_explicit(&known, k, memory_order_relaxed);
	}
	return k;
}
#else
static int cpu_width(void)
{
	return 0;
}
#endif


int run_gemm_width(int w)
{
	atomic_store_explicit(&gemm_pin, w, memory_order_relaxed);
	int c = cpu_width();
	return w == 8 || c < 16 ? 8 : 16;
}

#ifdef GEMM_TARGETS
/* The vector width the products use now. */
static int gemm_width(void)
{
	int c = cpu_width(), w = atomic_load_explicit(&gemm_pin, memory_order_relaxed);
	return w == 8 && c > 8 ? 8 : c;
}
#endif

void run_gemm(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
#ifdef GEMM_TARGETS
	if (gemm_width() == 16) {
		run_gemm_16(A, B, C, M, K, N);
		return;
	}
#endif
	run_gemm_8(A, B, C, M, K, N);
}

int run_gemm_rows(void)
{
#ifdef GEMM_TARGETS
	if (gemm_width() == 16)
		return 12;
#endif
	return 6;
}

void run_gemm_strips(const float *A, int64_t rs, const float *bp, float *C, int64_t M, int64_t K, int64_t N)
{
#ifdef GEMM_TARGETS
	if (gemm_width() == 16) {
		run_gemm_strips_16(A, rs, bp, C, M, K, N);
		return;
	}
#endif
	run_gemm_strips_8(A, rs, bp, C, M, K, N);
}

void run_gemm_ref(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
#ifdef GEMM_TARGETS
	switch (gemm_width()) {
	case 16:
		run_gemm_fma16(A, B, C, M, K, N);
		return;
	case 8:
		run_gemm_fma8(A, B, C, M, K, N);
		return;
	}
#endif
	for (int64_t r = 0; r < M; r++)
		for (int64_t k = 0; k < K; k++)
			for (int64_t n = 0; n < N; n++)
				C[r * N + n] = fmaf(A[r * K + k], B[k * N + n], C[r * N + n]);
}

static float gelu(float x)
{
	return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* gelu of every fp16 value, and of every fp8 code at the last scale
 * asked for: gelu_n looks a decoded input up by its code instead of
 * computing tanhf again (the same function of the same float, so the
 * same bits). */
static float gelu16[65536];
static pthread_once_t gelu16_once = PTHREAD_ONCE_INIT;

static void gelu16_build(void)
{
	for (int i = 0; i < 65536; i++)
		gelu16[i] = gelu(f16_to_f32((uint16_t)i));
}

/* y[i] = gelu(x[i]) for n inputs decoded from fmt at scale sc. */
static void gelu_n(const float *x, int64_t n, Format fmt, int sc, float *y)
{
	if (fmt == FMT_FP16) {
		pthread_once(&gelu16_once, gelu16_build);
		uint16_t h[256];
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			int64_t k = n - i0 < 256 ? n - i0 : 256;
			f32_to_f16_n(x + i0, k, h);     /* exact: each value is an fp16 one */
			for (int64_t i = 0; i < k; i++)
				y[i0 + i] = gelu16[h[i]];
		}
	} else if (fmt == FMT_FP8) {
		float t8[256], d8[256];
		for (int c = 0; c < 256; c++)
			t8[c] = gelu(d8[c] = f8s_to_f32((uint8_t)c, sc));
		uint8_t b[256];
		for (int64_t i0 = 0; i0 < n; i0 += 256) {
			int64_t k = n - i0 < 256 ? n - i0 : 256;
			f32_to_f8s_n(x + i0, k, sc, b);
			for (int64_t i = 0; i < k; i++)    /* a value no code decodes to (none should): computed */
				y[i0 + i] = memcmp(&d8[b[i]], &x[i0 + i], sizeof *x) ? gelu(x[i0 + i]) : t8[b[i]];
		}
	} else {
		for (int64_t i = 0; i < n; i++)
			y[i] = gelu(x[i]);
		return;
	}
	for (int64_t i = 0; i < n; i++)         /* a NaN's payload as gelu itself gives it */
		if (x[i] != x[i])
			y[i] = gelu(x[i]);
}

void run_gelu(const float *x, int64_t n, Format fmt, int scale, float *y)
{
	tables();
	gelu_n(x, n, fmt, scale, y);
}

/* One head's attention for R query rows over N keys (D wide), the keys
 * transposed in kp and the values in vp as run_gemm_strips's panels
 * (kv_panels): scores
 * summed in fp32 in D order and scaled; softmax with fp32 statistics (row
 * maximum m, exponentials, their sum l in key order); the output summed
 * in fp32 in key order. Whole (partial 0): o (R x D) is that sum divided
 * by l. Partial: o (R x (D+2)) holds m, l and the undivided sum, for
 * merge(). The caller rounds o once into its format. */
static void attend(const float *q, const float *kp, const float *vp, float *o, int64_t R, int64_t N,
		   int64_t D, float scale, int partial)
{
	float *s = xzeroed((size_t)(R * N), sizeof *s), *acc = xzeroed((size_t)(R * D), sizeof *acc);
	int64_t mr = run_gemm_rows(), mp = cdiv(R, mr) * mr, wide = (N > D ? N : D) + GEMM_S;
	float *ap = xmalloc((size_t)(cdiv(wide, GEMM_S) * mp * GEMM_S) * sizeof *ap);
	pack_strips(q, D, R, D, mp, ap);
	run_gemm_strips(ap, mp * GEMM_S, kp, s, R, D, N);      /* every score summed in D order */
	float *mx = xmalloc((size_t)R * sizeof *mx), *sum = xcalloc((size_t)R, sizeof *sum);
	for (int64_t i = 0; i < R; i++) {
		float *p = s + i * N, m = -INFINITY, l = 0;
		for (int64_t j = 0; j < N; j++) {
			p[j] *= scale;
			m = p[j] > m ? p[j] : m;
		}
		for (int64_t j = 0; j < N; j++) {
			p[j] = expf(p[j] - m);
			l += p[j];
		}
		mx[i] = m, sum[i] = l;
	}
	pack_strips(s, N, R, N, mp, ap);
	run_gemm_strips(ap, mp * GEMM_S, vp, acc, R, N, D);    /* every output summed in key order */
	for (int64_t i = 0; i < R; i++) {
		float *out = partial ? o + i * (D + 2) + 2 : o + i * D;
		if (partial) {
			memcpy(out, acc + i * D, (size_t)D * sizeof *out);
			out[-2] = mx[i];
			out[-1] = sum[i];
		} else {
			for (int64_t d = 0; d < D; d++)
				out[d] = acc[i * D + d] / sum[i];
		}
	}
	free(s);
	free(ap);
	free(acc);
	free(mx);
	free(sum);
}

/* Online-softmax merge of KB key blocks' partials (rows kb*R + r, each m,
 * l, o[D]) in key-block order: M the largest m, w_kb = exp(m_kb - M),
 * L = sum of w_kb*l_kb, O = sum of w_kb*o_kb, out = O / L (all fp32). */
static void merge(const float *a, float *res, int64_t KB, int64_t R, int64_t D)
{
	for (int64_t r = 0; r < R; r++) {
		float M = -INFINITY, L = 0, *out = res + r * D;
		for (int64_t kb = 0; kb < KB; kb++) {
			float mk = a[(kb * R + r) * (D + 2)];
			M = mk > M ? mk : M;
		}
		memset(out, 0, (size_t)D * sizeof *out);
		for (int64_t kb = 0; kb < KB; kb++) {
			const float *row = a + (kb * R + r) * (D + 2);
			float w = expf(row[0] - M);
			L += w * row[1];
			axpy(out, row + 2, w, D);
		}
		for (int64_t d = 0; d < D; d++)
			out[d] /= L;
	}
}

typedef struct {
	Machine_ *m;
	int step, part, parts;
	double cpu;             /* the thread's CPU seconds on the step, the expected bytes' copies not counted */
	uint8_t *enc;           /* the output tensor's expected bytes */
} Work;

/* A matmul's left operand, placement p's shard on tile t (R x K), in the
 * strips of run_gemm_strips, mp rows each: an amp-left shard whose runs
 * are a strip wide is already strips of R rows, decoded as it lies. */
static const float *read_strips(Machine_ *m, const Work *w, int p, int64_t t, Layout *l, int64_t mp)
{
	const uint8_t *mem = shard_mem(m, p, t, l);
	Format f = m->pl->p[p].fmt;
	int sc = m->pl->t[m->pl->p[p].tensor].scale;
	int64_t R = l->rows, K = l->cols, ns = cdiv(K, GEMM_S);
	float *d = scratch(m, w->part, 0, ns * mp * GEMM_S);
	if (l->kind == LAYOUT_AMP_LEFT && fmt_mu(f) == GEMM_S) {
		for (int64_t s = 0; s < ns; s++) {     /* element (r, c) at (c / mu) * R * mu + r * mu + c % mu */
			decode_run(mem + s * R * GEMM_S * fmt_bytes(f), NULL, R * GEMM_S, f, sc, d + s * mp * GEMM_S);
			memset(d + (s * mp + R) * GEMM_S, 0, (size_t)((mp - R) * GEMM_S) * sizeof *d);
		}
		return d;
	}
	float *v = scratch(m, w->part, 3, R * K);
	decode_shard(mem, l, f, sc, v);
	pack_strips(v, K, R, K, mp, d);
	return d;
}

/* Its right operand (K x N) in 16-column panels: a transposed-right
 * shard decoded straight into them. */
static const float *read_panels(Machine_ *m, const Work *w, int p, int64_t t, Layout *l)
{
	const uint8_t *mem = shard_mem(m, p, t, l);
	Format f = m->pl->p[p].fmt;
	int sc = m->pl->t[m->pl->p[p].tensor].scale;
	int64_t K = l->rows, N = l->cols, np = cdiv(N, 16);
	float *d = scratch(m, w->part, 1, np * K * 16);
	if (l->kind == LAYOUT_TRANSPOSED_RIGHT) {
		if (N % 16)                     /* the last panel's columns past N */
			memset(d + (np - 1) * K * 16, 0, (size_t)(K * 16) * sizeof *d);
		decode_tr(mem, l, f, sc, d, 16, K * 16);
		return d;
	}
	float *v = scratch(m, w->part, 3, K * N);
	decode_shard(mem, l, f, sc, v);
	for (int64_t q = 0; q < np; q++)
		pack_panel_8(v, N, 0, K, q * 16, N - q * 16 < 16 ? N - q * 16 : 16, d + q * K * 16);
	return d;
}

/* Shard lin of placement out, as its first replica's tile holds it,
 * into the tensor's encoded bytes enc: row by row, a strip row at a time
 * in strip layouts (*off, *cap: a row's offsets, kept between calls). */
static void enc_shard(Machine_ *m, const Placement *out, uint8_t *enc, int64_t lin, int64_t **off, int64_t *cap)
{
	int64_t T = m->pl->machine.tiles, z[MAX_REP] = { 0 }, idx[MAX_RANK];
	int esz = fmt_bytes(out->fmt);
	place_shard_idx(out, lin, idx);
	const uint8_t *mem = m->s.mem[place_tile(out, idx, z, T)] + out->addr;  /* allocated: it holds a shard */
	Layout l = place_layout(out, idx);
	int64_t w = strip_layout(&l) ? layout_run(&l) : 0;
	if (l.kind != LAYOUT_ROW_MAJOR && !w) {
		if (l.cols > *cap)
			*off = xrealloc(*off, (size_t)(*cap = l.cols) * sizeof **off);
		layout_row(&l, 0, *off);
	}
	for (int64_t r = 0; r < l.rows; r++) {  /* a row: consecutive elements */
		uint8_t *d = enc + shard_elem(out, idx, r, 0) * esz;
		const uint8_t *s = mem + layout_offset(&l, r, 0) * esz;
		if (l.kind == LAYOUT_ROW_MAJOR) {
			memcpy(d, s, (size_t)(l.cols * esz));
		} else if (w) {                 /* strips: a row's w elements a strip apart */
			for (int64_t c = 0; c < l.cols; c += w) {
				const uint8_t *q = s + c * l.rows * esz;
				if (w * esz == 32 && l.cols - c >= w)
					memcpy(d + c * esz, q, 32);
				else
					memcpy(d + c * esz, q, (size_t)((l.cols - c < w ? l.cols - c : w) * esz));
			}
		} else {
			elems_gather(d, s, *off, l.cols, esz);
		}
	}
}

/* Placement p's shard on tile t as attend's panels: keys (trans 1, N x D)
 * transposed into D x N panels, values (N x D) as they are. Made again
 * only when the tile's bytes differ from those the cache c was made from
 * in this step (the same bytes decode to the same panels). */
static const float *kv_panels(Machine_ *m, const Work *w, KvPanels *c, int p, int64_t t, int trans, Layout *l)
{
	const uint8_t *mem = shard_mem(m, p, t, l);
	int64_t N = l->rows, D = l->cols;
	if (made_same(&c->from, m->exec, mem, l, trans))
		return c->p;
	int64_t n = trans ? cdiv(N, 16) * 16 * D : cdiv(D, 16) * 16 * N;
	if (n > c->cap) {
		free(c->p);
		c->p = xmalloc((size_t)n * sizeof *c->p);
		c->cap = n;
	}
	float *v = scratch(m, w->part, 3, N * D);
	decode_shard(mem, l, m->pl->p[p].fmt, m->pl->t[m->pl->p[p].tensor].scale, v);
	if (trans) {                    /* element (d, j) of the keys' transpose */
		memset(c->p, 0, (size_t)n * sizeof *c->p);
		for (int64_t j = 0; j < N; j++)
			for (int64_t d = 0; d < D; d++)
				c->p[j / 16 * D * 16 + d * 16 + j % 16] = v[j * D + d];
	} else {
		for (int64_t q0 = 0; q0 < D; q0 += 16)
			pack_panel_8(v, D, 0, N, q0, D - q0 < 16 ? D - q0 : 16, c->p + q0 * N);
	}
	made_set(&c->from, m->exec, mem, l, trans);
	return c->p;
}

/* Compute step w->step on the tiles t of its output with t % parts == part. */
static void *compute_tiles(void *arg)
{
	Work *w = arg;
	Machine_ *m = w->m;
	const Step *st = &m->pl->s[w->step];
	const Placement *out = &m->pl->p[st->out];
	int64_t T = m->pl->machine.tiles;
	const int64_t *os = m->ts[st->out].shard;
	double cpu0 = thread_cpu();
	int64_t *off = NULL, offcap = 0, z[MAX_REP] = { 0 };
	double enc_cpu = 0;

	for (int64_t t = w->part; t < T; t += w->parts) {
		if (os[t] < 0)
			continue;
		int64_t idx[MAX_RANK];
		place_shard_idx(out, os[t], idx);
		Layout lo = place_layout(out, idx);
		int64_t R = lo.rows, C = lo.cols;
		Layout la, lb, lc;
		if (st->compute == C_MATMUL) {  /* both operands decoded into run_gemm_strips's */
			float *res = scratch(m, w->part, 2, R * C);
			memset(res, 0, (size_t)(R * C) * sizeof *res);
			int64_t mp = cdiv(R, run_gemm_rows()) * run_gemm_rows();
			const float *ap = read_strips(m, w, st->in[0], t, &la, mp);
			const float *bp = read_panels(m, w, st->in[1], t, &lb);
			int64_t K = la.cols;
			run_gemm_strips(ap, mp * GEMM_S, bp, res, R, K, C);   /* K order */
			if (st->nin > 2) {
				float *bias = read_shard(m, st->in[2], t, &lc);
				for (int64_t r = 0; r < R; r++)
					for (int64_t n = 0; n < C; n++)
						res[r * C + n] += bias[n];
				free(bias);
			}
			write_shard(m, st->out, t, res);   /* rounds into the output's format */
			if (place_tile(out, idx, z, T) == t) {  /* the first replica: the expected bytes, not the product's time */
				double e0 = thread_cpu();
				enc_shard(m, out, w->enc, os[t], &off, &offcap);
				enc_cpu += thread_cpu() - e0;
			}
			continue;
		}
		float *res = xcalloc((size_t)(R * C), sizeof *res);
		float *a = read_shard(m, st->in[0], t, &la);
		switch (st->compute) {
		case C_CAST:
		case C_PACK:
		case C_CARRY:
			memcpy(res, a, (size_t)(R * C) * sizeof *res);
			break;
		case C_BROADCAST:               /* the parameter's rows, for every batch entry */
			for (int64_t r = 0; r < R; r++)
				memcpy(res + r * C, a + (r % la.rows) * C, (size_t)C * sizeof *res);
			break;
		case C_ATTENTION: {
			Layout lk, lv;
			const float *kp = kv_panels(m, w, &m->kv[w->part][0], st->in[1], t, 1, &lk);
			const float *vp = kv_panels(m, w, &m->kv[w->part][1], st->in[2], t, 0, &lv);
			int partial = out->fmt == FMT_FP32;
			attend(a, kp, vp, res, R, lk.rows, partial ? C - 2 : C, (float)st->scale, partial);
			break;
		}
		case C_MERGE:
			merge(a, res, la.rows / R, R, C);
			break;
		case C_GELU:
			gelu_n(a, R * C, m->pl->p[st->in[0]].fmt, m->pl->t[m->pl->p[st->in[0]].tensor].scale, res);
			break;
		case C_ADD: {
			float *b = read_shard(m, st->in[1], t, &lb);   /* fewer rows: a table per batch entry */
			for (int64_t q = 0; q < R * C; q++)
				res[q] = a[q] + b[(q / C) % lb.rows * C + q % C];
			free(b);
			break;
		}
		case C_LAYERNORM: {
			float *g = read_shard(m, st->in[1], t, &lb), *b = read_shard(m, st->in[2], t, &lc);
			for (int64_t r = 0; r < R; r++) {
				const float *x = a + r * C;
				float mean = 0, var = 0;
				for (int64_t c = 0; c < C; c++)
					mean += x[c];
				mean /= (float)C;
				for (int64_t c = 0; c < C; c++)
					var += (x[c] - mean) * (x[c] - mean);
				var /= (float)C;
				float inv = 1.0f / sqrtf(var + (float)st->eps);
				for (int64_t c = 0; c < C; c++)
					res[r * C + c] = (x[c] - mean) * inv * g[c] + b[c];
			}
			free(g);
			free(b);
			break;
		}
		case C_REDUCE: {
			int64_t parts = la.rows / R;
			float *bias = st->nin > 1 ? read_shard(m, st->in[1], t, &lb) : NULL;
			/* each element summed from 0 in part order, then the bias
			 * added: parts outermost, so the rows are read as they lie */
			for (int64_t k = 0; k < parts; k++)
				for (int64_t q = 0; q < R * C; q++)
					res[q] += a[k * R * C + q];
			for (int64_t q = 0; q < R * C; q++)
				res[q] += bias ? bias[q % C] : 0;
			free(bias);
			break;
		}
		default:
			break;
		}
		free(a);
		write_shard(m, st->out, t, res);   /* rounds into the output's format */
		free(res);
		if (place_tile(out, idx, z, T) == t)
			enc_shard(m, out, w->enc, os[t], &off, &offcap);
	}
	free(off);
	w->cpu = thread_cpu() - cpu0 - enc_cpu;
	return NULL;
}


/* Runs compute step i on every tile of its output, on two threads. */
static int compute(Machine_ *m, int i)
{
	const Step *st = &m->pl->s[i];
	const Placement *out = &m->pl->p[st->out];
	int64_t T = m->pl->machine.tiles;
	const int64_t *os = shards_of(m, st->out);

	for (int64_t t = 0; t < T; t++)         /* every input on every tile, before threads */
		for (int k = 0; os[t] >= 0 && k < st->nin; k++)
			if (shards_of(m, st->in[k])[t] < 0)
				return errf(m->e, "step %d (%s): tile %lld holds no shard of '%s'", i, st->op,
					    (long long)t, m->pl->p[st->in[k]].name);
	for (int64_t t = 0; t < T; t++)
		if (os[t] >= 0)
			sim_tile(&m->s, t);
	/* The tensor's bytes as the movement check expects them: each shard's
	 * first replica as write_shard encoded it, copied through the layout
	 * by the thread that wrote it (compute_tiles; no decode and encode
	 * again). Only an output's values are kept as floats. */
	const PTensor *x = &m->pl->t[out->tensor];
	int64_t n = tensor_count(x);
	uint8_t **enc = &m->vs->enc[out->tensor];
	if (!*enc)
		*enc = xmalloc((size_t)(tensor_values(x) * fmt_bytes(out->fmt)));
	m->exec++;                      /* a new run of a step: what an earlier one cached is stale */
	Work w[2] = { { m, i, 0, 2, 0, *enc }, { m, i, 1, 2, 0, *enc } };
	pthread_t th;
	double t0 = run_now();
	if (sim_threads() > 1 && pthread_create(&th, NULL, compute_tiles, &w[1]) == 0) {
		compute_tiles(&w[0]);
		pthread_join(th, NULL);
	} else {
		w[0].parts = 1;
		compute_tiles(&w[0]);
	}
	if (st->compute == C_MATMUL) {
		const Placement *A = &m->pl->p[st->in[0]], *B = &m->pl->p[st->in[1]];
		double mm = 1;
		for (int a = 0; a + 1 < A->rank; a++)
			mm *= (double)A->shape[a];
		stats.gemm_flops += 2.0 * mm * (double)B->shape[0] * (double)B->shape[1];
		stats.gemm_secs += run_now() - t0;
		stats.gemm_cpu += w[0].cpu + w[1].cpu;
	}
	if (x->role == R_OUTPUT) {
		if (!m->val[out->tensor])
			m->val[out->tensor] = xmalloc((size_t)n * sizeof **m->val);
		decode_run(*enc, NULL, n, x->fmt, x->scale, m->val[out->tensor]);
	}
	return 0;
}

/* ---- exchange from the program's rows ---- */

/* One receive's copy: len bytes from tile st at sa (st < 0: zeros) to
 * tile dt at da, of the frag'th send or local copy of its step. */
typedef struct {
	int64_t st, sa, dt, da, len, frag;
} Move;

typedef struct {
	Machine_ *m;
	Instr **row;
	int *n, *cur;
	int phase;
	int failed;
	uint8_t *buf;           /* a fragment's bytes in flight, reused */
	int64_t nbuf;
	int64_t *lo, *hi;       /* per tile: the bytes the present step's destination occupies (lo > hi: none) */
	Move *mv;               /* the step's receives and local copies, checked, not yet made, in schedule order */
	int64_t nmv, cmv, nfrag;
	int hazard;             /* a send reads bytes of this step's destination: copy in order, one thread */
	int local;              /* a local copy writes outside the destination: in order, one thread */
	int64_t *first, *order; /* the moves by destination tile: tile t's are order[first[t] .. first[t + 1]) */
	int64_t *sfirst, *stiles; /* the destination's tiles by shard: shard k's are stiles[sfirst[k] .. sfirst[k + 1]) */
	int src, dst;           /* the step's placements */
} Exchange;

/* The bytes [lo, hi) placement p's shard occupies on tile t (0 when it has none). */
static int shard_range(Machine_ *m, int p, int64_t t, int64_t *lo, int64_t *hi)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK], lin = shards_of(m, p)[t];
	if (lin < 0)
		return 0;
	place_shard_idx(pp, lin, idx);
	Layout l = place_layout(pp, idx);
	*lo = pp->addr, *hi = pp->addr + layout_bytes(&l);
	return 1;
}

/* A receive must write inside its step's destination on its tile: any
 * other byte it wrote would be a stray write into another tensor (or into
 * memory no placement owns), which the destinations' check cannot see. */
static int check_stray(Exchange *x, const Xfer *xf, int64_t t, int64_t addr, int64_t len)
{
	Machine_ *m = x->m;
	const Plan *pl = m->pl;
	int dst = pl->s[xf->step].dst;
	if (addr >= x->lo[t] && addr + len <= x->hi[t])
		return 0;
	/* name what the bytes belong to: a placement live at this step first */
	int *fi = xmalloc((size_t)pl->np * sizeof *fi), *la = xmalloc((size_t)pl->np * sizeof *la);
	int *al = xmalloc((size_t)pl->np * sizeof *al), owner = -1, live = 0;
	plan_lifetimes(pl, fi, la, al);
	for (int p = 0; p < pl->np; p++) {
		int64_t plo, phi;
		if (p == dst || !shard_range(m, p, t, &plo, &phi))
			continue;
		if (plan_stacked(pl, p))
			phi = plo + place_instance(&pl->p[p]) * pl->t[pl->p[p].tensor].count;
		if (plo >= addr + len || addr >= phi)
			continue;
		int l = fi[p] <= xf->step && xf->step <= la[p];
		if (owner < 0 || (l && !live))
			owner = p, live = l;
	}
	free(fi);
	free(la);
	free(al);
	char what[300];
	if (owner >= 0)
		snprintf(what, sizeof what, "placement '%s' (%s at this step)", pl->p[owner].name,
			 live ? "live" : "dead");
	else
		snprintf(what, sizeof what, "memory no placement owns");
	return errf(m->e, "tile %lld, phase %d: a receive writes bytes %lld..%lld outside the destination "
		    "'%s' of its step %d, into %s", (long long)t, x->phase, (long long)addr,
		    (long long)(addr + len), pl->p[dst].name, xf->step, what);
}

static Instr *next_instr(Exchange *x, int64_t t)
{
	if (!x->row[t] || x->cur[t] >= x->n[t])
		return NULL;
	return &x->row[t][x->cur[t]++];
}


static void push_move(Exchange *x, Move v)
{
	if (x->nmv == x->cmv)
		x->mv = xrealloc(x->mv, (size_t)(x->cmv = x->cmv ? 2 * x->cmv : 1024) * sizeof *x->mv);
	x->mv[x->nmv++] = v;
}

static int fragment(void *ctx, const Xfer *xf, int64_t mb, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Exchange *x = ctx;
	Machine_ *m = x->m;
	int64_t T = m->pl->machine.tiles;
	(void)mb, (void)sa, (void)da;
	Instr *s = next_instr(x, st);
	if (!s || s->kind != I_SEND || s->len != xf->len)
		return errf(m->e, "tile %lld, phase %d: the table's next instruction is not the send of "
			    "%lld bytes the schedule needs (step %d)", (long long)st, x->phase,
			    (long long)xf->len, xf->step);
	int64_t sa0 = s->addr + m->s.iter * s->istride;       /* a moving source: this iteration's */
	if (sa0 < 0 || sa0 + xf->len > m->s.sram) {
		return errf(m->e, "tile %lld, phase %d: send address %lld out of SRAM", (long long)st,
			    x->phase, (long long)sa0);
	}
	/* Receives write only inside the step's destination (else
	 * check_stray stops the run), so a send that reads none of it on its
	 * tile reads the same bytes whenever it is copied: the step's copies
	 * are checked first and made afterwards (make_moves). */
	sim_tile(&m->s, st);
	if (sa0 < x->hi[st] && x->lo[st] < sa0 + xf->len)
		x->hazard = 1;
	for (int64_t j = 0; j < xf->nrecv; j++) {
		int64_t t = tile_mod(dt + j * xf->recv_step, T);
		Instr *r = next_instr(x, t);
		if (!r || r->kind != I_RECV || r->len != xf->len || r->peer != st) {
			return errf(m->e, "tile %lld, phase %d: the table's next instruction is not the "
				    "receive of %lld bytes from tile %lld the schedule needs (step %d)",
				    (long long)t, x->phase, (long long)xf->len, (long long)st, xf->step);
		}
		if (r->addr < 0 || r->addr + xf->len > m->s.sram || check_stray(x, xf, t, r->addr, xf->len)) {
			if (r->addr < 0 || r->addr + xf->len > m->s.sram)
				return errf(m->e, "tile %lld, phase %d: receive address %lld out of SRAM",
					    (long long)t, x->phase, (long long)r->addr);
			return -1;
		}
		sim_tile(&m->s, t);
		push_move(x, (Move){ st, sa0, t, r->addr, xf->len, x->nfrag });
	}
	x->nfrag++;
	return 0;
}


/* Fills a copy's destination shards with 0xA5, but those that alias the
 * source's shard on their tile (the same buffer). */
typedef struct {
	Machine_ *m;
	int src, dst;
} Poison;

static int poison(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Poison *q = ctx;
	Layout l = place_layout(p, idx);
	(void)rep;
	if (q->m->pl->p[q->src].addr == p->addr && place_aliases(q->m->pl, q->src, q->dst, idx, t))
		return 0;
	memset(sim_tile(&q->m->s, t) + p->addr, 0xA5, (size_t)layout_bytes(&l));
	return 0;
}

/* A member of a local copy (on-tile, or zeros), checked as sim_xfer
 * checks it and kept as moves like a send's. */
static int local_move(void *ctx, const Xfer *xf, int64_t mb, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Exchange *x = ctx;
	Machine_ *m = x->m;
	int64_t T = m->pl->machine.tiles;
	(void)mb;
	if (da < 0 || da + xf->len > m->s.sram || (xf->kind != X_ZERO && (sa < 0 || sa + xf->len > m->s.sram)))
		return errf(m->e, "transfer of step %d: address out of SRAM (tile %lld, %lld)", xf->step,
			    (long long)dt, (long long)da);
	if (xf->kind != X_ZERO) {
		sim_tile(&m->s, st);
		if (sa < x->hi[st] && x->lo[st] < sa + xf->len)
			x->hazard = 1;
	}
	for (int64_t j = 0; j < xf->nrecv; j++) {
		int64_t t = tile_mod(dt + j * xf->recv_step, T);
		if (da < x->lo[t] || da + xf->len > x->hi[t])
			x->local = 1;
		sim_tile(&m->s, t);
		push_move(x, (Move){ xf->kind == X_ZERO ? -1 : st, sa, t, da, xf->len, x->nfrag });
	}
	x->nfrag++;
	return 0;
}

/* Tile t's shard of the step's destination poisoned (as poison does). */
static void poison_tile(Exchange *x, int64_t t)
{
	Machine_ *m = x->m;
	int64_t lin = shards_of(m, x->dst)[t], idx[MAX_RANK];
	if (lin < 0)
		return;
	place_shard_idx(&m->pl->p[x->dst], lin, idx);
	Poison q = { m, x->src, x->dst };
	poison(&q, &m->pl->p[x->dst], idx, NULL, t);
}

typedef struct {
	Exchange *x;
	int part;
	SimCheck *c;            /* this thread's check */
	int bad;                /* a replica failed it */
} MovePart;

/* The shards lin = part mod 2 of the step's destination, each replica's
 * tile poisoned, given its copies in order and checked while its bytes
 * are in cache (the shard's expected image made once for its replicas). */
static void *move_part(void *arg)
{
	MovePart *p = arg;
	Exchange *x = p->x;
	Sim *s = &x->m->s;
	const Placement *dp = &x->m->pl->p[x->dst];
	for (int64_t lin = p->part; lin < place_shards(dp); lin += 2) {
		int64_t idx[MAX_RANK];
		place_shard_idx(dp, lin, idx);
		for (int64_t k = x->sfirst[lin]; k < x->sfirst[lin + 1]; k++) {
			int64_t t = x->stiles[k];
			poison_tile(x, t);
			for (int64_t i = x->first[t]; i < x->first[t + 1]; i++) {
				const Move *v = &x->mv[x->order[i]];
				if (v->st < 0)
					memset(s->mem[v->dt] + v->da, 0, (size_t)v->len);
				else
					memcpy(s->mem[v->dt] + v->da, s->mem[v->st] + v->sa, (size_t)v->len);
			}
			if (!p->bad && sim_check_one(p->c, idx, t))
				p->bad = 1;
		}
	}
	return NULL;
}

/* Counting sort: items 0 .. n - 1, item i's key key[i * stride] in
 * [0, nk), into order, grouped by key and in their own order within one;
 * first[k] (nk + 1 of them) where key k's start. */
static void group_by(const int64_t *key, int64_t stride, int64_t n, int64_t nk, int64_t *first, int64_t *order)
{
	memset(first, 0, (size_t)(nk + 1) * sizeof *first);
	for (int64_t i = 0; i < n; i++)
		first[key[i * stride] + 1]++;
	for (int64_t k = 0; k < nk; k++)
		first[k + 1] += first[k];
	int64_t *at = xmalloc((size_t)(nk + 1) * sizeof *at);
	memcpy(at, first, (size_t)(nk + 1) * sizeof *at);
	for (int64_t i = 0; i < n; i++)
		order[at[key[i * stride]]++] = i;
	free(at);
}

/* The step's destination poisoned and its checked copies (receives and
 * local copies) made, as if each were made when checked: when no copy
 * reads the destination and every one writes inside it, every byte a
 * copy reads is the same whenever it is read, so each destination tile
 * is poisoned, gets its copies in order and is checked while its bytes
 * are in cache, the shards split over two threads; otherwise the
 * destination is poisoned first and the copies made in order, each send
 * or local copy from a copy of its bytes taken first. Returns 1 when
 * every replica was checked and matched, else 0 (the caller checks the
 * placement, and names the first difference). */
static int make_moves(Exchange *x, int ph)
{
	Machine_ *m = x->m;
	const Plan *pl = m->pl;
	int64_t T = pl->machine.tiles;
	const int64_t *ds = shards_of(m, x->dst);
	for (int64_t t = 0; t < T; t++)          /* allocated before any thread */
		if (ds[t] >= 0)
			sim_tile(&m->s, t);
	double t0 = run_now();
	if (!x->hazard && !x->local && sim_threads() > 1) {
		x->order = xrealloc(x->order, (size_t)(x->nmv + 1) * sizeof *x->order);
		if (x->nmv)
			group_by(&x->mv[0].dt, (int64_t)(sizeof *x->mv / sizeof x->mv[0].dt), x->nmv, T, x->first,
				 x->order);
		else
			memset(x->first, 0, (size_t)(T + 1) * sizeof *x->first);
		/* the destination's tiles by shard (the tiles with none last, not visited) */
		int64_t ns = place_shards(&pl->p[x->dst]), *key = xmalloc((size_t)T * sizeof *key);
		for (int64_t t = 0; t < T; t++)
			key[t] = ds[t] >= 0 ? ds[t] : ns;
		x->sfirst = xrealloc(x->sfirst, (size_t)(ns + 2) * sizeof *x->sfirst);
		x->stiles = xrealloc(x->stiles, (size_t)T * sizeof *x->stiles);
		group_by(key, 1, T, ns + 1, x->sfirst, x->stiles);
		free(key);
		MovePart mp[2] = { { x, 0, sim_check_begin(&m->s, pl, x->dst, ph), 0 },
				   { x, 1, sim_check_begin(&m->s, pl, x->dst, ph), 0 } };
		pthread_t th;
		if (pthread_create(&th, NULL, move_part, &mp[1]) == 0) {
			move_part(&mp[0]);
			pthread_join(th, NULL);
		} else {
			move_part(&mp[0]);
			move_part(&mp[1]);
		}
		sim_check_end(mp[0].c);
		sim_check_end(mp[1].c);
		stats.move_secs += run_now() - t0;
		x->nmv = 0;
		return !mp[0].bad && !mp[1].bad;
	}
	Poison q = { m, x->src, x->dst };
	sim_each2(&m->s, &pl->p[x->dst], poison, &q, &q);     /* poison only reads q */
	double t1 = run_now();
	stats.poison_secs += t1 - t0;
	for (int64_t i = 0; i < x->nmv; i++)   /* the snapshot buffer: the longest copy */
		if (x->mv[i].len > x->nbuf) {
			free(x->buf);
			x->nbuf = x->mv[i].len;
			x->buf = xmalloc((size_t)x->nbuf);
		}
	int64_t frag = -1;
	for (int64_t i = 0; i < x->nmv; i++) {
		const Move *v = &x->mv[i];
		if (v->st < 0) {
			memset(m->s.mem[v->dt] + v->da, 0, (size_t)v->len);
			continue;
		}
		if (v->frag != frag) {          /* a send's bytes as they are before its receives */
			memcpy(x->buf, m->s.mem[v->st] + v->sa, (size_t)v->len);
			frag = v->frag;
		}
		memcpy(m->s.mem[v->dt] + v->da, x->buf, (size_t)v->len);
	}
	stats.move_secs += run_now() - t1;
	x->nmv = 0;
	return 0;
}

/* One thread's share of a phase's tables: the entries of tiles t = part
 * mod 2, in order; its first failure. */
typedef struct {
	const Program *prog;
	Exchange *x;
	int ph, part, bad;
	Err e;
} RowPart;

static void *rows_part(void *arg)
{
	RowPart *r = arg;
	const Program *prog = r->prog;
	for (int i = 0; i < prog->nent; i++) {
		const Entry *en = &prog->ent[i];
		if (en->phase != r->ph || en->tile % 2 != r->part)
			continue;
		if (program_row(prog, i, &r->x->row[en->tile], &r->x->n[en->tile], &r->e)) {
			r->bad = i;
			break;
		}
	}
	return NULL;
}

/* Phase ph's tables decoded, the tiles over two threads; the error is the
 * first entry's that fails, as one pass in order reports it. */
static int decode_tables(const Program *prog, int ph, Exchange *x, Err *e)
{
	RowPart rp[2] = { { prog, x, ph, 0, -1, { { 0 } } }, { prog, x, ph, 1, -1, { { 0 } } } };
	pthread_t th;
	if (sim_threads() > 1 && pthread_create(&th, NULL, rows_part, &rp[1]) == 0) {
		rows_part(&rp[0]);
		pthread_join(th, NULL);
	} else {
		rows_part(&rp[0]);
		rows_part(&rp[1]);
	}
	const RowPart *bad = NULL;
	for (int k = 0; k < 2; k++)
		if (rp[k].bad >= 0 && (!bad || rp[k].bad < bad->bad))
			bad = &rp[k];
	if (!bad)
		return 0;
	*e = bad->e;
	return -1;
}

static int run_phase(Machine_ *m, const Program *prog, int ph, int first, int last)
{
	const Plan *pl = m->pl;
	int64_t T = pl->machine.tiles;
	Exchange x = { m, xcalloc((size_t)T, sizeof *x.row), xcalloc((size_t)T, sizeof *x.n),
		       xcalloc((size_t)T, sizeof *x.cur), ph, 0, NULL, 0,
		       xmalloc((size_t)T * sizeof *x.lo), xmalloc((size_t)T * sizeof *x.hi), NULL, 0, 0, 0, 0, 0,
		       xmalloc((size_t)(T + 1) * sizeof *x.first), NULL, NULL, NULL, 0, 0 };
	int rc = 0;
	double t0 = run_now(), t1;

	if (ph >= 0)
		rc = decode_tables(prog, ph, &x, m->e);
	stats.table_secs += (t1 = run_now()) - t0;
	/* Step by step (records follow step order): a destination is poisoned
	 * just before its step moves anything, since a placement that dies
	 * earlier in the phase may share its address, and checked when its
	 * step ends, since one that dies later in the phase may be reused. */
	int i = 0;
	for (int s = first; s <= last && !rc; s++) {
		if (pl->s[s].kind != STEP_COPY)
			continue;
		for (int64_t t = 0; t < T; t++)         /* where a receive of this step may write */
			if (!shard_range(m, pl->s[s].dst, t, &x.lo[t], &x.hi[t]))
				x.lo[t] = 1, x.hi[t] = 0;
		x.src = pl->s[s].src, x.dst = pl->s[s].dst;
		x.hazard = x.local = 0, x.nmv = x.nfrag = 0;
		while (i < pl->nx && pl->x[i].step < s)
			i++;
		for (; i < pl->nx && pl->x[i].step == s && !rc; i++) {    /* checked, in order */
			const Xfer *xf = &pl->x[i];
			if (xf->kind == X_SEND) {
				if (ph < 0)
					rc = errf(m->e, "step %d: a send outside every phase", xf->step);
				else
					rc = xfer_each(xf, T, fragment, &x) ? -1 : 0;
			} else {
				Xfer lx = *xf;          /* a local copy from a stacked home: this iteration's instance */
				int src = pl->s[s].src;
				if (lx.kind == X_LOCAL && plan_stacked(pl, src))
					lx.src_addr += m->s.iter * place_instance(&pl->p[src]);
				rc = xfer_each(&lx, T, local_move, &x) ? -1 : 0;
			}
		}
		stats.route_secs += (t0 = run_now()) - t1;
		int checked = !rc && make_moves(&x, ph);
		t1 = run_now();
		if (!rc && !checked)
			rc = sim_check_placement(&m->s, pl, pl->s[s].dst, ph, m->e);
		stats.check_secs += (t0 = run_now()) - t1;
		t1 = t0;
	}
	for (int64_t t = 0; t < T && !rc; t++)
		if (x.row[t] && x.cur[t] != x.n[t])
			rc = errf(m->e, "tile %lld, phase %d: %d instructions of its table were not used by "
				  "the schedule", (long long)t, ph, x.n[t] - x.cur[t]);
	for (int64_t t = 0; t < T; t++)
		free(x.row[t]);
	free(x.row);
	free(x.n);
	free(x.cur);
	free(x.buf);
	free(x.lo);
	free(x.hi);
	free(x.mv);
	free(x.first);
	free(x.order);
	free(x.sfirst);
	free(x.stiles);
	return rc;
}

int run_program(const Program *prog, const Plan *pl, const RunOpts *o, float **val, Err *e)
{
	tables();
	Machine_ m;
	Values vs = { pl, o, val, xcalloc((size_t)pl->nt + 1, sizeof *vs.enc) };
	int rc = 0, ph = 0;

	memset(&m, 0, sizeof m);
	m.pl = pl;
	m.val = val;
	m.vs = &vs;
	double setup = run_now();
	for (int t = 0; t < pl->nt; t++)
		enc_update(&vs, t);
	cache_filled(o->cache);
	stats.encode_secs += run_now() - setup;
	m.e = e;
	m.ts = xcalloc((size_t)pl->np, sizeof *m.ts);
	for (int i = 0; i < 2; i++)
		m.kv[i][0].from.exec = m.kv[i][1].from.exec = -1;
	sim_init(&m.s, &pl->machine, 0);
	m.s.elem = elem_bytes;
	m.s.elem_ctx = &vs;
	setup = run_now();
	for (int p = 0; p < pl->np; p++)
		if (plan_writer(pl, p) < 0)
			sim_fill(&m.s, pl, p);
	stats.fill_secs += run_now() - setup;
	int rep = -1;
	for (int i = 0; !rc;) {
		if (rep >= 0 && i > pl->r[rep].last) {
			if (++m.s.iter < pl->r[rep].count) {
				i = pl->r[rep].first;   /* the next iteration runs the same body */
				ph = 0;
				continue;
			}
			m.s.iter = 0;
			rep = -1;
		}
		if (i >= pl->ns)
			break;
		if (rep < 0 && (rep = plan_repeat_of(pl, i)) >= 0)
			m.s.iter = 0;           /* entering a repeat */
		while (ph < pl->nph && pl->ph[ph].last < i)
			ph++;
		double t0 = run_now();
		if (pl->s[i].kind == STEP_COMPUTE) {
			rc = compute(&m, i);
			i++;
			stats.compute_secs += run_now() - t0;
			continue;
		}
		if (ph < pl->nph && pl->ph[ph].first <= i) {
			rc = run_phase(&m, prog, ph, pl->ph[ph].first, pl->ph[ph].last);
			i = pl->ph[ph].last + 1;
		} else {
			rc = run_phase(&m, prog, -1, i, i);     /* on-tile copies only */
			i++;
		}
		stats.phase_secs += run_now() - t0;
	}
	if (rc && rep >= 0) {
		char why[sizeof e->msg];
		memcpy(why, e->msg, sizeof why);
		errf(e, "iteration %lld of repeat '%s': %s", (long long)m.s.iter, pl->r[rep].name, why);
	}
	for (int p = 0; p < pl->np; p++)
		free(m.ts[p].shard);
	for (int i = 0; i < 2; i++) {
		for (int j = 0; j < 4; j++)
			free(m.scr[i][j]);
		free(m.kv[i][0].p);
		free(m.kv[i][1].p);
	}
	cache_filled(o->cache);
	for (int t = 0; t < pl->nt; t++)
		if (!cache_holds(o->cache, vs.enc[t]))
			free(vs.enc[t]);
	free(vs.enc);
	free(m.ts);
	sim_free(&m.s);
	return rc;
}

/* ---- the FP32 reference ---- */

static int is_gemm_op(const Plan *pl, const char *op)
{
	for (int g = 0; g < pl->ng; g++)
		if (strcmp(pl->g[g].op, op) == 0)
			return g;
	return -1;
}

/* C[M x N] += A[M x K] B[K x N] (+ bias), rows split over two threads. */
typedef struct {
	const float *A, *B, *bias;
	float *C;
	int64_t r0, r1, K, N;
	double cpu;             /* the thread's CPU seconds on it */
} Gemm_;

static void *gemm_rows(void *arg)
{
	Gemm_ *g = arg;
	double cpu0 = thread_cpu();
	run_gemm_ref(g->A + g->r0 * g->K, g->B, g->C + g->r0 * g->N, g->r1 - g->r0, g->K, g->N);
	for (int64_t r = g->r0; g->bias && r < g->r1; r++)
		for (int64_t n = 0; n < g->N; n++)
			g->C[r * g->N + n] += g->bias[n];
	g->cpu = thread_cpu() - cpu0;
	return NULL;
}

static void gemm2(const float *A, const float *B, const float *bias, float *C, int64_t M, int64_t K,
		  int64_t N)
{
	Gemm_ g[2] = { { A, B, bias, C, 0, M / 2, K, N, 0 }, { A, B, bias, C, M / 2, M, K, N, 0 } };
	pthread_t th;
	double t0 = run_now();
	stats.ref_gemm_flops += 2.0 * (double)M * (double)K * (double)N;
	if (M >= 64 && sim_threads() > 1 && pthread_create(&th, NULL, gemm_rows, &g[1]) == 0) {
		gemm_rows(&g[0]);
		pthread_join(th, NULL);
	} else {
		g[0].r1 = M;
		gemm_rows(&g[0]);
	}
	stats.ref_gemm_secs += run_now() - t0;
	stats.ref_gemm_cpu += g[0].cpu + g[1].cpu;
}

/* The stage's reference as it runs: values per plan tensor (inputs and
 * parameters shared with the data, not copied) and the lazy parameters'
 * current instances. */
typedef struct {
	const Plan *pl;
	const RunOpts *o;
	float **ref;
	Lazy lz;
} PRef;

/* A tensor's values in the current iteration: a stacked one's instance. */
static float *inst(PRef *c, int t, int64_t iter)
{
	const Plan *pl = c->pl;
	if (!c->ref[t] && pl->t[t].count > 1 && (pl->t[t].role == R_PARAM || pl->t[t].role == R_INPUT)) {
		DataSpec d = plan_spec(pl, t);   /* a lazy one (run_data left it NULL) */
		return lazy_get(&c->lz, t, &d, c->o, iter);
	}
	return pl->t[t].count > 1 ? c->ref[t] + iter * tensor_count(&pl->t[t]) : c->ref[t];
}

static void track(double *amax, int t, const float *y, int64_t n)
{
	for (int64_t i = 0; amax && i < n; i++)
		if (fabs((double)y[i]) > amax[t])
			amax[t] = fabs((double)y[i]);
}

/* Attention for the reference: every (batch entry, head) with index %
 * parts == part. q [B, Tq, qw] (the head's columns from h * D), kv [B, Tk,
 * kw] (keys from column ko, values from ko + C), y [B, Tq, C]. Products
 * in fp32 (run_gemm_ref), the softmax's statistics and exponentials in
 * double. */
typedef struct {
	const float *q, *kv;
	float *y;
	int64_t B, Tq, Tk, qw, kw, C, H, ko;
	double scale;
	int part, parts;
} RefAttn;

static void *ref_attention(void *arg)
{
	RefAttn *a = arg;
	int64_t B = a->B, Tq = a->Tq, Tk = a->Tk, H = a->H, C = a->C;
	int64_t D = C / H, qw = a->qw, kw = a->kw, vo = a->ko + C;
	float *qh = xmalloc((size_t)(Tq * D) * sizeof *qh), *kt = xmalloc((size_t)(Tk * D) * sizeof *kt);
	float *vv = xmalloc((size_t)(Tk * D) * sizeof *vv), *s = xmalloc((size_t)(Tq * Tk) * sizeof *s);
	float *o = xmalloc((size_t)(Tq * D) * sizeof *o);
	double *l = xmalloc((size_t)Tq * sizeof *l);
	for (int64_t bh = a->part; bh < B * H; bh += a->parts) {
		int64_t bb = bh / H, h = bh % H;
		for (int64_t i = 0; i < Tq; i++)
			memcpy(qh + i * D, a->q + (bb * Tq + i) * qw + h * D, (size_t)D * sizeof *qh);
		for (int64_t j = 0; j < Tk; j++)
			for (int64_t d = 0; d < D; d++) {
				kt[d * Tk + j] = a->kv[(bb * Tk + j) * kw + a->ko + h * D + d];
				vv[j * D + d] = a->kv[(bb * Tk + j) * kw + vo + h * D + d];
			}
		memset(s, 0, (size_t)(Tq * Tk) * sizeof *s);
		run_gemm_ref(qh, kt, s, Tq, D, Tk);
		for (int64_t i = 0; i < Tq; i++) {
			float *p = s + i * Tk;
			double mx = -INFINITY, sum = 0;
			for (int64_t j = 0; j < Tk; j++)
				mx = p[j] * a->scale > mx ? p[j] * a->scale : mx;
			for (int64_t j = 0; j < Tk; j++) {
				double x = exp(p[j] * a->scale - mx);
				sum += x;
				p[j] = (float)x;
			}
			l[i] = sum;
		}
		memset(o, 0, (size_t)(Tq * D) * sizeof *o);
		run_gemm_ref(s, vv, o, Tq, Tk, D);
		for (int64_t i = 0; i < Tq; i++)
			for (int64_t d = 0; d < D; d++)
				a->y[(bb * Tq + i) * C + h * D + d] = (float)(o[i * D + d] / l[i]);
	}
	free(qh);
	free(kt);
	free(vv);
	free(s);
	free(o);
	free(l);
	return NULL;
}

/* The reference's attention on two threads: q [B, Tq, qw], kv [B, Tk, kw]
 * (fused: kv == q, keys after the C query columns), y [B, Tq, C]. */
static void ref_attend(const float *q, const float *kv, float *y, int64_t B, int64_t Tq, int64_t Tk,
		       int64_t qw, int64_t kw, int64_t C, int64_t H, int fused, double scale)
{
	RefAttn ra = { q, kv, y, B, Tq, Tk, qw, kw, C, H, fused ? C : 0, scale, 0, 2 };
	RefAttn rb = ra;
	pthread_t th;
	rb.part = 1;
	if (sim_threads() > 1 && pthread_create(&th, NULL, ref_attention, &rb) == 0) {
		ref_attention(&ra);
		pthread_join(th, NULL);
	} else {
		ra.parts = 1;
		ref_attention(&ra);
	}
}

/* Layernorm of rows of C values in double: mean and variance over the
 * row, then (x - mean) / sqrt(var + eps) * g + b. */
static void ref_layernorm(const float *x, const float *g, const float *b, float *y, int64_t rows, int64_t C,
			  double eps)
{
	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * C;
		double mean = 0, var = 0;
		for (int64_t c = 0; c < C; c++)
			mean += xr[c];
		mean /= (double)C;
		for (int64_t c = 0; c < C; c++)
			var += (xr[c] - mean) * (xr[c] - mean);
		var /= (double)C;
		double inv = 1 / sqrt(var + eps);
		for (int64_t c = 0; c < C; c++)
			y[r * C + c] = (float)((xr[c] - mean) * inv * g[c] + b[c]);
	}
}

/* y[i] = x[i] + b[i % nb]: b may be a [tokens, features] table added to
 * every batch entry. */
static void ref_add(const float *x, const float *b, float *y, int64_t n, int64_t nb)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] + b[i % nb];
}

/* One op-level step of the reference (GEMMs at their first step). */
static void ref_step(PRef *c, int s, const int *gemm_at, int64_t iter)
{
	const Plan *pl = c->pl;
	float **ref = c->ref;
	const Step *st = &pl->s[s];
	if (gemm_at[s] >= 0) {
		const Gemm *G = &pl->g[gemm_at[s]];
		int64_t M = G->m, K = G->k, N = G->n;
		float *y = xzeroed((size_t)(M * N), sizeof *y);   /* read before written */
		gemm2(ref[G->a], inst(c, G->b, iter), G->bias >= 0 ? inst(c, G->bias, iter) : NULL,
		      y, M, K, N);
		free(ref[G->out]);
		ref[G->out] = y;
		
		return;
	}
	int out = pl->p[st->out].tensor, in = pl->p[st->in[0]].tensor;
	if (st->compute == C_ATTENTION && pl->t[out].role == R_PARTIAL)
		for (int k = s + 1; k < pl->ns; k++)    /* key blocks: the op's result is the merge's */
			if (pl->s[k].kind == STEP_COMPUTE && pl->s[k].compute == C_MERGE &&
			    strcmp(pl->s[k].op, st->op) == 0) {
				out = pl->p[pl->s[k].out].tensor;
				break;
			}
	int64_t n = tensor_count(&pl->t[out]), C = pl->t[out].shape[pl->t[out].rank - 1];
	float *y = xmalloc((size_t)n * sizeof *y);
	const float *x = inst(c, in, iter);
	switch (st->compute) {
	case C_GELU:
		for (int64_t i = 0; i < n; i++)
			y[i] = gelu(x[i]);
		break;
	case C_ADD: {
		int bt = pl->p[st->in[1]].tensor;
		ref_add(x, inst(c, bt, iter), y, n, tensor_count(&pl->t[bt]));
		break;
	}
	case C_BROADCAST:
		for (int64_t i = 0, nx = tensor_count(&pl->t[in]); i < n; i++)
			y[i] = x[i % nx];
		break;
	case C_LAYERNORM:
		ref_layernorm(x, inst(c, pl->p[st->in[1]].tensor, iter),
			      inst(c, pl->p[st->in[2]].tensor, iter), y, n / C, C, st->eps);
		break;
	case C_ATTENTION: {
		const PTensor *Q = &pl->t[in], *KV = &pl->t[pl->p[st->in[1]].tensor];
		ref_attend(x, ref[pl->p[st->in[1]].tensor], y, Q->shape[0], Q->shape[1], KV->shape[1],
			   Q->shape[2], KV->shape[2], C, st->heads, Q == KV, st->scale);
		break;
	}
	default:        /* a cast op or a carry: activations stay fp32 */
		memcpy(y, x, (size_t)n * sizeof *y);
		break;
	}
	free(ref[out]);
	ref[out] = y;
	
}

int run_reference(const Plan *pl, const RunOpts *o, float *const *val, float **ref, Err *e)
{
	PRef c = { pl, o, ref, { NULL, NULL, 0 } };
	(void)e;
	lazy_init(&c.lz, pl->nt);
	for (int t = 0; t < pl->nt; t++)
		ref[t] = pl->t[t].role == R_INPUT || pl->t[t].role == R_PARAM ? val[t] : NULL;
	/* Op-level steps: every compute but those inside a matmul (casts,
	 * packs, partial products, reductions), which stand for the GEMM
	 * record at the op's first compute step. */
	int *gemm_at = xmalloc((size_t)pl->ns * sizeof *gemm_at);
	char *skip = xcalloc((size_t)pl->ns + 1, 1), *seen = xcalloc((size_t)pl->ng + 1, 1);
	for (int s = 0; s < pl->ns; s++) {
		int g = pl->s[s].kind == STEP_COMPUTE ? is_gemm_op(pl, pl->s[s].op) : -1;
		gemm_at[s] = -1;
		skip[s] = pl->s[s].kind != STEP_COMPUTE || (g >= 0 && seen[g]) ||
			  pl->s[s].compute == C_MERGE;  /* its attention step stands for the op */
		if (g >= 0 && !seen[g])
			gemm_at[s] = g, seen[g] = 1;
	}
	for (int s = 0; s < pl->ns; s++) {
		int r = plan_repeat_of(pl, s);
		if (r >= 0 && s == pl->r[r].first) {
			for (int64_t it = 0; it < pl->r[r].count; it++)
				for (int b = pl->r[r].first; b <= pl->r[r].last; b++)
					if (!skip[b])
						ref_step(&c, b, gemm_at, it);
			s = pl->r[r].last;
			continue;
		}
		if (!skip[s])
			ref_step(&c, s, gemm_at, 0);
	}
	for (int t = 0; t < pl->nt; t++)        /* the shared data stays the caller's */
		if (pl->t[t].role == R_INPUT || pl->t[t].role == R_PARAM)
			ref[t] = NULL;
	lazy_free(&c.lz);
	free(gemm_at);
	free(skip);
	free(seen);
	return 0;
}

/* ---- the reference from the model ---- */

static int64_t mtensor_count(const MTensor *t)
{
	int64_t n = 1;
	for (int a = 0; a < t->rank; a++)
		n *= t->shape[a];
	return n;
}

static DataSpec model_spec(const Model *m, const Scales *sc, int t)
{
	const MTensor *x = &m->t[t];
	int scale = x->scale;
	if (x->dtype == FMT_FP8)
		scales_find(sc, x->name, &scale);
	return (DataSpec){ x->name, x->rank, x->shape, x->count, x->dtype, scale, model_dist(m, t) };
}

int run_model_data(const Model *m, const Scales *sc, const RunOpts *o, const Plan *pl, float *const *pval,
		   ModelRef *r, Err *e)
{
	memset(r, 0, sizeof *r);
	r->n = m->nt;
	r->v = xcalloc((size_t)m->nt + 1, sizeof *r->v);
	r->own = xcalloc((size_t)m->nt + 1, 1);
	Lazy z;
	lazy_init(&z, m->nt);
	r->inst = z.buf, r->at = z.at;
	r->sc = sc;
	r->o = *o;
	if (data_dir_ok(o, e))
		return -1;
	for (int i = 0; i < m->nt; i++) {
		if (m->t[i].role == T_ACT)
			continue;
		DataSpec d = model_spec(m, sc, i);
		if (lazy(&d, o))
			continue;               /* made an instance at a time (minst) */
		int t = pl && pval ? plan_find_tensor(pl, d.name) : -1;
		if (t >= 0 && pval[t] && (pl->t[t].role == R_INPUT || pl->t[t].role == R_PARAM)) {
			DataSpec q = plan_spec(pl, t);
			if (same_spec(&d, &q)) {        /* made the same way: the same values */
				r->v[i] = pval[t];
				continue;
			}
		}
		r->v[i] = xmalloc((size_t)spec_values(&d) * sizeof *r->v[i]);
		r->own[i] = 1;
		if (tensor_data(&d, o, r->v[i], e))
			return -1;
	}
	return 0;
}

/* Tensor t's values in iteration iter: a stacked parameter's instance. */
static float *minst(const Model *m, ModelRef *r, int t, int64_t iter)
{
	if (!r->v[t] && m->t[t].count > 1 && m->t[t].role != T_ACT) {
		Lazy z = { r->inst, r->at, r->n };     /* a lazy one */
		DataSpec d = model_spec(m, r->sc, t);
		return lazy_get(&z, t, &d, &r->o, iter);
	}
	return m->t[t].count > 1 ? r->v[t] + iter * mtensor_count(&m->t[t]) : r->v[t];
}

static void mset(const Model *m, ModelRef *r, int t, float *y)
{
	if (r->own[t])
		free(r->v[t]);
	r->v[t] = y;
	r->own[t] = 1;
	track(r->amax, t, y, mtensor_count(&m->t[t]));
}

/* One op of the model on fp32 values (formats/model.md): no cast inside a
 * matmul, a cast op keeps its input's values, every result fp32. */
static void model_op(const Model *m, ModelRef *r, int k, int64_t iter)
{
	const MOp *op = &m->ops[k];
	const MTensor *out = &m->t[op->out], *in = &m->t[op->in[0]];
	int64_t n = mtensor_count(out), C = out->shape[out->rank - 1];
	const float *x = minst(m, r, op->in[0], iter);
	float *y;
	if (op->kind == OP_MATMUL) {
		const MTensor *b = &m->t[op->in[1]];
		int64_t K = b->shape[0], N = b->shape[1], M = mtensor_count(in) / K;
		y = xzeroed((size_t)(M * N), sizeof *y);   /* read before written */
		gemm2(x, minst(m, r, op->in[1], iter), op->in[2] >= 0 ? minst(m, r, op->in[2], iter) : NULL, y,
		      M, K, N);
		mset(m, r, op->out, y);
		return;
	}
	y = xmalloc((size_t)n * sizeof *y);
	switch (op->kind) {
	case OP_GELU:
		for (int64_t i = 0; i < n; i++)
			y[i] = gelu(x[i]);
		break;
	case OP_ADD:
		ref_add(x, minst(m, r, op->in[1], iter), y, n, mtensor_count(&m->t[op->in[1]]));
		break;
	case OP_BROADCAST:
		for (int64_t i = 0, nx = mtensor_count(in); i < n; i++)
			y[i] = x[i % nx];
		break;
	case OP_LAYERNORM:
		ref_layernorm(x, minst(m, r, op->in[1], iter), minst(m, r, op->in[2], iter), y, n / C, C, op->eps);
		break;
	case OP_ATTENTION: {
		const MTensor *kv = &m->t[op->in[1]];
		ref_attend(x, minst(m, r, op->in[1], iter), y, in->shape[0], in->shape[1], kv->shape[1],
			   in->shape[2], kv->shape[2], C, op->heads, op->in[0] == op->in[1],
			   1.0 / sqrt((double)(C / op->heads)));
		break;
	}
	case OP_PATCHIFY:
		patchify(x, in->shape[0], in->shape[1], in->shape[2], in->shape[3], op->patch, op->cls, y);
		break;
	default:        /* cast: the reference keeps fp32 */
		memcpy(y, x, (size_t)n * sizeof *y);
		break;
	}
	mset(m, r, op->out, y);
}

void run_model_ops(const Model *m, ModelRef *r)
{
	for (int k = 0; k < m->nops; k++) {
		int ri = m->ops[k].rep;
		if (ri < 0) {
			model_op(m, r, k, 0);
			continue;
		}
		const MRepeat *rp = &m->rep[ri];
		int64_t n = mtensor_count(&m->t[rp->carry]);
		float *c = xmalloc((size_t)n * sizeof *c);
		memcpy(c, r->v[rp->in], (size_t)n * sizeof *c);
		mset(m, r, rp->carry, c);
		for (int64_t it = 0; it < rp->count; it++) {
			for (int b = rp->first; b <= rp->last; b++)
				model_op(m, r, b, it);
			memcpy(r->v[rp->carry], r->v[m->ops[rp->last].out], (size_t)n * sizeof *c);
			track(r->amax, rp->carry, r->v[rp->carry], n);
		}
		k = rp->last;
	}
}

int run_model_reference(const Model *m, const Scales *sc, const RunOpts *o, const Plan *pl,
			float *const *pval, ModelRef *r, Err *e)
{
	if (run_model_data(m, sc, o, pl, pval, r, e))
		return -1;
	run_model_ops(m, r);
	return 0;
}

void model_ref_free(ModelRef *r)
{
	for (int i = 0; i < r->n; i++) {
		if (r->own[i])
			free(r->v[i]);
		if (r->inst)
			free(r->inst[i]);
	}
	free(r->inst);
	free(r->at);
	free(r->v);
	free(r->own);
	free(r->amax);
	memset(r, 0, sizeof *r);
}

static int tensor_is(const Plan *pl, int t, const Model *m, int mt)
{
	return t >= 0 && mt >= 0 && strcmp(pl->t[t].name, m->t[mt].name) == 0;
}

int run_check_model(const Plan *pl, const Model *m, const Scales *sc, Err *e)
{
	const char *f = m->file;
	if (strcmp(pl->model, m->name))
		return errf(e, "%s: the program lowers model '%s', not '%s'", f, pl->model, m->name);
	for (int i = 0; i < m->nt; i++) {
		const MTensor *x = &m->t[i];
		int t = plan_find_tensor(pl, x->name);
		if (t < 0)
			return err_at(e, f, x->line, x->col, "tensor '%s' is not in the program's stage", x->name);
		const PTensor *y = &pl->t[t];
		int same = y->rank == x->rank && y->count == x->count;
		for (int k = 0; same && k < x->rank; k++)
			same = y->shape[k] == x->shape[k];
		if (!same)
			return err_at(e, f, x->line, x->col, "tensor '%s': the stage gives it another shape or "
				      "instance count", x->name);
		if (y->fmt != x->dtype)
			return err_at(e, f, x->line, x->col, "tensor '%s': the stage says %s, the model %s",
				      x->name, fmt_name(y->fmt), fmt_name(x->dtype));
		int want = x->scale;
		if (x->dtype == FMT_FP8)
			scales_find(sc, x->name, &want);
		if (x->dtype == FMT_FP8 && y->scale != want)
			return err_at(e, f, x->line, x->col, "tensor '%s': the stage's fp8 scale is %d, %s %d",
				      x->name, y->scale, sc ? "the scales file's (or the model's)" : "the model's",
				      want);
		if (x->output != (y->role == R_OUTPUT))
			return err_at(e, f, x->line, x->col, "tensor '%s' is %san output of the model but %san "
				      "output of the stage", x->name, x->output ? "" : "not ", x->output ? "not " : "");
		char cast[300];
		snprintf(cast, sizeof cast, "%s.fp8", x->name);
		int c = plan_find_tensor(pl, cast), cw = 0;
		scales_find(sc, x->name, &cw);
		if (c >= 0 && pl->t[c].scale != cw)
			return err_at(e, f, x->line, x->col, "tensor '%s': the stage's cast '%s' has fp8 scale %d, "
				      "%s %d", x->name, cast, pl->t[c].scale, sc ? "the scales file's" : "the default",
				      cw);
	}
	for (int t = 0; t < pl->nt; t++) {
		int known = 0;
		for (int i = 0; !known && i < m->nt; i++)
			known = strcmp(m->t[i].name, pl->t[t].name) == 0;
		if (pl->t[t].role == R_OUTPUT && !known)
			return errf(e, "%s: the stage's output '%s' is not a tensor of the model", f, pl->t[t].name);
	}
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		int steps = 0;
		for (int s = 0; s < pl->ns; s++) {
			const Step *st = &pl->s[s];
			if (strcmp(st->op, op->name))
				continue;
			steps++;
			if (op->kind == OP_LAYERNORM && st->kind == STEP_COMPUTE && st->compute == C_LAYERNORM &&
			    st->eps != op->eps)
				return err_at(e, f, op->line, op->col, "op '%s': the stage's layernorm step %d has "
					      "eps %g, the model %g", op->name, s, st->eps, op->eps);
		}
		for (int h = 0; op->kind == OP_PATCHIFY && h < pl->nh; h++)
			steps += strcmp(pl->h[h].op, op->name) == 0;
		if (!steps)
			return err_at(e, f, op->line, op->col, "op '%s' has no step in the program's stage",
				      op->name);
		if (op->kind != OP_MATMUL)
			continue;
		const Gemm *g = NULL;
		for (int k = 0; k < pl->ng; k++)
			if (strcmp(pl->g[k].op, op->name) == 0)
				g = &pl->g[k];
		if (!g || !tensor_is(pl, g->a, m, op->in[0]) || !tensor_is(pl, g->b, m, op->in[1]) ||
		    !tensor_is(pl, g->out, m, op->out) ||
		    (op->in[2] >= 0 ? !tensor_is(pl, g->bias, m, op->in[2]) : g->bias >= 0))
			return err_at(e, f, op->line, op->col, "matmul '%s': the stage's GEMM record does not "
				      "read and write the model's a, b, bias and out", op->name);
	}
	return 0;
}

int run_check_texts(const Plan *pl, const char *model, size_t mlen, const char *mname,
		    const char *scales, size_t slen, const char *sname, Err *e)
{
	Model md;
	Scales sc = { NULL, NULL, 0 };
	Input *in = input_open_mem(mname, model, mlen, e);
	if (!in || model_load_input(&md, in, e))
		return -1;
	int rc = 0;
	if (scales) {
		Input *si = input_open_mem(sname, scales, slen, e);
		rc = !si || scales_load_input(&sc, si, e) ? -1 : 0;
	}
	if (!rc)
		rc = run_check_model(pl, &md, scales ? &sc : NULL, e);
	scales_free(&sc);
	model_free(&md);
	return rc;
}

void run_compare(const float *a, const float *b, int64_t n, double *cosine, double *max_abs)
{
	double ab = 0, aa = 0, bb = 0, m = 0;
	for (int64_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
		double d = fabs((double)a[i] - b[i]);
		if (d > m || isnan(d))
			m = isnan(d) ? INFINITY : d;
	}
	*cosine = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1 : 0);
	*max_abs = m;
}

/* ---- calibration ---- */

static double amax_of(const float *v, int64_t n)
{
	double m = 0;
	for (int64_t i = 0; i < n; i++)
		m = fmax(m, fabs(v[i]));
	return m;
}

int run_calibrate(const Model *m, const RunOpts *ro, Scales *sc, Err *e)
{
	RunOpts raw = *ro;
	ModelRef r;
	int rc = -1;

	raw.quantized = 0;
	if (run_model_data(m, NULL, &raw, NULL, NULL, &r, e))
		goto out;
	/* fp8 parameters and inputs: from their own values, then quantized */
	for (int t = 0; t < m->nt; t++) {
		const MTensor *x = &m->t[t];
		if (x->role == T_ACT)
			continue;
		int scale = x->scale;
		int64_t n = mtensor_count(x) * x->count;
		if (x->dtype == FMT_FP8) {
			scale = scale_for_amax(amax_of(r.v[t], n));
			scales_add(sc, x->name, scale);
		}
		quantize_n(r.v[t], n, x->dtype, scale);
	}
	r.amax = xcalloc((size_t)m->nt + 1, sizeof *r.amax);
	run_model_ops(m, &r);          /* amax over every iteration */
	/* activations cast to fp8: a matmul's a when its b is fp8 (amp-plan's
	 * <a>.fp8), and a cast op's fp8 result */
	for (int t = 0; t < m->nt; t++) {
		int cast = m->t[t].role == T_ACT && m->t[t].dtype == FMT_FP8;
		for (int k = 0; !cast && k < m->nops; k++)
			cast = m->ops[k].kind == OP_MATMUL && m->ops[k].in[0] == t &&
			       m->t[m->ops[k].in[1]].dtype == FMT_FP8 && m->t[t].dtype != FMT_FP8;
		if (cast)
			scales_add(sc, m->t[t].name, scale_for_amax(r.amax[t]));
	}
	rc = 0;
out:
	model_ref_free(&r);
	return rc;
}
