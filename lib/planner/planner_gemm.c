/* planner_gemm.c: a matmul's GEMM plan (lib/planner/planner.h). Its candidates
 * (lib/stage/gemm.h) are ranked by the formula; under the memory and cycles
 * objectives a short list is lowered exactly (planner_gemm_trial.c) and the
 * best fitting one is built, with its casts and operand deliveries. */
#include "planner/planner_int.h"

/* ---- matmul ---- */

static int cast_tensor(Builder *b, const char *op, int src, Format to)
{
	Plan *pl = b->pl;
	int t = planner_cast_tensor(b, src, to), existed;
	if (b->canon[t] >= 0)
		return t;
	int in = planner_canonical(b, src);
	Placement p = pl->p[in];
	p.name = NULL;
	int out = planner_add_place(pl, &p, t, "canon", &existed);
	b->canon[t] = out;
	planner_add_compute(pl, op, C_CAST, &in, 1, out, 0);
	return t;
}

/* Parameter delivery from its home: straight into an unreplicated operand;
 * otherwise into a stage on the first replica, then replicated. */
static int deliver(Builder *b, const char *op, Operand opd, int tensor, Placement *stage,
		   Placement *dst, const char *what)
{
	Plan *pl = b->pl;
	int existed, src = b->canon[tensor];

	if (dst->nrep) {
		char *swhat = xasprintf("%s.stage", what);
		int st = planner_add_place_of(pl, stage, tensor, op, swhat, &existed);
		free(swhat);
		if (!existed)
			planner_add_copy(pl, op, opd, MOVE_PARAMETER, src, st);
		src = st;
	}
	int d = planner_add_place_of(pl, dst, tensor, op, what, &existed);
	if (!existed)
		planner_add_copy(pl, op, opd, MOVE_PARAMETER, src, d);
	return d;
}

/* The first tile of op k's grid (k its place in the model): k golden-ratio
 * steps around the tiles, floor(frac(k / phi) * tiles) in integers. It is
 * the op's own, so a change to one op's grid (a pin) moves no other op's
 * tiles and the stages of two plans diff op by op; successive ops still
 * start far apart, spreading their grids over the machine. */
int64_t planner_op_start(const Builder *b, const MOp *op)
{
	uint64_t k = (uint64_t)(op - b->m->ops), x = k * 0x9e3779b97f4a7c15ull;   /* 2^64 / phi */
	return (int64_t)(((x >> 32) * (uint64_t)b->mc->tiles) >> 32);
}

/* Every candidate of op's GEMM that its pins allow, scored (gemm_score),
 * to fn in one fixed order: grid rows, k, columns, cast order, staging,
 * out staging, reduction; but when may (not NULL) says a candidate, with
 * only its choice and tile_bytes set, cannot matter to fn, it is neither
 * scored nor given. Returns how many there are. */
int64_t planner_matmul_each(const Builder *b, const MOp *op, const GemmShape *gs, MatmulEachFn fn,
			    MatmulMayFn may, void *ctx)
{
	const Machine *mc = b->mc;
	int64_t ks = cdiv(gs->k, fmt_mu(gs->fmt)), cg = cdiv(gs->n, 16), n = 0;
	int need_cast = gs->a_fmt != gs->fmt;
	GemmFigures f;

	for (int64_t R = 1; R <= gs->tokens; R++) {
		if (!uniform_ok(gs->tokens, R) || (op->grid[0] && op->grid[0] != R))
			continue;
		for (int64_t K = 1; K <= ks && R * K <= mc->tiles; K++) {
			if (!uniform_ok(ks, K) || (op->grid[1] && op->grid[1] != K) || (gs->reduce_rows && K < 2))
				continue;
			for (int64_t C = 1; C <= cg && R * K * C <= mc->tiles; C++) {
				if (!uniform_ok(cg, C) || (op->grid[2] && op->grid[2] != C))
					continue;
				for (int ci = 0; ci < 2; ci++) {
					CastOrder cast = need_cast ? (ci ? CAST_LATE : CAST_EARLY) : CAST_AUTO;
					if ((!need_cast && ci) || (op->cast && need_cast && op->cast != cast))
						continue;
					int figured = 0;        /* one grid and cast: its placements' bytes once */
					for (int si = 0; si < 12; si++) {
						static const Staging sts[3] = { STAGING_PACK_ONCE, STAGING_DIRECT,
										STAGING_SPREAD };
						Staging st = sts[si % 3];
						int unpack = si / 3 & 1, scatter = si / 6;
						if ((st == STAGING_SPREAD && gemm_stage_pieces(gs, (int64_t[3]){ R, K, C }) == 1) ||
						    (op->staging && op->staging != st) ||
						    (op->out_staging && op->out_staging != unpack + 1) ||
						    (scatter && K == 1) ||
						    (op->reduce && K > 1 && op->reduce != scatter + 1))
							continue;
						Candidate c = { .grid = { R, K, C }, .cast = cast, .staging = st,
								.unpack = unpack, .scatter = scatter };
						if (!figured)
							gemm_figures(gs, &c, &f), figured = 1;
						n++;
						if (may) {
							c.tile_bytes = gemm_tile_bytes(gs, &f, &c);
							if (!may(ctx, &c))
								continue;
						}
						gemm_score_from(gs, mc, &f, &c);
						fn(ctx, &c);
					}
				}
			}
		}
	}
	return n;
}

