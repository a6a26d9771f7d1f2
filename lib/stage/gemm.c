#include "stage/gemm.h"

#include <string.h>

static int64_t strips(const GemmShape *s) { return cdiv(s->k, fmt_mu(s->fmt)); }
static int64_t groups(const GemmShape *s) { return cdiv(s->n, 16); }

int gemm_grid_ok(const GemmShape *s, const int64_t g[3], int64_t tiles, Err *e)
{
	const char *f = fmt_name(s->fmt);

	if (g[0] > s->tokens)
		return errf(e, "grid rows %lld exceed the %lld tokens", (long long)g[0],
			    (long long)s->tokens);
	if (g[1] > strips(s))
		return errf(e, "grid k %lld needs more partitions than K=%lld has %s strips (%lld)",
			    (long long)g[1], (long long)s->k, f, (long long)strips(s));
	if (g[2] > groups(s))
		return errf(e, "grid cols %lld needs more partitions than N=%lld has 16-column groups (%lld)",
			    (long long)g[2], (long long)s->n, (long long)groups(s));
	int64_t n[3] = { s->tokens, strips(s), groups(s) };
	static const char *what[3] = { "tokens", "K strips", "column groups" };
	static const char *axis[3] = { "rows", "k", "cols" };
	for (int i = 0; i < 3; i++)
		if (!uniform_ok(n[i], g[i]))
			return errf(e, "grid %s %lld cannot cut %lld %s into %lld non-empty uniform parts "
				    "(parts of %lld give %lld)", axis[i], (long long)g[i], (long long)n[i],
				    what[i], (long long)g[i], (long long)cdiv(n[i], g[i]),
				    (long long)cdiv(n[i], cdiv(n[i], g[i])));
	if (g[0] * g[1] * g[2] > tiles)
		return errf(e, "grid [%lld, %lld, %lld] needs %lld tiles; the machine has %lld",
			    (long long)g[0], (long long)g[1], (long long)g[2],
			    (long long)(g[0] * g[1] * g[2]), (long long)tiles);
	return 0;
}

static void set(Placement *p, LayoutKind lay, Format fmt, int rank, const int64_t *shape,
		const int64_t *split, const int64_t *block, const int64_t *stride,
		int64_t rep, int64_t rstride)
{
	memset(p, 0, sizeof *p);
	p->tensor = -1;
	p->layout = lay;
	p->fmt = fmt;
	p->rank = rank;
	memcpy(p->shape, shape, (size_t)rank * sizeof *shape);
	memcpy(p->split, split, (size_t)rank * sizeof *split);
	memcpy(p->block, block, (size_t)rank * sizeof *block);
	memcpy(p->stride, stride, (size_t)rank * sizeof *stride);
	if (rep > 1) {
		p->nrep = 1;
		p->rep[0] = rep;
		p->rstride[0] = rstride;
	}
}

int gemm_scatter_axis(const GemmShape *s, const int64_t g[3], int64_t *parts, int64_t *block)
{
	int64_t K = g[1], bt = cdiv(s->tokens, g[0]);
	if (s->batch % K == 0) {
		*parts = K, *block = s->batch / K;
		return 0;
	}
	*block = cdiv(bt, K);
	*parts = cdiv(s->tokens, *block);
	/* One row block of fewer token parts than the batch has entries (a
	 * decode step: one token, K above the batch): the batch in its
	 * largest divisor of parts below K, on the first of the K tiles. */
	int64_t d = s->batch < K ? s->batch : K;
	while (s->batch % d)
		d--;
	if (g[0] == 1 && d > *parts) {
		*parts = d, *block = s->batch / d;
		return 0;
	}
	return 1;
}

int64_t gemm_stage_pieces(const GemmShape *s, const int64_t g[3])
{
	int64_t C = g[2], strips_k = cdiv(strips(s), g[1]);
	if (C < 2 || strips_k % C)
		return 1;
	return cdiv(s->k, strips_k / C * fmt_mu(s->fmt)) == g[1] * C ? C : 1;
}

