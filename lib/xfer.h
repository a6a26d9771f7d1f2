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

#include "diag.h"
#include "yio.h"

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

/* Lowest and highest address any member reads (src) or writes (dst). */
void xfer_span(const Xfer *x, int dst, int64_t *lo, int64_t *hi);

/* Folds consecutive records that differ by constant deltas into families
 * (adds outer loops); returns the new count. Records must be flat or share
 * loop shapes to fold; kind, step, len and receivers must agree. */
int xfer_compress(Xfer *xs, int n);

void xfer_write(YWriter *w, const Xfer *x);
/* Strict: nsteps bounds step, tiles and sram bound tiles and addresses. */
int xfer_read(const char *file, const Val *rec, int nsteps, int64_t tiles, int64_t sram,
	      Xfer *x, Err *e);

#endif