/* The formula's choice (capacity objectives): the best candidate whose
 * largest shards fit beside the busiest tile's load, and explain's list. */
typedef struct {
	Objective obj;
	int64_t avail, base;
	int64_t fitting, closest;
	Candidate *best, nearest, *top;
	int ntop, keep;
} Choice;

static void choice_add(void *ctx, const Candidate *cp)
{
	Choice *h = ctx;
	const Candidate c = *cp;
	if (h->base + c.tile_bytes > h->avail) {
		if (h->base + c.tile_bytes < h->closest) {
			h->closest = h->base + c.tile_bytes;
			h->nearest = c;
		}
		return;
	}
	h->fitting++;
	if (h->fitting == 1 || candidate_cmp(&c, h->best, h->obj) < 0)
		*h->best = c;
	if (h->keep) {
		int pos = h->ntop;
		while (pos > 0 && candidate_cmp(&c, &h->top[pos - 1], h->obj) < 0)
			pos--;
		if (pos < h->keep) {
			if (h->ntop < h->keep)
				h->ntop++;
			h->top = xrealloc(h->top, (size_t)h->keep * sizeof *h->top);
			memmove(&h->top[pos + 1], &h->top[pos], (size_t)(h->ntop - 1 - pos) * sizeof *h->top);
			h->top[pos] = c;
		}
	}
}

int planner_matmul_choose(Builder *b, const MOp *op, const GemmShape *gs, Candidate *best,
			  Explain *ex, Err *e)
{
	const Machine *mc = b->mc;
	Choice h = { b->o->objective, machine_avail(mc), planner_base_load(b, (int)(op - b->m->ops)), 0,
		     INT64_MAX, best, { .grid = { 0 } }, NULL, 0, ex && b->o->explain > 0 ? b->o->explain : 0 };
	int64_t considered = planner_matmul_each(b, op, gs, choice_add, NULL, &h);
	int64_t avail = h.avail, base = h.base, fitting = h.fitting, closest = h.closest;

	if (ex) {
		ex->op = xstrdup(op->name);
		ex->considered = considered;
		ex->fitting = fitting;
		ex->best = h.top;
		ex->nbest = h.ntop;
		ex->avail = avail;
		ex->base = base;
	} else {
		free(h.top);
	}
	/* The bound adds the candidate's largest shards to the busiest tile;
	 * when none passes it, the candidate nearest to passing is taken and
	 * the plan's exact per-tile memory (check_memory) decides. */
	if (!fitting && closest < INT64_MAX && !op->grid[0]) {
		*best = h.nearest;
		return 0;
	}
	if (!fitting) {
		const Model *m = b->m;
		long line = op->pinned ? op->pin_line : op->line, col = op->pinned ? op->pin_col : op->col;
		if (!considered)
			return err_at(e, m->file, line, col,
				      "matmul '%s': no grid allows its pins%s", op->name,
				      op->staging == STAGING_SPREAD ? " (staging spread needs grid cols > 1 that "
				      "cut each K block's strips into whole-strip pieces, none empty)" : "");
		char *next = plan_next_steps(b->pl, NULL);
		err_at(e, m->file, line, col,
		       "matmul '%s': no %sgrid fits in SRAM: the smallest needs %lld bytes on a tile "
		       "(%lld already in use), %lld are available (sram_bytes - reserved_bytes).%s%s",
		       op->name, op->pinned ? "pinned " : "", (long long)closest, (long long)base,
		       (long long)avail, op->pinned ? " Unpin it to let the planner choose." : "", next);
		free(next);
		return -1;
	}
	return 0;
}

