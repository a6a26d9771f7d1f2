#include "stage/xfer.h"

#include <string.h>

static const char *kind_names[X_COUNT] = { "send", "local", "zero" };

const char *xkind_name(XKind k) { return kind_names[k]; }

int64_t xfer_members(const Xfer *x)
{
	int64_t n = 1;
	for (int k = 0; k < x->nloop; k++)
		n *= x->loop[k].count;
	return n;
}

int xfer_each(const Xfer *x, int64_t tiles, XferFn fn, void *ctx)
{
	return xfer_each_inline(x, tiles, fn, ctx);
}

void xfer_span(const Xfer *x, int dst, int64_t *lo, int64_t *hi)
{
	int64_t a = dst ? x->dst_addr : x->src_addr, l = a, h = a;
	for (int k = 0; k < x->nloop; k++) {
		int64_t d = (x->loop[k].count - 1) * (dst ? x->loop[k].dst_addr : x->loop[k].src_addr);
		if (d < 0)
			l += d;
		else
			h += d;
	}
	*lo = l;
	*hi = h + x->len;
}

/* Same kind, step, length, receivers and loop shape. */
static int alike(const Xfer *a, const Xfer *b)
{
	if (a->kind != b->kind || a->step != b->step || a->len != b->len ||
	    a->nrecv != b->nrecv || a->recv_step != b->recv_step || a->nloop != b->nloop)
		return 0;
	return memcmp(a->loop, b->loop, (size_t)a->nloop * sizeof *a->loop) == 0;
}

static XLoop delta(const Xfer *a, const Xfer *b)
{
	XLoop d = { 0, b->src_tile - a->src_tile, b->src_addr - a->src_addr,
		    b->dst_tile - a->dst_tile, b->dst_addr - a->dst_addr };
	return d;
}

static int same_delta(XLoop a, XLoop b)
{
	return a.src_tile == b.src_tile && a.src_addr == b.src_addr &&
	       a.dst_tile == b.dst_tile && a.dst_addr == b.dst_addr;
}

/* One pass: runs of alike records with a constant delta become one record
 * with a new outer loop. */
static int fold(Xfer *xs, int n)
{
	int out = 0;
	for (int i = 0; i < n;) {
		int j = i + 1;
		if (j < n && alike(&xs[i], &xs[j]) && xs[i].nloop < XFER_LOOPS) {
			XLoop d = delta(&xs[i], &xs[j]);
			while (j + 1 < n && alike(&xs[i], &xs[j + 1]) &&
			       same_delta(d, delta(&xs[j], &xs[j + 1])))
				j++;
			Xfer f = xs[i];
			d.count = j - i + 1;
			f.loop[f.nloop++] = d;
			xs[out++] = f;
			i = j + 1;
		} else {
			xs[out++] = xs[i++];
		}
	}
	return out;
}

int xfer_compress(Xfer *xs, int n)
{
	for (;;) {
		int m = fold(xs, n);
		if (m == n)
			return n;
		n = m;
	}
}

void xfer_write(YWriter *w, const Xfer *x)
{
	int64_t v[2];

	yw_map(w, 1);
	yw_kint(w, "step", x->step);
	yw_kstr(w, "kind", xkind_name(x->kind));
	yw_kint(w, "len", x->len);
	if (x->kind != X_ZERO) {
		v[0] = x->src_tile, v[1] = x->src_addr;
		yw_kints(w, "src", 2, v);
	}
	v[0] = x->dst_tile, v[1] = x->dst_addr;
	yw_kints(w, "dst", 2, v);
	if (x->kind == X_SEND) {
		v[0] = x->nrecv, v[1] = x->recv_step;
		yw_kints(w, "recv", 2, v);
	}
	yw_str(w, "loops");
	yw_seq(w, 1);
	for (int k = 0; k < x->nloop; k++) {
		const XLoop *l = &x->loop[k];
		int64_t q[5] = { l->count, l->src_tile, l->src_addr, l->dst_tile, l->dst_addr };
		yw_seq(w, 1);
		for (int i = 0; i < 5; i++)
			yw_int(w, q[i]);
		yw_end_seq(w);
	}
	yw_end_seq(w);
	yw_end_map(w);
}

/* [a, b] with a in [alo, ahi] and b in [blo, bhi]; for src and dst, a is a
 * tile and b an address. */
static int pair(const char *f, const Val *r, const char *key, int64_t alo, int64_t ahi,
		int64_t blo, int64_t bhi, int64_t *a, int64_t *b, Err *e)
{
	const Val *v;
	int place = strcmp(key, "recv") != 0;
	if (map_need(f, r, key, &v, e))
		return -1;
	if (v->kind != VAL_SEQ || v->n != 2)
		return val_err(f, v, e, "%s must be a pair [%s]", key,
			       place ? "tile, address" : "count, tile step");
	if (val_int(f, &v->items[0], INT64_MIN, INT64_MAX, a, e) ||
	    val_int(f, &v->items[1], INT64_MIN, INT64_MAX, b, e))
		return -1;
	if (*a < alo || *a > ahi)
		return val_err(f, &v->items[0], e, place ? "tile %lld is not a tile of this machine "
			       "(0..%lld)" : "receiver count %lld is not in 1..%lld", (long long)*a,
			       (long long)ahi);
	if (*b < blo || *b > bhi)
		return val_err(f, &v->items[1], e, place ? "address %lld is outside SRAM (0..%lld)" :
			       "receiver tile step %lld is not in %lld..%lld", (long long)*b,
			       (long long)(place ? bhi : blo), (long long)bhi);
	return 0;
}

