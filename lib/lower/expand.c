#include "lower/expand.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stage/alloc.h"
#include "base/keytab.h"

/* ---- copies ---- */

typedef struct {
	Xfer *x;
	int n, cap;
} XList;

static inline void push(XList *l, const Xfer *x)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->x = xrealloc(l->x, (size_t)l->cap * sizeof *l->x);
	}
	l->x[l->n++] = *x;
}

static void shard_region(const Placement *p, const int64_t *idx, int64_t *lo, int64_t *hi)
{
	for (int a = 0; a < p->rank; a++) {
		lo[a] = p->off[a] + idx[a] * p->block[a];
		hi[a] = lo[a] + place_extent(p, a, idx[a]);
	}
}

/* Zero padding of a destination shard on one tile: amp-left's last strip
 * past C, transposed-right's panels past K and N, amp-output's last strip
 * past C (it feeds no matrix unit, but a shard's padding is then always
 * written, once, zero, as amp-run's check expects; row-major has none). */
static void zero_pad(XList *l, int step, const Placement *D, const int64_t *didx, int64_t tile)
{
	Layout ld = place_layout(D, didx);
	int64_t mu = fmt_mu(D->fmt), esz = fmt_bytes(D->fmt), R = ld.rows, C = ld.cols;
	Xfer z;

	memset(&z, 0, sizeof z);
	z.kind = X_ZERO;
	z.step = step;
	z.dst_tile = tile;
	z.nrecv = 1;
	if (D->layout == LAYOUT_AMP_LEFT && C % mu) {
		z.dst_addr = D->addr + ((C / mu) * R * mu + C % mu) * esz;
		z.len = (mu - C % mu) * esz;
		z.nloop = R > 1;
		z.loop[0] = (XLoop){ R, 0, 0, 0, mu * esz };
		push(l, &z);
	} else if (D->layout == LAYOUT_AMP_OUTPUT && C % 16) {
		z.dst_addr = D->addr + ((C / 16) * R * 16 + C % 16) * esz;
		z.len = (16 - C % 16) * esz;
		z.nloop = R > 1;
		z.loop[0] = (XLoop){ R, 0, 0, 0, 16 * esz };
		push(l, &z);
	} else if (D->layout == LAYOUT_TRANSPOSED_RIGHT) {
		int64_t kb = cdiv(R, mu), cg = cdiv(C, 16), panel = mu * 16 * esz;
		if (R % mu) {                   /* rows past K in the last k-block, valid columns */
			for (int64_t g = 0; g < cg; g++) {
				int64_t cols = g == cg - 1 && C % 16 ? C % 16 : 16;
				z.dst_addr = D->addr + (g * kb + kb - 1) * panel + (R % mu) * esz;
				z.len = (mu - R % mu) * esz;
				z.nloop = cols > 1;
				z.loop[0] = (XLoop){ cols, 0, 0, 0, mu * esz };
				push(l, &z);
			}
		}
		if (C % 16) {                   /* columns past N, all rows of each k-block */
			z.dst_addr = D->addr + (cg - 1) * kb * panel + (C % 16) * mu * esz;
			z.len = (16 - C % 16) * mu * esz;
			z.nloop = kb > 1;
			z.loop[0] = (XLoop){ kb, 0, 0, 0, panel };
			push(l, &z);
		}
	}
}

static int by_shape(const void *a, const void *b);
static void stable_sort(Xfer *x, int n, int (*cmp)(const void *, const void *));

/* One destination shard's requests, folded as they are made. Folding them
 * would be a stable sort by shape (by_shape) and xfer_compress, whose
 * first pass makes runs of alike requests with a constant delta into
 * families. The copies' requests have no loops, so their shape is their
 * kind, length and receivers: each shape's group folds its run as it
 * grows, in generation order, and the groups are laid out in by_shape's
 * order afterwards. That is the first pass's result without moving a
 * request; xfer_compress does the rest. Zero padding (with loops) is
 * sorted and folded as before. */
typedef struct {
	XKind kind;
	int64_t len, nrecv, recv_step;
	XList out;              /* folded; the last may still grow */
} Group;

