/* (mmap's MAP_ANONYMOUS and MAP_NORESERVE are not POSIX) */
#define _DEFAULT_SOURCE
#include "run/sim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "stage/alloc.h"

static int64_t elem_of(const Placement *p, const int64_t *idx, int64_t r, int64_t c);

/* Every tile's SRAM (or write counts) in one anonymous mapping of
 * ordinary pages, each tile's at a page boundary: a page is zero until
 * first written, and one a plan never writes is never mapped (calloc
 * from the heap cleared each tile's whole SRAM, and faulted every page
 * of it in). NULL when the mapping fails: then each tile's from calloc. */
static uint8_t *sram_map(const Sim *s, size_t *len)
{
	size_t page = 4096, stride = ((size_t)s->sram + page - 1) / page * page;
	*len = stride * (size_t)s->tiles;
	void *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void sim_init(Sim *s, const Machine *m, int counting)
{
	memset(s, 0, sizeof *s);
	s->tiles = m->tiles;
	s->sram = m->sram_bytes;
	s->counting = counting;
	s->mem = xcalloc((size_t)s->tiles, sizeof *s->mem);
	s->elem = NULL;
	s->map = sram_map(s, &s->map_len);
	if (counting) {
		s->count = xcalloc((size_t)s->tiles, sizeof *s->count);
		s->cmap = sram_map(s, &s->map_len);
	}
}

void sim_free(Sim *s)
{
	for (int64_t t = 0; t < s->tiles; t++) {
		if (!s->map)
			free(s->mem[t]);
		if (s->count && !s->cmap)
			free(s->count[t]);
	}
	if (s->map)
		munmap(s->map, s->map_len);
	if (s->cmap)
		munmap(s->cmap, s->map_len);
	free(s->mem);
	free(s->count);
	memset(s, 0, sizeof *s);
}

static int threads = 2;
static pthread_once_t threads_once = PTHREAD_ONCE_INIT;

static void read_threads(void)
{
	const char *v = getenv("AMP_THREADS");
	threads = v && strcmp(v, "1") == 0 ? 1 : 2;
}

int sim_threads(void)
{
	pthread_once(&threads_once, read_threads);
	return threads;
}

uint8_t *sim_tile(Sim *s, int64_t t)
{
	if (!s->mem[t])
		s->mem[t] = s->map ? s->map + (size_t)t * (s->map_len / (size_t)s->tiles) : xcalloc((size_t)s->sram, 1);
	return s->mem[t];
}

uint8_t *sim_count(Sim *s, int64_t t)
{
	if (!s->count[t])
		s->count[t] = s->cmap ? s->cmap + (size_t)t * (s->map_len / (size_t)s->tiles) :
			      xcalloc((size_t)s->sram, 1);
	return s->count[t];
}

void sim_clear_counts(Sim *s)
{
	for (int64_t t = 0; s->count && t < s->tiles; t++)
		if (s->count[t])
			memset(s->count[t], 0, (size_t)s->sram);
	s->writes = 0;
}

typedef struct {
	Sim *s;
	Err *e;
} Exec;

static void bump(Sim *s, int64_t t, int64_t a, int64_t n)
{
	uint8_t *c = sim_count(s, t);
	s->writes += n;
	for (int64_t i = 0; i < n; i++)
		if (c[a + i] < 255)
			c[a + i]++;
}

static int member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Exec *ex = ctx;
	Sim *s = ex->s;
	(void)m;
	if (da < 0 || da + x->len > s->sram || (x->kind != X_ZERO && (sa < 0 || sa + x->len > s->sram)))
		return errf(ex->e, "transfer of step %d: address out of SRAM (tile %lld, %lld)",
			    x->step, (long long)dt, (long long)da);
	uint8_t *buf = NULL;
	if (x->kind != X_ZERO) {
		buf = xmalloc((size_t)x->len);
		memcpy(buf, sim_tile(s, st) + sa, (size_t)x->len);
	}
	for (int64_t j = 0; j < x->nrecv; j++) {
		int64_t t = tile_mod(dt + j * x->recv_step, s->tiles);
		if (buf)
			memcpy(sim_tile(s, t) + da, buf, (size_t)x->len);
		else
			memset(sim_tile(s, t) + da, 0, (size_t)x->len);
		if (s->counting)
			bump(s, t, da, x->len);
	}
	free(buf);
	return 0;
}

int sim_xfer(Sim *s, const Xfer *x, Err *e)
{
	Exec ex = { s, e };
	return xfer_each(x, s->tiles, member, &ex) ? -1 : 0;
}

