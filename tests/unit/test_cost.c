/* test_cost: lib/cost against brute-force references written here from the
 * contract in cost.h and formats/machine.md: every tile of the machine is
 * visited, the shards on it found by walking every (shard, replica) with
 * explicit loops and the documented tile formula (refplace.h), storage by
 * the formulas of docs/machine.md §4, and local-copy members by the loop formula of
 * xfer.h. Three families: random placements and compute kinds, the compute
 * steps of planned random models, and random local copies.
 *
 * Deterministic: a fixed-seed xorshift. FUZZ=1 runs 20x more cases.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost/cost.h"
#include "planner/planner.h"
#include "refplace.h"
#include "t.h"
#include "testlib.h"

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* ---- references ---- */

static const int64_t ref_mu[FMT_COUNT] = { 8, 16, 32, 8 };    /* fp32, fp16, fp8, int32 */
static const int64_t ref_size[FMT_COUNT] = { 4, 2, 1, 4 };

/* Storage of an R x C shard (docs/machine.md §4): whole strips or panels. */
static int64_t ref_storage(LayoutKind k, Format f, int64_t R, int64_t C)
{
	int64_t mu = ref_mu[f], e;

	switch (k) {
	case LAYOUT_AMP_LEFT: e = ceil_div(C, mu) * mu * R; break;
	case LAYOUT_TRANSPOSED_RIGHT: e = ceil_div(R, mu) * mu * ceil_div(C, 16) * 16; break;
	case LAYOUT_AMP_OUTPUT: e = ceil_div(C, 16) * 16 * R; break;
	default: e = R * C; break;
	}
	return e * ref_size[f];
}

typedef struct {
	int found;
	int64_t order;          /* position in shard-major, replica-minor order */
	int64_t rows, cols, bytes;
	Format fmt;
} RefShard;

/* The shard of p on tile t, from the brute-force walk of every (shard,
 * replica) in place_each's documented order (refplace.h). */
static RefShard ref_shard_on(const Placement *p, int64_t T, int64_t t)
{
	RefShard r;
	int64_t n = ref_visits(p, T, NULL);
	RefVisit *v = calloc((size_t)n, sizeof *v);

	memset(&r, 0, sizeof r);
	ref_visits(p, T, v);
	for (int64_t i = 0; i < n && !r.found; i++) {
		if (v[i].tile != t)
			continue;
		r.found = 1;
		r.order = i;
		r.rows = 1;
		for (int a = 0; a < p->rank; a++) {
			int64_t ext = ref_extent(p, a, v[i].idx[a]);
			if (a + 1 < p->rank)
				r.rows *= ext;
			else
				r.cols = ext;
		}
		r.fmt = p->fmt;
		r.bytes = ref_storage(p->layout, p->fmt, r.rows, r.cols);
	}
	free(v);
	return r;
}

/* One tile's cycles, formats/machine.md's table. */
static int64_t ref_tile_cycles(const Machine *m, ComputeKind k, const RefShard *out, const RefShard *in)
{
	switch (k) {
	case C_MATMUL:
		return ceil_div(out->rows * in->cols * out->cols,
				in->fmt == FMT_FP8 ? m->macs_fp8 : m->macs_fp16) + m->matmul_call_cycles;
	case C_LAYERNORM:
	case C_REDUCE:
		return in->rows * in->cols * m->reduction_cycles_per_element;
	case C_PACK:
		return ceil_div(out->bytes, m->local_copy_bytes_per_cycle);
	default:
		return out->rows * out->cols * m->elementwise_cycles_per_element;
	}
}

/* A compute step by brute force: the slowest tile of the machine, the
 * first in visiting order among equals, and the tiles that compute. */
