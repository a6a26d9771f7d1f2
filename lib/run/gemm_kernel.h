/* gemm_kernel.h: the blocked GEMM kernel of lib/run/run_gemm.c (its comment there
 * says how it is blocked), included by it once per arithmetic and vector
 * width: GK(x) names this copy's functions, GK_ATTR is its run_gemm's
 * attributes, GK_MR its register tile's rows and GK_NP its 16-column
 * panels: 6 rows of two 8-wide vectors (AVX2, or whatever the target
 * has), 12 rows of one 16-wide vector (AVX-512), or 6 rows of two 16-wide
 * vectors over two panels (GK_NP 2: each row's broadcast serves twice as
 * many fused multiply-adds, so the loads keep up). Each copy sums every
 * element in K order, so every copy of one arithmetic gives the same
 * bits. */
#ifndef GK_NP
#define GK_NP 1
#endif
#define GK_NC (16 * GK_NP)
/* c[ni x nj] (row stride ldc) += a b, a register tile of GK_MR rows by
 * GK_NC columns over A in strips (run_gemm_strips) and b packed 16-column
 * panels (k-major, the next one ps floats on; with one column panel left,
 * b's is read twice and the copy's second half dropped): k in [k0, k0 +
 * kc), k0 a multiple of GEMM_S; strip s of the tile's rows at a + s * rs,
 * row r GEMM_S floats after row r - 1, so every row is one base pointer
 * and a constant offset. */
static inline __attribute__((always_inline)) void GK(strip_tile)(const float *a, int64_t rs, const float *b,
							      int64_t ps, int64_t k0, int64_t kc, float *c,
							      int64_t ldc, int64_t ni, int64_t nj)
{
	/* Full panels' rows are read and written in place; partial ones' (or
	 * the rows past ni) through a zero-padded copy. */
	float tile[GK_MR][GK_NC], *row[GK_MR];
	(void)ps;
	for (int r = 0; r < GK_MR; r++) {
		if (nj == GK_NC && r < ni) {
			row[r] = c + r * ldc;
			continue;
		}
		row[r] = tile[r];
		memset(tile[r], 0, sizeof tile[r]);
		if (r < ni)
			memcpy(tile[r], c + r * ldc, (size_t)nj * sizeof **tile);
	}
#if GK_NP == 2
	const float *b1 = nj > 16 ? b + ps : b;
	v16f c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
#define GK_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define GK_LOAD(r) memcpy(&c##r##0, row[r], 64), memcpy(&c##r##1, row[r] + 16, 64);
#define GK_STEP(r) { float x = as[r * GEMM_S + k]; c##r##0 += p0 * x, c##r##1 += p1 * x; }
#define GK_STORE(r) memcpy(row[r], &c##r##0, 64), memcpy(row[r] + 16, &c##r##1, 64);
	GK_ROWS(GK_LOAD)
	for (int64_t s0 = k0; s0 < k0 + kc; s0 += GEMM_S) {
		const float *as = a + s0 / GEMM_S * rs, *bs = b + s0 * 16, *bt = b1 + s0 * 16;
		int64_t n = k0 + kc - s0 < GEMM_S ? k0 + kc - s0 : GEMM_S;
#pragma GCC unroll 4
		for (int64_t k = 0; k < n; k++) {
			v16f p0, p1;
			memcpy(&p0, bs + k * 16, 64);
			memcpy(&p1, bt + k * 16, 64);
			GK_ROWS(GK_STEP)
		}
	}
	GK_ROWS(GK_STORE)
#undef GK_ROWS
#undef GK_LOAD
#undef GK_STEP
#undef GK_STORE
#elif GK_MR == 12
	v16f c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11;
#define GK_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define GK_LOAD(r) memcpy(&c##r, row[r], 64);
#define GK_STEP(r) c##r += b0 * as[r * GEMM_S + k];
#define GK_STORE(r) memcpy(row[r], &c##r, 64);
	GK_ROWS(GK_LOAD)
	for (int64_t s0 = k0; s0 < k0 + kc; s0 += GEMM_S) {
		const float *as = a + s0 / GEMM_S * rs, *bs = b + s0 * 16;
		int64_t n = k0 + kc - s0 < GEMM_S ? k0 + kc - s0 : GEMM_S;
#pragma GCC unroll 4
		for (int64_t k = 0; k < n; k++) {
			v16f b0;
			memcpy(&b0, bs + k * 16, 64);
			GK_ROWS(GK_STEP)
		}
	}
	GK_ROWS(GK_STORE)
#undef GK_ROWS
#undef GK_LOAD
#undef GK_STEP
#undef GK_STORE
#else
	v8f c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
	memcpy(&c00, row[0], 32), memcpy(&c01, row[0] + 8, 32);
	memcpy(&c10, row[1], 32), memcpy(&c11, row[1] + 8, 32);
	memcpy(&c20, row[2], 32), memcpy(&c21, row[2] + 8, 32);
	memcpy(&c30, row[3], 32), memcpy(&c31, row[3] + 8, 32);
	memcpy(&c40, row[4], 32), memcpy(&c41, row[4] + 8, 32);
	memcpy(&c50, row[5], 32), memcpy(&c51, row[5] + 8, 32);
	for (int64_t s0 = k0; s0 < k0 + kc; s0 += GEMM_S) {
		const float *as = a + s0 / GEMM_S * rs, *bs = b + s0 * 16;
		int64_t n = k0 + kc - s0 < GEMM_S ? k0 + kc - s0 : GEMM_S;
#pragma GCC unroll 4
		for (int64_t k = 0; k < n; k++) {
			v8f b0, b1;
			memcpy(&b0, bs + k * 16, 32);
			memcpy(&b1, bs + k * 16 + 8, 32);
			float x0 = as[k], x1 = as[GEMM_S + k], x2 = as[2 * GEMM_S + k], x3 = as[3 * GEMM_S + k],
			      x4 = as[4 * GEMM_S + k], x5 = as[5 * GEMM_S + k];
			c00 += b0 * x0, c01 += b1 * x0;
			c10 += b0 * x1, c11 += b1 * x1;
			c20 += b0 * x2, c21 += b1 * x2;
			c30 += b0 * x3, c31 += b1 * x3;
			c40 += b0 * x4, c41 += b1 * x4;
			c50 += b0 * x5, c51 += b1 * x5;
		}
	}
	memcpy(row[0], &c00, 32), memcpy(row[0] + 8, &c01, 32);
	memcpy(row[1], &c10, 32), memcpy(row[1] + 8, &c11, 32);
	memcpy(row[2], &c20, 32), memcpy(row[2] + 8, &c21, 32);
	memcpy(row[3], &c30, 32), memcpy(row[3] + 8, &c31, 32);
	memcpy(row[4], &c40, 32), memcpy(row[4] + 8, &c41, 32);
	memcpy(row[5], &c50, 32), memcpy(row[5] + 8, &c51, 32);
#endif
	for (int r = 0; nj < GK_NC && r < ni; r++)
		memcpy(c + r * ldc, tile[r], (size_t)nj * sizeof **tile);
}

