/* run_gemm.c: the matrix-product kernels (lib/run/run.h: run_gemm,
 * run_gemm_strips, run_gemm_ref): the blocked kernel of gemm_kernel.h
 * built once per arithmetic (the machine's one rounding per multiply and
 * per add, the reference's fused multiply-add) and vector width (8, 16),
 * and the copy the CPU can run chosen at run time, or the width
 * run_gemm_width holds them to. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "run/run_int.h"

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
typedef float v8f __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));

/* A (M x K, row r at A + r * lda) into d in the strips of
 * run_gemm_strips, mp rows each (zeros past M and past K). */
void run_pack_strips(const float *A, int64_t lda, int64_t M, int64_t K, int64_t mp, float *d)
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
#include "run/gemm_kernel.h"
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
#include "run/gemm_kernel.h"
#undef GK
#undef GK_MR
#pragma GCC optimize("fp-contract=fast")
#define GK(x) x##_fma16
#define GK_MR 6
#define GK_NP 2
#include "run/gemm_kernel.h"
#undef GK
#undef GK_MR
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("fp-contract=fast")
#define GK(x) x##_fma8
#define GK_MR 6
#include "run/gemm_kernel.h"
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
	atomic_store_explicit(&run_gemm_pin, w, memory_order_relaxed);
	int c = cpu_width();
	return w == 8 || c < 16 ? 8 : 16;
}

#ifdef GEMM_TARGETS
/* The vector width the products use now. */
static int gemm_width(void)
{
	int c = cpu_width(), w = atomic_load_explicit(&run_gemm_pin, memory_order_relaxed);
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
