/* The matrix-product kernels alone, one thread, on the shapes amp-run
 * gives them: run_gemm_strips (the machine model's: a separate multiply
 * and add) on a tile's shard product of the 27-layer SigLIP's layer GEMMs, and
 * run_gemm_ref (the FP32 reference's: fused) on the whole products, at
 * each vector width the CPU runs (run_gemm_width). Prints one line per
 * kernel, shape and width: GFLOP/s, best of 3. bench/run.sh does not
 * build it; bench/kernel.sh does, and puts the figures beside peak.c's
 * one-thread peaks. Not a test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "run/run.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *matrix(int64_t n, unsigned seed)
{
	float *v = malloc((size_t)n * sizeof *v);
	if (!v)
		exit(1);
	for (int64_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = (float)((int)(seed >> 16 & 0x7fff) - 16384) * 0x1p-14f;
	}
	return v;
}

/* GFLOP/s of the kernel on M x K x N, best of 3 runs of at least reps
 * products each. The machine's (not fused) runs on operands already in
 * run_gemm_strips's strips and panels, as amp-run decodes shards into
 * them; the reference's runs run_gemm_ref on row-major matrices, packing
 * included. */
static double rate(int fused, int64_t M, int64_t K, int64_t N, int reps)
{
	int64_t mr = run_gemm_rows(), mp = (M + mr - 1) / mr * mr, ns = (K + RUN_GEMM_S - 1) / RUN_GEMM_S;
	int64_t np = (N + 15) / 16;
	float *A = fused ? matrix(M * K, 1) : matrix(ns * mp * RUN_GEMM_S, 1);
	float *B = fused ? matrix(K * N, 2) : matrix(np * K * 16, 2), *C = matrix(M * N, 3);
	double best = 0;
	for (int r = 0; r < 3; r++) {
		double t0 = now();
		for (int i = 0; i < reps; i++)
			if (fused)
				run_gemm_ref(A, B, C, M, K, N);
			else
				run_gemm_strips(A, mp * RUN_GEMM_S, B, C, M, K, N);
		double g = 2.0 * (double)M * (double)K * (double)N * reps / (now() - t0) / 1e9;
		best = g > best ? g : best;
	}
	free(A), free(B), free(C);
	return best;
}

int main(void)
{
	/* per tile of the 27-layer SigLIP's default plan: rows x K x columns
	 * of a shard (1458 rows; K and N cut by the grids of bench/fit.sh's
	 * plan), and the reference's whole products (729 rows a thread) */
	static const struct { const char *name; int fused; int64_t M, K, N; int reps; } s[] = {
		{ "qkv-shard", 0, 146, 576, 144, 200 },
		{ "proj-shard", 0, 134, 576, 128, 200 },
		{ "mlp_down-shard", 0, 98, 736, 96, 300 },
		{ "embed-shard", 0, 184, 320, 192, 200 },
		{ "qkv-ref", 1, 729, 1152, 3456, 1 },
		{ "mlp_up-ref", 1, 729, 1152, 4304, 1 },
		{ "mlp_down-ref", 1, 729, 4304, 1152, 1 },
	};
	int wide = run_gemm_width(0);
	for (int w = 8; w <= wide; w += 8) {
		run_gemm_width(w);
		for (size_t i = 0; i < sizeof s / sizeof *s; i++)
			printf("%s %s %lldx%lldx%lld %d-wide %.1f\n", s[i].fused ? "run_gemm_ref" : "run_gemm_strips", s[i].name,
			       (long long)s[i].M, (long long)s[i].K, (long long)s[i].N, w,
			       rate(s[i].fused, s[i].M, s[i].K, s[i].N, s[i].reps));
	}
	return 0;
}