/* C[M x N] += A B from the packed operands run_gemm_strips takes (run.h
 * says how they are laid out): K in slices of GEMM_KC; in each, a B
 * panel's slice stays in L1 while every block of GK_MR rows runs over it. */
GK_ATTR
void GK(run_gemm_strips)(const float *A, int64_t rs, const float *bp, float *C, int64_t M, int64_t K, int64_t N)
{
	for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
		int64_t kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
		for (int64_t j0 = 0; j0 < N; j0 += GK_NC) {
			int64_t nj = N - j0 < GK_NC ? N - j0 : GK_NC;
			for (int64_t i0 = 0; i0 < M; i0 += GK_MR)
				GK(strip_tile)(A + i0 * GEMM_S, rs, bp + j0 * K, K * 16, k0, kc, C + i0 * N + j0, N,
					       M - i0 < GK_MR ? M - i0 : GK_MR, nj);
		}
	}
}

/* B[k0 .. k0 + kc) x [j0 .. j0 + nj) as a 16-column panel, zeros past nj
 * (not static: lib/run/run_shard.c and run_attention.c pack with the
 * 8-wide copy's). */
void GK(run_pack_panel)(const float *B, int64_t N, int64_t k0, int64_t kc, int64_t j0, int64_t nj, float *d)
{
	if (nj == 16) {
		for (int64_t k = 0; k < kc; k++)
			memcpy(d + k * 16, B + (k0 + k) * N + j0, 16 * sizeof *d);
		return;
	}
	for (int64_t k = 0; k < kc; k++) {
		memcpy(d + k * 16, B + (k0 + k) * N + j0, (size_t)nj * sizeof *d);
		memset(d + k * 16 + nj, 0, (size_t)(16 - nj) * sizeof *d);
	}
}

GK_ATTR
void GK(run_gemm)(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N)
{
	int64_t np = (N + 15) / 16;             /* column panels */
	if (M <= 2 * GEMM_MC) {                 /* a shard's product: both operands packed whole */
		int64_t mp = (M + GK_MR - 1) / GK_MR * GK_MR;
		float *ap = xmalloc((size_t)((K + GEMM_S - 1) / GEMM_S * mp * GEMM_S) * sizeof *ap + 32);
		float *bp = xmalloc((size_t)(K * 16 * np) * sizeof *bp + 32);
		run_pack_strips(A, K, M, K, mp, ap);
		for (int64_t p = 0; p < np; p++)
			GK(run_pack_panel)(B, N, 0, K, p * 16, N - p * 16 < 16 ? N - p * 16 : 16, bp + p * K * 16);
		GK(run_gemm_strips)(ap, mp * GEMM_S, bp, C, M, K, N);
		free(ap);
		free(bp);
		return;
	}
	float *bp = xmalloc((size_t)(GEMM_KC * 16 * np) * sizeof *bp + 32);
	int64_t mcp = (GEMM_MC + GK_MR - 1) / GK_MR * GK_MR;
	float *ap = xmalloc((size_t)(GEMM_KC * mcp) * sizeof *ap + 32);
	for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
		int64_t kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
		for (int64_t p = 0; p < np; p++)
			GK(run_pack_panel)(B, N, k0, kc, p * 16, N - p * 16 < 16 ? N - p * 16 : 16, bp + p * kc * 16);
		for (int64_t m0 = 0; m0 < M; m0 += GEMM_MC) {
			int64_t mc = M - m0 < GEMM_MC ? M - m0 : GEMM_MC;
			/* the block's rows, a strip at a time */
			run_pack_strips(A + m0 * K + k0, K, mc, kc, mcp, ap);
			for (int64_t p = 0; p < np; p += GK_NP) {
				int64_t j0 = p * 16, nj = N - j0 < GK_NC ? N - j0 : GK_NC;
				for (int64_t i0 = 0; i0 < mc; i0 += GK_MR)
					GK(strip_tile)(ap + i0 * GEMM_S, mcp * GEMM_S, bp + p * kc * 16, kc * 16, 0, kc,
						       C + (m0 + i0) * N + j0, N, mc - i0 < GK_MR ? mc - i0 : GK_MR, nj);
			}
		}
	}
	free(bp);
	free(ap);
}
#undef GK_NC
#undef GK_NP
