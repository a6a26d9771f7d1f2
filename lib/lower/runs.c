/* runs: a shard-to-shard mapping as byte runs (lib/lower/expand.h), and the
 * runs kept by geometry for amp-expand's copies. */
#include "lower/expand.h"

#include <stdlib.h>
#include <string.h>

/* Cut quanta: a layout is affine between multiples of these (0: nowhere
 * cut). Each format's own panel shape: fp8 strips are 32 K-values. */
static int64_t row_quantum(const Placement *p)
{
	return p->layout == LAYOUT_TRANSPOSED_RIGHT ? fmt_mu(p->fmt) : 0;
}

static int64_t col_quantum(const Placement *p)
{
	switch (p->layout) {
	case LAYOUT_AMP_LEFT: return fmt_mu(p->fmt);
	case LAYOUT_TRANSPOSED_RIGHT:
	case LAYOUT_AMP_OUTPUT: return 16;
	default: return 0;
	}
}

/* Element strides inside one cell. */
static void cell_strides(const Layout *l, int64_t *sr, int64_t *sc)
{
	switch (l->kind) {
	case LAYOUT_ROW_MAJOR: *sr = l->cols; *sc = 1; break;
	case LAYOUT_AMP_LEFT: *sr = fmt_mu(l->fmt); *sc = 1; break;
	case LAYOUT_AMP_OUTPUT: *sr = 16; *sc = 1; break;
	default: *sr = 1; *sc = fmt_mu(l->fmt); break;
	}
}

/* Distance from x to the next multiple of q (q == 0: never). */
static int64_t to_cut(int64_t x, int64_t q)
{
	return q ? q - x % q : INT64_MAX;
}

/* Is shard idx made of whole panels: every boundary of its region on a
 * panel boundary of its layout or at the tensor's edge? Transposed-right
 * panels stack K-rows, so with more leading axes they must be trivial. */
int shard_whole(const Placement *p, const int64_t *idx)
{
	int last = p->rank - 1, L = p->rank - 2;
	int64_t qc = col_quantum(p), qr = row_quantum(p);
	if (!qc)
		return 0;
	int64_t lo = idx[last] * p->block[last], hi = lo + place_extent(p, last, idx[last]);
	if (lo % qc || (hi % qc && hi != p->shape[last]))
		return 0;
	if (qr && L >= 0) {
		for (int a = 0; a < L; a++)
			if (p->shape[a] != 1)
				return 0;
		lo = idx[L] * p->block[L];
		hi = lo + place_extent(p, L, idx[L]);
		if (lo % qr || (hi % qr && hi != p->shape[L]))
			return 0;
	}
	return 1;
}

typedef struct {
	Run *r;
	int64_t n, *cap;
	Run **out;
} Runs;

static void emit(Runs *rs, int64_t src, int64_t dst, int64_t len)
{
	if (rs->n == *rs->cap) {
		*rs->cap = *rs->cap ? 2 * *rs->cap : 64;
		rs->r = xrealloc(rs->r, (size_t)*rs->cap * sizeof *rs->r);
		*rs->out = rs->r;
	}
	Run r = { src, dst, len };
	rs->r[rs->n++] = r;
}

/* One cell [h rows x w cols] where both sides are affine. */
static void cell(Runs *rs, const Layout *ls, const Layout *ld, int64_t rS, int64_t rD, int64_t h,
		 int64_t cS, int64_t cD, int64_t w)
{
	int64_t srS, scS, srD, scD;
	int64_t s0 = layout_offset(ls, rS, cS), d0 = layout_offset(ld, rD, cD);

	cell_strides(ls, &srS, &scS);
	cell_strides(ld, &srD, &scD);
	/* Traverse along the destination's unit stride. */
	int64_t fast = w, slow = h, fS = scS, sS = srS, sD = srD;
	if (scD != 1) {
		fast = h, slow = w, fS = srS, sS = scS, sD = scD;
	}
	if (fS != 1) {                      /* cross-layout relayout: single elements */
		int64_t fD = scD != 1 ? srD : scD;
		for (int64_t k = 0; k < slow; k++)
			for (int64_t j = 0; j < fast; j++)
				emit(rs, s0 + k * sS + j * fS, d0 + k * sD + j * fD, 1);
		return;
	}
	if (slow == 1 || (sS == fast && sD == fast)) {
		emit(rs, s0, d0, fast * slow);
		return;
	}
	for (int64_t k = 0; k < slow; k++)
		emit(rs, s0 + k * sS, d0 + k * sD, fast);
}