typedef struct {
	Group *g;
	int n, cap, last;
	XList zeros;
} Stream;

static int group_cmp(const Group *a, const Group *b)
{
	int64_t k[4] = { (int64_t)a->kind - (int64_t)b->kind, a->len - b->len, a->nrecv - b->nrecv,
			 a->recv_step - b->recv_step };
	for (int i = 0; i < 4; i++)
		if (k[i])
			return k[i] < 0 ? -1 : 1;
	return 0;
}

/* One request of a copy as it is made: a record with no loops. */
typedef struct {
	XKind kind;
	int step;
	int64_t len, src_tile, src_addr, dst_tile, dst_addr, nrecv, recv_step;
} Req;

/* Is x of g's shape (group_cmp's 0)? */
static inline int of_group(const Group *g, const Req *x)
{
	return g->kind == x->kind && g->len == x->len && g->nrecv == x->nrecv && g->recv_step == x->recv_step;
}

static void stream_push(Stream *s, const Req *x)
{
	Group key = { x->kind, x->len, x->nrecv, x->recv_step, { NULL, 0, 0 } }, *g = NULL;
	if (s->n && of_group(&s->g[s->last], x))
		g = &s->g[s->last];
	for (int i = 0; !g && i < s->n; i++)
		if (of_group(&s->g[i], x))
			g = &s->g[s->last = i];
	if (!g) {
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 8;
			s->g = xrealloc(s->g, (size_t)s->cap * sizeof *s->g);
			for (int i = s->n; i < s->cap; i++)
				s->g[i].out = (XList){ NULL, 0, 0 };
		}
		g = &s->g[s->last = s->n++];
		XList keep = g->out;
		*g = key;
		g->out = keep;
		g->out.n = 0;
	}
	if (g->out.n) {
		Xfer *f = &g->out.x[g->out.n - 1];
		XLoop d = { 0, x->src_tile - f->src_tile, x->src_addr - f->src_addr,
			    x->dst_tile - f->dst_tile, x->dst_addr - f->dst_addr };
		if (f->nloop == 0) {            /* a single: a family of two */
			d.count = 2;
			f->loop[f->nloop++] = d;
			return;
		}
		const XLoop *v = &f->loop[0];   /* the family's last member is count - 1 steps on */
		int64_t c = v->count - 1;
		if (x->src_tile - f->src_tile == (c + 1) * v->src_tile &&
		    x->src_addr - f->src_addr == (c + 1) * v->src_addr &&
		    x->dst_tile - f->dst_tile == (c + 1) * v->dst_tile &&
		    x->dst_addr - f->dst_addr == (c + 1) * v->dst_addr) {
			f->loop[0].count++;
			return;
		}
	}
	XList *l = &g->out;                     /* a new record: a single, made in place */
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->x = xrealloc(l->x, (size_t)l->cap * sizeof *l->x);
	}
	Xfer *r = &l->x[l->n++];
	memset(r, 0, sizeof *r);
	r->kind = x->kind, r->step = x->step, r->len = x->len;
	r->src_tile = x->src_tile, r->src_addr = x->src_addr, r->dst_tile = x->dst_tile, r->dst_addr = x->dst_addr;
	r->nrecv = x->nrecv, r->recv_step = x->recv_step;
}

/* The shard's requests into l (after from), folded: the groups in
 * by_shape's order, then the zero padding. */
static void stream_flush(Stream *s, XList *l, int from)
{
	for (int i = 1; i < s->n; i++)          /* insertion sort: a few groups */
		for (int j = i; j > 0 && group_cmp(&s->g[j - 1], &s->g[j]) > 0; j--) {
			Group t = s->g[j];
			s->g[j] = s->g[j - 1];
			s->g[j - 1] = t;
		}
	for (int i = 0; i < s->n; i++)
		for (int k = 0; k < s->g[i].out.n; k++)
			push(l, &s->g[i].out.x[k]);
	stable_sort(s->zeros.x, s->zeros.n, by_shape);
	for (int k = 0; k < s->zeros.n; k++)
		push(l, &s->zeros.x[k]);
	for (int i = 0; i < s->n; i++)
		s->g[i].out.n = 0;
	s->n = s->last = 0;
	s->zeros.n = 0;
	l->n = from + xfer_compress(l->x + from, l->n - from);
}

