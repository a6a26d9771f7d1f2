/* run_exchange.c: the machine's exchange and its run (lib/run/run.h,
 * run_program; docs/machine.md §8): each phase's SENDs and RECVs taken
 * from the program's decoded rows and matched with the schedule's
 * transfers, every write (a receive, a local copy, a zero fill) checked to
 * land inside its step's destination, the destination poisoned, the
 * copies made (tile by tile on two threads where no copy reads the
 * destination) and checked byte for byte (run_phase, for run_program in
 * run_program.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stage/alloc.h"
#include "run/run_int.h"
#include "stage/plan_memory.h"

/* ---- exchange from the program's rows ---- */

/* A send's or a local copy's member, the frag'th of its step: len bytes
 * from tile st at sa (st < 0: zeros). */
typedef struct {
	int64_t st, sa, len;
} Frag;

/* One receive's copy (or a local copy's): fragment frag's bytes to tile
 * dt at da. A step makes millions of them: 16 bytes each, not 48. */
typedef struct {
	int32_t dt;             /* (tiles are at most 2^20: machine.c) */
	uint32_t frag;          /* (a step's fragments are at most UINT32_MAX: reserve_moves) */
	int64_t da;
} Move;

/* A table instruction as the exchange reads it: program_row's Instr
 * (40 bytes) without the fields the exchange does not read, 24 bytes, so
 * a phase's tables take 60% of the room (siglip-mlp's largest phase has
 * 3.8 million instructions). */
typedef struct {
	int64_t addr;
	int64_t aux;            /* SEND: the source's step per iteration (istride); RECV: the sending tile (peer) */
	uint32_t len;           /* (a row's lengths are 32-bit fields: formats/program.md) */
	uint8_t kind;
} Op;

/* The large arrays of a phase, kept from phase to phase (RunMachine.xk):
 * made anew each phase, they were mapped and faulted in each time. */
struct ExKeep {
	Move *mv;
	Frag *fr;
	uint32_t *order;
	int64_t cmv, cfr, cord;
};

typedef struct {
	RunMachine *m;
	Op **row;
	int *n, *cur;
	int phase;
	int failed;
	uint8_t *buf;           /* a fragment's bytes in flight, reused */
	int64_t nbuf;
	int64_t *lo, *hi;       /* per tile: the bytes the present step's destination occupies (lo > hi: none) */
	Move *mv;               /* the step's receives and local copies, checked, not yet made, in schedule order */
	Frag *fr;               /* the step's sends' and local copies' members, in schedule order */
	int64_t nmv, cmv, nfrag, cfr;
	int hazard;             /* a send reads bytes of this step's destination: copy in order, one thread */
	int64_t *first;         /* the moves by destination tile: tile t's are order[first[t] .. first[t + 1]) */
	uint32_t *order;
	int64_t cord;
	int64_t *sfirst;        /* the destination's tiles by shard: shard k's are stiles[sfirst[k] .. sfirst[k + 1]) */
	uint32_t *stiles;
	int src, dst;           /* the step's placements */
} Exchange;

/* The bytes [lo, hi) placement p's shard occupies on tile t (0 when it has none). */
static int shard_range(RunMachine *m, int p, int64_t t, int64_t *lo, int64_t *hi)
{
	const Placement *pp = &m->pl->p[p];
	int64_t idx[MAX_RANK], lin = run_shards_of(m, p)[t];
	if (lin < 0)
		return 0;
	place_shard_idx(pp, lin, idx);
	Layout l = place_layout(pp, idx);
	*lo = pp->addr, *hi = pp->addr + layout_bytes(&l);
	return 1;
}

/* Every write, a receive, a local copy or a zero fill, must land inside
 * its step's destination on its tile: any other byte it wrote would be a
 * stray write into another tensor (or into memory no placement owns),
 * which the destinations' check cannot see. */
