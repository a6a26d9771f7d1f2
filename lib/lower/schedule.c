#include "lower/schedule.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cost/replay.h"
#include "stage/limits.h"
#include "stage/table.h"


/* The unit of scheduling: the fragments of one record between one sender
 * and one set of receivers that its innermost loops make (the loops
 * before the first that moves a tile), issued back to back. f is its
 * first fragment. */
typedef struct {
	Frag f;
	int rec;
	int64_t seq;            /* its place in record order */
} Item;

typedef struct {
	Item *it;
	int64_t n, cap;
	const Xfer *x;          /* the step's records */
	int rec;
} Items;

/* Loops of x that keep its tiles: its units' own. */
static int unit_loops(const Xfer *x)
{
	int u = 0;
	while (u < x->nloop && x->loop[u].src_tile == 0 && x->loop[u].dst_tile == 0)
		u++;
	return u;
}

/* Item it's fragments as one record. */
static Xfer unit_of(const Items *v, const Item *it)
{
	Xfer u = v->x[it->rec];
	u.src_tile = it->f.src, u.src_addr = it->f.src_addr;
	u.dst_tile = it->f.dst_tile, u.dst_addr = it->f.dst_addr;
	u.nloop = unit_loops(&u);
	return u;
}

static int collect(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Items *v = ctx;
	(void)m;
	if (v->n == v->cap)
		v->it = xrealloc(v->it, (size_t)(v->cap = v->cap ? 2 * v->cap : 1024) * sizeof *v->it);
	Item i = { { st, sa, dt, da, x->len, x->nrecv, x->recv_step }, v->rec, v->n };
	v->it[v->n++] = i;
	return 0;
}

static int issue_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	(void)m;
	Frag f = { st, sa, dt, da, x->len, x->nrecv, x->recv_step };
	replay_issue(ctx, &f);
	return 0;
}

