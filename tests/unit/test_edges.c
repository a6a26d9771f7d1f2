/* test_edges: the stage movement check (sim_check_stage) held to the byte
 * at every edge of every kind of destination (issue 45).
 *
 * Each case is a small hand-made plan: a tensor, its placements and copy
 * steps, expanded by the real expansion, its transfers then flattened to
 * one record per member and receiver. A brute-force reference walks each
 * destination shard element by element (layout_offset, not the layout's
 * row walk) and marks, per tile, its data bytes and, in every layout but
 * row-major (which has none), its
 * padding: the flat records must write each marked byte exactly once and
 * nothing else, and the check must pass them. Then each record in turn is
 * moved by one byte at each edge: a byte before its start, a byte past its
 * end, its last byte missing, its first byte missing, and shifted one byte
 * either way. Every such version must be refused, and a one-byte change
 * must be named where the reference puts it: the tile, step and offset of
 * a data byte or padding byte written twice or never, or bytes written
 * outside every destination. A record's edge is a row's, strip's or
 * panel's edge in the middle of a shard as well as the shard's ends.
 *
 * Destinations: row-major, amp-left, transposed-right and amp-output
 * (padding zeroed by the receiver, or carried by whole panels), windows
 * of a tensor, replicas (multicast), partial tensors, on-tile (local)
 * copies, shards that alias their source, two copies in one phase into
 * adjacent buffers, and a relay written and read in one phase; then
 * random small copies (fixed seed). */
#include <stdlib.h>
#include <string.h>

#include "lower/expand.h"
#include "run/sim.h"
#include "stage/alloc.h"
#include "t.h"
#include "testlib.h"

/* ---- building a case ---- */

typedef struct {
	LayoutKind lay;
	int64_t split[MAX_RANK];        /* 0: 1 */
	int64_t base, addr;
	int64_t rep;                    /* replicas (0 or 1: none) */
	int64_t off[MAX_RANK], shape[MAX_RANK]; /* a window (shape 0: the whole tensor) */
} Spec;

static void set_place(Placement *p, int i, int rank, const int64_t *tshape, Format fmt, const Spec *s)
{
	char name[16];
	int win = 0;
	snprintf(name, sizeof name, "p%d", i);
	memset(p, 0, sizeof *p);
	p->name = strdup(name);
	p->layout = s->lay;
	p->fmt = fmt;
	p->rank = rank;
	for (int a = 0; a < rank; a++) {
		p->shape[a] = s->shape[a] ? s->shape[a] : tshape[a];
		p->off[a] = s->off[a];
		win |= p->shape[a] != tshape[a] || p->off[a];
		p->split[a] = s->split[a] ? s->split[a] : 1;
		p->block[a] = cdiv(p->shape[a], p->split[a]);
	}
	for (int a = 0; win && a < rank; a++)
		p->whole[a] = tshape[a];
	p->stride[rank - 1] = 1;
	for (int a = rank - 2; a >= 0; a--)
		p->stride[a] = p->stride[a + 1] * p->split[a + 1];
	p->base = s->base;
	p->addr = s->addr;
	if (s->rep > 1) {
		p->nrep = 1;
		p->rep[0] = s->rep;
		p->rstride[0] = place_shards(p);
	}
}

/* A plan of one tensor, placements spec[0..np), copy steps step[k] =
 * {src, dst}, in one phase when `phase`, expanded. */