static int check_stray(Exchange *x, const Xfer *xf, int64_t t, int64_t addr, int64_t len)
{
	RunMachine *m = x->m;
	const Plan *pl = m->pl;
	int dst = pl->s[xf->step].dst;
	if (addr >= x->lo[t] && addr + len <= x->hi[t])
		return 0;
	/* name what the bytes belong to: a placement live at this step first */
	int *fi = xmalloc((size_t)pl->np * sizeof *fi), *la = xmalloc((size_t)pl->np * sizeof *la);
	int *al = xmalloc((size_t)pl->np * sizeof *al), owner = -1, live = 0;
	plan_lifetimes(pl, fi, la, al);
	for (int p = 0; p < pl->np; p++) {
		int64_t plo, phi;
		if (p == dst || !shard_range(m, p, t, &plo, &phi))
			continue;
		if (plan_stacked(pl, p))
			phi = plo + place_instance(&pl->p[p]) * pl->t[pl->p[p].tensor].count;
		if (plo >= addr + len || addr >= phi)
			continue;
		int l = fi[p] <= xf->step && xf->step <= la[p];
		if (owner < 0 || (l && !live))
			owner = p, live = l;
	}
	free(fi);
	free(la);
	free(al);
	const char *who = xf->kind == X_SEND ? "a receive" : xf->kind == X_LOCAL ? "a local copy" : "a zero fill";
	return errf(m->e, "tile %lld, phase %d: %s writes bytes %lld..%lld outside the destination "
		    "'%s' of its step %d, into %s%s%s%s", (long long)t, x->phase, who, (long long)addr,
		    (long long)(addr + len), pl->p[dst].name, xf->step, owner >= 0 ? "placement '" : "",
		    owner >= 0 ? pl->p[owner].name : "memory no placement owns",
		    owner >= 0 ? "' (" : "", owner >= 0 ? (live ? "live at this step)" : "dead at this step)") : "");
}

/* Tile t's next instruction. Each tile's row is read in order, but the
 * tiles' turns come in the schedule's order, far apart: the line after
 * this instruction's is fetched now, to be in cache at the tile's next turn
 * (a row has room for one instruction past its last). */
static Op *next_instr(Exchange *x, int64_t t)
{
	if (!x->row[t] || x->cur[t] >= x->n[t])
		return NULL;
	int k = x->cur[t]++;
	__builtin_prefetch(&x->row[t][k + 2 <= x->n[t] ? k + 2 : x->n[t]]);
	return &x->row[t][k];
}


/* Room for the moves and fragments of any one of the copy steps first ..
 * last: each member of a record is a fragment and moves to its nrecv
 * receivers, so the counts are known before any is made (the arrays grow
 * at most once a phase, to its largest step's, not by doubling step by
 * step). A step of more than UINT32_MAX of either is refused. */
static int reserve_moves(Exchange *x, const Plan *pl, int first, int last)
{
	int64_t need = 0, frags = 0, step = 0, sfr = 0;
	for (int i = 0, s = -1; i < pl->nx; i++) {
		const Xfer *xf = &pl->x[i];
		if (xf->step < first || xf->step > last || pl->s[xf->step].kind != STEP_COPY)
			continue;
		if (xf->step != s)
			s = xf->step, step = sfr = 0;
		step += xfer_members(xf) * (xf->nrecv > 0 ? xf->nrecv : 0);
		sfr += xfer_members(xf);
		need = step > need ? step : need;
		frags = sfr > frags ? sfr : frags;
		if (step > UINT32_MAX || sfr > UINT32_MAX)
			return errf(x->m->e, "step %d: more than %lu receives or fragments, more than amp-run "
				    "counts", s, (unsigned long)UINT32_MAX);
	}
	if (need > x->cmv) {            /* (none kept yet: x->nmv is 0) */
		free(x->mv);
		x->mv = xmalloc((size_t)(x->cmv = need) * sizeof *x->mv);
	}
	if (frags > x->cfr) {
		free(x->fr);
		x->fr = xmalloc((size_t)(x->cfr = frags) * sizeof *x->fr);
	}
	return 0;
}

