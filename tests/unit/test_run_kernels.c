/* test_run_kernels: the machine model's kernels (lib/run) against plain
 * loops and the scalar conversions, bit for bit, at every vector width
 * the CPU has: run_gemm, run_gemm_ref and run_gemm_strips on random sizes
 * and values, run_decode_fp8 on every code at every scale, run_gelu on
 * every fp16 value and fp8 code, quantize_n on random bit patterns; the
 * next tokens' judgement (run_next_judge, run_next_summary); rope's
 * frequencies, Llama 3's scaling among them (rope_frequency). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "run/run.h"
#include "t.h"
#include "run/run_int.h"

static uint64_t rng = 0xD1B54A32D192ED03u;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }

/* run_gemm against the plain loop, bit for bit: each element summed in K
 * order, one rounding per multiply and per add, from a nonzero C; and
 * run_gemm_ref against the plain loop of fmaf (one rounding per
 * multiply-add; its products' low bits differ, so a mixed-up kernel
 * fails); sizes
 * that leave partial register tiles (rows past 6, columns past 16), and
 * larger ones that cross its K slices (256) and row blocks (120). */
static void gemm_bits(void)
{
	int wide = run_gemm_width(0);
	for (int w = 8; w <= wide; w += 8) {
	run_gemm_width(w);
	t_case(w == 8 ? "run_gemm and run_gemm_ref give the plain K-order loops' bits (unfused, fused) on random sizes and values, 8 wide" :
	       "run_gemm and run_gemm_ref give the plain K-order loops' bits (unfused, fused) on random sizes and values, 16 wide (AVX-512)");
	for (int i = 0; i < 224; i++) {
		int64_t M = pick(1, 40), K = pick(1, 90), N = pick(1, 70);
		if (i >= 200)
			M = pick(100, 300), K = pick(200, 800), N = pick(1, 50);
		float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(K * N) * sizeof *B);
		float *C = malloc((size_t)(M * N) * sizeof *C), *D = malloc((size_t)(M * N) * sizeof *D);
		for (int64_t q = 0; q < M * K; q++)
			A[q] = (float)((int64_t)(next() % 20001) - 10000) * 0x1p-7f * (float)(1 << (next() % 12));
		for (int64_t q = 0; q < K * N; q++)
			B[q] = (float)((int64_t)(next() % 20001) - 10000) * 0x1p-13f;
		for (int64_t q = 0; q < M * N; q++)
			C[q] = D[q] = (float)((int64_t)(next() % 201) - 100) * 0.37f;
		float *E = malloc((size_t)(M * N) * sizeof *E), *F = malloc((size_t)(M * N) * sizeof *F);
		memcpy(E, C, (size_t)(M * N) * sizeof *E);
		memcpy(F, C, (size_t)(M * N) * sizeof *F);
		run_gemm(A, B, C, M, K, N);
		run_gemm_ref(A, B, E, M, K, N);
		for (int64_t r = 0; r < M; r++)
			for (int64_t k = 0; k < K; k++)
				for (int64_t n = 0; n < N; n++) {
					D[r * N + n] += A[r * K + k] * B[k * N + n];
					F[r * N + n] = fmaf(A[r * K + k], B[k * N + n], F[r * N + n]);
				}
		CHECK(memcmp(C, D, (size_t)(M * N) * sizeof *C) == 0, "M %lld K %lld N %lld", (long long)M,
		      (long long)K, (long long)N);
		CHECK(memcmp(E, F, (size_t)(M * N) * sizeof *E) == 0, "fused: M %lld K %lld N %lld", (long long)M,
		      (long long)K, (long long)N);
		free(A), free(B), free(C), free(D), free(E), free(F);
	}
	}
	run_gemm_width(0);
}

/* run_gemm_strips on operands packed here by the formula of run.h
 * (element (r, k) of A at (k / 32) * rs + r * 32 + k % 32, (k, n) of B at
 * (n / 16) * K * 16 + k * 16 + n % 16), with a strip stride beyond the
 * least and NaN in every padding lane it must not read, against the
 * plain K-order loop, bit for bit, at every width. */