/* A few-row GEMM's reduction may write its result straight in the cut its
 * readers want: when the result's class is free and nothing of it is
 * placed yet, this result's cut, written row-major, becomes the class's
 * (returns 2: planner_class_claim once placed); when the class's first
 * maker claimed a cut, or the class is not free and its canonical owners
 * are cut (wide: planner_canonical_of), in blocks that are this
 * reduction's (the same rows and column blocks), the reduction moves onto
 * those tiles (returns 1). Either way the result needs no copy back to
 * canonical owners, a phase fewer. 0: neither. */
static int reduce_at_class(Builder *b, int out, const Candidate *c, Placement *gp)
{
	Placement *o = &gp[GP_OUT], *r = &gp[GP_RED];
	if (!b->maker_cuts || c->grid[1] < 2 || c->unpack || r->split[0] != 1 || r->base != o->base || o->nrep ||
	    r->nrep)
		return 0;
	for (int k = 0; k < 3; k++)
		if (r->split[k + 1] != o->split[k] || (o->split[k] > 1 && r->stride[k + 1] != o->stride[k]))
			return 0;
	const Placement *cp = planner_class_placement(b, out);
	Placement canon;
	if (!cp && planner_class_open(b, out)) {
		o->layout = LAYOUT_ROW_MAJOR;
		return 2;
	}
	if (!cp && out < b->m->nt && b->wide && b->wide[out]) {   /* its canonical owners' cut, fixed */
		planner_canonical_of(b, &b->pl->t[out], &canon);
		canon.rank = 3;
		cp = &canon;
	}
	if (!cp)
		return 0;
	for (int k = 0; k < 3; k++)
		if (cp->split[k] != o->split[k] || cp->block[k] != o->block[k] || cp->off[k] != o->off[k])
			return 0;
	if (gp[GP_BIAS_OP].rank && (c->grid[0] > 1 ||
				    (cp->split[0] > 1 && cp->split[1] > 1 && cp->stride[0] != cp->split[1] * cp->stride[1])))
		return 0;               /* a bias could not follow (planner_owners_vector's rows at one stride) */
	r->base = cp->base;
	for (int k = 0; k < 3; k++)
		r->stride[k + 1] = cp->stride[k];
	*o = *cp;
	o->name = NULL;
	if (gp[GP_BIAS_OP].rank) {      /* the bias the reduction adds: beside its new blocks */
		Placement v;
		planner_owners_vector(o, gp[GP_BIAS_OP].shape[0], &v);
		v.fmt = gp[GP_BIAS_OP].fmt, v.rank = 1, memcpy(v.shape, gp[GP_BIAS_OP].shape, sizeof v.shape);
		gp[GP_BIAS_OP] = v;
		v.nrep = 0, memset(v.rep, 0, sizeof v.rep), memset(v.rstride, 0, sizeof v.rstride);
		gp[GP_BIAS_STAGE] = v;
	}
	return 1;
}

/* A GEMM without a K split whose result it unpacks to row-major on its
 * own tiles (pi) may keep it there as its class's cut: the class's first
 * maker claims that cut when the class is free and unplaced
 * (planner_class_claim), and a later maker whose unpacked result is cut
 * exactly alike (a sibling of the same grid on the same tiles: up beside
 * gate) finds it there. The class's row-local work (a decoder's silu and
 * mul, the cast before down) then runs on the GEMM's tiles, and the
 * result makes no trip to the canonical owners and back. */
static int unpacked_at_class(Builder *b, int out, int pi)
{
	if (!b->maker_cuts)
		return 0;
	const Placement *cp = planner_class_placement(b, out), *p = &b->pl->p[pi];
	if (!cp)
		return planner_class_claim(b, out, pi);
	if (cp->layout != p->layout || cp->base != p->base || p->nrep || cp->nrep)
		return 0;
	for (int k = 0; k < 3; k++)
		if (cp->split[k] != p->split[k] || cp->block[k] != p->block[k] || cp->off[k] != p->off[k] ||
		    (p->split[k] > 1 && cp->stride[k] != p->stride[k]))
			return 0;
	return 1;
}

/* The first tile of matmul op's grid under candidate c: its own
 * (planner_op_start), but when an earlier sibling (one of the run of adjacent
 * matmuls of the same a just before it, such as a decoder's gate before
 * up) was built with the same grid, cast and staging, the earliest such
 * sibling's: their a placements are then one, and a reaches their tiles
 * once (a trial of the later one sees that copy made already). */
static int64_t gemm_start(const Builder *b, const MOp *op, const Candidate *c)
{
	const Plan *pl = b->pl;
	const MOp *first = op;
	for (const MOp *p = op; p > b->m->ops && p[-1].kind == OP_MATMUL && p[-1].in[0] == op->in[0]; p--)
		for (int i = 0; i < pl->ng; i++)
			if (!strcmp(pl->g[i].op, p[-1].name) && !memcmp(pl->g[i].grid, c->grid, sizeof c->grid) &&
			    pl->g[i].cast == c->cast && pl->g[i].staging == c->staging)
				first = p - 1;
	return planner_op_start(b, first);
}

