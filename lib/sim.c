#include "sim.h"

#include <stdlib.h>
#include <string.h>

void sim_init(Sim *s, const Machine *m, int counting)
{
	memset(s, 0, sizeof *s);
	s->tiles = m->tiles;
	s->sram = m->sram_bytes;
	s->counting = counting;
	s->mem = xcalloc((size_t)s->tiles, sizeof *s->mem);
	if (counting)
		s->count = xcalloc((size_t)s->tiles, sizeof *s->count);
}

void sim_free(Sim *s)
{
	for (int64_t t = 0; t < s->tiles; t++) {
		free(s->mem[t]);
		if (s->count)
			free(s->count[t]);
	}
	free(s->mem);
	free(s->count);
	memset(s, 0, sizeof *s);
}

uint8_t *sim_tile(Sim *s, int64_t t)
{
	if (!s->mem[t])
		s->mem[t] = xcalloc((size_t)s->sram, 1);
	return s->mem[t];
}

uint8_t *sim_count(Sim *s, int64_t t)
{
	if (!s->count[t])
		s->count[t] = xcalloc((size_t)s->sram, 1);
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
} Walk;

/* Element index of shard-local (r, c) in the whole tensor. */
static int64_t elem_of(const Placement *p, const int64_t *idx, int64_t r, int64_t c)
{
	int last = p->rank - 1;
	int64_t e = 0, rem = r, coord[MAX_RANK];
	for (int a = last - 1; a >= 0; a--) {
		int64_t ext = place_extent(p, a, idx[a]);
		coord[a] = idx[a] * p->block[a] + rem % ext;
		rem /= ext;
	}
	coord[last] = idx[last] * p->block[last] + c;
	for (int a = 0; a <= last; a++)
		e = e * p->shape[a] + coord[a];
	return e;
}

static int fill_shard(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Walk *w = ctx;
	Layout l = place_layout(p, idx);
	int esz = fmt_bytes(p->fmt);
	uint8_t *m = sim_tile(w->s, t) + p->addr;
	(void)rep;
	memset(m, 0, (size_t)layout_bytes(&l));
	for (int64_t r = 0; r < l.rows; r++)
		for (int64_t c = 0; c < l.cols; c++) {
			int64_t e = elem_of(p, idx, r, c), off = layout_offset(&l, r, c) * esz;
			for (int k = 0; k < esz; k++)
				m[off + k] = ref_byte(p->tensor, e, k);
		}
	return 0;
}

void sim_fill(Sim *s, const Plan *pl, int i)
{
	Walk w = { s, pl, i, -1, NULL, 0, -1 };
	place_each(&pl->p[i], s->tiles, fill_shard, &w);
}

static int check_shard(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Walk *w = ctx;
	Layout l = place_layout(p, idx);
	int esz = fmt_bytes(p->fmt);
	int64_t bytes = layout_bytes(&l);
	uint8_t *m = sim_tile(w->s, t) + p->addr, *c = sim_count(w->s, t) + p->addr;
	int pad = p->layout == LAYOUT_AMP_LEFT || p->layout == LAYOUT_TRANSPOSED_RIGHT;
	const char *tn = w->pl->t[p->tensor].name;
	(void)rep;

	/* An alias is the source's buffer: nothing written, data in place. */
	int alias = 0;
	{
		const Placement *S = &w->pl->p[w->src];
		if (S->addr == p->addr && S->layout == p->layout) {
			int64_t z[MAX_REP] = { 0 };
			int64_t n = place_shards(S), sidx[MAX_RANK];
			for (int64_t q = 0; q < n && !alias; q++) {
				int64_t u = q;
				for (int a = S->rank - 1; a >= 0; a--) {
					sidx[a] = u % S->split[a];
					u /= S->split[a];
				}
				if (place_tile(S, sidx, z, w->s->tiles) != t)
					continue;
				alias = 1;
				for (int a = 0; a < S->rank; a++)
					if (sidx[a] * S->block[a] != idx[a] * p->block[a] ||
					    place_extent(S, a, sidx[a]) != place_extent(p, a, idx[a]))
						alias = 0;
			}
		}
	}
	uint8_t *seen = xcalloc((size_t)bytes, 1);
	for (int64_t r = 0; r < l.rows; r++)
		for (int64_t cc = 0; cc < l.cols; cc++) {
			int64_t e = elem_of(p, idx, r, cc), off = layout_offset(&l, r, cc) * esz;
			for (int k = 0; k < esz; k++) {
				uint8_t want = ref_byte(p->tensor, e, k), got = m[off + k];
				int n = c[off + k];
				seen[off + k] = 1;
				if (got != want || (!alias && n != 1) || (alias && n != 0)) {
					free(seen);
					return errf(w->e, "tile %lld, step %d: tensor '%s' (placement '%s') "
						    "offset %lld (element %lld byte %d): expected 0x%02x, "
						    "found 0x%02x, written %d times%s", (long long)t, w->step,
						    tn, p->name, (long long)(p->addr + off), (long long)e, k,
						    want, got, n, n == 0 ? " (missing)" : n > 1 ? " (overwritten)" :
						    " (misrouted)");
				}
			}
		}
	for (int64_t off = 0; off < bytes; off++) {
		if (seen[off])
			continue;
		int bad = alias ? c[off] != 0 : pad ? (m[off] != 0 || c[off] != 1) : c[off] > 1;
		if (bad) {
			free(seen);
			return errf(w->e, "tile %lld, step %d: tensor '%s' (placement '%s') padding at "
				    "offset %lld: found 0x%02x, written %d times (expected zero, written once)",
				    (long long)t, w->step, tn, p->name, (long long)(p->addr + off),
				    m[off], c[off]);
		}
	}
	free(seen);
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
	for (int64_t i = 0; i < layout_bytes(&l); i++)
		*sum += c[i];
	return 0;
}

int sim_check_copy(Sim *s, const Plan *pl, int step, Err *e)
{
	const Step *st = &pl->s[step];
	Walk w = { s, pl, st->dst, step, e, 0, st->src };
	if (place_each(&pl->p[st->dst], s->tiles, check_shard, &w))
		return -1;
	/* Every write landed in a destination shard: no stray bytes. */
	int64_t in_dst = 0, all = s->writes;
	Walk sw = { s, pl, st->dst, step, (Err *)&in_dst, 0, st->src };
	place_each(&pl->p[st->dst], s->tiles, sum_counts, &sw);
	if (all != in_dst)
		return errf(e, "step %d: %lld bytes written outside the destination '%s'",
			    step, (long long)(all - in_dst), pl->p[st->dst].name);
	return 0;
}