/* (Room was made by reserve_moves.) */
static inline void push_move(Exchange *x, int64_t dt, int64_t da)
{
	x->mv[x->nmv++] = (Move){ (int32_t)dt, (uint32_t)x->nfrag, da };
}

static int fragment(void *ctx, const Xfer *xf, int64_t mb, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Exchange *x = ctx;
	RunMachine *m = x->m;
	int64_t T = m->pl->machine.tiles;
	(void)mb, (void)sa, (void)da;
	Op *s = next_instr(x, st);
	if (!s || s->kind != I_SEND || (int64_t)s->len != xf->len)
		return errf(m->e, "tile %lld, phase %d: the table's next instruction is not the send of "
			    "%lld bytes the schedule needs (step %d)", (long long)st, x->phase,
			    (long long)xf->len, xf->step);
	int64_t sa0 = s->addr + m->s.iter * s->aux;   /* a moving source: this iteration's */
	if (sa0 < 0 || sa0 + xf->len > m->s.sram) {
		return errf(m->e, "tile %lld, phase %d: send address %lld out of SRAM", (long long)st,
			    x->phase, (long long)sa0);
	}
	/* Receives write only inside the step's destination (else
	 * check_stray stops the run), so a send that reads none of it on its
	 * tile reads the same bytes whenever it is copied: the step's copies
	 * are checked first and made afterwards (make_moves). */
	sim_tile(&m->s, st);
	if (sa0 < x->hi[st] && x->lo[st] < sa0 + xf->len)
		x->hazard = 1;
	for (int64_t j = 0; j < xf->nrecv; j++) {
		int64_t t = tile_mod(dt + j * xf->recv_step, T);
		Op *r = next_instr(x, t);
		if (!r || r->kind != I_RECV || (int64_t)r->len != xf->len || r->aux != st) {
			return errf(m->e, "tile %lld, phase %d: the table's next instruction is not the "
				    "receive of %lld bytes from tile %lld the schedule needs (step %d)",
				    (long long)t, x->phase, (long long)xf->len, (long long)st, xf->step);
		}
		if (r->addr < 0 || r->addr + xf->len > m->s.sram || check_stray(x, xf, t, r->addr, xf->len)) {
			if (r->addr < 0 || r->addr + xf->len > m->s.sram)
				return errf(m->e, "tile %lld, phase %d: receive address %lld out of SRAM",
					    (long long)t, x->phase, (long long)r->addr);
			return -1;
		}
		sim_tile(&m->s, t);
		push_move(x, t, r->addr);
	}
	x->fr[x->nfrag++] = (Frag){ st, sa0, xf->len };
	return 0;
}


/* Fills a copy's destination shards with 0xA5, but those that alias the
 * source's shard on their tile (the same buffer). */
typedef struct {
	RunMachine *m;
	int src, dst;
} Poison;

static int poison(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Poison *q = ctx;
	Layout l = place_layout(p, idx);
	(void)rep;
	if (q->m->pl->p[q->src].addr == p->addr && place_aliases(q->m->pl, q->src, q->dst, idx, t))
		return 0;
	uint8_t *part = sim_copy_part(q->m->pl, q->src, q->dst, idx), *d = sim_tile(&q->m->s, t) + p->addr;
	if (!part)
		memset(d, 0xA5, (size_t)layout_bytes(&l));
	for (int64_t b = 0; part && b < layout_bytes(&l); b++)
		if (part[b])            /* only the part this copy writes: other copies write the rest */
			d[b] = 0xA5;
	free(part);
	return 0;
}

/* A member of a local copy (on-tile, or zeros), checked as sim_xfer
 * checks it and kept as moves like a send's. */