static void stream_free(Stream *s)
{
	for (int i = 0; i < s->cap; i++)
		free(s->g[i].out.x);
	free(s->g);
	free(s->zeros.x);
}

static void expand_copy(Plan *pl, int step, XList *l, Run **runs, int64_t *cap)
{
	const Step *st = &pl->s[step];
	const Placement *S = &pl->p[st->src], *D = &pl->p[st->dst];
	int64_t T = pl->machine.tiles, rep0[MAX_REP] = { 0 };
	int panel = D->layout != LAYOUT_ROW_MAJOR;      /* padding zeroed unless it travels */
	/* Replicas: one multicast (receivers nrep apart by rstride) per value
	 * of the other axis, when there are two; the larger axis multicasts. */
	int in = D->nrep == 2 && D->rep[0] > D->rep[1] ? 0 : D->nrep - 1;
	int64_t nd = place_shards(D), nrep = D->nrep ? D->rep[in] : 1, rstride = D->nrep ? D->rstride[in] : 0;
	int64_t nout = D->nrep == 2 ? D->rep[1 - in] : 1, ostride = D->nrep == 2 ? D->rstride[1 - in] : 0;

	Stream sm;
	memset(&sm, 0, sizeof sm);
	runs_forget();
	for (int64_t dl = 0; dl < nd; dl++) {
		int64_t didx[MAX_RANK], dlo[MAX_RANK], dhi[MAX_RANK], q = dl;
		int64_t slo[MAX_RANK], shi[MAX_RANK], sidx[MAX_RANK];
		for (int a = D->rank - 1; a >= 0; a--) {
			didx[a] = q % D->split[a];
			q /= D->split[a];
		}
		shard_region(D, didx, dlo, dhi);
		int64_t tz = place_tile(D, didx, rep0, T);
		/* the part inside the source's window (other copies write the
		 * rest: plan_check holds them to cover it once) */
		int from = l->n, clipped = 0, none = 0;
		for (int a = 0; a < S->rank; a++) {
			int64_t wlo = S->off[a], whi = S->off[a] + S->shape[a];
			clipped |= dlo[a] < wlo || dhi[a] > whi;
			dlo[a] = dlo[a] > wlo ? dlo[a] : wlo;
			dhi[a] = dhi[a] < whi ? dhi[a] : whi;
			none |= dlo[a] >= dhi[a];
		}
		if (none)
			continue;
		for (int a = 0; a < S->rank; a++) {
			slo[a] = (dlo[a] - S->off[a]) / S->block[a];
			shi[a] = (dhi[a] - S->off[a] - 1) / S->block[a] + 1;
			sidx[a] = slo[a];
		}
		/* This destination moves whole panels when it and every source
		 * shard it meets are whole in the same panel layout; then padding
		 * travels, otherwise the receiver zeroes it. */
		int whole = S->layout == D->layout && !clipped && shard_whole(D, didx);
		for (int done = 0; whole && !done;) {
			whole = shard_whole(S, sidx);
			int a = S->rank - 1;
			while (a >= 0 && ++sidx[a] == shi[a]) {
				sidx[a] = slo[a];
				a--;
			}
			done = a < 0;
		}
		for (int64_t o = 0; o < nout; o++) {
		int64_t t0 = tile_mod(tz + o * ostride, T);
		for (int a = 0; a < S->rank; a++)
			sidx[a] = slo[a];
		if (panel && !whole)
			for (int64_t r = 0; r < nrep; r++) {
				int64_t t = tile_mod(t0 + r * rstride, T);
				if (!place_alias0(pl, st->src, st->dst, didx, t))  /* the source's own buffer */
					zero_pad(&sm.zeros, step, D, didx, t);
			}
		for (;;) {
			int64_t lo[MAX_RANK], hi[MAX_RANK], s_lo[MAX_RANK], s_hi[MAX_RANK];
			shard_region(S, sidx, s_lo, s_hi);
			for (int a = 0; a < S->rank; a++) {
				lo[a] = dlo[a] > s_lo[a] ? dlo[a] : s_lo[a];
				hi[a] = dhi[a] < s_hi[a] ? dhi[a] : s_hi[a];
			}
			int64_t ts = place_tile(S, sidx, rep0, T);
			/* Receivers: the replicas, less one that aliases the source. */
			int64_t first = 0, count = nrep, skip = -1;
			for (int64_t r = 0; r < nrep; r++)
				if (tile_mod(t0 + r * rstride, T) == ts && S->addr == D->addr &&
				    place_same_region(S, sidx, D, didx))
					skip = r;
			int64_t nr = shard_runs_kept(S, sidx, D, didx, lo, hi, whole, runs, cap);
			for (int part = 0; part < 2; part++) {
				if (skip < 0 && part)
					break;
				if (skip >= 0) {
					first = part ? skip + 1 : 0;
					count = part ? nrep - skip - 1 : skip;
				}
				if (count <= 0)
					continue;
				int64_t td = tile_mod(t0 + first * rstride, T);
				for (int64_t k = 0; k < nr; k++) {
					Req x;
					x.step = step;
					x.len = (*runs)[k].len;
					x.src_tile = ts;
					x.src_addr = S->addr + (*runs)[k].src;
					x.dst_tile = td;
					x.dst_addr = D->addr + (*runs)[k].dst;
					x.nrecv = count;
					x.recv_step = count > 1 ? rstride : 0;
					x.kind = count == 1 && td == ts ? X_LOCAL : X_SEND;
					if (x.kind == X_LOCAL)
						x.nrecv = 1;
					stream_push(&sm, &x);
				}
			}
			int a = S->rank - 1;
			while (a >= 0 && ++sidx[a] == shi[a]) {
				sidx[a] = slo[a];
				a--;
			}
			if (a < 0)
				break;
		}
		}
		stream_flush(&sm, l, from);
	}
	stream_free(&sm);
}

