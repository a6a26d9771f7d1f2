/* This machine's fp32 arithmetic peak, measured: independent chains of
 * x = x * m + c held in registers (no loads or stores), as a separate
 * multiply and add (the machine model's arithmetic: one rounding each) and
 * as a fused multiply-add, with 8-wide (AVX2) and, where the CPU has it,
 * 16-wide (AVX-512) vectors, on one thread and on two. Prints one line per
 * figure, "NAME GFLOP/s", counting 2 flops per lane per chain step:
 *
 *   muladd8-1 muladd8-2 fma8-1 fma8-2 [muladd16-1 muladd16-2 fma16-1 fma16-2]
 *   muladd-best-1 muladd-best-2 fma-best-1
 *
 * bench/run.sh builds it with -O3 -march=native and reports the matrix
 * products against them: their GFLOP per CPU second (per core) against
 * muladd-best-1 (the reference's, fused, against fma-best-1), and their wall-clock rate against muladd-best-2 (what
 * the machine model's GEMM could reach on both cores). Not a test. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define STEPS 20000000L
#define CHAINS 12

typedef struct {
	int width, fused;
	float sink;
} Job;

static void *run(void *arg)
{
	Job *j = arg;
	float out = 0;
#if defined(__AVX2__) && defined(__FMA__)
	if (j->width == 8) {
		__m256 x[CHAINS], m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
		for (int i = 0; i < CHAINS; i++)
			x[i] = _mm256_set1_ps((float)i);
		for (long s = 0; s < STEPS; s++)
			for (int i = 0; i < CHAINS; i++)
				x[i] = j->fused ? _mm256_fmadd_ps(x[i], m, c) : _mm256_add_ps(_mm256_mul_ps(x[i], m), c);
		for (int i = 0; i < CHAINS; i++) {
			float v[8];
			_mm256_storeu_ps(v, x[i]);
			out += v[0];
		}
	}
#endif
#if defined(__AVX512F__)
	if (j->width == 16) {
		__m512 x[CHAINS], m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
		for (int i = 0; i < CHAINS; i++)
			x[i] = _mm512_set1_ps((float)i);
		for (long s = 0; s < STEPS; s++)
			for (int i = 0; i < CHAINS; i++)
				x[i] = j->fused ? _mm512_fmadd_ps(x[i], m, c) : _mm512_add_ps(_mm512_mul_ps(x[i], m), c);
		for (int i = 0; i < CHAINS; i++)
			out += _mm512_reduce_add_ps(x[i]);
	}
#endif
	j->sink = out;
	return NULL;
}

/* GFLOP/s of `threads` threads each running the chains; 0 when this build
 * lacks the width. */
static double measure(int width, int fused, int threads)
{
	Job a = { width, fused, 0 }, b = a;
	pthread_t th;
	struct timespec t0, t1;
#if !(defined(__AVX2__) && defined(__FMA__))
	if (width == 8)
		return 0;
#endif
#if !defined(__AVX512F__)
	if (width == 16)
		return 0;
#endif
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (threads > 1)
		pthread_create(&th, NULL, run, &b);
	run(&a);
	if (threads > 1)
		pthread_join(th, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	if (a.sink == 12345.0f || b.sink == 12345.0f)
		printf("#\n");          /* keeps the results live */
	return 2.0 * width * CHAINS * (double)STEPS * threads / s / 1e9;
}

int main(void)
{
	double best = 0, best1 = 0, fbest1 = 0;
	for (int w = 8; w <= 16; w += 8)
		for (int f = 0; f < 2; f++)
			for (int t = 1; t <= 2; t++) {
				double g = measure(w, f, t);
				if (g <= 0)
					continue;
				printf("%s%d-%d %.1f\n", f ? "fma" : "muladd", w, t, g);
				if (!f && t == 2 && g > best)
					best = g;
				if (!f && t == 1 && g > best1)
					best1 = g;
				if (f && t == 1 && g > fbest1)
					fbest1 = g;
			}
	printf("muladd-best-1 %.1f\n", best1);
	printf("muladd-best-2 %.1f\n", best);
	printf("fma-best-1 %.1f\n", fbest1);
	return 0;
}
