/* planner_cost.c: the exact cost of one choice of an op (a GEMM candidate,
 * an attention's staging): build it into the plan, lower it against what
 * earlier ops put on every tile (lib/trial.h), and take it back. */
#include "planner_int.h"

/* ---- exact costing: build a candidate, lower it, take it back ---- */

typedef struct {
	int nt, np, ns, ng;
	int *canon;
} Snap;

static int canon_len(const Builder *b) { return 2 * b->m->nt + 4 * b->m->nops + 1; }

static void snap_take(Builder *b, Snap *s)
{
	s->nt = b->pl->nt, s->np = b->pl->np, s->ns = b->pl->ns, s->ng = b->pl->ng;
	s->canon = xmalloc((size_t)canon_len(b) * sizeof *s->canon);
	memcpy(s->canon, b->canon, (size_t)canon_len(b) * sizeof *s->canon);
}

static void snap_back(Builder *b, Snap *s)
{
	Plan *pl = b->pl;
	for (int i = s->nt; i < pl->nt; i++)
		free(pl->t[i].name);
	for (int i = s->np; i < pl->np; i++)
		free(pl->p[i].name);
	for (int i = s->ns; i < pl->ns; i++)
		free(pl->s[i].op);
	for (int i = s->ng; i < pl->ng; i++)
		free(pl->g[i].op);
	pl->nt = s->nt, pl->np = s->np, pl->ns = s->ns, pl->ng = s->ng;
	memcpy(b->canon, s->canon, (size_t)canon_len(b) * sizeof *s->canon);
	free(s->canon);
}

typedef struct {
	int64_t *acc, *src_at;
	const Placement *src;
} NewBytes;

/* Adds a shard's bytes unless it is the copy source's buffer there (the
 * same region and layout on the tile: one buffer, plan_memory's rule). */
static int add_new(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	NewBytes *n = ctx;
	(void)rep;
	if (n->src && n->src_at[t] >= 0 && n->src->layout == p->layout) {
		int64_t sidx[MAX_RANK];
		place_shard_idx(n->src, n->src_at[t], sidx);
		if (place_same_region(n->src, sidx, p, idx))
			return 0;
	}
	n->acc[t] += place_shard_bytes(p, idx);
	return 0;
}

/* Per tile, the peak over steps ns0.. of the bytes of placements np0..
 * live at each (plan_lifetimes; a shard that is its copy source's buffer
 * counts once), each step's scratch included. */
static void new_bytes(const Plan *pl, int np0, int ns0, int64_t *peak)
{
	int64_t T = pl->machine.tiles;
	int np = pl->np, nn = np - np0;
	int *fi = xmalloc((size_t)np * sizeof *fi), *la = xmalloc((size_t)np * sizeof *la);
	int *alias = xmalloc((size_t)np * sizeof *alias);
	int64_t *src_at = xmalloc((size_t)T * sizeof *src_at);
	int64_t *by = xcalloc((size_t)(nn + 1) * (size_t)T, sizeof *by), *cur = xmalloc((size_t)T * sizeof *cur);

	plan_lifetimes(pl, fi, la, alias);
	for (int i = np0; i < np; i++) {
		NewBytes n = { by + (int64_t)(i - np0) * T, src_at, NULL };
		for (int s = ns0; s < pl->ns; s++)
			if (pl->s[s].kind == STEP_COPY && pl->s[s].dst == i) {
				n.src = &pl->p[pl->s[s].src];
				place_shard_at(n.src, T, src_at);
			}
		place_each(&pl->p[i], T, add_new, &n);
	}
	for (int s = ns0; s < pl->ns; s++) {
		memset(cur, 0, (size_t)T * sizeof *cur);
		for (int i = np0; i < np; i++)
			if (fi[i] <= s && s <= la[i])
				for (int64_t t = 0; t < T; t++)
					cur[t] += by[(int64_t)(i - np0) * T + t];
		if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].scratch) {
			memset(by + (int64_t)nn * T, 0, (size_t)T * sizeof *by);
			place_each(&pl->p[pl->s[s].out], T, add_bytes, by + (int64_t)nn * T);
			for (int64_t t = 0; t < T; t++)
				cur[t] += by[(int64_t)nn * T + t] ? pl->s[s].scratch : 0;
		}
		for (int64_t t = 0; t < T; t++)
			peak[t] = cur[t] > peak[t] ? cur[t] : peak[t];
	}
	free(fi);
	free(la);
	free(alias);
	free(src_at);
	free(by);
	free(cur);
}