/* ---- reference data and the check ---- */

typedef struct {
	Sim *s;
	const Plan *pl;
	int placement, step;
	Err *e;
	int failed;
	int src;                /* the copy's source, for aliases */
	int64_t aoff;           /* fill: the instance's offset from the address */
} Walk;

/* The expected bytes of elements e .. e + n - 1 of a tensor, packed
 * (n x esz): this iteration's instance of a stacked one. */
static void expect_row(const Sim *s, int tensor, int64_t e, int64_t n, int esz, uint8_t *out)
{
	const PTensor *t = s->plan ? &s->plan->t[tensor] : NULL;
	if (t && t->count > 1) {
		int64_t size = 1;
		for (int a = 0; a < t->rank; a++)
			size *= t->shape[a];
		e += s->iter * size;
	}
	if (s->elem) {
		s->elem(s->elem_ctx, tensor, e, n, out);
		return;
	}
	for (int64_t i = 0; i < n; i++)
		for (int k = 0; k < esz; k++)
			out[i * esz + k] = ref_byte(tensor, e + i, k);
}

/* A shard's row r: its elements' offsets in the layout (off, elements)
 * and their expected bytes (want, packed); a row's elements are
 * consecutive in the tensor (the last axis is the columns). */
typedef struct {
	int64_t *off, *off0;    /* off0: row 0's (layouts are separable) */
	uint8_t *want;
} Row;

static void row_init(Row *w, const Layout *l, int esz)
{
	w->off = xmalloc((size_t)l->cols * sizeof *w->off);
	w->off0 = xmalloc((size_t)l->cols * sizeof *w->off0);
	w->want = xmalloc((size_t)(l->cols * esz));
	layout_row(l, 0, w->off0);
}

static int64_t row_at(Row *w, const Sim *s, const Placement *p, const int64_t *idx, const Layout *l, int64_t r)
{
	int esz = fmt_bytes(p->fmt);
	int64_t e0 = elem_of(p, idx, r, 0), base = layout_offset(l, r, 0);
	for (int64_t c = 0; c < l->cols; c++)
		w->off[c] = w->off0[c] + base;
	expect_row(s, p->tensor, e0, l->cols, esz, w->want);
	return e0;
}

static void row_free(Row *w)
{
	free(w->off);
	free(w->off0);
	free(w->want);
}

int64_t shard_elem(const Placement *p, const int64_t *idx, int64_t r, int64_t c)
{
	return elem_of(p, idx, r, c);
}

static int64_t elem_of(const Placement *p, const int64_t *idx, int64_t r, int64_t c)
{
	int last = p->rank - 1;
	int64_t e = 0, rem = r, coord[MAX_RANK];
	for (int a = last - 1; a >= 0; a--) {
		int64_t ext = place_extent(p, a, idx[a]);
		coord[a] = p->off[a] + idx[a] * p->block[a] + rem % ext;
		rem /= ext;
	}
	coord[last] = p->off[last] + idx[last] * p->block[last] + c;
	for (int a = 0; a <= last; a++)
		e = e * (p->whole[a] ? p->whole[a] : p->shape[a]) + coord[a];
	return e;
}

uint8_t *sim_copy_part(const Plan *pl, int src, int dst, const int64_t *idx)
{
	const Placement *S = &pl->p[src], *D = &pl->p[dst];
	int last = D->rank - 1, whole = 1;
	int64_t lo[MAX_RANK], hi[MAX_RANK];
	for (int a = 0; a <= last; a++) {       /* the shard's box, and is it inside the window? */
		lo[a] = D->off[a] + idx[a] * D->block[a];
		hi[a] = lo[a] + place_extent(D, a, idx[a]);
		whole &= lo[a] >= S->off[a] && hi[a] <= S->off[a] + S->shape[a];
	}
	if (whole)
		return NULL;
	Layout l = place_layout(D, idx);
	int esz = fmt_bytes(D->fmt);
	uint8_t *part = xcalloc((size_t)layout_bytes(&l) + 1, 1);
	int64_t *off = xmalloc((size_t)l.cols * sizeof *off);
	for (int64_t r = 0; r < l.rows; r++) {
		int in = 1;
		for (int64_t a = last - 1, rem = r; a >= 0; a--) {     /* the row's coordinates */
			int64_t ext = hi[a] - lo[a], x = lo[a] + rem % ext;
			in &= x >= S->off[a] && x < S->off[a] + S->shape[a];
			rem /= ext;
		}
		if (!in)
			continue;
		layout_row(&l, r, off);
		for (int64_t c = 0; c < l.cols; c++) {
			int64_t x = lo[last] + c;
			if (x >= S->off[last] && x < S->off[last] + S->shape[last])
				memset(part + off[c] * esz, 1, (size_t)esz);
		}
	}
	free(off);
	return part;
}