static int local_move(void *ctx, const Xfer *xf, int64_t mb, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Exchange *x = ctx;
	RunMachine *m = x->m;
	int64_t T = m->pl->machine.tiles;
	(void)mb;
	if (da < 0 || da + xf->len > m->s.sram || (xf->kind != X_ZERO && (sa < 0 || sa + xf->len > m->s.sram)))
		return errf(m->e, "transfer of step %d: address out of SRAM (tile %lld, %lld)", xf->step,
			    (long long)dt, (long long)da);
	if (xf->kind != X_ZERO) {
		sim_tile(&m->s, st);
		if (sa < x->hi[st] && x->lo[st] < sa + xf->len)
			x->hazard = 1;
	}
	for (int64_t j = 0; j < xf->nrecv; j++) {
		int64_t t = tile_mod(dt + j * xf->recv_step, T);
		if (check_stray(x, xf, t, da, xf->len))
			return -1;
		sim_tile(&m->s, t);
		push_move(x, t, da);
	}
	x->fr[x->nfrag++] = (Frag){ xf->kind == X_ZERO ? -1 : st, sa, xf->len };
	return 0;
}

/* Tile t's shard of the step's destination poisoned (as poison does). */
static void poison_tile(Exchange *x, int64_t t)
{
	RunMachine *m = x->m;
	int64_t lin = run_shards_of(m, x->dst)[t], idx[MAX_RANK];
	if (lin < 0)
		return;
	place_shard_idx(&m->pl->p[x->dst], lin, idx);
	Poison q = { m, x->src, x->dst };
	poison(&q, &m->pl->p[x->dst], idx, NULL, t);
}

typedef struct {
	Exchange *x;
	int part;
	SimCheck *c;            /* this thread's check */
	int bad;                /* a replica failed it */
} MovePart;

/* The shards lin = part mod 2 of the step's destination, each replica's
 * tile poisoned, given its copies in order and checked while its bytes
 * are in cache (the shard's expected image made once for its replicas). */
static void *move_part(void *arg)
{
	MovePart *p = arg;
	Exchange *x = p->x;
	Sim *s = &x->m->s;
	const Placement *dp = &x->m->pl->p[x->dst];
	for (int64_t lin = p->part; lin < place_shards(dp); lin += 2) {
		int64_t idx[MAX_RANK];
		place_shard_idx(dp, lin, idx);
		for (int64_t k = x->sfirst[lin]; k < x->sfirst[lin + 1]; k++) {
			int64_t t = x->stiles[k];
			poison_tile(x, t);
			uint8_t *d = s->mem[t];
			for (int64_t i = x->first[t]; i < x->first[t + 1]; i++) {
				const Move *v = &x->mv[x->order[i]];
				const Frag *f = &x->fr[v->frag];
				if (f->st < 0)
					memset(d + v->da, 0, (size_t)f->len);
				else
					memcpy(d + v->da, s->mem[f->st] + f->sa, (size_t)f->len);
			}
			if (!p->bad && sim_check_one(p->c, idx, t))
				p->bad = 1;
		}
	}
	return NULL;
}

/* Counting sort: items 0 .. n - 1, item i's key key[i * stride] in
 * [0, nk), into order, grouped by key and in their own order within one;
 * first[k] (nk + 1 of them) where key k's start. */
static void group_by(const int32_t *key, int64_t stride, int64_t n, int64_t nk, int64_t *first, uint32_t *order)
{
	memset(first, 0, (size_t)(nk + 1) * sizeof *first);
	for (int64_t i = 0; i < n; i++)
		first[key[i * stride] + 1]++;
	for (int64_t k = 0; k < nk; k++)
		first[k + 1] += first[k];
	int64_t *at = xmalloc((size_t)(nk + 1) * sizeof *at);
	memcpy(at, first, (size_t)(nk + 1) * sizeof *at);
	for (int64_t i = 0; i < n; i++)
		order[at[key[i * stride]]++] = (uint32_t)i;
	free(at);
}

/* Sets bits [a, b) of the bitmap w; returns the first of them that was
 * set already, or -1. Whole 64-bit words at a time: a span is a run. */
