/* run_shard.c: a tile's shards as the machine's compute steps read and
 * write them (lib/run/run_int.h): placement p's shard index on each tile,
 * its bytes in the tile's SRAM decoded from any layout into floats (a
 * matmul's operands straight into run_gemm_strips's strips and panels),
 * a result rounded into its format and layout, the expected bytes of the
 * movement check copied from each shard's first replica, and the compute
 * threads' scratch buffers. */
#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "run/run_int.h"

/* Compute thread part's buffer i, at least n floats (its contents lost when it grows). */
float *run_scratch(RunMachine *m, int part, int i, int64_t n)
{
	if (n > m->scap[part][i]) {
		free(m->scr[part][i]);
		m->scr[part][i] = xmalloc((size_t)n * sizeof **m->scr + 64);
		m->scap[part][i] = n;
	}
	return m->scr[part][i];
}

const int64_t *run_shards_of(RunMachine *m, int p)
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
				run_f8_decode(rows, nr * 16, run_f8_pow2[sc + 126], v + cp * ps + kb * mu * 16);
				continue;
			}
			for (int64_t r = 0; r < nr; r++) {
				float *d = v + cp * ps + (kb * mu + r) * rs;
				if (f == FMT_FP8) {
					float k = run_f8_pow2[sc + 126];
					for (int64_t j = 0; j < nj; j++)
						d[j] = run_f8_table[panel[j * mu + r]] * k;
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
const uint8_t *run_shard_mem(RunMachine *m, int p, int64_t t, Layout *l)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK];
	place_shard_idx(pp, run_shards_of(m, p)[t], idx);
	*l = place_layout(pp, idx);
	const uint8_t *mem = sim_tile(&m->s, t) + pp->addr;
	if (m->stacked[p])     /* a stacked home read in place: this iteration's instance */
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
void run_decode_shard(const uint8_t *mem, const Layout *l, Format fmt, int sc, float *v)
{
	if (l->kind == LAYOUT_ROW_MAJOR) {      /* offset = r * cols + c */
		run_decode_run(mem, NULL, l->rows * l->cols, fmt, sc, v);
		return;
	}
	if (strip_layout(l)) {                  /* decoded as it lies, in one run, then its rows gathered */
		int64_t w = layout_run(l), R = l->rows, C = l->cols, ns = cdiv(C, w);
		float *tmp = xmalloc((size_t)(ns * R * w) * sizeof *tmp);
		run_decode_run(mem, NULL, ns * R * w, fmt, sc, tmp);
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
				run_decode_run(mem + layout_offset(l, r, c) * esz, NULL,
					       l->cols - c < w ? l->cols - c : w, fmt, sc, v + r * l->cols + c);
		return;
	}
	if (l->kind == LAYOUT_TRANSPOSED_RIGHT) {
		decode_tr(mem, l, fmt, sc, v, l->cols, 16);
		return;
	}
	int64_t *off = xmalloc((size_t)l->cols * sizeof *off);
	layout_row(l, 0, off);                  /* row r's: row 0's, from its first */
	for (int64_t r = 0; r < l->rows; r++)
		run_decode_run(mem + layout_offset(l, r, 0) * esz, off, l->cols, fmt, sc, v + r * l->cols);
	free(off);
}

/* A shard as a float matrix (rows x cols), and back with zero padding. */
/* Shard p of tile t decoded into floats, row-major. */
float *run_read_shard(RunMachine *m, int p, int64_t t, Layout *l)
{
	const uint8_t *mem = run_shard_mem(m, p, t, l);
	float *v = xmalloc((size_t)(l->rows * l->cols) * sizeof *v);
	run_decode_shard(mem, l, m->pl->p[p].fmt, m->pl->t[m->pl->p[p].tensor].scale, v);
	return v;
}

void run_write_shard(RunMachine *m, int p, int64_t t, const float *v)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK];
	place_shard_idx(pp, run_shards_of(m, p)[t], idx);
	Layout l = place_layout(pp, idx);
	uint8_t *mem = sim_tile(&m->s, t) + pp->addr;
	int sc = m->pl->t[pp->tensor].scale;
	if (m->stacked[p])     /* a stacked state's home: this iteration's instance */
		mem += m->s.iter * place_instance(pp);
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
		run_encode_run(tmp, NULL, ns * R * w, pp->fmt, sc, mem);
		free(tmp);
		return;
	}
	memset(mem, 0, (size_t)layout_bytes(&l));
	if (l.kind == LAYOUT_ROW_MAJOR) {
		run_encode_run(v, NULL, l.rows * l.cols, pp->fmt, sc, mem);
		return;
	}
	int64_t w = layout_run(&l), esz = fmt_bytes(pp->fmt);
	if (w > 1) {
		for (int64_t r = 0; r < l.rows; r++)
			for (int64_t c = 0; c < l.cols; c += w)
				run_encode_run(v + r * l.cols + c, NULL, l.cols - c < w ? l.cols - c : w, pp->fmt, sc,
					       mem + layout_offset(&l, r, c) * esz);
		return;
	}
	int64_t *off = xmalloc((size_t)l.cols * sizeof *off);
	layout_row(&l, 0, off);
	for (int64_t r = 0; r < l.rows; r++)
		run_encode_run(v + r * l.cols, off, l.cols, pp->fmt, sc, mem + layout_offset(&l, r, 0) * esz);
	free(off);
}