static int fill_shard(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Walk *w = ctx;
	Layout l = place_layout(p, idx);
	int esz = fmt_bytes(p->fmt);
	uint8_t *m = sim_tile(w->s, t) + p->addr + w->aoff;
	(void)rep;
	Row row;
	memset(m, 0, (size_t)layout_bytes(&l));
	row_init(&row, &l, esz);
	for (int64_t r = 0; r < l.rows; r++) {
		row_at(&row, w->s, p, idx, &l, r);
		elems_scatter(m, row.off, row.want, l.cols, esz);
	}
	row_free(&row);
	return 0;
}

static int touch(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t);

typedef struct {
	const Placement *p;
	int64_t tiles;
	ShardFn fn;
	void *ctx;
	int part, rc;
} EachHalf;

static void *each_half(void *arg)
{
	EachHalf *h = arg;
	h->rc = place_each_part(h->p, h->tiles, h->fn, h->ctx, h->part, 2);
	return NULL;
}

int sim_each2(Sim *s, const Placement *p, ShardFn fn, void *ctx0, void *ctx1)
{
	pthread_t th;
	EachHalf h[2] = { { p, s->tiles, fn, ctx0, 0, 0 }, { p, s->tiles, fn, ctx1, 1, 0 } };
	if (sim_threads() > 1 && place_shards(p) > 1) {
		place_each(p, s->tiles, touch, s);      /* allocated before the threads */
		if (pthread_create(&th, NULL, each_half, &h[1]) == 0) {
			each_half(&h[0]);
			pthread_join(th, NULL);
			return h[0].rc ? h[0].rc : h[1].rc;
		}
	}
	return place_each(p, s->tiles, fn, ctx0);
}

/* p's shards filled on two threads (each its own copy of w). */
static void fill_each(Sim *s, const Placement *p, Walk *w)
{
	Walk w1 = *w;
	sim_each2(s, p, fill_shard, w, &w1);
}

void sim_fill(Sim *s, const Plan *pl, int i)
{
	Walk w = { s, pl, i, -1, NULL, 0, -1, 0 };
	int64_t iter = s->iter, n = plan_stacked(pl, i) ? pl->t[pl->p[i].tensor].count : 0;
	s->plan = pl;
	if (!n) {
		fill_each(s, &pl->p[i], &w);
		return;
	}
	for (s->iter = 0; s->iter < n; s->iter++) {
		w.aoff = s->iter * place_instance(&pl->p[i]);
		fill_each(s, &pl->p[i], &w);
	}
	s->iter = iter;
}

/* Is dst shard idx on tile t the copy source's own buffer (place_alias0)? */
static int is_alias(const Walk *w, const Placement *p, const int64_t *idx, int64_t t)
{
	(void)p;
	return place_alias0(w->pl, w->src, w->placement, idx, t);
}

