/* The replay and the footprint on small phases computed by hand
 * (formats/capture.md): 4 bytes a cycle, send control 2, receive control 3. */
#include <stdlib.h>
#include <string.h>

#include "cost/replay.h"
#include "stage/table.h"
#include "t.h"
#include "testlib.h"

static Plan phase_of(const Xfer *x, int n)
{
	Plan pl;
	memset(&pl, 0, sizeof pl);
	pl.machine = test_machine(16);
	pl.ns = 1;
	pl.nph = 1;
	pl.ph = calloc(1, sizeof *pl.ph);
	pl.x = calloc((size_t)n, sizeof *pl.x);
	memcpy(pl.x, x, (size_t)n * sizeof *x);
	pl.nx = n;
	return pl;
}

static Xfer send(int64_t src, int64_t sa, int64_t dst, int64_t da, int64_t nrecv, int64_t len)
{
	Xfer x;
	memset(&x, 0, sizeof x);
	x.kind = X_SEND;
	x.len = len;
	x.src_tile = src, x.src_addr = sa;
	x.dst_tile = dst, x.dst_addr = da;
	x.nrecv = nrecv;
	x.recv_step = nrecv > 1 ? 1 : 0;
	return x;
}

static void done(Plan *pl)
{
	free(pl->ph);
	free(pl->x);
}

typedef struct {
	int64_t bytes[16];
	int n[16];
} Rows;

static int note(void *ctx, int64_t t, const Instr *ins, int n)
{
	Rows *r = ctx;
	r->bytes[t] = row_bytes(ins, n);
	r->n[t] = n;
	return 0;
}

/* The replay's definition (lib/cost/replay.h), written plainly: every earlier
 * write on the sender is scanned for each fragment. */
typedef struct {
	const Machine *m;
	int64_t issue[16], sfree[16], rfree[16], last;
	int64_t wt[4096], wlo[4096], whi[4096], wend[4096];
	int nw;
} Ref;

static int64_t mx(int64_t a, int64_t b) { return a > b ? a : b; }

static int ref_frag(void *ctx, const Xfer *x, int64_t m, int64_t s, int64_t sa, int64_t dt, int64_t da)
{
	Ref *r = ctx;
	int64_t start, dep = 0, end, T = r->m->tiles;
	(void)m;
	r->issue[s] += r->m->send_control_cycles;
	start = mx(r->issue[s], r->sfree[s]);
	for (int i = 0; i < r->nw; i++)
		if (r->wt[i] == s && r->wlo[i] < sa + x->len && sa < r->whi[i])
			dep = mx(dep, r->wend[i]);
	start = mx(start, dep);
	for (int64_t j = 0; j < x->nrecv; j++) {
		int64_t t = tile_mod(dt + j * x->recv_step, T);
		r->issue[t] += r->m->receive_control_cycles;
		start = mx(start, mx(r->issue[t], r->rfree[t]));
	}
	end = start + cdiv(x->len, r->m->exchange_bytes_per_cycle);
	r->sfree[s] = end;
	r->last = mx(r->last, mx(end, r->issue[s]));
	for (int64_t j = 0; j < x->nrecv; j++) {
		int64_t t = tile_mod(dt + j * x->recv_step, T);
		r->rfree[t] = end;
		r->last = mx(r->last, r->issue[t]);
		if (r->nw < 4096)
			r->wt[r->nw] = t, r->wlo[r->nw] = da, r->whi[r->nw] = da + x->len, r->wend[r->nw++] = end;
	}
	r->last = mx(r->last, end);
	return 0;
}

/* Random phases on 16 tiles, addresses crowded into a few KB (forwards
 * overlap often) or spread over the SRAM (writes across many buckets):
 * phase_cycles against the plain definition. */