static int64_t set_span(uint64_t *w, int64_t a, int64_t b)
{
	int64_t first = -1;
	while (a < b) {
		int64_t k = a >> 6, lo = a & 63, hi = b - (k << 6) < 64 ? b - (k << 6) : 64;
		uint64_t m = (hi == 64 ? ~UINT64_C(0) : (UINT64_C(1) << hi) - 1) & ~((UINT64_C(1) << lo) - 1);
		if (first < 0 && (w[k] & m))
			first = (k << 6) + __builtin_ctzll(w[k] & m);
		w[k] |= m;
		a = (k + 1) << 6;
	}
	return first;
}

/* The first clear bit of w in [0, n), or n. */
static int64_t first_clear(const uint64_t *w, int64_t n)
{
	for (int64_t k = 0; k << 6 < n; k++)
		if (~w[k]) {
			int64_t i = (k << 6) + __builtin_ctzll(~w[k]);
			return i < n ? i : n;
		}
	return n;
}

/* Every byte of the step's destination written exactly once, its padding
 * too (amp-expand zeroes what whole strips or panels do not carry),
 * counted from the writes' spans, not from the bytes' values: marked on a
 * bitmap of the shard a word at a time, no two overlap, and (check_stray
 * kept them inside the destination) they cover each shard's bytes, as
 * sim_check_stage counts them. A shard that aliases its source is the source's buffer and
 * is written not at all. So a write missing where the poison happens to
 * hold the right value, or a byte written twice with the same value, is
 * named too. */
static int count_writes(Exchange *x, int s)
{
	RunMachine *m = x->m;
	const Plan *pl = m->pl;
	const Placement *p = &pl->p[x->dst];
	const char *tn = pl->t[p->tensor].name;
	int64_t T = pl->machine.tiles;
	const int64_t *ds = run_shards_of(m, x->dst);
	int64_t *first = x->first;
	uint32_t *order;
	uint64_t *bits = NULL;          /* a shard's bytes, written or not */
	int64_t nbits = 0;
	const Placement *S = &pl->p[x->src];
	int64_t *r0 = S->addr == p->addr && S->layout == p->layout ? place_r0_shards(pl, x->src) : NULL;
	int rc = 0;

	/* the moves by destination tile, kept in x for make_moves */
	if (x->nmv + 1 > x->cord) {
		free(x->order);
		x->order = xmalloc((size_t)(x->cord = x->nmv + 1) * sizeof *x->order);
	}
	order = x->order;
	if (x->nmv)
		group_by(&x->mv[0].dt, (int64_t)(sizeof *x->mv / sizeof x->mv[0].dt), x->nmv, T, first, order);
	else
		memset(first, 0, (size_t)(T + 1) * sizeof *first);
	for (int64_t t = 0; t < T && !rc; t++) {
		const uint32_t *o = order + first[t];
		int64_t n = first[t + 1] - first[t], idx[MAX_RANK];
		if (ds[t] < 0)
			continue;       /* (a write there is outside the destination: check_stray) */
		place_shard_idx(p, ds[t], idx);
		Layout l = place_layout(p, idx);
		int alias = place_alias0_at(pl, x->src, x->dst, idx, t, r0);    /* what amp-expand sends nothing */
		if (alias && n) {
			rc = errf(m->e, "tile %lld, phase %d: tensor '%s' (placement '%s') offset %lld: written %lld "
				    "time%s, though the shard is its source's buffer (step %d)", (long long)t,
				    x->phase, tn, p->name, (long long)x->mv[o[0]].da, (long long)n, n > 1 ? "s" : "", s);
			break;
		}
		int64_t wrote = 0, B = layout_bytes(&l), words = (B + 63) >> 6;
		uint8_t *part = sim_copy_part(pl, x->src, x->dst, idx);    /* NULL: the whole shard */
		if (words > nbits)
			bits = xrealloc(bits, (size_t)(nbits = words) * sizeof *bits);
		memset(bits, 0, (size_t)words * sizeof *bits);
		for (int64_t i = 0; i < n && !rc; i++) {
			const Move *v = &x->mv[o[i]];
			int64_t len = x->fr[v->frag].len;
			int64_t twice = set_span(bits, v->da - p->addr, v->da - p->addr + len);
			if (twice >= 0)
				rc = errf(m->e, "tile %lld, phase %d: tensor '%s' (placement '%s') offset %lld: written "
					  "twice (overwritten) by step %d", (long long)t, x->phase, tn, p->name,
					  (long long)(p->addr + twice), s);
			wrote += len;
		}
		if (part) {             /* exactly the part its source's window holds */
			for (int64_t b = 0; b < B && !rc; b++) {
				int on = (int)(bits[b >> 6] >> (b & 63) & 1);
				if (on != part[b])
					rc = errf(m->e, "tile %lld, phase %d: tensor '%s' (placement '%s') offset %lld: %s "
						  "by step %d, %s the part of the shard its source's window holds",
						  (long long)t, x->phase, tn, p->name, (long long)(p->addr + b),
						  on ? "written" : "written 0 times (missing)", s, on ? "outside" : "inside");
			}
			free(part);
			continue;
		}
		if (rc || alias || wrote == B)
			continue;
		int64_t gap = first_clear(bits, B), end = gap;
		while (end < B && !(bits[end >> 6] >> (end & 63) & 1))
			end++;
		rc = errf(m->e, "tile %lld, phase %d: tensor '%s' (placement '%s') bytes %lld..%lld: written 0 times "
			  "(missing) by step %d; %lld of the shard's %lld bytes written", (long long)t, x->phase, tn,
			  p->name, (long long)(p->addr + gap), (long long)(p->addr + end), s, (long long)wrote,
			  (long long)B);
	}
	free(bits);
	free(r0);
	return rc;
}