static int check_shard(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Walk *w = ctx;
	Layout l = place_layout(p, idx);
	int esz = fmt_bytes(p->fmt);
	int64_t bytes = layout_bytes(&l);
	uint8_t *m = sim_tile(w->s, t) + p->addr, *c = sim_count(w->s, t) + p->addr;
	int pad = p->layout != LAYOUT_ROW_MAJOR;        /* (row-major has no padding) */
	const char *tn = w->pl->t[p->tensor].name;
	(void)rep;

	/* An alias is the source's buffer: the copy writes nothing there (the
	 * source may have been written earlier in the same phase), and the
	 * data is in place. */
	Row row;
	row_init(&row, &l, esz);
	if (is_alias(w, p, idx, t)) {
		for (int64_t r = 0; r < l.rows; r++) {
			row_at(&row, w->s, p, idx, &l, r);
			for (int64_t cc = 0; cc < l.cols; cc++) {
				int64_t off = row.off[cc] * esz;
				const uint8_t *want = row.want + cc * esz;
				for (int k = 0; k < esz; k++)
					if (m[off + k] != want[k]) {
						int wk = want[k];       /* (want is the row's, freed next) */
						row_free(&row);
						return errf(w->e, "tile %lld, step %d: tensor '%s' (placement "
							    "'%s', an alias of its source) offset %lld: expected "
							    "0x%02x, found 0x%02x", (long long)t, w->step, tn,
							    p->name, (long long)(p->addr + off), wk, m[off + k]);
					}
			}
		}
		row_free(&row);
		return 0;
	}
	int alias = 0;
	uint8_t *seen = xcalloc((size_t)bytes, 1);
	uint8_t *part = sim_copy_part(w->pl, w->src, w->placement, idx);   /* (NULL: the whole shard) */
	for (int64_t r = 0; r < l.rows; r++) {
		int64_t e0 = row_at(&row, w->s, p, idx, &l, r);
		for (int64_t cc = 0; cc < l.cols; cc++) {
			int64_t off = row.off[cc] * esz;
			const uint8_t *wants = row.want + cc * esz;
			for (int k = 0; k < esz; k++) {
				uint8_t want = wants[k], got = m[off + k];
				int n = c[off + k];
				seen[off + k] = 1;
				if (part && !part[off + k])
					continue;       /* another copy's part */
				if (got != want || (!alias && n != 1) || (alias && n != 0)) {
					free(seen);
					free(part);
					row_free(&row);
					return errf(w->e, "tile %lld, step %d: tensor '%s' (placement '%s') "
						    "offset %lld (element %lld byte %d): expected 0x%02x, "
						    "found 0x%02x, written %d times%s", (long long)t, w->step,
						    tn, p->name, (long long)(p->addr + off), (long long)(e0 + cc), k,
						    want, got, n, n == 0 ? " (missing)" : n > 1 ? " (overwritten)" :
						    " (misrouted)");
				}
			}
		}
	}
	row_free(&row);
	free(part);
	/* Padding (every layout's but row-major's, which has none): written
	 * once, zero, whether whole strips or panels carry it or the
	 * receiver zeroes it (amp-expand). */
	int64_t bad = -1;
	for (int64_t off = 0; off < bytes && bad < 0; off++)
		if (!seen[off] && (alias ? c[off] != 0 : !pad || m[off] != 0 || c[off] != 1))
			bad = off;
	free(seen);
	if (bad >= 0)
		return errf(w->e, "tile %lld, step %d: tensor '%s' (placement '%s') padding at offset %lld: "
			    "found 0x%02x, written %d times (expected zero, written once)", (long long)t,
			    w->step, tn, p->name, (long long)(p->addr + bad), m[bad], c[bad]);
	return 0;
}

static int sum_counts(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
		      int64_t t)
{
	Walk *w = ctx;
	Layout l = place_layout(p, idx);
	const uint8_t *c = sim_count(w->s, t) + p->addr;
	int64_t *sum = (int64_t *)w->e;
	(void)rep;
	if (is_alias(w, p, idx, t))
		return 0;
	uint8_t *part = sim_copy_part(w->pl, w->src, w->placement, idx);   /* the bytes this copy owns */
	for (int64_t i = 0; i < layout_bytes(&l); i++)
		*sum += !part || part[i] ? c[i] : 0;
	free(part);
	return 0;
}

static int check_range(Sim *s, const Plan *pl, int first, int last, Err *e)
{
	int64_t in_dst = 0;
	s->plan = pl;
	for (int i = first; i <= last; i++) {
		const Step *st = &pl->s[i];
		if (st->kind != STEP_COPY)
			continue;
		Walk w = { s, pl, st->dst, i, e, 0, st->src, 0 };
		if (place_each(&pl->p[st->dst], s->tiles, check_shard, &w))
			return -1;
		Walk sw = { s, pl, st->dst, i, (Err *)&in_dst, 0, st->src, 0 };
		place_each(&pl->p[st->dst], s->tiles, sum_counts, &sw);
	}
	/* Every write landed in a destination shard: no stray bytes. */
	if (s->writes != in_dst)
		return errf(e, "steps %d..%d: %lld bytes written outside every destination",
			    first, last, (long long)(s->writes - in_dst));
	return 0;
}

typedef struct {
	Sim *s;
	const Plan *pl;
	int phase;
	Err *e;
	int64_t shard;          /* the shard whose expected image is cached */
	uint8_t *image, *valid; /* valid: its element bytes, made only when a byte differs */
	int has_valid;
	int64_t cap;
	int shard_of;           /* the placement checked */
	int src;                /* the copy that wrote it (-1: any): only the part it writes is checked */
	uint8_t *part;          /* that part of the cached shard (NULL: all of it) */
} Plain;