/* Pairs: the items of one (sender, first receiver), in record order. */
static int by_pair(const void *a, const void *b)
{
	const Item *x = a, *y = b;
	if (x->f.src != y->f.src)
		return x->f.src < y->f.src ? -1 : 1;
	if (x->f.dst_tile != y->f.dst_tile)
		return x->f.dst_tile < y->f.dst_tile ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* A min-heap of pairs by (the start their next item could take, its
 * seq): four children a node, so that a node's children share a cache
 * line and the heap is half as deep; the pair is found from the seq. */
typedef struct {
	int64_t start, seq;
} Key;

static int key_less(const Key *a, const Key *b)
{
	return a->start != b->start ? a->start < b->start : a->seq < b->seq;
}

static void heap_push(Key *h, int64_t *n, Key k)
{
	int64_t i = (*n)++;
	while (i > 0) {
		int64_t p = (i - 1) / 4;
		if (!key_less(&k, &h[p]))
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = k;
}

/* Puts k where h[at] was and sifts it down (the heap's n keys). */
static void heap_down(Key *h, int64_t n, int64_t at, Key k)
{
	int64_t i = at;
	for (;;) {
		int64_t c = 4 * i + 1, e = c + 4 < n ? c + 4 : n;
		if (c >= n)
			break;
		for (int64_t d = c + 1; d < e; d++)
			if (key_less(&h[d], &h[c]))
				c = d;
		if (!key_less(&h[c], &k))
			break;
		h[i] = h[c];
		i = c;
	}
	if (n)
		h[i] = k;
}

static Key heap_pop(Key *h, int64_t *n)
{
	Key top = h[0];
	--*n;
	heap_down(h, *n, 0, h[*n]);
	return top;
}

/* Items by their place in record order. */
static _Thread_local const Items *sorting;

static int by_seq(const void *a, const void *b)
{
	int64_t x = sorting->it[*(const int64_t *)a].seq, y = sorting->it[*(const int64_t *)b].seq;
	return (x > y) - (x < y);
}

static void seq_sort(const Items *v, int64_t *idx, int64_t n)
{
	sorting = v;
	qsort(idx, (size_t)n, sizeof *idx, by_seq);
}

/* Pairs parked on a tile: a min-heap by the place in record order of
 * their next unit. */
typedef struct {
	int64_t *p;
	int64_t n, cap;
} Park;

typedef struct {
	Items *v;
	int64_t *cur, *first;   /* pair p's next unit, and its units first[p]..first[p + 1] */
	Key *h;                 /* the queue */
	int64_t nh;
	Park *park;             /* per tile */
	int64_t *rep, *repof;   /* per tile: its pair in the queue (-1: none); per pair: the tile it stands for */
	int64_t *pof;           /* per item seq: its pair */
	Replay *r;
} List;

static int64_t head_seq(const List *l, int64_t p) { return l->v->it[l->cur[p]].seq; }

static void park_push(List *l, int64_t t, int64_t pair)
{
	Park *k = &l->park[t];
	if (k->n == k->cap)
		k->p = xrealloc(k->p, (size_t)(k->cap = k->cap ? 2 * k->cap : 8) * sizeof *k->p);
	int64_t i = k->n++;
	while (i > 0 && head_seq(l, k->p[(i - 1) / 2]) > head_seq(l, pair)) {
		k->p[i] = k->p[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	k->p[i] = pair;
}

static int64_t park_pop(List *l, int64_t t)
{
	Park *k = &l->park[t];
	int64_t top = k->p[0], last = k->p[--k->n], i = 0;
	for (;;) {
		int64_t c = 2 * i + 1;
		if (c >= k->n)
			break;
		if (c + 1 < k->n && head_seq(l, k->p[c + 1]) < head_seq(l, k->p[c]))
			c++;
		if (head_seq(l, k->p[c]) >= head_seq(l, last))
			break;
		k->p[i] = k->p[c];
		i = c;
	}
	if (k->n)
		k->p[i] = last;
	return top;
}

static void queue(List *l, int64_t pair)
{
	heap_push(l->h, &l->nh, (Key){ replay_start(l->r, &l->v->it[l->cur[pair]].f), head_seq(l, pair) });
}

/* Pair stops standing for its tile: the next pair parked there takes its place in the queue. */
static void release(List *l, int64_t pair)
{
	int64_t t = l->repof[pair];
	if (t < 0)
		return;
	l->repof[pair] = l->rep[t] = -1;
	if (l->park[t].n) {
		int64_t q = park_pop(l, t);
		l->rep[t] = q, l->repof[q] = t;
		queue(l, q);
	}
}

/* Issues the units order[0..n) of v, in that order, on r. */
static void issue_units(Replay *r, const Items *v, const int64_t *order, int64_t n, int64_t T)
{
	for (int64_t k = 0; k < n; k++) {
		Xfer u = unit_of(v, &v->it[order[k]]);
		xfer_each(&u, T, issue_member, r);
	}
}

/* The list schedule of v's items on r: writes their new order to out
 * (item indices) and issues them. Of every pair's next unit the one that
 * can start earliest is issued (ties: record order). Start times only
 * grow as fragments are issued, so a queued key is a lower bound: a
 * popped pair whose start grew goes back with its new start. Pairs that
 * wait for the same busy tile would be re-examined at every fragment
 * that tile takes; only one of them (the first in record order) stays in
 * the queue, standing for the tile, and the others are parked there
 * until it is issued or waits for another tile. */
static void list_schedule(Replay *r, Items *v, int64_t *out, int64_t T, int exact)
{
	int64_t n = v->n, np = 0, k = 0;
	qsort(v->it, (size_t)n, sizeof *v->it, by_pair);
	List l = { v, NULL, xmalloc((size_t)(n + 1) * sizeof *l.first), NULL, 0,
		   xcalloc((size_t)T, sizeof *l.park), xmalloc((size_t)T * sizeof *l.rep), NULL,
		   xmalloc((size_t)(n + 1) * sizeof *l.pof), r };
	for (int64_t i = 0; i < n; i++) {
		if (!i || v->it[i].f.src != v->it[i - 1].f.src || v->it[i].f.dst_tile != v->it[i - 1].f.dst_tile)
			l.first[np++] = i;
		l.pof[v->it[i].seq] = np - 1;
	}
	l.first[np] = n;
	l.cur = xmalloc((size_t)(np + 1) * sizeof *l.cur);
	l.repof = xmalloc((size_t)(np + 1) * sizeof *l.repof);
	l.h = xmalloc((size_t)(np + 1) * sizeof *l.h);
	for (int64_t t = 0; t < T; t++)
		l.rep[t] = -1;
	for (int64_t p = 0; p < np; p++) {
		l.cur[p] = l.first[p];
		l.repof[p] = -1;
		queue(&l, p);
	}
	int64_t pops = 0, budget = SCHEDULE_POPS_PER_UNIT * n + SCHEDULE_POPS_EXTRA;
	while (l.nh && pops++ < budget) {
		Key top = l.h[0];
		int64_t p = l.pof[top.seq], b;
		Item *it = &v->it[l.cur[p]];
		int64_t s = replay_start_at(r, &it->f, &b);
		if (s > top.start) {
			if (!exact && b != it->f.src && l.rep[b] >= 0 && l.rep[b] != p) {
				heap_pop(l.h, &l.nh);
				release(&l, p);
				park_push(&l, b, p);
				continue;
			}
			/* back with its new start: the top's key grows in place */
			heap_down(l.h, l.nh, 0, (Key){ s, top.seq });
			if (exact || b == it->f.src) {
				release(&l, p);         /* waits for its own sender */
			} else if (l.rep[b] != p) {
				release(&l, p);
				l.rep[b] = p, l.repof[p] = b;
			}
			continue;
		}
		heap_pop(l.h, &l.nh);
		Xfer u = unit_of(v, it);
		xfer_each(&u, T, issue_member, r);
		out[k++] = l.cur[p]++;
		release(&l, p);
		if (l.cur[p] < l.first[p + 1])
			queue(&l, p);
	}
	if (k < n) {            /* over budget: the rest in record order */
		int64_t k0 = k;
		for (int64_t p = 0; p < np; p++)
			for (; l.cur[p] < l.first[p + 1]; l.cur[p]++)
				out[k++] = l.cur[p];
		seq_sort(v, out + k0, k - k0);
		issue_units(r, v, out + k0, k - k0, T);
	}
	for (int64_t t = 0; t < T; t++)
		free(l.park[t].p);
	free(l.park);
	free(l.rep);
	free(l.repof);
	free(l.pof);
	free(l.first);
	free(l.cur);
	free(l.h);
}

/* The replay and every tile's row depend only on each tile's own order,
 * so any order of the fragments that keeps every tile's is the same
 * schedule. The one written is by level (a fragment's is one more than
 * the highest of the fragments before it on any of its tiles), then
 * record order: fragments that run side by side sit together in their
 * old order, which folds back into families. */
static _Thread_local const int64_t *sort_key;

static int by_key(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	if (sort_key[x] != sort_key[y])
		return sort_key[x] < sort_key[y] ? -1 : 1;
	return (x > y) - (x < y);
}

/* order: v's items by (key[their seq], seq). */
static void order_by(const Items *v, const int64_t *key, int64_t *order)
{
	int64_t *seq = xmalloc((size_t)(v->n + 1) * sizeof *seq), *pos = xmalloc((size_t)(v->n + 1) * sizeof *pos);
	for (int64_t k = 0; k < v->n; k++)
		seq[k] = k, pos[v->it[k].seq] = k;
	sort_key = key;
	qsort(seq, (size_t)v->n, sizeof *seq, by_key);
	for (int64_t k = 0; k < v->n; k++)
		order[k] = pos[seq[k]];
	free(pos);
	free(seq);
}

static void by_level(Items *v, int64_t *order, int64_t T)
{
	int64_t *last = xcalloc((size_t)T, sizeof *last);
	int64_t *level = xmalloc((size_t)(v->n + 1) * sizeof *level);
	for (int64_t k = 0; k < v->n; k++) {
		const Frag *f = &v->it[order[k]].f;
		int64_t l = last[f->src];
		for (int64_t j = 0; j < f->nrecv; j++) {
			int64_t t = tile_mod(f->dst_tile + j * f->recv_step, T);
			l = last[t] > l ? last[t] : l;
		}
		l++;
		last[f->src] = l;
		for (int64_t j = 0; j < f->nrecv; j++)
			last[tile_mod(f->dst_tile + j * f->recv_step, T)] = l;
		level[v->it[order[k]].seq] = l;
	}
	order_by(v, level, order);
	free(level);
	free(last);
}

/* Rounds: the items in the order of an all-to-all's rounds. G is the
 * widest span of tiles that send to one receiver or that one sender
 * sends to; an item's round is its first receiver's offset from its
 * sender, modulo G, so that the items of one round share no sender and
 * no receiver where the step's tiles form groups of G, and a step whose
 * senders all start with the same receiver (an all-to-all in record
 * order) is spread over the receivers instead. Ties: record order, so a
 * pair keeps its own. */
typedef struct {
	int64_t lo, hi;
} Span;

static void by_rounds(const Items *v, int64_t *order, int64_t T)
{
	Span *snd = xmalloc((size_t)T * sizeof *snd), *rcv = xmalloc((size_t)T * sizeof *rcv);
	for (int64_t t = 0; t < T; t++)
		snd[t] = rcv[t] = (Span){ INT64_MAX, INT64_MIN };
	for (int64_t i = 0; i < v->n; i++) {
		const Frag *f = &v->it[i].f;
		int64_t d = tile_mod(f->dst_tile, T);
		Span *a = &snd[f->src], *b = &rcv[d];
		a->lo = d < a->lo ? d : a->lo, a->hi = d > a->hi ? d : a->hi;
		b->lo = f->src < b->lo ? f->src : b->lo, b->hi = f->src > b->hi ? f->src : b->hi;
	}
	int64_t G = 1;
	for (int64_t t = 0; t < T; t++) {
		if (snd[t].hi >= snd[t].lo && snd[t].hi - snd[t].lo + 1 > G)
			G = snd[t].hi - snd[t].lo + 1;
		if (rcv[t].hi >= rcv[t].lo && rcv[t].hi - rcv[t].lo + 1 > G)
			G = rcv[t].hi - rcv[t].lo + 1;
	}
	int64_t *rd = xmalloc((size_t)(v->n + 1) * sizeof *rd);
	for (int64_t i = 0; i < v->n; i++) {
		const Item *it = &v->it[i];
		int64_t d = tile_mod(it->f.dst_tile, T) - it->f.src;
		rd[it->seq] = ((d % G) + G) % G;
	}
	order_by(v, rd, order);
	free(rd);
	free(snd);
	free(rcv);
}

/* Diagonals: an item's round is (a + b) mod M, a its rank among its
 * sender's items (by first receiver, then record order), b its rank
 * among its first receiver's (by sender, then record order), M the most
 * items any tile sends or receives first. Where senders and receivers
 * form complete groups (every sender of a group to every receiver: a
 * row-to-column relayout, a gather into staging blocks) whatever their
 * tile numbers, each round then has every sender once and every
 * receiver at most once, so the phase takes about M rounds of one item,
 * its busiest tile's. Ties: record order. */
static _Thread_local int64_t *rank_key;

static int by_rank(const void *a, const void *b)
{
	const int64_t *x = &rank_key[2 * *(const int64_t *)a], *y = &rank_key[2 * *(const int64_t *)b];
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return (x[1] > y[1]) - (x[1] < y[1]);
}

/* rank[it->seq]: item's place among the items sharing its tile (own: the
 * sender, else its first receiver) ordered by the other tile, then seq;
 * returns the most items on one tile. With sorted, *sorted receives the
 * items' indices in that order (the caller frees it). */
static int64_t ranks(const Items *v, int own_is_src, int64_t T, int64_t *rank, int64_t **sorted)
{
	int64_t n = v->n, *idx = xmalloc((size_t)(n + 1) * sizeof *idx);
	int64_t *key = xmalloc((size_t)(2 * n + 2) * sizeof *key), most = 0;
	for (int64_t i = 0; i < n; i++) {
		const Frag *f = &v->it[i].f;
		int64_t s = f->src, d = tile_mod(f->dst_tile, T);
		idx[i] = i;
		key[2 * i] = own_is_src ? s * T + d : d * T + s;
		key[2 * i + 1] = v->it[i].seq;
	}
	rank_key = key;
	qsort(idx, (size_t)n, sizeof *idx, by_rank);
	for (int64_t k = 0, first = 0; k < n; k++) {
		int64_t own = key[2 * idx[k]] / T;
		if (k && own != key[2 * idx[k - 1]] / T)
			first = k;
		rank[v->it[idx[k]].seq] = k - first;
		most = k - first + 1 > most ? k - first + 1 : most;
	}
	free(key);
	if (sorted)
		*sorted = idx;
	else
		free(idx);
	return most;
}

static void by_diagonals(const Items *v, int64_t *order, int64_t T, int by_sender)
{
	int64_t n = v->n;
	int64_t *a = xmalloc((size_t)(n + 1) * sizeof *a), *b = xmalloc((size_t)(n + 1) * sizeof *b);
	int64_t *idx;           /* the items by (sender, first receiver, seq) */
	int64_t ms = ranks(v, 1, T, a, &idx), mr = ranks(v, 0, T, b, NULL), M = ms > mr ? ms : mr;
	for (int64_t i = 0; i < n; i++) {       /* b: the round, then (by_sender) the sender tile */
		int64_t q = v->it[i].seq, round = (a[q] + b[q]) % M;
		b[q] = by_sender ? round * T + v->it[i].f.src : round;
	}
	/* a pair's later unit in no earlier round (past M it would wrap to round 0) */
	for (int64_t k = 1; k < n; k++) {
		const Frag *f = &v->it[idx[k]].f, *g = &v->it[idx[k - 1]].f;
		int64_t p = v->it[idx[k - 1]].seq, q = v->it[idx[k]].seq;
		if (f->src == g->src && tile_mod(f->dst_tile, T) == tile_mod(g->dst_tile, T) && b[q] < b[p])
			b[q] = b[p];
	}
	free(idx);
	order_by(v, b, order);
	free(a);
	free(b);
}

/* The candidate orders of a phase: the list schedule with pairs waiting
 * on one tile parked, the exact list schedule, rounds, and diagonals with
 * each round's units in record order or by sender. */
typedef enum {
	ORDER_PARKED, ORDER_EXACT, ORDER_ROUNDS, ORDER_DIAGONALS, ORDER_DIAGONALS_SENDER, ORDER_MODES
} OrderMode;

/* Does a send of records x[0..n) read bytes of the step's destination? */
static int reads_dst(const Plan *pl, int step, const Xfer *x, int n)
{
	const Placement *d = &pl->p[pl->s[step].dst];
	int64_t dlo = d->addr, dhi = d->addr + place_max_bytes(d);
	for (int i = 0; i < n; i++) {
		int64_t lo, hi;
		if (x[i].kind != X_SEND)
			continue;
		xfer_span(&x[i], 0, &lo, &hi);
		if (lo < dhi && dlo < hi)
			return 1;
	}
	return 0;
}

typedef struct {
	Xfer *x;
	int n, cap;
} Out;

static void put(Out *o, const Xfer *x)
{
	if (o->n == o->cap)
		o->x = xrealloc(o->x, (size_t)(o->cap = o->cap ? 2 * o->cap : 64) * sizeof *o->x);
	o->x[o->n++] = *x;
}

/* Step records x[0..n): the step's sends scheduled on r, written to o. */
static void schedule_step(const Plan *pl, Replay *r, const Xfer *x, int n, OrderMode mode, Out *o)
{
	int64_t T = pl->machine.tiles;
	if (reads_dst(pl, x[0].step, x, n)) {   /* a forward: record order */
		for (int i = 0; i < n; i++) {
			put(o, &x[i]);
			if (x[i].kind == X_SEND)
				xfer_each(&x[i], T, issue_member, r);
		}
		return;
	}
	Items v = { NULL, 0, 0, x, 0 };
	int at = -1;
	for (int i = 0; i < n; i++) {
		if (x[i].kind != X_SEND) {
			put(o, &x[i]);
			continue;
		}
		if (at < 0)
			at = o->n;
		Xfer outer = x[i];       /* the units: the loops after the unit's own */
		int u = unit_loops(&outer);
		outer.nloop -= u;
		memmove(outer.loop, outer.loop + u, (size_t)outer.nloop * sizeof *outer.loop);
		v.rec = i;
		xfer_each(&outer, T, collect, &v);
	}
	if (at < 0)
		return;
	int64_t *order = xmalloc((size_t)(v.n + 1) * sizeof *order);
	if (mode == ORDER_ROUNDS || mode == ORDER_DIAGONALS || mode == ORDER_DIAGONALS_SENDER) {
		if (mode == ORDER_ROUNDS)
			by_rounds(&v, order, T);
		else
			by_diagonals(&v, order, T, mode == ORDER_DIAGONALS_SENDER);
		issue_units(r, &v, order, v.n, T);
	} else {
		list_schedule(r, &v, order, T, mode == ORDER_EXACT);
		by_level(&v, order, T);
	}
	/* The sends, flat in their new order, go where the first send was. */
	Out s = { NULL, 0, 0 };
	for (int64_t k = 0; k < v.n; k++) {
		Xfer f = unit_of(&v, &v.it[order[k]]);
		put(&s, &f);
	}
	s.n = xfer_compress(s.x, s.n);
	int tail = o->n - at;
	for (int k = 0; k < s.n; k++)
		put(o, &s.x[k]);
	/* rotate the non-sends that followed the first send behind the sends */
	if (tail) {
		Xfer *tmp = xmalloc((size_t)tail * sizeof *tmp);
		memcpy(tmp, o->x + at, (size_t)tail * sizeof *tmp);
		memmove(o->x + at, o->x + at + tail, (size_t)s.n * sizeof *tmp);
		memcpy(o->x + at + s.n, tmp, (size_t)tail * sizeof *tmp);
		free(tmp);
	}
	free(s.x);
	free(order);
	free(v.it);
}

/* Per tile, the bytes of its row in phase p when the phase holds records
 * x[0..n) (rows[tiles], zeroed first). */
static void row_sizes(const Plan *pl, int p, Xfer *x, int n, int64_t *rows)
{
	Plan q = *pl;
	q.x = x, q.nx = n;
	memset(rows, 0, (size_t)pl->machine.tiles * sizeof *rows);
	phase_row_sums(&q, p, rows, NULL);
}

/* Phase p's records [lo, hi) in the order of mode, into o; returns the
 * new order's replay. */
static int64_t order_phase(const Plan *pl, int lo, int hi, OrderMode mode, Out *o)
{
	Replay *r = replay_new(&pl->machine);
	replay_reads(r, pl->x + lo, hi - lo);
	for (int a = lo; a < hi;) {
		int b = a;
		while (b < hi && pl->x[b].step == pl->x[a].step)
			b++;
		schedule_step(pl, r, pl->x + a, b - a, mode, o);
		a = b;
	}
	replay_free(r);
	return replay_records(pl, o->x, o->n);
}

/* One phase's work: record order's replay and its candidate orders. */
typedef struct {
	int lo, hi, sends;
	int64_t old;            /* record order's cycles */
	Out o[ORDER_MODES];     /* by OrderMode */
	int64_t now[ORDER_MODES];
} Order;

/* The phases, shared by the threads that order them: each takes the
 * next phase not yet taken (under mu). Each phase is ordered alone, so
 * the result does not depend on which thread orders it. */
typedef struct {
	const Plan *pl;
	Order *ph;
	int n, next;
	pthread_mutex_t mu;
} Work;

static void *order_run(void *arg)
{
	Work *w = arg;
	for (;;) {
		pthread_mutex_lock(&w->mu);
		int p = w->next < w->n ? w->next++ : -1;
		pthread_mutex_unlock(&w->mu);
		if (p < 0)
			return NULL;
		Order *f = &w->ph[p];
		if (!f->sends)
			continue;
		f->old = replay_records(w->pl, w->pl->x + f->lo, f->hi - f->lo);
		for (int k = 0; k < ORDER_MODES; k++)
			f->now[k] = order_phase(w->pl, f->lo, f->hi, (OrderMode)k, &f->o[k]);
	}
}

/* Is order o of phase p [lo, hi), faster than record order's old cycles
 * (the caller passes only such), worth taking, and, strict, does it grow
 * no tile's row? */
static int worth(const Plan *pl, int p, int lo, int hi, int64_t old, const Out *o, int64_t now, int strict,
		 double per_record, int64_t *ra, int64_t *rb)
{
	/* faster by per_record cycles (one run) for each record added */
	int take = (double)(old - now) >= per_record * (o->n - (hi - lo));
	if (take && strict) {
		row_sizes(pl, p, pl->x + lo, hi - lo, ra);
		row_sizes(pl, p, o->x, o->n, rb);
		for (int64_t t = 0; t < pl->machine.tiles && take; t++)
			take = rb[t] <= ra[t];
	}
	return take;
}

/* Every phase of pl, its records [lo, hi) in each candidate order, on two
 * threads. */
static void order_all(const Plan *pl, Work *w)
{
	*w = (Work){ pl, xcalloc((size_t)pl->nph + 1, sizeof *w->ph), pl->nph, 0, PTHREAD_MUTEX_INITIALIZER };
	for (int p = 0, i = 0; p < pl->nph; p++) {
		Order *f = &w->ph[p];
		while (i < pl->nx && pl->x[i].step < pl->ph[p].first)
			i++;
		f->lo = i;
		while (i < pl->nx && pl->x[i].step <= pl->ph[p].last)
			i++;
		f->hi = i;
		for (int k = f->lo; k < f->hi; k++)
			f->sends += pl->x[k].kind == X_SEND;
	}
	pthread_t th;
	int threaded = pthread_create(&th, NULL, order_run, w) == 0;
	order_run(w);
	if (threaded)
		pthread_join(th, NULL);
}

static void order_free(Work *w)
{
	for (int p = 0; p < w->n; p++)
		for (int k = 0; k < ORDER_MODES; k++)
			free(w->ph[p].o[k].x);
	free(w->ph);
}

/* The records of pl with each phase in the order worth taking (strict:
 * also growing no row), into *all. */
static void pick_pass(const Plan *pl, const Work *w, int strict, double per_record, ScheduleStats *stats,
		      Out *all)
{
	int64_t T = pl->machine.tiles;
	int64_t *ra = xmalloc((size_t)T * sizeof *ra), *rb = xmalloc((size_t)T * sizeof *rb);
	ScheduleStats st = { 0, 0, 0 };
	int i = 0;
	for (int p = 0; p < pl->nph; p++) {
		const Order *f = &w->ph[p];
		while (i < f->lo)
			put(all, &pl->x[i++]);
		int lo = f->lo, hi = f->hi, pick = -1;
		int64_t old = f->old, best = old;
		for (int k = 0; f->sends && k < ORDER_MODES; k++)
			if (f->now[k] < best && worth(pl, p, lo, hi, old, &f->o[k], f->now[k], strict, per_record, ra, rb))
				best = f->now[k], pick = k;
		st.before += old;
		st.after += best;
		st.phases += pick >= 0;
		if (pick >= 0)
			for (int k = 0; k < f->o[pick].n; k++)
				put(all, &f->o[pick].x[k]);
		else
			for (int k = lo; k < hi; k++)
				put(all, &pl->x[k]);
		i = hi;
	}
	while (i < pl->nx)
		put(all, &pl->x[i++]);
	free(ra);
	free(rb);
	if (stats)
		*stats = st;
}

/* Does the plan fit the machine (lib/stage/limits.h, amp-emit's rule)? */
static int fits(const Plan *pl)
{
	Limits l;
	limits_measure(pl, -1, &l, NULL, NULL, NULL, NULL);
	return limits_over(pl, &l) == LIMIT_NONE;
}

int plan_schedule(Plan *pl, double per_record, ScheduleStats *stats, Err *e)
{
	for (int i = 1; i < pl->nx; i++)
		if (pl->x[i].step < pl->x[i - 1].step)
			return errf(e, "transfer %d: records are not in step order", i);
	Work w;
	order_all(pl, &w);
	Xfer *old = pl->x;
	int nold = pl->nx;
	Out all = { NULL, 0, 0 };
	pick_pass(pl, &w, 0, per_record, stats, &all);
	pl->x = all.x, pl->nx = all.n;
	if (!fits(pl)) {                /* the tables grew past a limit: only orders that grow no row */
		free(all.x);
		pl->x = old, pl->nx = nold;
		all = (Out){ NULL, 0, 0 };
		pick_pass(pl, &w, 1, per_record, stats, &all);
		pl->x = all.x, pl->nx = all.n;
	}
	free(old);
	order_free(&w);
	return 0;
}