static int64_t ref_step(const Plan *pl, int step, int64_t *worst, int64_t *tiles)
{
	const Step *s = &pl->s[step];
	int64_t T = pl->machine.tiles, best = 0, best_order = -1;

	*worst = -1;
	*tiles = 0;
	for (int64_t t = 0; t < T; t++) {
		RefShard out = ref_shard_on(&pl->p[s->out], T, t);
		if (!out.found)
			continue;
		RefShard in = ref_shard_on(&pl->p[s->in[0]], T, t);
		if (!in.found)
			in.rows = in.cols = 0, in.fmt = FMT_FP32;
		int64_t c = ref_tile_cycles(&pl->machine, s->compute, &out, &in);
		++*tiles;
		if (best_order < 0 || c > best || (c == best && out.order < best_order))
			best = c, best_order = out.order, *worst = t;
	}
	return best;
}

/* ---- random placements ---- */

/* Axis a of extent about n cut uniformly: block b, then the extent in
 * (split*b - min(split, b), split*b] so that ceil(n/split) = b and no part
 * is empty. */
static void gen_axis(Placement *p, int a, int64_t max_block, int64_t max_split)
{
	int64_t s = 1 + t_upto(max_split), b = 1 + t_upto(max_block);
	p->split[a] = s;
	p->block[a] = b;
	p->shape[a] = s * b - t_upto(s < b ? s : b);
}

/* Tiles by a mixed-radix numbering of the digits (shard axes, then
 * replica axes, or the reverse), each radix at least its count and each
 * weight of either sign: distinct digits give distinct tiles modulo any
 * T at least the product returned. */
static int64_t gen_tiles(Placement *p)
{
	int nd = p->rank + p->nrep, rev = (int)t_upto(2);
	int64_t w = 1;

	for (int i = 0; i < nd; i++) {
		int d = rev ? nd - 1 - i : i;
		int64_t count = d < p->rank ? p->split[d] : p->rep[d - p->rank];
		int64_t sw = t_upto(4) ? w : -w;
		if (d < p->rank)
			p->stride[d] = sw;
		else
			p->rstride[d - p->rank] = sw;
		w *= count + t_upto(2);
	}
	return w;
}

static char out_name[] = "out", in_name[] = "in";

static void gen_placement(Placement *p, char *name)
{
	memset(p, 0, sizeof *p);
	p->name = name;
	p->layout = (LayoutKind)t_upto(LAYOUT_COUNT);
	p->fmt = (Format)t_upto(FMT_COUNT);
	p->rank = 1 + (int)t_upto(MAX_RANK);
	for (int a = 0; a < p->rank; a++)
		gen_axis(p, a, a + 1 < p->rank ? 6 : 40, 4);
	p->nrep = (int)t_upto(MAX_REP + 1);
	for (int k = 0; k < p->nrep; k++)
		p->rep[k] = 1 + t_upto(3);
}