/* The first index along dimension dim of placement p's shard on tile t
 * (dim 1: its first token row). */
int64_t run_shard_first(RunMachine *m, int p, int64_t t, int dim)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK];
	place_shard_idx(pp, run_shards_of(m, p)[t], idx);
	return pp->off[dim] + idx[dim] * pp->block[dim];
}

/* A matmul's left operand, placement p's shard on tile t (R x K), in the
 * strips of run_gemm_strips, mp rows each: an amp-left shard whose runs
 * are a strip wide is already strips of R rows, decoded as it lies. */
const float *run_read_strips(RunMachine *m, const Work *w, int p, int64_t t, Layout *l, int64_t mp)
{
	const uint8_t *mem = run_shard_mem(m, p, t, l);
	Format f = m->pl->p[p].fmt;
	int sc = m->pl->t[m->pl->p[p].tensor].scale;
	int64_t R = l->rows, K = l->cols, ns = cdiv(K, GEMM_S);
	float *d = run_scratch(m, w->part, 0, ns * mp * GEMM_S);
	if (l->kind == LAYOUT_AMP_LEFT && fmt_mu(f) == GEMM_S) {
		for (int64_t s = 0; s < ns; s++) {     /* element (r, c) at (c / mu) * R * mu + r * mu + c % mu */
			run_decode_run(mem + s * R * GEMM_S * fmt_bytes(f), NULL, R * GEMM_S, f, sc,
				       d + s * mp * GEMM_S);
			memset(d + (s * mp + R) * GEMM_S, 0, (size_t)((mp - R) * GEMM_S) * sizeof *d);
		}
		return d;
	}
	float *v = run_scratch(m, w->part, 3, R * K);
	run_decode_shard(mem, l, f, sc, v);
	run_pack_strips(v, K, R, K, mp, d);
	return d;
}

/* Its right operand (K x N) in 16-column panels: a transposed-right
 * shard decoded straight into them. */
const float *run_read_panels(RunMachine *m, const Work *w, int p, int64_t t, Layout *l)
{
	const uint8_t *mem = run_shard_mem(m, p, t, l);
	Format f = m->pl->p[p].fmt;
	int sc = m->pl->t[m->pl->p[p].tensor].scale;
	int64_t K = l->rows, N = l->cols, np = cdiv(N, 16);
	float *d = run_scratch(m, w->part, 1, np * K * 16);
	if (l->kind == LAYOUT_TRANSPOSED_RIGHT) {
		if (N % 16)                     /* the last panel's columns past N */
			memset(d + (np - 1) * K * 16, 0, (size_t)(K * 16) * sizeof *d);
		decode_tr(mem, l, f, sc, d, 16, K * 16);
		return d;
	}
	float *v = run_scratch(m, w->part, 3, K * N);
	run_decode_shard(mem, l, f, sc, v);
	for (int64_t q = 0; q < np; q++)
		run_pack_panel_8(v, N, 0, K, q * 16, N - q * 16 < 16 ? N - q * 16 : 16, d + q * K * 16);
	return d;
}

/* Shard lin of placement out, as its first replica's tile holds it,
 * into the tensor's encoded bytes enc: row by row, a strip row at a time
 * in strip layouts (*off, *cap: a row's offsets, kept between calls). */
void run_enc_shard(RunMachine *m, const Placement *out, uint8_t *enc, int64_t lin, int64_t **off, int64_t *cap)
{
	int64_t T = m->pl->machine.tiles, z[MAX_REP] = { 0 }, idx[MAX_RANK];
	int esz = fmt_bytes(out->fmt);
	place_shard_idx(out, lin, idx);
	const uint8_t *mem = m->s.mem[place_tile(out, idx, z, T)] + out->addr;  /* allocated: it holds a shard */
	Layout l = place_layout(out, idx);
	if (m->stacked[out - m->pl->p]) {      /* this iteration's instance */
		mem += m->s.iter * place_instance(out);
		enc += m->s.iter * tensor_count(&m->pl->t[out->tensor]) * esz;
	}
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