/* The step's destination poisoned and its checked copies (receives and
 * local copies) made, as if each were made when checked: when no copy
 * reads the destination and every one writes inside it, every byte a
 * copy reads is the same whenever it is read, so each destination tile
 * is poisoned, gets its copies in order and is checked while its bytes
 * are in cache, the shards split over two threads; otherwise the
 * destination is poisoned first and the copies made in order, each send
 * or local copy from a copy of its bytes taken first. Returns 1 when
 * every replica was checked and matched, else 0 (the caller checks the
 * placement, and names the first difference). */
static int make_moves(Exchange *x, int ph)
{
	RunMachine *m = x->m;
	const Plan *pl = m->pl;
	int64_t T = pl->machine.tiles;
	const int64_t *ds = run_shards_of(m, x->dst);
	for (int64_t t = 0; t < T; t++)          /* allocated before any thread */
		if (ds[t] >= 0)
			sim_tile(&m->s, t);
	double t0 = run_now();
	if (!x->hazard && sim_threads() > 1) {
		/* (x->first and x->order: the moves by destination tile, from count_writes) */
		/* the destination's tiles by shard (the tiles with none last, not visited) */
		int64_t ns = place_shards(&pl->p[x->dst]);
		int32_t *key = xmalloc((size_t)T * sizeof *key);
		for (int64_t t = 0; t < T; t++)         /* (a shard per tile at most: ns <= T) */
			key[t] = (int32_t)(ds[t] >= 0 ? ds[t] : ns);
		x->sfirst = xrealloc(x->sfirst, (size_t)(ns + 2) * sizeof *x->sfirst);
		x->stiles = xrealloc(x->stiles, (size_t)T * sizeof *x->stiles);
		group_by(key, 1, T, ns + 1, x->sfirst, x->stiles);
		free(key);
		MovePart mp[2] = { { x, 0, sim_check_begin(&m->s, pl, x->dst, x->src, ph), 0 },
				   { x, 1, sim_check_begin(&m->s, pl, x->dst, x->src, ph), 0 } };
		pthread_t th;
		if (pthread_create(&th, NULL, move_part, &mp[1]) == 0) {
			move_part(&mp[0]);
			pthread_join(th, NULL);
		} else {
			move_part(&mp[0]);
			move_part(&mp[1]);
		}
		sim_check_end(mp[0].c);
		sim_check_end(mp[1].c);
		run_totals.move_secs += run_now() - t0;
		x->nmv = 0;
		return !mp[0].bad && !mp[1].bad;
	}
	Poison q = { m, x->src, x->dst };
	sim_each2(&m->s, &pl->p[x->dst], poison, &q, &q);     /* poison only reads q */
	double t1 = run_now();
	run_totals.poison_secs += t1 - t0;
	for (int64_t i = 0; i < x->nfrag; i++)  /* the snapshot buffer: the longest copy */
		if (x->fr[i].len > x->nbuf) {
			free(x->buf);
			x->nbuf = x->fr[i].len;
			x->buf = xmalloc((size_t)x->nbuf);
		}
	int64_t frag = -1;
	for (int64_t i = 0; i < x->nmv; i++) {
		const Move *v = &x->mv[i];
		const Frag *f = &x->fr[v->frag];
		if (f->st < 0) {
			memset(m->s.mem[v->dt] + v->da, 0, (size_t)f->len);
			continue;
		}
		if (v->frag != frag) {          /* a send's bytes as they are before its receives */
			memcpy(x->buf, m->s.mem[f->st] + f->sa, (size_t)f->len);
			frag = v->frag;
		}
		memcpy(m->s.mem[v->dt] + v->da, x->buf, (size_t)f->len);
	}
	run_totals.move_secs += run_now() - t1;
	x->nmv = 0;
	return 0;
}

