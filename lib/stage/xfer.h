/* xfer: the one transfer record, from expansion to the simulator.
 *
 * A transfer is a regular family of byte moves. Its member (i_0..i_{n-1})
 * (loop 0 innermost) moves len bytes
 *
 *   from tile (src_tile + sum i_k*loop[k].src_tile) mod tiles,
 *        address src_addr + sum i_k*loop[k].src_addr,
 *   to   tiles (d + j*recv_step) mod tiles for j < nrecv, where
 *        d = dst_tile + sum i_k*loop[k].dst_tile,
 *        each at address dst_addr + sum i_k*loop[k].dst_addr.
 *
 * kind send: an exchange multicast (loopback when the sender is among the
 * receivers); local: an on-tile copy (one receiver, the sender itself);
 * zero: the receiver writes len zero bytes at the destination (no source).
 * step names the plan step the transfer serves. Members are ordered with
 * loop 0 fastest; within a tile, that order and the record order are the
 * order of its instructions.
 */
#ifndef AMP_XFER_H
#define AMP_XFER_H

#include <stdint.h>

#include "base/diag.h"
#include "base/yio.h"

#define XFER_LOOPS 6

typedef enum { X_SEND, X_LOCAL, X_ZERO, X_COUNT } XKind;

typedef struct {
	int64_t count, src_tile, src_addr, dst_tile, dst_addr;
} XLoop;

typedef struct {
	XKind kind;
	int step;
	int64_t len;
	int64_t src_tile, src_addr, dst_tile, dst_addr;
	int64_t nrecv, recv_step;
	int nloop;
	XLoop loop[XFER_LOOPS];
} Xfer;

const char *xkind_name(XKind k);
int64_t xfer_members(const Xfer *x);
static inline int64_t tile_mod(int64_t t, int64_t tiles)
{
	t %= tiles;
	return t < 0 ? t + tiles : t;
}

/* fn(ctx, x, member index, src tile, src addr, first dst tile, dst addr)
 * for every member in order; the first non-zero return stops the walk. */
typedef int (*XferFn)(void *ctx, const Xfer *x, int64_t m, int64_t src_tile,
		      int64_t src_addr, int64_t dst_tile, int64_t dst_addr);
int xfer_each(const Xfer *x, int64_t tiles, XferFn fn, void *ctx);

/* xfer_each itself, for a caller whose fn should be inlined (a walk that
 * visits millions of members). */
static inline int xfer_each_inline(const Xfer *x, int64_t tiles, XferFn fn, void *ctx)
{
	int64_t idx[XFER_LOOPS] = { 0 }, n = 1;
	/* Members in order, each from the last: a loop's step adds its deltas,
	 * its wrap takes back count - 1 of them. Tiles stay in [0, tiles),
	 * so one comparison replaces a division. */
	int64_t ds[XFER_LOOPS], dd[XFER_LOOPS], ws[XFER_LOOPS], wd[XFER_LOOPS];
	for (int k = 0; k < x->nloop; k++) {
		int64_t c = (x->loop[k].count - 1) % tiles;
		n *= x->loop[k].count;
		ds[k] = tile_mod(x->loop[k].src_tile, tiles);
		dd[k] = tile_mod(x->loop[k].dst_tile, tiles);
		ws[k] = tile_mod(c * ds[k], tiles);
		wd[k] = tile_mod(c * dd[k], tiles);
	}
	int64_t st = tile_mod(x->src_tile, tiles), sa = x->src_addr, dt = tile_mod(x->dst_tile, tiles), da = x->dst_addr;
	for (int64_t m = 0; m < n; m++) {
		int rc = fn(ctx, x, m, st, sa, dt, da);
		if (rc)
			return rc;
		for (int k = 0; k < x->nloop; k++) {
			const XLoop *l = &x->loop[k];
			if (++idx[k] < l->count) {
				st += ds[k], dt += dd[k];
				st -= st >= tiles ? tiles : 0;
				dt -= dt >= tiles ? tiles : 0;
				sa += l->src_addr, da += l->dst_addr;
				break;
			}
			idx[k] = 0;
			st -= ws[k], dt -= wd[k];
			st += st < 0 ? tiles : 0;
			dt += dt < 0 ? tiles : 0;
			sa -= (l->count - 1) * l->src_addr, da -= (l->count - 1) * l->dst_addr;
		}
	}
	return 0;
}

/* Lowest and highest address any member reads (src) or writes (dst). */
void xfer_span(const Xfer *x, int dst, int64_t *lo, int64_t *hi);

/* Folds consecutive records that differ by constant deltas into families
 * (adds outer loops); returns the new count. Records must be flat or share
 * loop shapes to fold; kind, step, len and receivers must agree. */
int xfer_compress(Xfer *xs, int n);

void xfer_write(YWriter *w, const Xfer *x);
/* Strict: nsteps bounds step, tiles and sram bound tiles and addresses;
 * a family's members are bounded before anything walks them: the bytes
 * they write by tiles x sram, a send's fragments by tiles x frags (the
 * fragment limit). */
int xfer_read(const char *file, const Val *rec, int nsteps, int64_t tiles, int64_t sram, int64_t frags,
	      Xfer *x, Err *e);

#endif