/* Within one copy the requests are independent (its source and destination
 * are different placements), so they may be grouped by shape before
 * folding: a stable order by kind, length and receivers keeps generation
 * order inside each group, which is where the regular strides are. */
static int by_shape(const void *a, const void *b)
{
	const Xfer *x = a, *y = b;
	int64_t k[5] = { (int64_t)x->kind - (int64_t)y->kind, x->len - y->len, x->nrecv - y->nrecv,
			 x->recv_step - y->recv_step, x->nloop - y->nloop };
	for (int i = 0; i < 5; i++)
		if (k[i])
			return k[i] < 0 ? -1 : 1;
	/* Same loop shape: records that can fold into one family. */
	for (int l = 0; l < x->nloop; l++) {
		const int64_t *p = &x->loop[l].count, *q = &y->loop[l].count;
		for (int i = 0; i < 5; i++)
			if (p[i] != q[i])
				return p[i] < q[i] ? -1 : 1;
	}
	return 0;
}

/* A stable sort of records that often arrive sorted (most steps): a
 * check first, else a merge sort of indices (4 bytes moved, not a
 * record), then one pass that places the records. */
static void stable_sort(Xfer *x, int n, int (*cmp)(const void *, const void *))
{
	int i = 1;
	while (i < n && cmp(&x[i], &x[i - 1]) >= 0)
		i++;
	if (i >= n)
		return;
	int *ix = xmalloc((size_t)n * sizeof *ix), *tmp = xmalloc((size_t)n * sizeof *tmp);
	for (i = 0; i < n; i++)
		ix[i] = i;
	for (int w = 1; w < n; w *= 2)
		for (int lo = 0; lo < n; lo += 2 * w) {
			int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			int a = lo, b = mid, k = lo;
			if (mid >= hi || cmp(&x[ix[mid]], &x[ix[mid - 1]]) >= 0)
				continue;       /* the two runs are already in order */
			while (a < mid && b < hi)
				tmp[k++] = cmp(&x[ix[b]], &x[ix[a]]) < 0 ? ix[b++] : ix[a++];
			while (a < mid)
				tmp[k++] = ix[a++];
			while (b < hi)
				tmp[k++] = ix[b++];
			memcpy(&ix[lo], &tmp[lo], (size_t)(hi - lo) * sizeof *ix);
		}
	Xfer *out = xmalloc((size_t)n * sizeof *out);
	for (i = 0; i < n; i++)
		out[i] = x[ix[i]];
	memcpy(x, out, (size_t)n * sizeof *x);
	free(out);
	free(ix);
	free(tmp);
}