void gemm_placements(const GemmShape *s, const Candidate *c, Placement pl[GP_COUNT])
{
	const int64_t *g = c->grid;
	int64_t R = g[0], K = g[1], C = g[2], mu = fmt_mu(s->fmt);
	int64_t bt = cdiv(s->tokens, R);
	int64_t bk = cdiv(strips(s), K) * mu, bc = cdiv(groups(s), C) * 16;
	Format moved = c->cast == CAST_LATE ? s->a_fmt : s->fmt;
	int64_t ashape[3] = { s->batch, s->tokens, s->k };
	int64_t asplit[3] = { 1, R, K }, ablock[3] = { s->batch, bt, bk };
	int64_t astride[3] = { 0, K * C, C };
	int64_t bshape[2] = { s->k, s->n }, bsplit[2] = { K, C }, bblock[2] = { bk, bc };
	int64_t bstride[2] = { C, 1 };
	int64_t vshape[1] = { s->n }, vsplit[1] = { C }, vblock[1] = { bc }, vstride[1] = { 1 };
	int64_t pshape[4] = { K, s->batch, s->tokens, s->n }, psplit[4] = { K, 1, R, C };
	int64_t pblock[4] = { 1, s->batch, bt, bc }, pstride[4] = { C, 0, K * C, 1 };
	/* The reduction's tiles, and so the result's: gathered, the k = 0
	 * tile of each block; scattered, a part of the block's rows on each
	 * of its K tiles (tile (r, k, c) = r*K*C + k*C + c, so part j of the
	 * batch within row block r, or token part j overall, is tile j*C + c
	 * counted from the right origin). */
	int64_t oshape[3] = { s->batch, s->tokens, s->n }, osplit[3] = { 1, R, C };
	int64_t oblock[3] = { s->batch, bt, bc }, ostride[3] = { 0, K * C, 1 };
	int64_t rowparts = R, rowstride = K * C;
	if (K > 1 && c->scatter) {
		int64_t parts, blk;
		if (gemm_scatter_axis(s, g, &parts, &blk) == 0) {
			osplit[0] = parts, oblock[0] = blk, ostride[0] = C;
			rowparts = R * parts;   /* parts < K only when R is 1 */
		} else {
			osplit[1] = parts, oblock[1] = blk, ostride[1] = C;
			rowparts = parts;
		}
		rowstride = C;
	}
	int64_t rsplit[4] = { 1, osplit[0], osplit[1], C }, rblock[4] = { K, oblock[0], oblock[1], bc };
	int64_t rstride_[4] = { 0, ostride[0], ostride[1], 1 };

	memset(pl, 0, GP_COUNT * sizeof *pl);
	if (c->staging == STAGING_PACK_ONCE || c->staging == STAGING_SPREAD) {
		/* spread: piece j of block (r, k) on tile (r, k, j) */
		int64_t P = c->staging == STAGING_SPREAD ? gemm_stage_pieces(s, g) : 1;
		int64_t ssplit[3] = { 1, R, K * P }, sblock[3] = { s->batch, bt, bk / P };
		int64_t sstride[3] = { 0, K * C, P > 1 ? 1 : C };
		set(&pl[GP_A_STAGE], LAYOUT_ROW_MAJOR, moved, 3, ashape, ssplit, sblock, sstride, 1, 0);
		set(&pl[GP_A_PACKED], LAYOUT_AMP_LEFT, moved, 3, ashape, ssplit, sblock, sstride, 1, 0);
	}
	set(&pl[GP_A_MOVED], LAYOUT_AMP_LEFT, moved, 3, ashape, asplit, ablock, astride, C, 1);
	if (c->cast == CAST_LATE)
		set(&pl[GP_A_OP], LAYOUT_AMP_LEFT, s->fmt, 3, ashape, asplit, ablock, astride, C, 1);
	set(&pl[GP_B_STAGE], LAYOUT_TRANSPOSED_RIGHT, s->fmt, 2, bshape, bsplit, bblock, bstride, 1, 0);
	set(&pl[GP_B_OP], LAYOUT_TRANSPOSED_RIGHT, s->fmt, 2, bshape, bsplit, bblock, bstride, R, K * C);
	if (s->has_bias) {
		set(&pl[GP_BIAS_STAGE], LAYOUT_ROW_MAJOR, FMT_FP16, 1, vshape, vsplit, vblock, vstride, 1, 0);
		set(&pl[GP_BIAS_OP], LAYOUT_ROW_MAJOR, FMT_FP16, 1, vshape, vsplit, vblock, vstride,
		    K > 1 ? rowparts : R, K > 1 ? rowstride : K * C);
	}
	if (K > 1) {
		set(&pl[GP_PARTIAL], LAYOUT_AMP_OUTPUT, FMT_FP16, 4, pshape, psplit, pblock, pstride, 1, 0);
		set(&pl[GP_RED], LAYOUT_AMP_OUTPUT, FMT_FP16, 4, pshape, rsplit, rblock, rstride_, 1, 0);
	}
	set(&pl[GP_OUT], LAYOUT_AMP_OUTPUT, FMT_FP16, 3, oshape, osplit, oblock, ostride, 1, 0);
	if (c->unpack)
		set(&pl[GP_OUT_ROWS], LAYOUT_ROW_MAJOR, FMT_FP16, 3, oshape, osplit, oblock, ostride, 1, 0);
}