static int64_t gcd(int64_t a, int64_t b)
{
	while (b) {
		int64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

int xfer_read(const char *f, const Val *r, int nsteps, int64_t tiles, int64_t sram, int64_t frags,
	      Xfer *x, Err *e)
{
	static const char *keys[] = { "step", "kind", "len", "src", "dst", "recv", "loops", NULL };
	const int64_t big = INT64_C(1) << 40;
	const Val *v;
	const char *s;
	int64_t step;
	int k;

	memset(x, 0, sizeof *x);
	if (map_keys(f, r, keys, e) || get_int(f, r, "step", 0, INT64_MAX, &step, e))
		return -1;
	if (step >= nsteps)
		return val_err(f, map_get(r, "step"), e, "step %lld does not exist (the plan has %d steps)",
			       (long long)step, nsteps);
	if (get_str(f, r, "kind", &s, e))
		return -1;
	for (k = 0; k < X_COUNT && strcmp(s, kind_names[k]); k++)
		;
	if (k == X_COUNT)
		return val_err(f, map_get(r, "kind"), e, "unknown kind '%s' (expected send, local or zero)", s);
	x->kind = (XKind)k;
	x->step = (int)step;
	x->nrecv = 1;
	if (get_int(f, r, "len", 1, sram, &x->len, e) ||
	    pair(f, r, "dst", 0, tiles - 1, 0, sram, &x->dst_tile, &x->dst_addr, e))
		return -1;
	if (x->kind != X_ZERO &&
	    pair(f, r, "src", 0, tiles - 1, 0, sram, &x->src_tile, &x->src_addr, e))
		return -1;
	if (x->kind == X_ZERO && map_get(r, "src"))
		return val_err(f, map_get(r, "src"), e, "a zero transfer has no source");
	if (x->kind == X_SEND &&
	    pair(f, r, "recv", 1, tiles, -tiles, tiles, &x->nrecv, &x->recv_step, e))
		return -1;
	if (x->kind != X_SEND && map_get(r, "recv"))
		return val_err(f, map_get(r, "recv"), e, "only a send has receivers");
	if (x->nrecv > 1) {
		/* Receivers d + j*step (mod tiles) are distinct for j < n exactly
		 * when n <= tiles / gcd(step, tiles). */
		int64_t s = tile_mod(x->recv_step, tiles);
		if (s == 0 || x->nrecv > tiles / gcd(s, tiles))
			return val_err(f, map_get(r, "recv"), e, "a multicast names the same receiver twice "
				       "(%lld receivers %lld tiles apart on %lld tiles)", (long long)x->nrecv,
				       (long long)x->recv_step, (long long)tiles);
	}
	if (map_need(f, r, "loops", &v, e))
		return -1;
	if (v->kind != VAL_SEQ || v->n > XFER_LOOPS)
		return val_err(f, v, e, "expected a list of at most %d loops", XFER_LOOPS);
	for (int i = 0; i < v->n; i++) {
		int64_t q[5];
		int n;
		if (val_ints(f, &v->items[i], 5, -big, big, q, &n, e))
			return -1;
		if (n != 5 || q[0] < 1)
			return val_err(f, &v->items[i], e, "a loop is [count >= 1, src_tile, src_addr, dst_tile, dst_addr]");
		XLoop l = { q[0], q[1], q[2], q[3], q[4] };
		x->loop[x->nloop++] = l;
	}
	/* every member writes len bytes (on each receiver) that no other
	 * member of the family writes, so a family writes at most what the
	 * machine's SRAM holds: a bound on its members before anything
	 * walks them */
	int64_t members = xfer_members(x), room;
	if (__builtin_mul_overflow(tiles, sram / x->len, &room))
		room = INT64_MAX;
	if (members > big || members > room / x->nrecv)
		return val_err(f, v, e, "%lld members of %lld bytes%s write more than the machine's SRAM holds "
			       "(%lld tiles x %lld bytes)", (long long)members, (long long)x->len,
			       x->nrecv > 1 ? " to each receiver" : "", (long long)tiles, (long long)sram);
	if (__builtin_mul_overflow(tiles, frags, &room))
		room = INT64_MAX;
	if (x->kind == X_SEND && members > room)
		return val_err(f, v, e, "%lld members, each a send fragment, are more than the machine's tiles send "
			       "(%lld tiles x fragment_limit %lld)", (long long)members, (long long)tiles,
			       (long long)frags);
	if (x->kind == X_LOCAL) {
		int same = x->src_tile == x->dst_tile;
		for (int i = 0; i < x->nloop; i++)
			same &= x->loop[i].src_tile == x->loop[i].dst_tile;
		if (!same)
			return val_err(f, r, e, "a local transfer must read and write the same tile");
	}
	for (int d = 0; d < 2; d++) {
		int64_t lo, hi;
		if (d == 0 && x->kind == X_ZERO)
			continue;
		xfer_span(x, d, &lo, &hi);
		if (lo < 0 || hi > sram)
			return val_err(f, map_get(r, d ? "dst" : "src"), e,
				       "%s addresses %lld..%lld are outside SRAM (%lld bytes)",
				       d ? "destination" : "source", (long long)lo, (long long)hi,
				       (long long)sram);
	}
	return 0;
}