static void random_phases(void)
{
	t_case("phase_cycles equals the replay's plain definition on random phases with forwards");
	for (int c = 0; c < 300; c++) {
		int n = (int)t_pick(1, 40);
		int64_t span = c % 3 ? 8192 : 500000;
		Xfer *x = calloc((size_t)n, sizeof *x);
		for (int i = 0; i < n; i++) {
			int64_t len = t_pick(1, c % 2 ? 64 : 12000), nr = t_pick(1, 3);
			x[i] = send(t_pick(0, 15), t_pick(0, span), t_pick(0, 15), t_pick(0, span), nr, len);
			if (t_upto(4) == 0) {
				x[i].nloop = 1;
				x[i].loop[0] = (XLoop){ t_pick(2, 5), t_pick(0, 2), t_pick(0, 600), t_pick(0, 2),
							t_pick(0, 600) };
			}
		}
		Plan pl = phase_of(x, n);
		Ref ref;
		memset(&ref, 0, sizeof ref);
		ref.m = &pl.machine;
		for (int i = 0; i < n; i++)
			xfer_each(&x[i], pl.machine.tiles, ref_frag, &ref);
		int64_t got = phase_cycles(&pl, 0);
		CHECK(got == ref.last, "case %d: %lld cycles, the definition %lld", c, (long long)got,
		      (long long)ref.last);
		done(&pl);
		free(x);
	}
}

typedef struct {
	int64_t table[16], frags[16];
} Sum16;

static int sum_row(void *ctx, int64_t t, const Instr *ins, int n)
{
	Sum16 *s = ctx;
	s->table[t] += row_bytes(ins, n);
	s->frags[t] += n;
	return 0;
}

/* phase_row_sums against the rows themselves (phase_rows, row_bytes) on
 * random phases: sends short and long, multicasts, loops whose receives
 * continue or jump. */
static void random_sums(void)
{
	t_case("phase_row_sums adds each tile's row_bytes and fragments, as the rows give them");
	for (int c = 0; c < 300; c++) {
		int n = (int)t_pick(1, 30);
		Xfer *x = calloc((size_t)n, sizeof *x);
		for (int i = 0; i < n; i++) {
			x[i] = send(t_pick(0, 15), t_pick(0, 4096), t_pick(0, 15), t_pick(0, 4096), t_pick(1, 3),
				    t_pick(1, 600));
			if (t_upto(3) == 0) {
				x[i].nloop = 1;
				x[i].loop[0] = (XLoop){ t_pick(2, 6), t_pick(0, 1), t_pick(0, 700), t_pick(0, 1),
							t_upto(2) ? x[i].len : t_pick(0, 700) };
			}
		}
		Plan pl = phase_of(x, n);
		Sum16 want, got;
		memset(&want, 0, sizeof want);
		memset(&got, 0, sizeof got);
		phase_rows(&pl, 0, sum_row, &want);
		phase_row_sums(&pl, 0, got.table, got.frags);
		CHECK(!memcmp(&want, &got, sizeof want), "case %d differs", c);
		int64_t mr = 0;
		for (int t = 0; t < 16; t++)
			mr = want.table[t] > mr ? want.table[t] : mr;
		CHECK(phase_max_row(&pl, 0) == mr, "case %d: largest row %lld, the rows' %lld", c,
		      (long long)phase_max_row(&pl, 0), (long long)mr);
		done(&pl);
		free(x);
	}
}

