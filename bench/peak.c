/* The machine's peak for a plain fp32 multiply-add loop: y[i] = a*x[i] + y[i]
 * over arrays that stay in L1, on two threads; prints GFLOP/s (2 per
 * element). Built by bench/run.sh with -O3 and, where the CPU has them,
 * AVX2 and FMA. Not a test. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#define N 2048
#define REPS 400000

static void *loop(void *arg)
{
	static float xs[2][N], ys[2][N];
	int k = *(int *)arg;
	float *x = xs[k], *y = ys[k], a = 1.0000001f;
	for (int i = 0; i < N; i++)
		x[i] = 1e-3f * (float)i, y[i] = 0;
	for (int r = 0; r < REPS; r++) {
		for (int i = 0; i < N; i++)
			y[i] = a * x[i] + y[i];
		__asm__ volatile("" : : "r"(y) : "memory");
	}
	return NULL;
}

int main(void)
{
	struct timespec t0, t1;
	pthread_t th;
	int k0 = 0, k1 = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&th, NULL, loop, &k1);
	loop(&k0);
	pthread_join(th, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
	printf("%.2f\n", 2.0 * 2 * N * (double)REPS / s / 1e9);
	return 0;
}