/* Is placement i of gemm_placements(s, c) there (rank > 0)? */
static int gp_used(const GemmShape *s, const Candidate *c, int i)
{
	switch (i) {
	case GP_A_STAGE:
	case GP_A_PACKED: return c->staging == STAGING_PACK_ONCE || c->staging == STAGING_SPREAD;
	case GP_A_OP: return c->cast == CAST_LATE;
	case GP_BIAS_STAGE:
	case GP_BIAS_OP: return s->has_bias;
	case GP_PARTIAL:
	case GP_RED: return c->grid[1] > 1;
	case GP_OUT_ROWS: return c->unpack;
	default: return 1;
	}
}

/* A placement's place_total_bytes depends only on its layout, format and
 * cut (not its tiles), times its replicas: each placement of gemm_figures
 * keeps the last few, per thread, for the grids after it (most of a GEMM's
 * placements cut fewer than all three axes). */
#define KEPT_BYTES 8

typedef struct {
	int64_t key[3 + 3 * MAX_RANK];
	int nkey;
	int64_t one;                    /* place_total_bytes of one replica */
} ShardBytes;

static _Thread_local ShardBytes last_bytes[2][GP_COUNT][KEPT_BYTES];

static int64_t shard_total(ShardBytes *kept, const Placement *p)
{
	int64_t k[3 + 3 * MAX_RANK];
	uint64_t h = 0;
	int n = 0;
	k[n++] = p->layout, k[n++] = p->fmt, k[n++] = p->rank;
	for (int a = 0; a < p->rank; a++)
		k[n++] = p->shape[a], k[n++] = p->split[a], k[n++] = p->block[a];
	for (int i = 0; i < n; i++)
		h = (h ^ (uint64_t)k[i]) * 0x100000001B3u;
	ShardBytes *m = &kept[(h ^ h >> 32) % KEPT_BYTES];
	if (n != m->nkey || memcmp(k, m->key, (size_t)n * sizeof *k)) {
		Placement one = *p;
		one.nrep = 0;
		m->one = place_total_bytes(&one);
		memcpy(m->key, k, (size_t)n * sizeof *k);
		m->nkey = n;
	}
	return m->one * place_replicas(p);
}

void gemm_figures(const GemmShape *s, const Candidate *c, GemmFigures *f)
{
	Candidate all = *c;
	all.staging = STAGING_PACK_ONCE, all.unpack = 1;
	f->nsc = 1 + (c->grid[1] > 1);
	f->totals = 0;
	for (int sc = 0; sc < f->nsc; sc++) {
		all.scatter = sc;
		gemm_placements(s, &all, f->pl[sc]);
		for (int i = 0; i < GP_COUNT; i++)
			f->max[sc][i] = f->pl[sc][i].rank ? place_max_bytes(&f->pl[sc][i]) : 0;
		f->red_tiles[sc] = place_shards(&f->pl[sc][GP_OUT]);
	}
	f->pieces = gemm_stage_pieces(s, c->grid);
	if (f->pieces > 1) {
		Placement sp[GP_COUNT];
		all.staging = STAGING_SPREAD, all.scatter = 0;
		gemm_placements(s, &all, sp);
		for (int i = 0; i < 2; i++) {
			f->spread[i] = sp[GP_A_STAGE + i];
			f->spread_max[i] = place_max_bytes(&f->spread[i]);
		}
	}
}

/* Largest shard of placement i for c (f: c's grid's figures). */
static int64_t fig_max(const GemmFigures *f, const Candidate *c, int sc, int i)
{
	if (c->staging == STAGING_SPREAD && f->pieces > 1 && (i == GP_A_STAGE || i == GP_A_PACKED))
		return f->spread_max[i - GP_A_STAGE];
	return f->max[sc][i];
}