static int by_dst(const void *a, const void *b)
{
	const Run *x = a, *y = b;
	return (x->dst > y->dst) - (x->dst < y->dst);
}

/* Where shard_runs stops on each axis: hi, or past the edge padding when
 * whole. */
static void runs_end(const Placement *D, const int64_t *lo, const int64_t *hi, int whole,
		     int64_t *end)
{
	int last = D->rank - 1, L = D->rank - 2;
	for (int a = 0; a < D->rank; a++)
		end[a] = hi[a];
	if (whole) {                        /* padding travels at the tensor's edge */
		int64_t q = col_quantum(D);
		if (q && hi[last] == D->shape[last])
			end[last] = lo[last] + (cdiv(D->shape[last], q) * q - lo[last]);
		q = row_quantum(D);
		if (q && L >= 0 && hi[L] == D->shape[L])
			end[L] = cdiv(D->shape[L], q) * q;
	}
}

int64_t shard_runs(const Placement *S, const int64_t *sidx, const Placement *D,
		   const int64_t *didx, const int64_t *lo, const int64_t *hi, int whole,
		   Run **runs, int64_t *cap)
{
	int rank = S->rank, last = rank - 1, L = rank - 2;
	Layout ls = place_layout(S, sidx), ld = place_layout(D, didx);
	int64_t los[MAX_RANK], lod[MAX_RANK], inS[MAX_RANK], inD[MAX_RANK], end[MAX_RANK];
	int64_t qrS = row_quantum(S), qrD = row_quantum(D), qcS = col_quantum(S), qcD = col_quantum(D);
	int esz = fmt_bytes(S->fmt);
	Runs rs = { *runs, 0, cap, runs };

	for (int a = 0; a < rank; a++) {
		los[a] = S->off[a] + sidx[a] * S->block[a];
		lod[a] = D->off[a] + didx[a] * D->block[a];
	}
	runs_end(D, lo, hi, whole, end);
	for (int a = L, iS = 1, iD = 1; a >= 0; a--) {
		inS[a] = iS;
		inD[a] = iD;
		iS *= place_extent(S, a, sidx[a]);
		iD *= place_extent(D, a, didx[a]);
	}

	int64_t idx[MAX_RANK];
	for (int a = 0; a < L; a++)
		idx[a] = lo[a];
	for (;;) {
		int64_t oS = 0, oD = 0, r0S, r0D, nr;
		for (int a = 0; a < L; a++) {
			oS += (idx[a] - los[a]) * inS[a];
			oD += (idx[a] - lod[a]) * inD[a];
		}
		if (L >= 0) {
			r0S = oS + lo[L] - los[L];
			r0D = oD + lo[L] - lod[L];
			nr = end[L] - lo[L];
		} else {
			r0S = r0D = 0;
			nr = 1;
		}
		int64_t c0S = lo[last] - los[last], c0D = lo[last] - lod[last], nc = end[last] - lo[last];
		for (int64_t i = 0; i < nr;) {
			int64_t h = nr - i, t;
			if ((t = to_cut(r0S + i, qrS)) < h) h = t;
			if ((t = to_cut(r0D + i, qrD)) < h) h = t;
			for (int64_t j = 0; j < nc;) {
				int64_t w = nc - j;
				if ((t = to_cut(c0S + j, qcS)) < w) w = t;
				if ((t = to_cut(c0D + j, qcD)) < w) w = t;
				cell(&rs, &ls, &ld, r0S + i, r0D + i, h, c0S + j, c0D + j, w);
				j += w;
			}
			i += h;
		}
		int a = L - 1;
		while (a >= 0 && ++idx[a] == hi[a]) {
			idx[a] = lo[a];
			a--;
		}
		if (a < 0)
			break;
	}

	int64_t u = 1;                          /* often made in order already */
	while (u < rs.n && rs.r[u - 1].dst <= rs.r[u].dst)
		u++;
	if (u < rs.n)
		qsort(rs.r, (size_t)rs.n, sizeof *rs.r, by_dst);
	int64_t n = 0;
	for (int64_t i = 0; i < rs.n; i++) {
		Run r = rs.r[i];
		if (n && rs.r[n - 1].dst + rs.r[n - 1].len == r.dst &&
		    rs.r[n - 1].src + rs.r[n - 1].len == r.src)
			rs.r[n - 1].len += r.len;
		else
			rs.r[n++] = r;
	}
	for (int64_t i = 0; i < n; i++) {
		rs.r[i].src *= esz;
		rs.r[i].dst *= esz;
		rs.r[i].len *= esz;
	}
	return n;
}