/* Builds the placements and steps of matmul op with candidate c. */
void planner_matmul_build(Builder *b, const MOp *op, const GemmShape *gsp, const Candidate *cp)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	GemmShape gs = *gsp;
	Candidate c = *cp;
	int a = planner_matmul_a(b, op), w = plan_find_tensor(pl, m->t[op->in[1]].name);
	int ma = plan_find_tensor(pl, m->t[op->in[0]].name), rows = b->fold_part[ma];   /* a folded norm's sums */
	int bias = op->in[2] >= 0 ? plan_find_tensor(pl, m->t[op->in[2]].name) : -1;
	int out = plan_find_tensor(pl, m->t[op->out].name);
	Placement gp[GP_COUNT], cp2;
	int idx[GP_COUNT], existed, ain = planner_canonical(b, a);

	int gi = pl->ng++;
	pl->g = xrealloc(pl->g, (size_t)pl->ng * sizeof *pl->g);
	Gemm *g = &pl->g[gi];
	memset(g, 0, sizeof *g);
	g->op = xstrdup(op->name);
	g->a = a, g->b = w, g->bias = bias, g->out = out;
	g->m = gs.batch * gs.tokens, g->k = gs.k, g->n = gs.n;
	g->fmt = gs.fmt;
	memcpy(g->grid, c.grid, sizeof g->grid);
	g->cast = c.cast;
	g->staging = c.staging;
	g->unpack = c.unpack;
	g->scatter = c.scatter;
	g->pinned = op->pinned == 1;     /* 2: held by the descent */
	g->tiles = c.tiles;

	/* a: early cast on the owners, then pack-once or direct delivery. */
	int moved = a;
	if (c.cast == CAST_EARLY)
		moved = cast_tensor(b, op->name, a, gs.fmt), ain = b->canon[moved];
	gemm_placements(&gs, &c, gp);
	/* Weight-stationary: a GEMM of one row block (a decode step's: a few
	 * rows against all of its weights) whose b blocks on its tiles are b's
	 * home's (the same cut, the same tile strides) starts at the home's
	 * first tile, so that b on the GEMM's tiles is the home itself and its
	 * bytes never move. */
	const Placement *h = &pl->p[b->canon[w]], *gb = &gp[GP_B_OP];
	int stationary = c.grid[0] == 1 && gb->layout == h->layout && gs.fmt == pl->t[w].fmt;
	for (int k = 0; stationary && k < 2; k++)
		stationary = gb->split[k] == h->split[k] && gb->block[k] == h->block[k] && gb->off[k] == h->off[k] &&
			     (gb->split[k] == 1 || gb->stride[k] == h->stride[k]);
	int64_t base = stationary ? h->base : gemm_start(b, op, &c);
	for (int i = 0; i < GP_COUNT; i++)
		gp[i].base = base;
	int at_class = reduce_at_class(b, out, &c, gp);