/* One thread's share of a phase's tables: the entries of tiles t = part
 * mod 2, in order; its first failure. */
typedef struct {
	const Program *prog;
	Exchange *x;
	int ph, part, bad;
	Err e;
} RowPart;

static void *rows_part(void *arg)
{
	RowPart *r = arg;
	const Program *prog = r->prog;
	for (int i = 0; i < prog->nent; i++) {
		const Entry *en = &prog->ent[i];
		if (en->phase != r->ph || en->tile % 2 != r->part)
			continue;
		Instr *ins;
		int n;
		if (program_row(prog, i, &ins, &n, &r->e)) {
			r->bad = i;
			break;
		}
		/* as Ops (room for one past the last, as next_instr reads ahead);
		 * the Instrs' room serves the next tile's */
		Op *op = xmalloc(((size_t)n + 1) * sizeof *op);
		for (int k = 0; k < n; k++)
			op[k] = (Op){ ins[k].addr, ins[k].kind == I_SEND ? ins[k].istride : ins[k].peer,
				      (uint32_t)ins[k].len, ins[k].kind };
		memset(&op[n], 0, sizeof *op);
		free(ins);
		free(r->x->row[en->tile]);
		r->x->row[en->tile] = op;
		r->x->n[en->tile] = n;
	}
	return NULL;
}

/* Phase ph's tables decoded, the tiles over two threads; the error is the
 * first entry's that fails, as one pass in order reports it. */
static int decode_tables(const Program *prog, int ph, Exchange *x, Err *e)
{
	RowPart rp[2] = { { prog, x, ph, 0, -1, { { 0 } } }, { prog, x, ph, 1, -1, { { 0 } } } };
	pthread_t th;
	if (sim_threads() > 1 && pthread_create(&th, NULL, rows_part, &rp[1]) == 0) {
		rows_part(&rp[0]);
		pthread_join(th, NULL);
	} else {
		rows_part(&rp[0]);
		rows_part(&rp[1]);
	}
	const RowPart *bad = NULL;
	for (int k = 0; k < 2; k++)
		if (rp[k].bad >= 0 && (!bad || rp[k].bad < bad->bad))
			bad = &rp[k];
	if (!bad)
		return 0;
	*e = bad->e;
	return -1;
}