/* ---- shard_runs by geometry (lib/lower/expand.h) ---- */
#define RKEY_MAX (5 + 5 * MAX_RANK)
#define RMEMO_SLOTS 8192                /* per thread; past half full, no more are kept */

typedef struct {
	int64_t key[RKEY_MAX];
	int nkey;
	int64_t at, n;                  /* its runs: kept_runs[at .. at + n) */
} RunsKept;

/* Kept per thread from copy to copy (runs_release frees them); each copy
 * starts empty (runs_forget clears only the slots it used). A slot is a
 * hash and 1 + the index of its geometry in kept_geo (0: free). */
static _Thread_local struct { uint64_t hash; int64_t geo; } *kept_slot;
static _Thread_local int *kept_used;
static _Thread_local RunsKept *kept_geo;
static _Thread_local int kept_nused;
static _Thread_local Run *kept_runs;
static _Thread_local int64_t kept_nruns, kept_caprun;

int64_t shard_runs_kept(const Placement *S, const int64_t *sidx, const Placement *D,
			const int64_t *didx, const int64_t *lo, const int64_t *hi, int whole,
			Run **runs, int64_t *cap)
{
	int64_t k[RKEY_MAX], end[MAX_RANK];
	int n = 0;
	runs_end(D, lo, hi, whole, end);
	k[n++] = S->rank, k[n++] = S->layout, k[n++] = D->layout, k[n++] = S->fmt, k[n++] = D->fmt;
	for (int a = 0; a < S->rank; a++) {
		k[n++] = place_extent(S, a, sidx[a]);
		k[n++] = place_extent(D, a, didx[a]);
		k[n++] = lo[a] - (S->off[a] + sidx[a] * S->block[a]);
		k[n++] = lo[a] - (D->off[a] + didx[a] * D->block[a]);
		k[n++] = end[a] - lo[a];
	}
	uint64_t h = 0x9E3779B97F4A7C15u;
	for (int i = 0; i < n; i++)
		h = (h + (uint64_t)k[i]) * 0x100000001B3u;
	h ^= h >> 29;
	h = h ? h : 1;
	if (!kept_slot) {
		kept_slot = xcalloc(RMEMO_SLOTS, sizeof *kept_slot);
		kept_used = xmalloc(RMEMO_SLOTS * sizeof *kept_used);
		kept_geo = xmalloc(RMEMO_SLOTS / 2 * sizeof *kept_geo);
	}
	int i = (int)(h % RMEMO_SLOTS);
	for (; kept_slot[i].hash; i = (i + 1) % RMEMO_SLOTS) {
		const RunsKept *x = &kept_geo[kept_slot[i].geo - 1];
		if (kept_slot[i].hash == h && x->nkey == n && !memcmp(x->key, k, (size_t)n * sizeof *k)) {
			if (*cap < x->n + 1) {
				*cap = x->n + 1;
				*runs = xrealloc(*runs, (size_t)*cap * sizeof **runs);
			}
			memcpy(*runs, kept_runs + x->at, (size_t)x->n * sizeof **runs);
			return x->n;
		}
	}
	int64_t nr = shard_runs(S, sidx, D, didx, lo, hi, whole, runs, cap);
	if (2 * (kept_nused + 1) <= RMEMO_SLOTS) {
		if (kept_nruns + nr > kept_caprun) {
			kept_caprun = 2 * (kept_nruns + nr);
			kept_runs = xrealloc(kept_runs, (size_t)kept_caprun * sizeof *kept_runs);
		}
		RunsKept *x = &kept_geo[kept_nused];
		memcpy(x->key, k, (size_t)n * sizeof *k);
		x->nkey = n;
		x->at = kept_nruns, x->n = nr;
		memcpy(kept_runs + kept_nruns, *runs, (size_t)nr * sizeof *kept_runs);
		kept_nruns += nr;
		kept_slot[i].hash = h, kept_slot[i].geo = ++kept_nused;
		kept_used[kept_nused - 1] = i;
	}
	return nr;
}

void runs_forget(void)
{
	for (int k = 0; k < kept_nused; k++)
		kept_slot[kept_used[k]].hash = 0;
	kept_nused = 0;
	kept_nruns = 0;
}

void runs_release(void)
{
	free(kept_slot);
	free(kept_used);
	free(kept_geo);
	free(kept_runs);
	kept_slot = NULL, kept_used = NULL, kept_geo = NULL, kept_runs = NULL;
	kept_nused = 0, kept_nruns = kept_caprun = 0;
}