/* The expected bytes of a shard (padding zero) and which bytes are data,
 * built once per shard and compared with every replica. */
static void shard_image(Plain *w, const Placement *p, const int64_t *idx, const Layout *l)
{
	int esz = fmt_bytes(p->fmt);
	int64_t bytes = layout_bytes(l), run = layout_run(l);
	if (bytes > w->cap) {
		w->cap = bytes;
		w->image = xrealloc(w->image, (size_t)bytes);
		w->valid = xrealloc(w->valid, (size_t)bytes);
	}
	Row row;
	memset(w->image, 0, (size_t)bytes);
	w->has_valid = 0;
	row_init(&row, l, esz);
	for (int64_t r = 0; r < l->rows; r++) {
		row_at(&row, w->s, p, idx, l, r);
		if (run == 1) {
			elems_scatter(w->image, row.off, row.want, l->cols, esz);
			continue;
		}
		for (int64_t c = 0; c < l->cols; c += run) {    /* runs of consecutive elements */
			if (run * esz == 32 && l->cols - c >= run)     /* a strip row: one vector move */
				memcpy(w->image + row.off[c] * esz, row.want + c * esz, 32);
			else
				memcpy(w->image + row.off[c] * esz, row.want + c * esz,
				       (size_t)((l->cols - c < run ? l->cols - c : run) * esz));
		}
	}
	row_free(&row);
}

/* The cached shard's element bytes (the rest is padding), for a report. */
static void shard_valid(Plain *w, const Placement *p, const Layout *l)
{
	int esz = fmt_bytes(p->fmt);
	int64_t *off = xmalloc((size_t)l->cols * sizeof *off);
	memset(w->valid, 0, (size_t)layout_bytes(l));
	for (int64_t r = 0; r < l->rows; r++) {
		layout_row(l, r, off);
		for (int64_t c = 0; c < l->cols; c++)
			memset(w->valid + off[c] * esz, 1, (size_t)esz);
	}
	free(off);
	w->has_valid = 1;
}

static int plain_shard(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Plain *w = ctx;
	Layout l = place_layout(p, idx);
	int64_t bytes = layout_bytes(&l), lin = 0;
	const uint8_t *m = sim_tile(w->s, t) + p->addr;
	(void)rep;
	for (int a = 0; a < p->rank; a++)
		lin = lin * p->split[a] + idx[a];
	if (lin != w->shard) {
		shard_image(w, p, idx, &l);
		w->shard = lin;
		free(w->part);
		w->part = w->src >= 0 ? sim_copy_part(w->pl, w->src, w->shard_of, idx) : NULL;
	}
	if (!w->part && !memcmp(m, w->image, (size_t)bytes))
		return 0;
	if (!w->has_valid)
		shard_valid(w, p, &l);
	for (int64_t off = 0; off < bytes; off++) {
		if (m[off] == w->image[off] || (w->part && !w->part[off]))
			continue;       /* (outside the part: another copy's) */
		if (!w->valid[off] && p->layout == LAYOUT_ROW_MAJOR)
			continue;
		if (!w->valid[off])
			return errf(w->e, "tile %lld, phase %d: tensor '%s' (placement '%s') padding at "
				    "offset %lld: expected 0x00, found 0x%02x", (long long)t, w->phase,
				    w->pl->t[p->tensor].name, p->name, (long long)(p->addr + off), m[off]);
		return errf(w->e, "tile %lld, phase %d: tensor '%s' (placement '%s') at offset %lld: "
			    "expected 0x%02x, found 0x%02x", (long long)t, w->phase,
			    w->pl->t[p->tensor].name, p->name, (long long)(p->addr + off), w->image[off], m[off]);
	}
	return 0;
}

/* One thread's half of a placement's check: its first failure, by shard
 * and replica, so the two halves report what one pass would. */
typedef struct {
	Plain w;
	Err e;
	int part, rc;
	int64_t bad_shard, bad_rep;
} Half;

static int half_shard(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Half *h = ctx;
	if (!plain_shard(&h->w, p, idx, rep, t))
		return 0;
	h->bad_shard = h->bad_rep = 0;
	for (int a = 0; a < p->rank; a++)
		h->bad_shard = h->bad_shard * p->split[a] + idx[a];
	for (int k = 0; k < p->nrep; k++)
		h->bad_rep = h->bad_rep * p->rep[k] + rep[k];
	return -1;
}