static int build(Plan *pl, int64_t tiles, int64_t sram, int rank, const int64_t *shape, Format fmt, PRole role,
		 int np, const Spec *spec, int ns, const int (*step)[2], int phase, Err *e)
{
	memset(pl, 0, sizeof *pl);
	pl->machine = test_machine(tiles);
	pl->machine.sram_bytes = sram;
	pl->t = calloc(1, sizeof *pl->t);
	pl->nt = 1;
	pl->t[0] = (PTensor){ strdup("t"), role, rank, { 0 }, fmt, 0, 1 };
	memcpy(pl->t[0].shape, shape, (size_t)rank * sizeof *shape);
	pl->p = calloc((size_t)np, sizeof *pl->p);
	pl->np = np;
	for (int i = 0; i < np; i++) {
		set_place(&pl->p[i], i, rank, shape, fmt, &spec[i]);
		if (place_check(&pl->p[i], tiles, e))
			return -1;
	}
	pl->s = calloc((size_t)ns, sizeof *pl->s);
	pl->ns = ns;
	for (int k = 0; k < ns; k++) {
		Step *s = &pl->s[k];
		s->kind = STEP_COPY;
		s->op = strdup("c");
		s->src = step[k][0], s->dst = step[k][1];
		s->move = k ? MOVE_RELAY : MOVE_COPY;
		s->map = copy_mapping(&pl->p[s->src], &pl->p[s->dst]);
	}
	if (phase) {
		pl->ph = calloc(1, sizeof *pl->ph);
		pl->ph[0] = (Phase){ 0, ns - 1, strdup("p") };
		pl->nph = 1;
	}
	pl->stage = STAGE_EXPAND;
	return plan_expand_steps(pl, 0, ns - 1, e);
}

/* ---- flat records ---- */

typedef struct {
	Xfer *x;
	int n, cap;
} Flat;

static int flat_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt, int64_t da)
{
	Flat *f = ctx;
	(void)m;
	for (int64_t j = 0; j < x->nrecv; j++) {
		if (f->n == f->cap)
			f->x = realloc(f->x, (size_t)(f->cap = f->cap ? 2 * f->cap : 64) * sizeof *f->x);
		Xfer *y = &f->x[f->n++];
		memset(y, 0, sizeof *y);
		y->kind = x->kind;
		y->step = x->step;
		y->len = x->len;
		y->src_tile = st, y->src_addr = sa;
		y->dst_tile = dt + j * x->recv_step, y->dst_addr = da;
		y->nrecv = 1;
	}
	return 0;
}

/* pl's transfers as one record per member and receiver, in order. */
static Flat flatten(const Plan *pl)
{
	Flat f = { NULL, 0, 0 };
	for (int i = 0; i < pl->nx; i++)
		xfer_each(&pl->x[i], pl->machine.tiles, flat_member, &f);
	return f;
}

static void set_xfers(Plan *pl, const Xfer *x, int n)
{
	pl->nx = 0;
	for (int i = 0; i < n; i++)
		plan_add_xfer(pl, &x[i]);
}

/* ---- the brute-force reference ---- */

enum { B_NONE, B_DATA, B_PAD };

/* What each byte of each tile is to one step: data or padding of its
 * destination (aliases of the source excluded), or neither. */
typedef struct {
	const Plan *pl;
	int step;
	uint8_t **cls;          /* [tiles][sram] */
} Ref;

static int mark_shard(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	Ref *r = ctx;
	Layout l = place_layout(p, idx);
	int esz = fmt_bytes(p->fmt);
	(void)rep;
	if (place_aliases(r->pl, r->pl->s[r->step].src, r->pl->s[r->step].dst, idx, t))
		return 0;
	if (!r->cls[t])
		r->cls[t] = calloc((size_t)r->pl->machine.sram_bytes, 1);
	uint8_t *c = r->cls[t] + p->addr;
	if (p->layout != LAYOUT_ROW_MAJOR)
		memset(c, B_PAD, (size_t)layout_bytes(&l));     /* every layout's padding: written once, zero */
	for (int64_t i = 0; i < l.rows; i++)
		for (int64_t j = 0; j < l.cols; j++)
			memset(c + layout_offset(&l, i, j) * esz, B_DATA, (size_t)esz);
	return 0;
}

static Ref ref_make(const Plan *pl, int step)
{
	Ref r = { pl, step, calloc((size_t)pl->machine.tiles, sizeof *r.cls) };
	place_each(&pl->p[pl->s[step].dst], pl->machine.tiles, mark_shard, &r);
	return r;
}

static void ref_free(Ref *r)
{
	for (int64_t t = 0; t < r->pl->machine.tiles; t++)
		free(r->cls[t]);
	free(r->cls);
}

static int ref_class(const Ref *r, int64_t t, int64_t a)
{
	return r->cls[t] && a >= 0 && a < r->pl->machine.sram_bytes ? r->cls[t][a] : B_NONE;
}