static void random_steps(int n)
{
	static const ComputeKind kinds[] = { C_CAST, C_PACK, C_MATMUL, C_REDUCE, C_GELU, C_ADD,
					     C_LAYERNORM, C_COUNT /* a kind cost.c does not know */ };
	for (int iter = 0; iter < n; iter++) {
		Placement pp[2];
		Step st[2];
		Plan pl;
		int64_t T;

		int aligned = (int)t_upto(2);
		gen_placement(&pp[0], out_name);
		T = gen_tiles(&pp[0]);
		if (aligned) {
			/* the input on the output's tiles, its own extents */
			pp[1] = pp[0];
			pp[1].name = in_name;
			pp[1].fmt = (Format)t_upto(FMT_COUNT);
			for (int a = 0; a < pp[1].rank; a++)
				if (a == 0 || a + 1 == pp[1].rank || t_upto(2)) {
					int64_t s = pp[1].split[a], b = 1 + t_upto(40);
					pp[1].block[a] = b;
					pp[1].shape[a] = s * b - t_upto(s < b ? s : b);
				}
		} else {
			/* anywhere: some output tiles hold no input shard */
			gen_placement(&pp[1], in_name);
			int64_t T1 = gen_tiles(&pp[1]);
			T = T > T1 ? T : T1;
		}
		T += t_upto(4);
		pp[0].base = t_upto(T);
		pp[1].base = aligned ? pp[0].base : t_upto(T);

		memset(&pl, 0, sizeof pl);
		memset(st, 0, sizeof st);
		pl.machine = test_machine(T);
		pl.machine.macs_fp16 = 1 + t_upto(100);
		pl.machine.macs_fp8 = 1 + t_upto(200);
		pl.machine.matmul_call_cycles = t_upto(300);
		pl.machine.elementwise_cycles_per_element = t_upto(4);
		pl.machine.reduction_cycles_per_element = t_upto(5);
		pl.machine.local_copy_bytes_per_cycle = 1 + t_upto(16);
		pl.p = pp;
		pl.np = 2;
		st[0].kind = STEP_COMPUTE;
		st[0].compute = kinds[t_upto(sizeof kinds / sizeof kinds[0])];
		st[0].in[0] = 1;
		st[0].nin = 1;
		st[0].out = 0;
		st[1].kind = STEP_COPY;
		st[1].src = 1;
		st[1].dst = 0;
		pl.s = st;
		pl.ns = 2;

		int64_t worst, ref_worst, ref_tiles, ref = ref_step(&pl, 0, &ref_worst, &ref_tiles);
		int64_t got = step_cycles(&pl, 0, &worst);
		t_case("random placements: a step's cycles are its slowest tile's, by brute force");
		CHECK(got == ref && worst == ref_worst,
		      "kind %d, out rank %d (%s), in rank %d, %lld tiles: got %lld at tile %lld, expected %lld at tile %lld",
		      (int)st[0].compute, pp[0].rank, layout_name(pp[0].layout), pp[1].rank, (long long)T,
		      (long long)got, (long long)worst, (long long)ref, (long long)ref_worst);
		t_case("random placements: a step runs on its output's shards and replicas");
		CHECK(step_tiles(&pl, 0) == ref_tiles, "got %lld tiles, expected %lld",
		      (long long)step_tiles(&pl, 0), (long long)ref_tiles);
		t_case("random placements: a copy step has no compute cost");
		CHECK(step_cycles(&pl, 1, &worst) == 0 && worst == -1 && step_tiles(&pl, 1) == 0,
		      "copy step: %lld cycles at tile %lld", (long long)step_cycles(&pl, 1, NULL),
		      (long long)worst);
	}
}

/* ---- planned models ---- */

static int64_t parts(int64_t n, int64_t want)
{
	if (want > n)
		want = n;
	while (want > 1 && !(ceil_div(n, ceil_div(n, want)) == want))
		want--;
	return want < 1 ? 1 : want;
}