static void *check_half(void *arg)
{
	Half *h = arg;
	h->rc = place_each_part(&h->w.pl->p[h->w.shard_of], h->w.s->tiles, half_shard, h, h->part, 2);
	return NULL;
}

static int touch(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	(void)p, (void)idx, (void)rep;
	sim_tile(ctx, t);               /* allocated here, before the threads read */
	return 0;
}

int sim_check_placement(Sim *s, const Plan *pl, int i, int phase, Err *e)
{
	return sim_check_part(s, pl, i, -1, phase, e);
}

int sim_check_part(Sim *s, const Plan *pl, int i, int src, int phase, Err *e)
{
	Half h[2];
	pthread_t th;
	s->plan = pl;
	place_each(&pl->p[i], s->tiles, touch, s);
	for (int k = 0; k < 2; k++) {
		h[k] = (Half){ { s, pl, phase, NULL, -1, NULL, NULL, 0, 0, i, src, NULL }, { { 0 } }, k, 0, 0, 0 };
		h[k].w.e = &h[k].e;
	}
	int two = sim_threads() > 1 && place_shards(&pl->p[i]) > 1 &&
		  pthread_create(&th, NULL, check_half, &h[1]) == 0;
	if (two) {
		check_half(&h[0]);
		pthread_join(th, NULL);
	} else {
		h[0].rc = place_each(&pl->p[i], s->tiles, half_shard, &h[0]);
	}
	const Half *bad = NULL;
	for (int k = 0; k < (two ? 2 : 1); k++)
		if (h[k].rc && (!bad || h[k].bad_shard < bad->bad_shard ||
				(h[k].bad_shard == bad->bad_shard && h[k].bad_rep < bad->bad_rep)))
			bad = &h[k];
	if (bad)
		*e = bad->e;
	for (int k = 0; k < 2; k++) {
		free(h[k].w.image);
		free(h[k].w.valid);
		free(h[k].w.part);
	}
	return bad ? -1 : 0;
}

struct SimCheck {
	Plain w;
	Err e;
};

SimCheck *sim_check_begin(Sim *s, const Plan *pl, int i, int src, int phase)
{
	SimCheck *c = xcalloc(1, sizeof *c);
	s->plan = pl;
	c->w = (Plain){ s, pl, phase, &c->e, -1, NULL, NULL, 0, 0, i, src, NULL };
	return c;
}

int sim_check_one(SimCheck *c, const int64_t *idx, int64_t t)
{
	return plain_shard(&c->w, &c->w.pl->p[c->w.shard_of], idx, NULL, t) ? -1 : 0;
}

void sim_check_end(SimCheck *c)
{
	if (!c)
		return;
	free(c->w.image);
	free(c->w.valid);
	free(c->w.part);
	free(c);
}

int sim_check_copy(Sim *s, const Plan *pl, int step, Err *e)
{
	return check_range(s, pl, step, step, e);
}

int sim_check_stage(const Plan *pl, Err *e)
{
	Sim s;
	int rc = 0, ph = 0;
	char *written = xcalloc((size_t)pl->np + 1, 1);

	sim_init(&s, &pl->machine, 1);
	for (int i = 0; i < pl->ns && !rc;) {
		int first = i, last = i;
		while (ph < pl->nph && pl->ph[ph].last < i)
			ph++;
		if (ph < pl->nph && pl->ph[ph].first <= i)
			first = pl->ph[ph].first, last = pl->ph[ph].last;
		i = last + 1;
		if (first == last && pl->s[first].kind != STEP_COPY)
			continue;
		memset(written, 0, (size_t)pl->np);
		for (int k = first; k <= last; k++)
			if (pl->s[k].kind == STEP_COPY)
				written[pl->s[k].dst] = 1;
		for (int k = first; k <= last; k++)
			if (pl->s[k].kind == STEP_COPY && !written[pl->s[k].src])
				sim_fill(&s, pl, pl->s[k].src);
		/* Records run in order; each step is checked when it ends, since a
		 * placement that dies inside a phase may be reused later in it. */
		for (int k = first; k <= last && !rc; k++) {
			if (pl->s[k].kind != STEP_COPY)
				continue;
			sim_clear_counts(&s);
			for (int x = 0; x < pl->nx && !rc; x++)
				if (pl->x[x].step == k)
					rc = sim_xfer(&s, &pl->x[x], e);
			if (!rc)
				rc = check_range(&s, pl, k, k, e);
		}
	}
	sim_free(&s);
	free(written);
	return rc;
}
