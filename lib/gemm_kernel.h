/* gemm_kernel.h: the blocked GEMM kernel of lib/run.c (its comment there
 * says how it is blocked), included by it once per arithmetic and vector
 * width: GK(x) names this copy's functions, GK_ATTR is its run_gemm's
 * attributes, GK_MR its register tile's rows: 6 rows of two 8-wide
 * vectors (AVX2, or whatever the target has), or 12 rows of one 16-wide
 * vector (AVX-512). Each copy sums every element in K order, so every
 * copy of one arithmetic gives the same bits. */
/* c[ni x nj] (row stride ldc) += a b over kc: a's row r, step k at
 * a[r * ars + k * aks], b a packed 16-column panel (k-major). */
static inline __attribute__((always_inline)) void GK(gemm_tile)(const float *a, int64_t ars, int64_t aks,
							     const float *b, int64_t kc, float *c, int64_t ldc,
							     int64_t ni, int64_t nj)
{
	/* A full panel's rows are read and written in place; a partial
	 * one's (or the rows past ni) through a zero-padded copy. */
	float tile[GK_MR][16], *row[GK_MR];
	for (int r = 0; r < GK_MR; r++) {
		if (nj == 16 && r < ni) {
			row[r] = c + r * ldc;
			continue;
		}
		row[r] = tile[r];
		memset(tile[r], 0, sizeof tile[r]);
		if (r < ni)
			memcpy(tile[r], c + r * ldc, (size_t)nj * sizeof **tile);
	}
#if GK_MR == 12
	v16f c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11;
#define GK_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define GK_LOAD(r) memcpy(&c##r, row[r], 64);
#define GK_PTR(r) const float *a##r = a + r * ars;
#define GK_STEP(r) c##r += b0 * a##r[q];
#define GK_STORE(r) memcpy(row[r], &c##r, 64);
	GK_ROWS(GK_LOAD)
	GK_ROWS(GK_PTR)
	for (int64_t k = 0; k < kc; k++) {
		v16f b0;
		int64_t q = k * aks;
		memcpy(&b0, b + k * 16, 64);
		GK_ROWS(GK_STEP)
	}
	GK_ROWS(GK_STORE)
#undef GK_ROWS
#undef GK_LOAD
#undef GK_PTR
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
	const float *a0 = a, *a1 = a + ars, *a2 = a + 2 * ars, *a3 = a + 3 * ars, *a4 = a + 4 * ars,
		    *a5 = a + 5 * ars;
	for (int64_t k = 0; k < kc; k++) {
		v8f b0, b1;
		int64_t q = k * aks;
		memcpy(&b0, b + k * 16, 32);
		memcpy(&b1, b + k * 16 + 8, 32);
		c00 += b0 * a0[q], c01 += b1 * a0[q];
		c10 += b0 * a1[q], c11 += b1 * a1[q];
		c20 += b0 * a2[q], c21 += b1 * a2[q];
		c30 += b0 * a3[q], c31 += b1 * a3[q];
		c40 += b0 * a4[q], c41 += b1 * a4[q];
		c50 += b0 * a5[q], c51 += b1 * a5[q];
	}
	memcpy(row[0], &c00, 32), memcpy(row[0] + 8, &c01, 32);
	memcpy(row[1], &c10, 32), memcpy(row[1] + 8, &c11, 32);
	memcpy(row[2], &c20, 32), memcpy(row[2] + 8, &c21, 32);
	memcpy(row[3], &c30, 32), memcpy(row[3] + 8, &c31, 32);
	memcpy(row[4], &c40, 32), memcpy(row[4] + 8, &c41, 32);
	memcpy(row[5], &c50, 32), memcpy(row[5] + 8, &c51, 32);
#endif
	for (int r = 0; nj < 16 && r < ni; r++)
		memcpy(c + r * ldc, tile[r], (size_t)nj * sizeof **tile);
}

/* B[k0 .. k0 + kc) x [j0 .. j0 + nj) as a 16-column panel, zeros past nj. */
static void GK(pack_panel)(const float *B, int64_t N, int64_t k0, int64_t kc, int64_t j0, int64_t nj, float *d)
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
	if (M <= 2 * GEMM_MC) {                 /* a shard's product: A's rows read in place */
		float *bp = xmalloc((size_t)(K * 16) * sizeof *bp + 32);
		int64_t full = M / GK_MR * GK_MR;   /* the rows past it: copied once, zeros past M */
		float *tail = M > full ? xcalloc((size_t)(GK_MR * K), sizeof *tail) : NULL;
		if (tail)
			memcpy(tail, A + full * K, (size_t)((M - full) * K) * sizeof *tail);
		for (int64_t p = 0; p < np; p++) {
			int64_t j0 = p * 16, nj = N - j0 < 16 ? N - j0 : 16;
			GK(pack_panel)(B, N, 0, K, j0, nj, bp);
			for (int64_t i0 = 0; i0 < full; i0 += GK_MR)
				GK(gemm_tile)(A + i0 * K, K, 1, bp, K, C + i0 * N + j0, N, GK_MR, nj);
			if (tail)
				GK(gemm_tile)(tail, K, 1, bp, K, C + full * N + j0, N, M - full, nj);
		}
		free(bp);
		free(tail);
		return;
	}
	float *bp = xmalloc((size_t)(GEMM_KC * 16 * np) * sizeof *bp + 32);
	float *ap = xmalloc((size_t)(GEMM_KC * GEMM_MC) * sizeof *ap + 32);
	for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
		int64_t kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
		for (int64_t p = 0; p < np; p++)
			GK(pack_panel)(B, N, k0, kc, p * 16, N - p * 16 < 16 ? N - p * 16 : 16, bp + p * kc * 16);
		for (int64_t m0 = 0; m0 < M; m0 += GEMM_MC) {
			int64_t mc = M - m0 < GEMM_MC ? M - m0 : GEMM_MC;
			for (int64_t i0 = 0; i0 < mc; i0 += GK_MR) {  /* A's rows, GK_MR at a time, k-major */
				float *d = ap + i0 * kc;
				for (int r = 0; r < GK_MR; r++) {
					if (i0 + r >= mc) {
						for (int64_t k = 0; k < kc; k++)
							d[k * GK_MR + r] = 0;
						continue;
					}
					const float *s = A + (m0 + i0 + r) * K + k0;
					for (int64_t k = 0; k < kc; k++)
						d[k * GK_MR + r] = s[k];
				}
			}
			for (int64_t p = 0; p < np; p++) {
				int64_t j0 = p * 16, nj = N - j0 < 16 ? N - j0 : 16;
				for (int64_t i0 = 0; i0 < mc; i0 += GK_MR)
					GK(gemm_tile)(ap + i0 * kc, 1, GK_MR, bp + p * kc * 16, kc, C + (m0 + i0) * N + j0,
						  N, mc - i0 < GK_MR ? mc - i0 : GK_MR, nj);
			}
		}
	}
	free(bp);
	free(ap);
}