/* Do step's flat records write each byte of the reference once, and no
 * other? The first difference in *why. */
static int ref_exact(const Ref *r, const Flat *f, char *why, size_t n)
{
	const Plan *pl = r->pl;
	int64_t T = pl->machine.tiles, S = pl->machine.sram_bytes;
	uint8_t **cnt = calloc((size_t)T, sizeof *cnt);
	int ok = 1;
	for (int i = 0; i < f->n && ok; i++) {
		const Xfer *x = &f->x[i];
		int64_t t = tile_mod(x->dst_tile, T);
		if (x->step != r->step)
			continue;
		if (!cnt[t])
			cnt[t] = calloc((size_t)S, 1);
		for (int64_t a = x->dst_addr; a < x->dst_addr + x->len; a++)
			if (ref_class(r, t, a) == B_NONE || cnt[t][a]++) {
				snprintf(why, n, "step %d writes tile %lld byte %lld %s", r->step, (long long)t,
					 (long long)a, ref_class(r, t, a) ? "twice" : "outside its destination");
				ok = 0;
				break;
			}
	}
	for (int64_t t = 0; t < T && ok; t++)
		for (int64_t a = 0; r->cls[t] && a < S && ok; a++)
			if ((r->cls[t][a] == B_DATA || r->cls[t][a] == B_PAD) && !(cnt[t] && cnt[t][a])) {
				snprintf(why, n, "step %d leaves tile %lld byte %lld (%s) unwritten", r->step,
					 (long long)t, (long long)a, r->cls[t][a] == B_DATA ? "data" : "padding");
				ok = 0;
			}
	for (int64_t t = 0; t < T; t++)
		free(cnt[t]);
	free(cnt);
	return ok;
}

/* ---- the corruptions ---- */

enum { K_BEFORE, K_AFTER, K_NO_LAST, K_NO_FIRST, K_UP, K_DOWN, K_COUNT };
static const char *const kind_names[K_COUNT] = {
	"a byte before its start", "a byte past its end", "its last byte missing",
	"its first byte missing", "shifted a byte up", "shifted a byte down",
};

/* Record x moved by one byte as kind k says; the one byte added or
 * removed (*add: 1 added, 0 removed, -1 two changes). */
static Xfer corrupt(const Xfer *x, int k, int64_t *byte, int *add)
{
	Xfer y = *x;
	int src = y.kind != X_ZERO;
	switch (k) {
	case K_BEFORE: y.dst_addr--, y.src_addr -= src, y.len++, *byte = y.dst_addr, *add = 1; break;
	case K_AFTER: y.len++, *byte = x->dst_addr + x->len, *add = 1; break;
	case K_NO_LAST: y.len--, *byte = x->dst_addr + x->len - 1, *add = 0; break;
	case K_NO_FIRST: y.dst_addr++, y.src_addr += src, y.len--, *byte = x->dst_addr, *add = 0; break;
	case K_UP: y.dst_addr++, *add = -1; break;
	default: y.dst_addr--, *add = -1; break;
	}
	return y;
}

/* What the check must say about one byte (tile t, offset a) of step s
 * of plan pl written twice or outside (add) or never (!add), as the
 * reference classes it: a data byte is named by its element's offset and
 * the byte in it, and padding by its offset. */
static int names_it(const Plan *pl, const char *msg, int cls, int64_t t, int s, int64_t a, int add)
{
	const Placement *d = &pl->p[pl->s[s].dst];
	int esz = fmt_bytes(d->fmt), k = (int)((a - d->addr) % esz);
	char where[64], off[96];
	if (cls == B_NONE)
		return strstr(msg, "written outside every destination") != NULL;
	snprintf(where, sizeof where, "tile %lld, step %d:", (long long)t, s);
	if (cls == B_DATA)
		snprintf(off, sizeof off, "offset %lld (element ", (long long)(a - k));
	else
		snprintf(off, sizeof off, "padding at offset %lld:", (long long)a);
	return strstr(msg, where) == msg && strstr(msg, off) && (cls != B_DATA || strstr(msg, "byte")) &&
	       strstr(msg, add ? "written 2 times" : "written 0 times");
}