/* The largest ratio of a tile's figure to the machine's limit for it:
 * table bytes to the table budget, fragments to the fragment limit, SRAM
 * (tensors and tables) to the available SRAM. At most 1 fits. */
double limit_excess(const Machine *mc, int64_t table, int64_t frags, int64_t sram)
{
	double x = (double)table / (double)mc->table_budget_bytes;
	if ((double)frags / (double)mc->fragment_limit > x)
		x = (double)frags / (double)mc->fragment_limit;
	if ((double)sram / (double)machine_avail(mc) > x)
		x = (double)sram / (double)machine_avail(mc);
	return x;
}

/* A lower bound on the two figures candidate_cmp ranks fitting trials by
 * under the memory objective: the worst tile's excess (in 1% steps) and
 * the bytes, from a choice's tensors (ob, per tile) on top of every
 * tile's load and earlier tables. Its own tables and fragments only add
 * to both. (Bound is in planner_int.h.) */
static Bound tensor_bound(const Builder *b, const int64_t *load, const int64_t *ob)
{
	double lb = 0;
	Bound r = { 0, 0 };
	for (int64_t t = 0; t < b->mc->tiles; t++) {
		double x = limit_excess(b->mc, b->tab[t], b->frg[t], load[t] + ob[t] + b->tab[t]);
		lb = x > lb ? x : lb;
		r.bytes += ob[t];
	}
	r.excess = (int64_t)(lb * 100);
	return r;
}

/* Whether a choice bounded by bd cannot rank before the fitting trial
 * beat: then lowering it cannot change the choice. */
int cannot_beat(Bound bd, const Candidate *beat)
{
	int64_t eb = (int64_t)(beat->x_excess * 100);
	return bd.excess > eb || (bd.excess == eb && bd.bytes > beat->x_bytes);
}

/* Builds a choice with build(arg), lowers it against what earlier ops put
 * on every tile, fills c's exact fields, and takes the choice back.
 * bound (not NULL): only the choice's tensor_bound is computed, into
 * *bound, and nothing is lowered. */
void trial_build(Builder *b, const MOp *op, BuildFn build, const void *arg,
		 const int64_t *load, Bound *bound, Candidate *c)
{
	Plan *pl = b->pl;
	const Machine *mc = b->mc;
	int64_t T = mc->tiles;
	int64_t *tt = xcalloc((size_t)T, sizeof *tt), *tf = xcalloc((size_t)T, sizeof *tf);
	int64_t *ob = xcalloc((size_t)T, sizeof *ob);
	Snap sn;
	Err e;

	snap_take(b, &sn);
	build(b, op, arg);
	c->exact = 1;
	c->x_table = c->x_frags = c->x_peak = c->x_bytes = 0;
	c->x_excess = 0;
	int64_t cyc = 0;
	new_bytes(pl, sn.np, sn.ns, ob);
	if (bound) {
		*bound = tensor_bound(b, load, ob);
		c->exact = 0;
	} else if (plan_trial(pl, sn.ns, pl->ns - 1, WEIGHTS_DEFAULT, tt, tf, b->o->objective == OBJ_CYCLES ? &cyc : NULL, &e)) {
		c->fits = 0;
		c->x_excess = 1e30;
	} else {
		for (int64_t t = 0; t < T; t++) {
			int64_t tab = b->tab[t] + tt[t], fr = b->frg[t] + tf[t], mem = load[t] + ob[t];
			double x = limit_excess(mc, tab, fr, mem + tab);
			if (x > c->x_excess)
				c->x_excess = x;
			c->x_table = tab > c->x_table ? tab : c->x_table;
			c->x_frags = fr > c->x_frags ? fr : c->x_frags;
			c->x_peak = mem + tab > c->x_peak ? mem + tab : c->x_peak;
			c->x_bytes += ob[t] + tt[t];
		}
		c->fits = c->x_excess <= 1.0 - b->margin;
		if (b->o->objective == OBJ_CYCLES)
			c->x_cycles = cyc;
	}
	snap_back(b, &sn);
	free(tt);
	free(tf);
	free(ob);
}