/* ---- copies already expanded ---- */

/* A copy's requests depend on its placements' shapes, tiles and formats,
 * whether they share an address, and the machine's tiles; addresses only
 * move them. The key holds those as integers. */
#define KEY_MAX (2 * PLACE_KEY_MAX + 8)

typedef struct {
	Xfer *x;                /* step 0, relative to saddr and daddr */
	int n;
	int64_t saddr, daddr;
} Expanded;

/* Shared by the threads (the planner's two ownerships lower many of the
 * same copies): under done_mu. done_tab: key -> index in done. */
static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static KeyTab done_tab;
static Expanded *done;
static int64_t done_cap, done_n;

static void done_put(const int64_t *k, int n, const Xfer *x, int nx, int64_t saddr, int64_t daddr)
{
	if (done_n == done_cap)
		done = xrealloc(done, (size_t)(done_cap = done_cap ? 2 * done_cap : 1024) * sizeof *done);
	Expanded *d = &done[done_n];
	d->x = xmalloc((size_t)(nx + 1) * sizeof *d->x);
	if (nx)                                 /* a copy with no requests has no list */
		memcpy(d->x, x, (size_t)nx * sizeof *x);
	d->n = nx;
	d->saddr = saddr, d->daddr = daddr;
	keytab_put(&done_tab, k, n, done_n++);
}

void expand_release_thread(void)
{
	runs_release();
}

void expand_release(void)
{
	runs_release();
	pthread_mutex_lock(&done_mu);
	for (int64_t i = 0; i < done_n; i++)
		free(done[i].x);
	free(done);
	keytab_free(&done_tab);
	done = NULL, done_cap = done_n = 0;
	pthread_mutex_unlock(&done_mu);
}

int plan_expand_steps(Plan *pl, int first, int last, Err *e)
{
	XList l = { NULL, 0, 0 };
	Run *runs = NULL;
	int64_t cap = 0;

	(void)e;        /* no copy fails: plan_check held each to its parts of its destination */

	for (int s = first; s <= last; s++) {
		if (pl->s[s].kind != STEP_COPY)
			continue;
		const Placement *S = &pl->p[pl->s[s].src], *D = &pl->p[pl->s[s].dst];
		int64_t key[KEY_MAX];
		int nk = place_key(S, key);
		nk += place_key(D, key + nk);
		key[nk++] = S->addr == D->addr;
		key[nk++] = pl->machine.tiles;
		pthread_mutex_lock(&done_mu);
		int64_t di = keytab_find(&done_tab, key, nk);
		const Expanded *d = di >= 0 ? &done[di] : NULL;
		if (d) {                        /* the same requests, moved */
			for (int i = 0; i < d->n; i++) {
				Xfer x = d->x[i];
				x.step = s;
				if (x.kind != X_ZERO)
					x.src_addr += S->addr - d->saddr;
				x.dst_addr += D->addr - d->daddr;
				plan_add_xfer(pl, &x);
			}
		}
		pthread_mutex_unlock(&done_mu);
		if (d)
			continue;
		l.n = 0;
		expand_copy(pl, s, &l, &runs, &cap);
		stable_sort(l.x, l.n, by_shape);
		int n = xfer_compress(l.x, l.n);
		for (int i = 0; i < n; i++)
			plan_add_xfer(pl, &l.x[i]);
		pthread_mutex_lock(&done_mu);
		if (keytab_find(&done_tab, key, nk) < 0)        /* another thread may have put it meanwhile */
			done_put(key, nk, l.x, n, S->addr, D->addr);
		pthread_mutex_unlock(&done_mu);
	}
	free(l.x);
	free(runs);
	return 0;
}

int plan_expand(Plan *pl, Err *e)
{
	if (plan_alloc(pl, e))
		return -1;
	pl->stage = STAGE_EXPAND;
	return plan_expand_steps(pl, 0, pl->ns - 1, e);
}