#define PLACE(i, t, suffix) (idx[i] = planner_add_place_of(pl, &gp[i], t, op->name, suffix, &existed))
	int rep_a = c.grid[2] > 1;
	if (c.staging == STAGING_PACK_ONCE || c.staging == STAGING_SPREAD) {
		PLACE(GP_A_STAGE, moved, "a.stage");
		if (!existed)
			planner_add_copy(pl, op->name, OPD_A, MOVE_ACTIVATION, ain, idx[GP_A_STAGE]);
		PLACE(GP_A_PACKED, moved, rep_a ? "a.packed" : "a");
		if (!existed)
			planner_add_compute(pl, op->name, C_PACK, &idx[GP_A_STAGE], 1, idx[GP_A_PACKED], 0);
		ain = idx[GP_A_PACKED];
	}
	if (c.staging == STAGING_DIRECT || rep_a) {
		PLACE(GP_A_MOVED, moved, "a");
		if (!existed)
			planner_add_copy(pl, op->name, OPD_A, MOVE_ACTIVATION, ain, idx[GP_A_MOVED]);
	} else {
		idx[GP_A_MOVED] = idx[GP_A_PACKED];
	}
	idx[GP_A_OP] = idx[GP_A_MOVED];
	if (c.cast == CAST_LATE) {
		int t8 = planner_cast_tensor(b, a, gs.fmt);
		PLACE(GP_A_OP, t8, "a");
		if (!existed)
			planner_add_compute(pl, op->name, C_CAST, &idx[GP_A_MOVED], 1, idx[GP_A_OP], 0);
	}

	/* b and bias: when replicated, a conversion into a stage on the first
	 * replica, then the replication (amp-compose joins the two). */
	idx[GP_B_OP] = deliver(b, op->name, OPD_B, w, &gp[GP_B_STAGE], &gp[GP_B_OP], "b");
	idx[GP_BIAS_OP] = bias < 0 ? -1 :
		deliver(b, op->name, OPD_BIAS, bias, &gp[GP_BIAS_STAGE], &gp[GP_BIAS_OP], "bias");

	/* A folded norm's sums of squares beside the rows of the reduction,
	 * moved (the norm's copy) with a, in its phase, before the product:
	 * the rows' owners are not the product's tiles, which receive a. */
	int sums = -1;
	const MOp *norm = NULL;
	for (int i = 0; rows >= 0 && i < m->nops; i++)
		norm = m->ops[i].out == op->in[0] ? &m->ops[i] : norm;
	if (norm && c.grid[1] > 1) {
		Placement rp;
		int st = pl->p[rows].tensor;
		planner_beside_rows(&gp[GP_OUT], pl->t[st].shape[2], &rp);
		if (rp.rep[0] < 2)
			rp.nrep = 0, rp.rep[0] = rp.rstride[0] = 0;
		sums = planner_add_place_of(pl, &rp, st, op->name, "rows", &existed);
		if (!existed)
			planner_add_copy(pl, norm->name, OPD_PARTIAL, MOVE_REDUCTION, rows, sums);
	}
	/* The product, its reduction, and the return to canonical owners. */
	int in[3] = { idx[GP_A_OP], idx[GP_B_OP], bias >= 0 ? idx[GP_BIAS_OP] : -1 };
	PLACE(GP_OUT, out, "out");
	if (c.grid[1] > 1) {
		char *name = xasprintf("%s.partial", pl->t[out].name);
		int pt = planner_add_tensor(pl, name, R_PARTIAL, 4, gp[GP_PARTIAL].shape, FMT_FP16, 0);
		free(name);
		PLACE(GP_PARTIAL, pt, "partial");
		planner_add_compute(pl, op->name, C_MATMUL, in, 2, idx[GP_PARTIAL], 0);
		PLACE(GP_RED, pt, "reduce");
		planner_add_copy(pl, op->name, OPD_PARTIAL, MOVE_REDUCTION, idx[GP_PARTIAL], idx[GP_RED]);
		int rin[3] = { idx[GP_RED], in[2] }, nr = bias >= 0 ? 2 : 1;
		if (sums >= 0)
			rin[nr++] = sums;
		planner_add_compute(pl, op->name, C_REDUCE, rin, nr, idx[GP_OUT], sums >= 0 ? norm->eps : 0);
	} else {
		planner_add_compute(pl, op->name, C_MATMUL, in, bias >= 0 ? 3 : 2, idx[GP_OUT], 0);
	}
	if (c.unpack) {         /* the result to row-major on its tiles: each row's columns one run */
		PLACE(GP_OUT_ROWS, out, "out.rows");
		planner_add_compute(pl, op->name, C_PACK, &idx[GP_OUT], 1, idx[GP_OUT_ROWS], 0);
		idx[GP_OUT] = idx[GP_OUT_ROWS];
	}
#undef PLACE
	/* A model output no later op reads stays where the GEMM wrote it
	 * (logits over a vocabulary: gathered on the owners of a decode
	 * step's few rows it would crowd them); the host reads it there. */
	int read = 0;
	for (const MOp *o = op + 1; o < b->m->ops + b->m->nops; o++)
		for (int k = 0; k < o->nin; k++)
			read |= o->in[k] == op->out;
	if (b->m->t[op->out].output && !read && pl->t[out].shape[1] == 1 && op->rep < 0) {
		b->canon[out] = idx[GP_OUT];
		return;
	}
	if (at_class == 1 || (at_class == 2 && planner_class_claim(b, out, idx[GP_OUT])) ||
	    (c.grid[1] == 1 && c.unpack && unpacked_at_class(b, out, idx[GP_OUT]))) {
		b->canon[out] = idx[GP_OUT];    /* where its readers want it: no copy back */
		return;
	}
	planner_canonical_of(b, &pl->t[out], &cp2);
	int oc = planner_add_place(pl, &cp2, out, "canon", &existed);
	b->canon[out] = oc;
	planner_add_copy(pl, op->name, OPD_OUT, MOVE_OUTPUT, idx[GP_OUT], oc);
}