static void planned_steps(int n)
{
	char path[] = "/tmp/amp-cost-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	for (int iter = 0; iter < n; iter++) {
		int64_t tiles = 8 + t_upto(90), B = 1 + t_upto(2), Tk = 2 + t_upto(23), D = 8 + t_upto(65),
			H = 8 + t_upto(90);
		const char *f1 = t_upto(3) ? "fp8" : "fp16";
		int pack = (int)t_upto(2);
		int64_t mu = f1[2] == '8' ? 32 : 16;
		int64_t r = parts(Tk, 1 + t_upto(4)), k = parts(ceil_div(D, mu), 1 + t_upto(3)),
			c = parts(ceil_div(H, 16), 1 + t_upto(4));
		while (r * k * c > tiles)
			c > 1 ? (c = parts(ceil_div(H, 16), c - 1)) : (r = parts(Tk, r - 1));
		FILE *f = fopen(path, "w");
		fprintf(f, "amp-model: 1\nname: rnd\ninputs:\n  x: {shape: [%lld, %lld, %lld], dtype: fp16}\n"
			"params:\n  s: {shape: [%lld], dtype: fp16}\n  o: {shape: [%lld], dtype: fp16}\n"
			"  w: {shape: [%lld, %lld], dtype: %s}\n  b: {shape: [%lld], dtype: fp16}\nops:\n"
			"  - {op: layernorm, name: ln, x: x, scale: s, bias: o, out: xn}\n"
			"  - {op: matmul, name: mm, a: xn, b: w, bias: b, out: h}\n"
			"  - {op: gelu, name: act, x: h, out: g}\noutputs: [g]\npins:\n"
			"  mm: {grid: [%lld, %lld, %lld], cast: %s, staging: %s}\n",
			(long long)B, (long long)Tk, (long long)D, (long long)D, (long long)D, (long long)D,
			(long long)H, f1, (long long)H, (long long)r, (long long)k, (long long)c,
			t_upto(2) ? "early" : "late", pack ? "pack-once" : "direct");
		fclose(f);

		Model md;
		Plan pl;
		Machine mc = test_machine(tiles);
		PlanOpts po = { OBJ_CAPACITY, 0, NULL, OWN_AUTO, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0 };
		Err e;
		if (model_load(&md, path, &e))
			continue;
		int rc = plan_build(&pl, &md, &mc, &po, NULL, &e);
		model_free(&md);
		if (rc)
			continue;               /* a pinned grid that does not fit */
		int seen[C_COUNT] = { 0 };
		for (int s = 0; s < pl.ns; s++) {
			if (pl.s[s].kind != STEP_COMPUTE)
				continue;
			int64_t worst, ref_worst, ref_tiles, ref = ref_step(&pl, s, &ref_worst, &ref_tiles);
			int64_t got = step_cycles(&pl, s, &worst);
			seen[pl.s[s].compute] = 1;
			t_case("planned models: every compute step's cycles are its slowest tile's, by brute force");
			CHECK(got == ref && worst == ref_worst && step_tiles(&pl, s) == ref_tiles,
			      "step %d (%s %s), grid [%lld, %lld, %lld]: got %lld at tile %lld on %lld tiles, "
			      "expected %lld at tile %lld on %lld", s, compute_name(pl.s[s].compute), pl.s[s].op,
			      (long long)r, (long long)k, (long long)c, (long long)got, (long long)worst,
			      (long long)step_tiles(&pl, s), (long long)ref, (long long)ref_worst,
			      (long long)ref_tiles);
			if (pl.s[s].compute == C_MATMUL) {
				/* by hand: the first tile's rows x K x cols are full blocks */
				int64_t rows = B * ceil_div(Tk, r), kk = ceil_div(ceil_div(D, mu), k) * mu,
					cols = ceil_div(ceil_div(H, 16), c) * 16;
				kk = kk < D ? kk : D;
				cols = cols < H ? cols : H;
				int64_t macs = mu == 32 ? mc.macs_fp8 : mc.macs_fp16;
				t_case("planned models: a GEMM costs its first tile's MACs / rate + the call");
				CHECK(got == ceil_div(rows * kk * cols, macs) + mc.matmul_call_cycles,
				      "got %lld for %lld x %lld x %lld", (long long)got, (long long)rows,
				      (long long)kk, (long long)cols);
			}
		}
		t_case("planned models: the plan has the compute kinds its pins imply");
		CHECK(seen[C_LAYERNORM] && seen[C_MATMUL] && seen[C_GELU] && seen[C_CAST] == (mu == 32) &&
		      seen[C_PACK] == pack && seen[C_REDUCE] == (k > 1),
		      "kinds: layernorm %d matmul %d gelu %d cast %d pack %d reduce %d for %s, %s, k %lld",
		      seen[C_LAYERNORM], seen[C_MATMUL], seen[C_GELU], seen[C_CAST], seen[C_PACK],
		      seen[C_REDUCE], f1, pack ? "pack-once" : "direct", (long long)k);
		plan_free(&pl);
	}
	unlink(path);
}

/* ---- local copies ---- */