typedef struct {
	int64_t tried, refused, named;
} Tally;

/* Every corruption of flat record i must be refused and, when one byte
 * changes, named as the reference says. */
static void corrupt_one(Plan *pl, const Flat *f, int i, Ref *refs, const char *what, Tally *tl)
{
	Xfer *x = malloc((size_t)f->n * sizeof *x);
	for (int k = 0; k < K_COUNT; k++) {
		int64_t byte = 0;
		int add = 0;
		const Xfer *o = &f->x[i];
		if (k == K_BEFORE && o->dst_addr == 0)
			continue;
		memcpy(x, f->x, (size_t)f->n * sizeof *x);
		x[i] = corrupt(o, k, &byte, &add);
		set_xfers(pl, x, f->n);
		Err e = { { 0 } };
		int rc = sim_check_stage(pl, &e);
		tl->tried++;
		tl->refused += rc != 0;
		CHECK(rc != 0, "%s: record %d (step %d, tile %lld, bytes %lld..%lld) with %s passes", what, i,
		      o->step, (long long)o->dst_tile, (long long)o->dst_addr, (long long)(o->dst_addr + o->len),
		      kind_names[k]);
		if (rc && add >= 0) {
			int64_t t = tile_mod(o->dst_tile, pl->machine.tiles);
			int cls = ref_class(&refs[o->step], t, byte);
			int ok = names_it(pl, e.msg, cls, t, o->step, byte, add);
			tl->named += ok;
			CHECK(ok, "%s: record %d with %s: the check says '%s', the reference: tile %lld byte %lld "
			      "(%s) %s", what, i, kind_names[k], e.msg, (long long)t, (long long)byte,
			      cls == B_DATA ? "data" : cls ? "padding" : "outside", add ? "added" : "missing");
		}
	}
	free(x);
}

/* A case: the reference agrees with the flat records, the check passes
 * them, and every corruption of records (all, or `most` picked at random)
 * is refused; widening a whole family record is refused too. */
static void run_case(Plan *pl, const char *what, int most)
{
	char why[160] = "";
	Flat f = flatten(pl);
	Xfer *fam = malloc((size_t)(pl->nx + 1) * sizeof *fam);
	int nfam = pl->nx;
	memcpy(fam, pl->x, (size_t)nfam * sizeof *fam);
	Ref *refs = calloc((size_t)pl->ns, sizeof *refs);
	int exact = 1;
	for (int k = 0; k < pl->ns; k++) {
		refs[k] = ref_make(pl, k);
		exact = exact && ref_exact(&refs[k], &f, why, sizeof why);
	}
	CHECK(exact, "%s: the expansion against the reference: %s", what, why);
	Err e = { { 0 } };
	set_xfers(pl, f.x, f.n);
	int rc = sim_check_stage(pl, &e);
	CHECK(rc == 0, "%s: the faithful flat records are refused: %s", what, e.msg);
	Tally tl = { 0, 0, 0 };
	if (exact && !rc) {
		if (most <= 0 || most >= f.n)
			for (int i = 0; i < f.n; i++)
				corrupt_one(pl, &f, i, refs, what, &tl);
		else
			for (int j = 0; j < most; j++)
				corrupt_one(pl, &f, (int)t_upto(f.n), refs, what, &tl);
		for (int j = 0; j < (most > 0 && most < nfam ? most : nfam); j++)    /* a whole family a byte wider */
			for (int end = 0; end < 2; end++) {
				int i = most > 0 && most < nfam ? (int)t_upto(nfam) : j;
				Xfer y = fam[i];
				y.len++;
				if (end && y.dst_addr == 0)
					continue;
				if (end)
					y.dst_addr--, y.src_addr -= y.kind != X_ZERO;
				Xfer *all = malloc((size_t)nfam * sizeof *all);
				memcpy(all, fam, (size_t)nfam * sizeof *all);
				all[i] = y;
				set_xfers(pl, all, nfam);
				free(all);
				CHECK(sim_check_stage(pl, &e) != 0, "%s: family record %d a byte wider %s passes", what,
				      i, end ? "before" : "after");
			}
	}
	set_xfers(pl, fam, nfam);
	for (int k = 0; k < pl->ns; k++)
		ref_free(&refs[k]);
	free(refs);
	free(fam);
	free(f.x);
}