static int64_t fig_total(const GemmFigures *f, const Candidate *c, int sc, int i)
{
	if (c->staging == STAGING_SPREAD && f->pieces > 1 && (i == GP_A_STAGE || i == GP_A_PACKED))
		return f->spread_total[i - GP_A_STAGE];
	return f->total[sc][i];
}

void gemm_figures_total(GemmFigures *f)
{
	if (f->totals)
		return;
	for (int sc = 0; sc < f->nsc; sc++)
		for (int i = 0; i < GP_COUNT; i++)
			f->total[sc][i] = f->pl[sc][i].rank ? shard_total(last_bytes[sc][i], &f->pl[sc][i]) : 0;
	for (int i = 0; f->pieces > 1 && i < 2; i++)
		f->spread_total[i] = place_total_bytes(&f->spread[i]);
	f->totals = 1;
}

/* Placement i's largest shard counts in c's per-tile bound. */
static int gp_counted(const GemmShape *s, const Candidate *c, int i)
{
	/* pack-once's packed block is GP_A_MOVED's first replica: one buffer */
	return gp_used(s, c, i) && (i != GP_A_PACKED || c->staging == STAGING_SPREAD);
}

int64_t gemm_tile_bytes(const GemmShape *s, const GemmFigures *f, const Candidate *c)
{
	int64_t b = 0;
	int sc = c->grid[1] > 1 && c->scatter;
	for (int i = 0; i < GP_COUNT; i++)
		if (gp_counted(s, c, i))
			b += fig_max(f, c, sc, i);
	return b;
}

void gemm_score_from(const GemmShape *s, const Machine *m, GemmFigures *f, Candidate *c)
{
	int64_t R = c->grid[0], K = c->grid[1], C = c->grid[2], frag = m->max_transfer_bytes;
	int64_t macs = s->fmt == FMT_FP8 ? m->macs_fp8 : m->macs_fp16;
	int64_t bt = cdiv(s->tokens, R), rows_a = s->batch * bt;
	int64_t bk = cdiv(strips(s), K) * fmt_mu(s->fmt), bc = cdiv(groups(s), C) * 16;
	int64_t max[GP_COUNT] = { 0 }, frags = 0, phases = 0, xbytes = 0, local = 0;
	int sc = K > 1 && c->scatter;

	gemm_figures_total(f);
	c->tiles = R * K * C;
	c->total = c->largest = 0;
	c->tile_bytes = gemm_tile_bytes(s, f, c);
	for (int i = 0; i < GP_COUNT; i++) {
		if (!gp_used(s, c, i))
			continue;
		max[i] = fig_max(f, c, sc, i);
		if (!gp_counted(s, c, i))
			continue;
		c->total += fig_total(f, c, sc, i);
		if (max[i] > c->largest)
			c->largest = max[i];
	}

	/* Rows: tiles taking part in each copy's phase. Fragments: runs per
	 * receiver (contiguous spans cut at max_transfer_bytes, one per row for
	 * row gathers, one per 32-byte strip row for relayouts), plus one send
	 * per run. */
	c->rows = 0;
	if (c->staging == STAGING_PACK_ONCE || c->staging == STAGING_SPREAD) {
		int64_t P = c->staging == STAGING_SPREAD ? f->pieces : 1;
		c->rows += s->owners + R * K * P;           /* gather into the stage */
		c->rows += R * K * C;                       /* replicate the packed block or pieces */
		frags += 2 * R * K * P * rows_a;
		frags += R * K * P * (1 + C) * cdiv(max[GP_A_PACKED], frag);
		xbytes += max[GP_A_STAGE] + max[GP_A_MOVED];
		local += max[GP_A_STAGE] + (P > 1 ? max[GP_A_PACKED] : 0);      /* the pack; spread: the own piece */
		phases += 2;
	} else {
		c->rows += s->owners + R * K * C;
		frags += (1 + C) * R * K * rows_a * cdiv(bk, fmt_mu(s->fmt));
		xbytes += max[GP_A_MOVED];
		phases += 1;
	}
	if (c->cast == CAST_LATE)
		local += max[GP_A_MOVED];
	c->rows += s->b_home_shards + R * K * C;
	frags += R * K * C * (cdiv(max[GP_B_OP], frag) + cdiv(bc, 16)) + s->b_home_shards;
	xbytes += max[GP_B_OP];
	phases += 1;
	int64_t red_tiles = f->red_tiles[sc];             /* the reduction's and the result's */
	if (s->has_bias) {
		c->rows += s->bias_home_shards + red_tiles;
		frags += 2 * red_tiles;
		xbytes += max[GP_BIAS_OP];
	}
	if (K > 1 && c->scatter) {      /* every tile sends a part to each of its K tiles */
		int64_t parts, blk, runs = cdiv(bc, 16);
		if (gemm_scatter_axis(s, c->grid, &parts, &blk))
			runs *= s->batch;       /* a token part is a run per batch entry and strip */
		c->rows += R * K * C;
		frags += 2 * R * K * C * parts * runs;
		xbytes += max[GP_RED] - max[GP_RED] / K;
		local += max[GP_RED];
		phases += 1;
	} else if (K > 1) {
		c->rows += R * K * C;
		frags += 2 * R * K * C * cdiv(max[GP_PARTIAL], frag);
		xbytes += (K - 1) * max[GP_PARTIAL];
		local += max[GP_RED];
		phases += 1;
	}
	c->rows += red_tiles + s->owners;                   /* back to canonical */
	if (c->unpack) {        /* a row's columns of a block are one run */
		frags += 2 * s->owners * s->owner_batch * C;
		local += max[GP_OUT];
	} else {                /* a 16-column strip row is a run */
		frags += 2 * s->owners * s->owner_batch * cdiv(bc, 16) * C;
	}
	xbytes += max[GP_OUT];
	phases += 1;
	/* The sum of the partials on the busiest tile: every fp16 element of
	 * its reduction block (all K partials of its part) read once. */
	int64_t reduce = K > 1 ? max[GP_RED] / 2 * m->reduction_cycles_per_element : 0;
	c->cycles = rows_a * bk * bc / macs + reduce + xbytes / m->exchange_bytes_per_cycle +
		    local / m->local_copy_bytes_per_cycle + phases * m->sync_cycles;
	c->tables = 8 * c->rows + 8 * frags;
}