static void strips_bits(void)
{
	int wide = run_gemm_width(0);
	for (int w = 8; w <= wide; w += 8) {
		run_gemm_width(w);
		t_case(w == 8 ? "run_gemm_strips on packed operands gives the plain K-order loop's bits, 8 wide" :
		       "run_gemm_strips on packed operands gives the plain K-order loop's bits, 16 wide (AVX-512)");
		int64_t mr = run_gemm_rows();
		for (int i = 0; i < 120; i++) {
			int64_t M = pick(1, 60), K = pick(1, 600), N = pick(1, 70);
			int64_t mp = (M + mr - 1) / mr * mr, rs = (mp + pick(0, 3)) * RUN_GEMM_S;
			int64_t ns = (K + RUN_GEMM_S - 1) / RUN_GEMM_S, np = (N + 15) / 16;
			float *A = malloc((size_t)(ns * rs) * sizeof *A), *B = malloc((size_t)(np * K * 16) * sizeof *B);
			float *C = malloc((size_t)(M * N) * sizeof *C), *D = malloc((size_t)(M * N) * sizeof *D);
			for (int64_t q = 0; q < ns * rs; q++)   /* rows past M must be zero; columns past K are never read */
				A[q] = q % rs < mp * RUN_GEMM_S && q % rs >= M * RUN_GEMM_S ? 0 : NAN;
			for (int64_t q = 0; q < np * K * 16; q++)
				B[q] = NAN;
			float *a = malloc((size_t)(M * K) * sizeof *a), *b = malloc((size_t)(K * N) * sizeof *b);
			for (int64_t r = 0; r < M; r++)
				for (int64_t k = 0; k < K; k++)
					A[k / 32 * rs + r * 32 + k % 32] = a[r * K + k] =
						(float)((int64_t)(next() % 20001) - 10000) * 0x1p-7f * (float)(1 << (next() % 12));
			for (int64_t k = 0; k < K; k++)
				for (int64_t n = 0; n < N; n++)
					B[n / 16 * K * 16 + k * 16 + n % 16] = b[k * N + n] =
						(float)((int64_t)(next() % 20001) - 10000) * 0x1p-13f;
			for (int64_t n = N; n < np * 16; n++)      /* columns past N: zero */
				for (int64_t k = 0; k < K; k++)
					B[n / 16 * K * 16 + k * 16 + n % 16] = 0;
			for (int64_t q = 0; q < M * N; q++)
				C[q] = D[q] = (float)((int64_t)(next() % 201) - 100) * 0.37f;
			run_gemm_strips(A, rs, B, C, M, K, N);
			for (int64_t r = 0; r < M; r++)
				for (int64_t k = 0; k < K; k++)
					for (int64_t n = 0; n < N; n++)
						D[r * N + n] += a[r * K + k] * b[k * N + n];
			CHECK(memcmp(C, D, (size_t)(M * N) * sizeof *C) == 0, "M %lld K %lld N %lld rs %lld", (long long)M,
			      (long long)K, (long long)N, (long long)rs);
			free(A), free(B), free(C), free(D), free(a), free(b);
		}
	}
	run_gemm_width(0);
}

/* run_decode_fp8 (vector arithmetic on the code's fields) against
 * f8s_to_f32, bit for bit: every code, at every scale, at every offset
 * of a run that leaves a tail. */
static void decode_fp8_bits(void)
{
	int wide = run_gemm_width(0);
	for (int w = 8; w <= wide; w += 8) {
	run_gemm_width(w);
	t_case(w == 8 ? "run_decode_fp8 gives f8s_to_f32's bits for every code at every scale, 8 wide" :
	       "run_decode_fp8 gives f8s_to_f32's bits for every code at every scale, 16 wide (AVX-512)");
	enum { N = 256 + 23 };
	uint8_t b[N];
	float v[N];
	for (int i = 0; i < N; i++)
		b[i] = (uint8_t)(i * 97 + 5);   /* every code, in no simple order */
	for (int sc = -126; sc <= 126; sc++) {
		run_decode_fp8(b, N, sc, v);
		for (int i = 0; i < N; i++) {
			float e = f8s_to_f32(b[i], sc);
			if (memcmp(&e, &v[i], 4)) {
				CHECK(0, "code 0x%02x scale %d: %a, f8s_to_f32 %a", b[i], sc, v[i], e);
				break;
			}
		}
	}
	}
	run_gemm_width(0);
}