int main(void)
{
	Plan pl;
	Rows r;

	t_case("a single 400-byte send takes the receiver's control then 100 cycles");
	Xfer one = send(0, 0, 1, 0, 1, 400);
	pl = phase_of(&one, 1);
	CHECK(phase_cycles(&pl, 0) == 103, "got %lld", (long long)phase_cycles(&pl, 0));
	memset(&r, 0, sizeof r);
	phase_rows(&pl, 0, note, &r);
	/* sender: 8 + 12 (over 256 B) = 20 -> 24; receiver: 8 + 12 (new address) -> 24 */
	CHECK(r.bytes[0] == 24 && r.bytes[1] == 24 && r.n[0] == 1 && r.n[1] == 1,
	      "rows %lld/%lld", (long long)r.bytes[0], (long long)r.bytes[1]);
	done(&pl);

	t_case("a multicast to three tiles costs the same cycles and its sender one send");
	Xfer mc = send(0, 0, 1, 0, 3, 400);
	pl = phase_of(&mc, 1);
	CHECK(phase_cycles(&pl, 0) == 103, "got %lld", (long long)phase_cycles(&pl, 0));
	memset(&r, 0, sizeof r);
	phase_rows(&pl, 0, note, &r);
	CHECK(r.n[0] == 1 && r.n[1] == 1 && r.n[2] == 1 && r.n[3] == 1 && r.bytes[0] == 24,
	      "sender %d instructions", r.n[0]);
	done(&pl);

	t_case("a forward starts after the receive it depends on");
	Xfer chain[2] = { send(0, 0, 1, 64, 1, 400), send(1, 64, 2, 128, 1, 400) };
	pl = phase_of(chain, 2);
	CHECK(phase_cycles(&pl, 0) == 203, "got %lld", (long long)phase_cycles(&pl, 0));
	done(&pl);

	t_case("a send that reads other bytes does not wait for an unrelated receive");
	Xfer indep[2] = { send(0, 0, 1, 64, 1, 400), send(1, 4096, 2, 128, 1, 400) };
	pl = phase_of(indep, 2);
	/* tile 1: recv control 3, send control 2 -> issue 5; tile 2 recv 3: start 5, end 105 */
	CHECK(phase_cycles(&pl, 0) == 105, "got %lld", (long long)phase_cycles(&pl, 0));
	done(&pl);

	t_case("many tiny fragments are bound by the receiver's controls");
	Xfer tiny = send(0, 0, 1, 0, 1, 4);
	tiny.nloop = 1;
	tiny.loop[0] = (XLoop){ 100, 0, 4, 0, 4 };
	pl = phase_of(&tiny, 1);
	/* fragment i starts at 3(i+1) (receiver issue), lasts 1: the last ends at 301 */
	CHECK(phase_cycles(&pl, 0) == 301, "got %lld", (long long)phase_cycles(&pl, 0));
	memset(&r, 0, sizeof r);
	phase_rows(&pl, 0, note, &r);
	/* receiver: 8 + 12 (first, new address) + 99 * 8 (each continues) = 812 -> 816 */
	CHECK(r.bytes[1] == 816 && r.n[1] == 100, "receiver row %lld", (long long)r.bytes[1]);
	/* sender: 8 + 100 * 8 = 808 */
	CHECK(r.bytes[0] == 808, "sender row %lld", (long long)r.bytes[0]);
	done(&pl);

	t_case("a receive that does not continue the previous one costs 4 bytes more");
	Xfer gap = send(0, 0, 1, 0, 1, 4);
	gap.nloop = 1;
	gap.loop[0] = (XLoop){ 3, 0, 4, 0, 8 };     /* receiver addresses 0, 8, 16 */
	pl = phase_of(&gap, 1);
	memset(&r, 0, sizeof r);
	phase_rows(&pl, 0, note, &r);
	CHECK(r.bytes[1] == 8 + 3 * 12 + 4, "receiver row %lld", (long long)r.bytes[1]);
	done(&pl);

	t_case("a loopback multicast puts the send before the sender's own receive");
	Xfer loop = send(0, 0, 0, 256, 2, 64);
	pl = phase_of(&loop, 1);
	memset(&r, 0, sizeof r);
	phase_rows(&pl, 0, note, &r);
	CHECK(r.n[0] == 2 && r.n[1] == 1, "tile 0 has %d instructions", r.n[0]);
	/* tile 0: issue 2 + 3 = 5, tile 1: 3; start 5, 16 cycles: 21 */
	CHECK(phase_cycles(&pl, 0) == 21, "got %lld", (long long)phase_cycles(&pl, 0));
	done(&pl);
	random_phases();
	random_sums();
	return t_summary();
}