static void local_copies(int n)
{
	for (int iter = 0; iter < n; iter++) {
		int64_t T = 1 + t_upto(40);
		int nx = 1 + (int)t_upto(8);
		Xfer x[8];
		Plan pl;

		memset(&pl, 0, sizeof pl);
		memset(x, 0, sizeof x);
		pl.machine = test_machine(T);
		pl.machine.local_copy_bytes_per_cycle = 1 + t_upto(16);
		for (int i = 0; i < nx; i++) {
			x[i].kind = (XKind)t_upto(X_COUNT);
			x[i].step = (int)t_upto(4);
			x[i].len = 1 + t_upto(100);
			x[i].src_tile = t_upto(T);
			x[i].dst_tile = x[i].kind == X_LOCAL ? x[i].src_tile : t_upto(T);
			x[i].nrecv = x[i].kind == X_SEND ? 1 + t_upto(3) : 1;
			x[i].recv_step = 1;
			x[i].nloop = (int)t_upto(3);
			for (int k = 0; k < x[i].nloop; k++) {
				x[i].loop[k].count = 1 + t_upto(4);
				x[i].loop[k].src_tile = t_upto(5) - 2;
				x[i].loop[k].dst_tile = x[i].kind == X_LOCAL ? x[i].loop[k].src_tile : t_upto(3);
				x[i].loop[k].src_addr = x[i].loop[k].dst_addr = 64;
			}
		}
		pl.x = x;
		pl.nx = nx;
		int first = (int)t_upto(4), last = first + (int)t_upto(4 - first);

		/* every member of every local transfer of steps first..last */
		int64_t bytes[41] = { 0 }, worst = -1;
		for (int i = 0; i < nx; i++) {
			if (x[i].kind != X_LOCAL || x[i].step < first || x[i].step > last)
				continue;
			int64_t members = 1;
			for (int k = 0; k < x[i].nloop; k++)
				members *= x[i].loop[k].count;
			for (int64_t m = 0; m < members; m++) {
				int64_t u = m, t = x[i].src_tile;
				for (int k = 0; k < x[i].nloop; k++) {
					t += u % x[i].loop[k].count * x[i].loop[k].src_tile;
					u /= x[i].loop[k].count;
				}
				bytes[((t % T) + T) % T] += x[i].len;
			}
		}
		for (int64_t t = 0; t < T; t++)
			if (bytes[t] && (worst < 0 || bytes[t] > bytes[worst]))
				worst = t;
		int64_t ref = worst < 0 ? 0 : ceil_div(bytes[worst], pl.machine.local_copy_bytes_per_cycle);
		int64_t got_tile, got = local_copy_cycles(&pl, first, last, &got_tile);
		t_case("local copies: the tile with the most local bytes, at local_copy_bytes_per_cycle");
		CHECK(got == ref && got_tile == worst, "steps %d..%d: got %lld at tile %lld, expected %lld at %lld",
		      first, last, (long long)got, (long long)got_tile, (long long)ref, (long long)worst);
	}
}

/* ---- compute sets ---- */

/* Does placement p have a shard on tile t? By the explicit walk. */
static int ref_on(const Placement *p, int64_t T, int64_t t)
{
	return ref_shard_on(p, T, t).found;
}

static int ref_conflict(const Plan *pl, int a, int b)
{
	const Step *x = &pl->s[a], *y = &pl->s[b];
	int wa = pl->p[x->out].tensor, wb = pl->p[y->out].tensor;
	int hit = wa == wb;
	for (int i = 0; i < y->nin; i++)
		hit |= pl->p[y->in[i]].tensor == wa;
	for (int i = 0; i < x->nin; i++)
		hit |= pl->p[x->in[i]].tensor == wb;
	return hit;
}

static int ref_overlap(const Plan *pl, int a, int b)
{
	int64_t T = pl->machine.tiles;
	for (int64_t t = 0; t < T; t++)
		if (ref_on(&pl->p[pl->s[a].out], T, t) && ref_on(&pl->p[pl->s[b].out], T, t))
			return 1;
	return 0;
}

/* Random step lists (compute steps on random placements of a few tensors,
 * copy steps between them, a repeat body somewhere): the sets compute_sets
 * returns are runs of consecutive compute steps, their steps pairwise on
 * disjoint tiles and free of conflicts, a body's first step starts one,
 * and each is maximal: the compute step after it overlaps or conflicts
 * with one of its steps, or starts a body. compute_charge's charges of a
 * set add up to its slowest step's cycles. */