/* run_gelu (a table by code for fp16 and fp8) against the machine's
 * formula computed on each value, bit for bit: every fp16 code, and
 * every fp8 code at several scales, NaNs included. */
static void gelu_bits(void)
{
	t_case("run_gelu gives the formula's bits for every fp16 value and every fp8 code");
	static float x[65536], y[65536];
	for (int i = 0; i < 65536; i++)
		x[i] = f16_to_f32((uint16_t)i);
	run_gelu(x, 65536, FMT_FP16, 0, y);
	int sc[] = { -126, -20, -3, 0, 5, 126 };
	for (int k = 0; k <= 6; k++) {
		int n = 65536;
		if (k > 0) {
			n = 256;
			for (int c = 0; c < 256; c++)
				x[c] = f8s_to_f32((uint8_t)c, sc[k - 1]);
			run_gelu(x, n, FMT_FP8, sc[k - 1], y);
		}
		for (int i = 0; i < n; i++) {
			float e = 0.5f * x[i] * (1.0f + tanhf(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
			if (memcmp(&e, &y[i], 4)) {
				CHECK(0, "%s code %d: %a gives %a, the formula %a", k ? "fp8" : "fp16", i, x[i], y[i], e);
				break;
			}
		}
	}
}

/* quantize_n against quantize, value by value: fp16 (through F16C where
 * the CPU has it), fp8 at several scales, fp32 untouched; random bit
 * patterns, NaNs and infinities included. */
static void quantize_bits(void)
{
	t_case("quantize_n gives quantize's bits for every value");
	enum { N = 4099 };
	static float v[N], w[N];
	Format fm[] = { FMT_FP16, FMT_FP8, FMT_FP8, FMT_FP8, FMT_FP32 };
	int sc[] = { 0, 0, -5, 7, 0 };
	for (int k = 0; k < 5; k++) {
		for (int i = 0; i < N; i++) {
			uint32_t u = (uint32_t)next();
			if (i % 3 == 0)                 /* near the formats' ranges */
				u = (u & 0x807fffffu) | (uint32_t)(100 + next() % 60) << 23;
			memcpy(&v[i], &u, 4);
		}
		memcpy(w, v, sizeof w);
		quantize_n(w, N, fm[k], sc[k]);
		for (int i = 0; i < N; i++) {
			float q = quantize(v[i], fm[k], sc[k]);
			if (memcmp(&q, &w[i], 4)) {
				CHECK(0, "format %d scale %d: %a gives %a, quantize %a", (int)fm[k], sc[k], v[i], w[i], q);
				break;
			}
		}
	}
}

/* run_next_judge and run_next_summary against loops written here: the
 * greedy token the first largest logit of each last row, the margin the
 * reference's largest less its largest other, the RMS over the row in
 * double; agreements counted by hand and the first divergence the
 * earliest token of the lowest sequence. Logits drawn from few values, so
 * that ties and equal rows happen. */
static void next_tokens(void)
{
	t_case("run_next_judge gives the greedy tokens, the reference's margin and the RMS of the difference, by brute force");
	for (int i = 0; i < 300; i++) {
		int64_t B = pick(1, 4), T = pick(1, 3), V = pick(1, 40);
		PTensor t = { 0 };
		t.rank = 3, t.shape[0] = B, t.shape[1] = T, t.shape[2] = V;
		float *mv = malloc((size_t)(B * T * V) * sizeof *mv), *rv = malloc((size_t)(B * T * V) * sizeof *rv);
		for (int64_t q = 0; q < B * T * V; q++)
			rv[q] = (float)pick(-6, 6) * 0.25f, mv[q] = next() % 3 ? rv[q] + (float)pick(-2, 2) * 0.125f : rv[q];
		NextToken nt[4];
		run_next_judge(mv, rv, &t, nt);
		for (int64_t b = 0; b < B; b++) {
			const float *x = mv + ((b + 1) * T - 1) * V, *y = rv + ((b + 1) * T - 1) * V;
			int64_t bm = 0, br = 0;
			for (int64_t k = 0; k < V; k++) {
				if (x[k] > x[bm])
					bm = k;
				if (y[k] > y[br])
					br = k;
			}
			double second = -INFINITY, ss = 0;
			for (int64_t k = 0; k < V; k++) {
				if (k != br && y[k] > second)
					second = y[k];
				ss += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
			}
			double margin = V > 1 ? y[br] - second : INFINITY, rms = sqrt(ss / (double)V);
			CHECK(nt[b].machine == bm && nt[b].reference == br && nt[b].margin == margin &&
			      fabs(nt[b].rms - rms) <= 1e-12 * (1 + rms) &&
			      run_next_decisive(&nt[b]) == (margin > RUN_DECISIVE * rms),
			      "B %lld T %lld V %lld entry %lld: got %lld %lld %g %g, expected %lld %lld %g %g", (long long)B,
			      (long long)T, (long long)V, (long long)b, (long long)nt[b].machine, (long long)nt[b].reference,
			      nt[b].margin, nt[b].rms, (long long)bm, (long long)br, margin, rms);
		}
		free(mv), free(rv);
	}
	t_case("run_next_summary counts agreements, plain and decisive, and finds the first divergence, by brute force");
	for (int i = 0; i < 300; i++) {
		int64_t nseq = pick(1, 5), len[5], agree = 0, total = 0, dagree = 0, dtotal = 0, fs = -1, fa = -1;
		NextToken *tok[5];
		for (int64_t q = 0; q < nseq; q++) {
			len[q] = pick(0, 6);
			tok[q] = malloc((size_t)(len[q] + 1) * sizeof *tok[q]);
			for (int64_t k = 0; k < len[q]; k++)
				tok[q][k] = (NextToken){ pick(0, 2), pick(0, 2), (double)pick(0, 9), (double)pick(0, 3) };
		}
		for (int64_t k = 0; k < 7; k++)         /* token by token, then sequence by sequence */
			for (int64_t q = 0; q < nseq; q++) {
				if (k >= len[q])
					continue;
				const NextToken *n = &tok[q][k];
				int same = n->machine == n->reference, dec = n->margin > 4 * n->rms;
				agree += same, total++, dagree += same && dec, dtotal += dec;
				if (!same && fs < 0)
					fs = q, fa = k;
			}
		NextSummary s;
		run_next_summary(tok, len, nseq, &s);
		CHECK(s.agree == agree && s.total == total && s.decisive_agree == dagree && s.decisive == dtotal &&
		      s.first_seq == fs && (fs < 0 || (s.first_at == fa && s.first.machine == tok[fs][fa].machine)),
		      "got %lld/%lld, %lld/%lld, first %lld at %lld; expected %lld/%lld, %lld/%lld, first %lld at %lld",
		      (long long)s.agree, (long long)s.total, (long long)s.decisive_agree, (long long)s.decisive,
		      (long long)s.first_seq, (long long)s.first_at, (long long)agree, (long long)total, (long long)dagree,
		      (long long)dtotal, (long long)fs, (long long)fa);
		for (int64_t q = 0; q < nseq; q++)
			free(tok[q]);
	}
}

/* rope_frequency against Llama 3's scaling as Meta's apply_scaling
 * writes it (a loop over the frequencies: wavelength under the high
 * bound kept, over the low one divided, between them interpolated by the
 * smoothing factor), on random theta, widths and scalings; and unscaled
 * (factor 0) against theta^(-2i/D). Every regime is met. */
static void rope_frequencies(void)
{
	int seen[3] = { 0, 0, 0 };
	for (int c = 0; c < 300; c++) {
		t_case("rope_frequency: llama3 scaling against apply_scaling");
		double theta = pick(2, 1000000), old = (double)pick(8, 16384);
		double low = (double)pick(1, 4), high = low + (double)pick(1, 8) / 2, factor = (double)pick(1, 64);
		int64_t D = 2 * pick(1, 64);
		RopeScale sc = { factor, low, high, old }, none = { 0, 0, 0, 0 };
		for (int64_t i = 0; i < D / 2; i++) {
			double freq = 1.0 / pow(theta, (double)(2 * i) / (double)D), want;
			double wavelen = 2 * 3.141592653589793 / freq;
			if (wavelen < old / high)
				want = freq, seen[0]++;
			else if (wavelen > old / low)
				want = freq / factor, seen[1]++;
			else {
				double smooth = (old / wavelen - low) / (high - low);
				want = (1 - smooth) * freq / factor + smooth * freq, seen[2]++;
			}
			double got = rope_frequency(theta, &sc, i, D), plain = rope_frequency(theta, &none, i, D);
			CHECK(fabs(got - want) <= 1e-12 * want, "theta %g D %lld pair %lld: %.17g, expected %.17g", theta,
			      (long long)D, (long long)i, got, want);
			CHECK(fabs(plain - freq) <= 1e-12 * freq, "unscaled pair %lld: %.17g, expected %.17g", (long long)i,
			      plain, freq);
		}
	}
	t_case("rope_frequency: every regime met");
	CHECK(seen[0] && seen[1] && seen[2], "kept %d, divided %d, smoothed %d", seen[0], seen[1], seen[2]);
}

/* run_ref_rope_grid against PE-Core's Rope2D written out as its code runs:
 * RotaryEmbedding(D/2).freqs = 1 / theta^(arange(0, D/2, 2) / (D/2)); a
 * grid axis's angles are position x freqs, each repeated twice ("(n r)",
 * r = 2); a patch's vector is cat(x's, y's), positions 1 .. with a class
 * token (whose vector is zeros) and 0 .. without; then t cos + rotate_half(t)
 * sin, rotate_half taking (t0, t1) to (-t1, t0) pair by pair. Random
 * grids, class tokens, head widths and heads; pairs interleaved (PE's). */
static void rope_grid_pe(void)
{
	for (int c = 0; c < 60; c++) {
		t_case("run_ref_rope_grid: PE-Core's Rope2D");
		int64_t gh = pick(1, 5), gw = pick(1, 5), cls = pick(0, 2), D = 4 * pick(1, 6), heads = pick(1, 3);
		int64_t T = cls + gh * gw, B = pick(1, 2), C = heads * D + pick(0, 3), rows = B * T;
		double theta = pick(0, 1) ? 10000 : pick(2, 100000);
		RopeGrid g = { gh, gw, cls };
		float *x = malloc((size_t)(rows * C) * sizeof *x), *y = malloc((size_t)(rows * C) * sizeof *y);
		double *vec = malloc((size_t)D * sizeof *vec);
		for (int64_t i = 0; i < rows * C; i++)
			x[i] = (float)pick(-1000, 1000) / 250.0f;
		run_ref_rope_grid(x, y, rows, C, heads, D, D, 1, theta, &g, T);
		int bad = 0;
		int64_t br = 0, bc = 0;
		double bgot = 0, bwant = 0;
		for (int64_t r = 0; r < rows; r++) {
			int64_t t = r % T;
			for (int64_t j = 0; j < D; j++)
				vec[j] = 0;
			if (t >= cls) {         /* update_grid: arange(grid) (+1 with a class token) */
				int64_t p = t - cls, gy = p / gw + (cls > 0), gx = p % gw + (cls > 0);
				for (int64_t n = 0; n < D / 4; n++) {
					double f = 1.0 / pow(theta, (double)(2 * n) / (double)(D / 2));
					vec[2 * n] = vec[2 * n + 1] = (double)gx * f;                   /* freqs_x */
					vec[D / 2 + 2 * n] = vec[D / 2 + 2 * n + 1] = (double)gy * f;   /* freqs_y */
				}
			}
			for (int64_t col = 0; col < C; col++) {
				int64_t h = col / D, j = col % D;
				double want = x[r * C + col];
				if (h < heads) {
					double rh = j % 2 ? x[r * C + col - 1] : -x[r * C + col + 1];
					want = x[r * C + col] * cos(vec[j]) + rh * sin(vec[j]);
				}
				if (!bad && fabs(y[r * C + col] - want) > 1e-5 * (1 + fabs(want)))
					bad = 1, br = r, bc = col, bgot = y[r * C + col], bwant = want;
			}
		}
		CHECK(!bad, "grid %lldx%lld cls %lld D %lld: row %lld column %lld: %g, expected %g", (long long)gh,
		      (long long)gw, (long long)cls, (long long)D, (long long)br, (long long)bc, bgot, bwant);
		free(x), free(y), free(vec);
	}
}

int main(void)
{
	rope_frequencies();
	rope_grid_pe();
	next_tokens();
	gemm_bits();
	strips_bits();
	decode_fp8_bits();
	gelu_bits();
	quantize_bits();
	return t_summary();
}