void gemm_score(const GemmShape *s, const Machine *m, Candidate *c)
{
	GemmFigures f;
	gemm_figures(s, c, &f);
	gemm_score_from(s, m, &f, c);
}

static int cmp64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

const char *objective_name(Objective o)
{
	static const char *n[] = { "capacity", "capacity+tables", "memory", "cycles" };
	return n[o];
}

int candidate_cmp(const Candidate *a, const Candidate *b, Objective o)
{
	int r;
	if (a->exact && b->exact) {     /* trial figures: fitting first, then the objective */
		if (a->fits != b->fits)
			return a->fits ? -1 : 1;
		/* cycles: the fewest modelled cycles (with the table price:
		 * x_score) among fitting ones; memory
		 * (and any candidate that does not fit): the most headroom on
		 * the worst tile, in steps of 1%, then the least bytes */
		int64_t ea = (int64_t)(a->x_excess * 100), eb = (int64_t)(b->x_excess * 100);
		if (o == OBJ_CYCLES && a->fits && (r = cmp64(a->x_score, b->x_score)))
			return r;
		if ((r = cmp64(ea, eb)))
			return r;
		if ((r = cmp64(a->x_bytes, b->x_bytes)) || (r = cmp64(a->x_peak, b->x_peak)))
			return r;
	}
	if (o != OBJ_CAPACITY && (r = cmp64(a->total + a->tables, b->total + b->tables)))
		return r;
	if ((r = cmp64(a->total, b->total)) || (r = cmp64(a->largest, b->largest)) ||
	    (r = cmp64(a->rows, b->rows)) || (r = cmp64(a->cycles, b->cycles)) ||
	    (r = cmp64(a->tiles, b->tiles)))
		return r;
	for (int i = 0; i < 3; i++)
		if ((r = cmp64(a->grid[i], b->grid[i])))
			return r;
	if ((r = cmp64(a->cast, b->cast)) || (r = cmp64(a->staging, b->staging)) ||
	    (r = cmp64(a->unpack, b->unpack)))
		return r;
	return cmp64(a->scatter, b->scatter);
}