static void random_sets(int n)
{
	for (int iter = 0; iter < n; iter++) {
		int np = 2 + (int)t_upto(6), ns = 1 + (int)t_upto(10), nt = 1 + (int)t_upto(6);
		Placement *pp = calloc((size_t)np, sizeof *pp);
		Step *st = calloc((size_t)ns, sizeof *st);
		Repeat rp;
		Plan pl;
		int64_t T = 1;
		for (int i = 0; i < np; i++) {
			gen_placement(&pp[i], out_name);
			int64_t w = gen_tiles(&pp[i]);
			T = w > T ? w : T;
			pp[i].tensor = (int)t_upto((uint64_t)nt);
		}
		T += t_upto(6);
		for (int i = 0; i < np; i++)
			pp[i].base = t_upto(T);
		for (int s = 0; s < ns; s++) {
			st[s].kind = t_upto(4) ? STEP_COMPUTE : STEP_COPY;
			st[s].compute = C_ADD;
			st[s].out = (int)t_upto((uint64_t)np);
			st[s].nin = (int)t_upto(3);
			for (int k = 0; k < st[s].nin; k++)
				st[s].in[k] = (int)t_upto((uint64_t)np);
			st[s].src = st[s].in[0], st[s].dst = st[s].out;
		}
		memset(&pl, 0, sizeof pl);
		pl.machine = test_machine(T);
		pl.p = pp, pl.np = np, pl.s = st, pl.ns = ns;
		memset(&rp, 0, sizeof rp);
		if (t_upto(2)) {
			rp.first = (int)t_upto((uint64_t)ns), rp.last = ns - 1, rp.count = 2;
			pl.r = &rp, pl.nr = 1;
		}
		int *lead = calloc((size_t)ns, sizeof *lead);
		int64_t *own = calloc((size_t)ns, 8), *ch = calloc((size_t)ns, 8);
		compute_sets(&pl, 0, ns - 1, lead);
		for (int s = 0; s < ns; s++)
			own[s] = (int64_t)t_upto(50);
		compute_charge(lead, own, 0, ns - 1, ch);
		int ok = 1, why = 0;
		for (int s = 0; s < ns && ok; s++) {
			int body = pl.nr && rp.first == s;
			if (st[s].kind != STEP_COMPUTE) {
				ok = lead[s] == -1, why = 1;
				continue;
			}
			int l = lead[s];
			ok = l >= 0 && l <= s && (l == s || !body), why = 2;
			for (int k = l; ok && k < s; k++)       /* a run of compute steps, no body start inside */
				ok = lead[k] == l && st[k].kind == STEP_COMPUTE && !(pl.nr && rp.first == k + 1 && k + 1 <= s),
				why = 3;
			for (int k = l; ok && k < s; k++)
				ok = !ref_conflict(&pl, k, s) && !ref_overlap(&pl, k, s), why = 4;
			if (ok && l == s && s > 0 && st[s - 1].kind == STEP_COMPUTE && !body) {
				int prev = lead[s - 1], blocked = 0;       /* s could not join the set before it */
				for (int k = prev; k < s; k++)
					blocked |= ref_conflict(&pl, k, s) || ref_overlap(&pl, k, s);
				ok = blocked, why = 5;
			}
		}
		for (int s = 0; s < ns && ok; s++) {
			if (st[s].kind != STEP_COMPUTE || lead[s] != s)
				continue;
			int64_t sum = 0, most = 0;
			for (int k = s; k < ns && lead[k] == s; k++)
				sum += ch[k], most = own[k] > most ? own[k] : most, ok &= ch[k] >= 0;
			ok &= sum == most, why = 6;
		}
		t_case("random step lists: compute sets are maximal runs of disjoint, independent steps");
		CHECK(ok, "%d steps, %d placements, %lld tiles: rule %d broken", ns, np, (long long)T, why);
		free(lead), free(own), free(ch), free(pp), free(st);
	}
}

int main(void)
{
	const char *fuzz = getenv("FUZZ");
	int scale = fuzz && *fuzz ? 20 : 1;

	t_rng = 0x6a09e667f3bcc909u;
	random_steps(400 * scale);
	planned_steps(40 * scale);
	local_copies(400 * scale);
	random_sets(400 * scale);
	return t_summary();
}