int run_phase(RunMachine *m, const Program *prog, int ph, int first, int last)
{
	const Plan *pl = m->pl;
	int64_t T = pl->machine.tiles;
	if (!m->xk)
		m->xk = xcalloc(1, sizeof *m->xk);
	struct ExKeep *k = m->xk;
	Exchange x = { .m = m, .row = xcalloc((size_t)T, sizeof *x.row), .n = xcalloc((size_t)T, sizeof *x.n),
		       .cur = xcalloc((size_t)T, sizeof *x.cur), .phase = ph, .lo = xmalloc((size_t)T * sizeof *x.lo),
		       .hi = xmalloc((size_t)T * sizeof *x.hi), .mv = k->mv, .fr = k->fr, .cmv = k->cmv,
		       .cfr = k->cfr, .first = xmalloc((size_t)(T + 1) * sizeof *x.first), .order = k->order,
		       .cord = k->cord };
	int rc = 0;
	double t0 = run_now(), t1;

	if (ph >= 0)
		rc = decode_tables(prog, ph, &x, m->e);
	run_totals.table_secs += (t1 = run_now()) - t0;
	/* Step by step (records follow step order): a destination is poisoned
	 * just before its step moves anything, since a placement that dies
	 * earlier in the phase may share its address, and checked when its
	 * step ends, since one that dies later in the phase may be reused. */
	int i = 0;
	if (!rc)
		rc = reserve_moves(&x, pl, first, last);
	for (int s = first; s <= last && !rc; s++) {
		if (pl->s[s].kind != STEP_COPY)
			continue;
		for (int64_t t = 0; t < T; t++)         /* where a receive of this step may write */
			if (!shard_range(m, pl->s[s].dst, t, &x.lo[t], &x.hi[t]))
				x.lo[t] = 1, x.hi[t] = 0;
		x.src = pl->s[s].src, x.dst = pl->s[s].dst;
		x.hazard = 0, x.nmv = x.nfrag = 0;
		while (i < pl->nx && pl->x[i].step < s)
			i++;
		for (; i < pl->nx && pl->x[i].step == s && !rc; i++) {    /* checked, in order */
			const Xfer *xf = &pl->x[i];
			if (xf->kind == X_SEND) {
				if (ph < 0)
					rc = errf(m->e, "step %d: a send outside every phase", xf->step);
				else
					rc = xfer_each(xf, T, fragment, &x) ? -1 : 0;
			} else {
				Xfer lx = *xf;          /* a local copy from a stacked home: this iteration's instance */
				int src = pl->s[s].src;
				if (lx.kind == X_LOCAL && m->stacked[src])
					lx.src_addr += m->s.iter * place_instance(&pl->p[src]);
				rc = xfer_each(&lx, T, local_move, &x) ? -1 : 0;
			}
		}
		if (!rc)
			rc = count_writes(&x, s);
		run_totals.route_secs += (t0 = run_now()) - t1;
		int checked = !rc && make_moves(&x, ph);
		t1 = run_now();
		if (!rc && !checked)
			rc = sim_check_part(&m->s, pl, pl->s[s].dst, pl->s[s].src, ph, m->e);
		run_totals.check_secs += (t0 = run_now()) - t1;
		t1 = t0;
	}
	for (int64_t t = 0; t < T && !rc; t++)
		if (x.row[t] && x.cur[t] != x.n[t])
			rc = errf(m->e, "tile %lld, phase %d: %d instructions of its table were not used by "
				  "the schedule", (long long)t, ph, x.n[t] - x.cur[t]);
	for (int64_t t = 0; t < T; t++)
		free(x.row[t]);
	free(x.row);
	free(x.n);
	free(x.cur);
	free(x.buf);
	free(x.lo);
	free(x.hi);
	*k = (struct ExKeep){ x.mv, x.fr, x.order, x.cmv, x.cfr, x.cord };
	free(x.first);
	free(x.sfirst);
	free(x.stiles);
	return rc;
}

void run_exchange_free(RunMachine *m)
{
	if (!m->xk)
		return;
	free(m->xk->mv);
	free(m->xk->fr);
	free(m->xk->order);
	free(m->xk);
	m->xk = NULL;
}