/* ---- the destination kinds ---- */

#define TILES 16
#define SRAM 32768

typedef struct {
	const char *what;
	int rank;
	int64_t shape[MAX_RANK];
	Format fmt;
	PRole role;
	int np;
	Spec p[3];
	int ns;
	int step[2][2];
	int phase;
} Case;

#define RM LAYOUT_ROW_MAJOR
#define AL LAYOUT_AMP_LEFT
#define TR LAYOUT_TRANSPOSED_RIGHT
#define AO LAYOUT_AMP_OUTPUT

static const Case cases[] = {
	{ "row-major, fp16, cut both ways", 2, { 6, 20 }, FMT_FP16, R_ACT, 2,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { RM, { 3, 2 }, 4, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "row-major, fp32, rank 3", 3, { 2, 5, 7 }, FMT_FP32, R_ACT, 2,
	  { { RM, { 1, 1, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { RM, { 2, 1, 2 }, 3, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "amp-left, fp16, clipped strip zeroed", 2, { 5, 40 }, FMT_FP16, R_ACT, 2,
	  { { RM, { 1, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { AL, { 1, 2 }, 2, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "amp-left, fp8, from row blocks", 2, { 6, 40 }, FMT_FP8, R_ACT, 2,
	  { { RM, { 3, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { AL, { 2, 1 }, 5, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "transposed-right, fp8, clipped K and N", 2, { 40, 20 }, FMT_FP8, R_PARAM, 2,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { TR, { 1, 1 }, 3, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "transposed-right, fp16, two column groups per shard", 2, { 20, 36 }, FMT_FP16, R_PARAM, 2,
	  { { RM, { 1, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { TR, { 1, 2 }, 6, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "transposed-right from transposed-right, whole panels", 2, { 40, 20 }, FMT_FP16, R_PARAM, 2,
	  { { TR, { 1, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { TR, { 1, 1 }, 7, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "amp-output partials, whole strips with their padding", 3, { 2, 6, 20 }, FMT_FP16, R_PARTIAL, 2,
	  { { AO, { 2, 1, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { AO, { 2, 3, 1 }, 4, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "amp-output from row-major", 2, { 6, 20 }, FMT_FP16, R_ACT, 2,
	  { { RM, { 1, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { AO, { 2, 1 }, 4, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "a window of rows", 2, { 8, 24 }, FMT_FP16, R_ACT, 2,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { RM, { 2, 2 }, 4, 8192, 0, { 2, 0 }, { 4, 24 } } },
	  1, { { 0, 1 } }, 0 },
	{ "a window of columns, replicated", 2, { 8, 40 }, FMT_FP8, R_ACT, 2,
	  { { AL, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { RM, { 2, 1 }, 4, 8192, 2, { 0, 8 }, { 8, 20 } } },
	  1, { { 0, 1 } }, 0 },
	{ "replicas, multicast", 2, { 6, 20 }, FMT_FP16, R_ACT, 2,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { RM, { 2, 1 }, 5, 8192, 3, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "replicas of amp-left, each zeroed", 2, { 6, 20 }, FMT_FP16, R_ACT, 2,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { AL, { 2, 1 }, 5, 8192, 2, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "local copies (the same tiles)", 2, { 6, 20 }, FMT_FP16, R_ACT, 2,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { AL, { 2, 1 }, 0, 8192, 0, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "replicas, the first aliasing the source", 2, { 6, 20 }, FMT_FP16, R_ACT, 2,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { RM, { 2, 1 }, 0, 1024, 2, { 0 }, { 0 } } },
	  1, { { 0, 1 } }, 0 },
	{ "two copies of a phase into adjacent buffers", 2, { 6, 16 }, FMT_FP16, R_ACT, 3,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { RM, { 2, 1 }, 4, 8192, 0, { 0 }, { 0 } },
	    { RM, { 2, 1 }, 4, 8192 + 96, 0, { 0 }, { 0 } } },
	  2, { { 0, 1 }, { 0, 2 } }, 1 },
	{ "a relay written and read in one phase", 2, { 6, 40 }, FMT_FP16, R_ACT, 3,
	  { { RM, { 2, 1 }, 0, 1024, 0, { 0 }, { 0 } }, { RM, { 1, 2 }, 4, 8192, 0, { 0 }, { 0 } },
	    { AL, { 3, 1 }, 9, 16384, 0, { 0 }, { 0 } } },
	  2, { { 0, 1 }, { 1, 2 } }, 1 },
};

static void fixed_cases(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const Case *c = &cases[i];
		Plan pl;
		Err e = { { 0 } };
		t_case(c->what);
		int rc = build(&pl, TILES, SRAM, c->rank, c->shape, c->fmt, c->role, c->np, c->p, c->ns, c->step,
			       c->phase, &e);
		CHECK(rc == 0, "%s: %s", c->what, e.msg);
		if (!rc)
			run_case(&pl, c->what, 150);
		plan_free(&pl);
	}
}

/* A write into a destination shard that aliases its source (it receives
 * nothing) is refused: one byte of a received replica's record moved
 * onto the aliased replica's tile. */
static void alias_write(void)
{
	const Case *c = NULL;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strstr(cases[i].what, "aliasing"))
			c = &cases[i];
	Plan pl;
	Err e = { { 0 } };
	t_case("a byte written into a shard that aliases its source is refused");
	int rc = build(&pl, TILES, SRAM, c->rank, c->shape, c->fmt, c->role, c->np, c->p, c->ns, c->step,
		       c->phase, &e);
	CHECK(rc == 0, "%s", e.msg);
	if (rc) {
		plan_free(&pl);
		return;
	}
	Flat f = flatten(&pl);
	CHECK(f.n > 0, "no records");
	for (int i = 0; i < f.n; i++) {
		Xfer y = f.x[i];
		y.dst_tile = pl.p[1].base;      /* replica 0 of shard 0: the source's own buffer */
		y.len = 1;
		Xfer *x = malloc((size_t)(f.n + 1) * sizeof *x);
		memcpy(x, f.x, (size_t)f.n * sizeof *x);
		x[f.n] = y;
		set_xfers(&pl, x, f.n + 1);
		free(x);
		rc = sim_check_stage(&pl, &e);
		CHECK(rc != 0 && (strstr(e.msg, "written outside every destination") ||
				  strstr(e.msg, "an alias of its source")),
		      "record %d's first byte on the aliased tile: %s", i, rc ? e.msg : "passes");
	}
	free(f.x);
	plan_free(&pl);
}

/* Whole amp-output strips carry their padding: padding they write must
 * be zero. A record split where its padding starts, the padding part
 * then read from the data part's source bytes (not zero). */
static void output_padding_value(void)
{
	const Case *c = NULL;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strstr(cases[i].what, "amp-output partials"))
			c = &cases[i];
	Plan pl;
	Err e = { { 0 } };
	t_case("amp-output padding carried with data other than zero is refused");
	int rc = build(&pl, TILES, SRAM, c->rank, c->shape, c->fmt, c->role, c->np, c->p, c->ns, c->step,
		       c->phase, &e);
	CHECK(rc == 0, "%s", e.msg);
	Flat f = flatten(&pl);
	Ref r = ref_make(&pl, 0);
	int tried = 0;
	for (int i = 0; !rc && i < f.n; i++) {
		const Xfer *o = &f.x[i];
		int64_t t = tile_mod(o->dst_tile, pl.machine.tiles), cut = 1;
		while (cut < o->len && ref_class(&r, t, o->dst_addr + cut) != B_PAD)
			cut++;
		if (cut == o->len || ref_class(&r, t, o->dst_addr) != B_DATA)
			continue;
		int64_t end = cut;
		while (end < o->len && ref_class(&r, t, o->dst_addr + end) == B_PAD)
			end++;
		Xfer *x = malloc((size_t)(f.n + 2) * sizeof *x);       /* data, padding, the rest */
		memcpy(x, f.x, (size_t)(i + 1) * sizeof *x);
		memcpy(x + i + 3, f.x + i + 1, (size_t)(f.n - i - 1) * sizeof *x);
		x[i].len = cut;
		for (int k = 1; k < 3; k++) {
			x[i + k] = *o;
			x[i + k].dst_addr += k == 1 ? cut : end, x[i + k].src_addr += k == 1 ? cut : end;
			x[i + k].len = k == 1 ? end - cut : o->len - end;
		}
		set_xfers(&pl, x, f.n + 2);
		rc = sim_check_stage(&pl, &e);
		CHECK(rc == 0, "record %d split where its padding starts: %s", i, e.msg);
		x[i + 1].src_addr = o->src_addr;        /* the padding from the data's source bytes */
		set_xfers(&pl, x, f.n + 2);
		free(x);
		rc = sim_check_stage(&pl, &e);
		tried++;
		CHECK(rc != 0 && strstr(e.msg, "padding at offset"), "record %d's padding from data: %s", i,
		      rc ? e.msg : "passes");
		rc = 0;
	}
	CHECK(tried > 0, "no record carries amp-output padding");
	ref_free(&r);
	free(f.x);
	plan_free(&pl);
}

/* ---- random small copies ---- */

static void random_spec(Spec *s, int rank, const int64_t *shape, int64_t addr, int64_t *tiles_used)
{
	static const LayoutKind lays[4] = { RM, AL, TR, AO };
	memset(s, 0, sizeof *s);
	s->lay = lays[t_upto(4)];
	s->addr = addr;
	int64_t n = 1;
	for (int a = 0; a < rank; a++) {
		s->split[a] = t_parts(shape[a], t_pick(1, 3));
		n *= s->split[a];
	}
	s->rep = n * 2 <= TILES && t_rnd() % 3 == 0 ? 2 : 1;
	s->base = t_upto(TILES);
	*tiles_used = n * s->rep;
}

static void random_cases(int n)
{
	int done = 0;
	for (int i = 0; i < n; i++) {
		static const Format fmts[3] = { FMT_FP8, FMT_FP16, FMT_FP32 };
		int rank = (int)t_pick(2, 3);
		int64_t shape[MAX_RANK];
		for (int a = 0; a < rank; a++)
			shape[a] = a == rank - 1 ? t_pick(1, 48) : t_pick(1, rank == 2 ? 24 : 5);
		Format fmt = fmts[t_upto(3)];
		Spec sp[2];
		int64_t used;
		random_spec(&sp[0], rank, shape, 1024, &used);
		sp[0].rep = 0;
		random_spec(&sp[1], rank, shape, 12288, &used);
		if (sp[1].lay == RM && t_rnd() % 3 == 0) {      /* a window of the last axis */
			int a = rank - 1;
			sp[1].shape[a] = t_pick(1, shape[a]);
			sp[1].off[a] = t_upto(shape[a] - sp[1].shape[a] + 1);
			sp[1].split[a] = t_parts(sp[1].shape[a], sp[1].split[a]);
		}
		int step[1][2] = { { 0, 1 } };
		char what[160];
		snprintf(what, sizeof what, "random %d: [%lld %lld %lld] %s, %s -> %s (rep %lld)", i,
			 (long long)shape[0], (long long)shape[1], (long long)(rank > 2 ? shape[2] : 0),
			 fmt_name(fmt), layout_name(sp[0].lay), layout_name(sp[1].lay), (long long)sp[1].rep);
		Plan pl;
		Err e = { { 0 } };
		if (build(&pl, TILES, SRAM, rank, shape, fmt, R_ACT, 2, sp, 1, (const int (*)[2])step, 0, &e)) {
			plan_free(&pl);         /* tiles that collide: not this test's subject */
			continue;
		}
		t_case("random copies: every edge of every record is held to the byte");
		run_case(&pl, what, 8);
		done++;
		plan_free(&pl);
	}
	t_case("random copies: enough of them were built");
	CHECK(done >= n / 2, "only %d of %d", done, n);
}

int main(void)
{
	t_rng = 0x45edce5u;
	fixed_cases();
	alias_write();
	output_padding_value();
	random_cases(60);
	expand_release();
	return t_summary();
}
