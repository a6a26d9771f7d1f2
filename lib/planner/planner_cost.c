/* planner_cost.c: the exact cost of one choice of an op (a GEMM candidate,
 * an attention's staging): build it into the plan, lower it against what
 * earlier ops put on every tile (lib/planner/trial.h), and take it back. */
#include "base/keytab.h"
#include "planner/planner_int.h"

/* ---- exact costing: build a candidate, lower it, take it back ---- */

typedef struct {
	int nt, np, ns, ng;
	int *canon, *cls_place, *fused;
} Snap;

static int canon_len(const Builder *b) { return 2 * b->m->nt + 4 * b->m->nops + 1; }

static void snap_take(Builder *b, Snap *s)
{
	s->nt = b->pl->nt, s->np = b->pl->np, s->ns = b->pl->ns, s->ng = b->pl->ng;
	s->canon = xmalloc((size_t)canon_len(b) * sizeof *s->canon);
	memcpy(s->canon, b->canon, (size_t)canon_len(b) * sizeof *s->canon);
	s->fused = xmalloc((size_t)canon_len(b) * sizeof *s->fused);
	memcpy(s->fused, b->fused, (size_t)canon_len(b) * sizeof *s->fused);
	s->cls_place = xmalloc((size_t)(b->m->nt + 1) * sizeof *s->cls_place);
	memcpy(s->cls_place, b->cls_place, (size_t)b->m->nt * sizeof *s->cls_place);
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
	memcpy(b->fused, s->fused, (size_t)canon_len(b) * sizeof *s->fused);
	memcpy(b->cls_place, s->cls_place, (size_t)b->m->nt * sizeof *s->cls_place);
	free(s->canon);
	free(s->fused);
	free(s->cls_place);
}

typedef struct {
	int64_t *at, n;         /* (tile, bytes) pairs, n of them */
	int64_t *src_at;
	const Placement *src;
	int64_t every;          /* every shard's bytes when all are alike, else -1 */
} NewBytes;

/* The bytes of each of p's shards when they are all alike (no axis ends
 * in a shorter part), else -1. */
static int64_t alike_bytes(const Placement *p)
{
	for (int a = 0; a < p->rank; a++)
		if (place_extent(p, a, p->split[a] - 1) != place_extent(p, a, 0))
			return -1;
	return place_max_bytes(p);
}

/* Notes a shard's tile and bytes unless it is the copy source's buffer
 * there (the same region and layout on the tile: one buffer,
 * plan_memory's rule). */
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
	n->at[2 * n->n] = t;
	n->at[2 * n->n++ + 1] = n->every >= 0 ? n->every : place_shard_bytes(p, idx);
	return 0;
}

/* Per tile, the peak over steps ns0.. of the bytes of placements np0..
 * live at each (plan_lifetimes; a shard that is its copy source's buffer
 * counts once), each step's scratch included. Only steps ns0.. can name
 * placements np0.. (they were added with them), so their live ranges are
 * plan_lifetimes' from those steps alone. by: scratch of at least
 * new_bytes_room(); peak holds no negative figure. */
static int64_t new_bytes_room(const Plan *pl, int np0)
{
	int64_t n = pl->machine.tiles;                  /* a step's output, for its scratch */
	for (int i = np0; i < pl->np; i++)
		n += place_shards(&pl->p[i]) * place_replicas(&pl->p[i]);
	for (int s = 0; s < pl->ns; s++)
		if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].scratch) {
			int64_t o = place_shards(&pl->p[pl->s[s].out]) * place_replicas(&pl->p[pl->s[s].out]);
			n += o > pl->machine.tiles ? o - pl->machine.tiles : 0;
		}
	return 2 * n;
}

static void new_bytes(const Plan *pl, int np0, int ns0, int64_t *peak, int64_t *by)
{
	int64_t T = pl->machine.tiles;
	int np = pl->np, nn = np - np0, ns = pl->ns;
	int *fi = xmalloc((size_t)(nn + 1) * sizeof *fi), *la = xmalloc((size_t)(nn + 1) * sizeof *la);
	int64_t *src_at = xmalloc((size_t)T * sizeof *src_at), *cur = xcalloc((size_t)T, sizeof *cur);
	int64_t *off = xmalloc((size_t)(nn + 2) * sizeof *off), *touched = xmalloc((size_t)T * sizeof *touched);
	int *stamp = xmalloc((size_t)T * sizeof *stamp);

	for (int64_t t = 0; t < T; t++)
		stamp[t] = -1;

	for (int i = 0; i < nn; i++)
		fi[i] = -1;
	for (int s = ns0; s < ns; s++) {                /* writers, as plan_writer: the first */
		const Step *st = &pl->s[s];
		int w = (st->kind == STEP_COPY ? st->dst : st->out) - np0;
		if (w >= 0 && fi[w] < 0)
			fi[w] = s;
	}
	for (int i = 0; i < nn; i++) {
		PRole r = pl->t[pl->p[np0 + i].tensor].role;
		int w = fi[i];
		fi[i] = w < 0 ? 0 : w;
		la[i] = (w < 0 || r == R_OUTPUT) ? ns : fi[i];
	}
	for (int s = ns0; s < ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind == STEP_COPY) {
			if (st->src >= np0)
				la[st->src - np0] = la[st->src - np0] > s ? la[st->src - np0] : s;
		} else {
			for (int k = 0; k < st->nin; k++)
				if (st->in[k] >= np0)
					la[st->in[k] - np0] = la[st->in[k] - np0] > s ? la[st->in[k] - np0] : s;
		}
	}
	for (int r = 0; r < pl->nr; r++)
		for (int i = 0; i < nn; i++)
			if (fi[i] < pl->r[r].first && la[i] >= pl->r[r].first && la[i] < pl->r[r].last)
				la[i] = pl->r[r].last;
	/* Each placement's shards and replicas as (tile, bytes), one
	 * placement after another in by. */
	off[0] = 0;
	for (int i = np0; i < np; i++) {
		NewBytes n = { by + 2 * off[i - np0], 0, src_at, NULL, alike_bytes(&pl->p[i]) };
		for (int s = ns0; s < pl->ns; s++)
			if (pl->s[s].kind == STEP_COPY && pl->s[s].dst == i) {
				n.src = &pl->p[pl->s[s].src];
				place_shard_at(n.src, T, src_at);
			}
		place_each(&pl->p[i], T, add_new, &n);
		off[i - np0 + 1] = off[i - np0] + n.n;
	}
	for (int s = ns0; s < pl->ns; s++) {
		int64_t nt = 0;
		for (int i = 0; i < nn; i++)
			if (fi[i] <= s && s <= la[i])
				for (int64_t k = off[i]; k < off[i + 1]; k++) {
					int64_t t = by[2 * k];
					if (!cur[t])
						touched[nt++] = t;
					cur[t] += by[2 * k + 1];
				}
		if (pl->s[s].kind == STEP_COMPUTE && pl->s[s].scratch) {
			/* once on every tile of the step's output */
			NewBytes n = { by + 2 * off[nn], 0, src_at, NULL, 1 };
			place_each(&pl->p[pl->s[s].out], T, add_new, &n);
			for (int64_t k = 0; k < n.n; k++) {
				int64_t t = n.at[2 * k];
				if (stamp[t] == s)
					continue;
				stamp[t] = s;
				if (!cur[t])
					touched[nt++] = t;
				cur[t] += pl->s[s].scratch;
			}
		}
		for (int64_t k = 0; k < nt; k++) {
			int64_t t = touched[k];
			peak[t] = cur[t] > peak[t] ? cur[t] : peak[t];
			cur[t] = 0;
		}
	}
	free(fi);
	free(la);
	free(src_at);
	free(cur);
	free(off);
	free(touched);
	free(stamp);
}

/* The largest ratio of a tile's figure to the machine's limit for it:
 * table bytes to the table budget, fragments to the fragment limit, SRAM
 * (tensors and tables) to the available SRAM. At most 1 fits. */
double planner_limit_excess(const Machine *mc, int64_t table, int64_t frags, int64_t sram)
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
		double x = planner_limit_excess(b->mc, b->tab[t], b->frg[t], load[t] + ob[t] + b->tab[t]);
		lb = x > lb ? x : lb;
		r.bytes += ob[t];
	}
	r.excess = (int64_t)(lb * 100);
	return r;
}

/* Whether a choice bounded by bd cannot rank before the fitting trial
 * beat: then lowering it cannot change the choice. */
int planner_cannot_beat(Bound bd, const Candidate *beat)
{
	int64_t eb = (int64_t)(beat->x_excess * 100);
	return bd.excess > eb || (bd.excess == eb && bd.bytes > beat->x_bytes);
}

/* ---- the memo ---- */

/* A choice made at an op after the choices of parent (-1: none). */
typedef struct {
	int parent, op;
	OpChoice k;
} Prefix;

/* A trial at an op after the choices prefix: a choice's (kind 0: the
 * figures planner_trial_build sets), or the op's own (kind 1: its tables). */
typedef struct {
	int prefix, op, kind;
	OpChoice k;
	int ok;                 /* 0: the lowering failed */
	int64_t x_table, x_frags, x_peak, x_bytes;
	int64_t cycles, lb;     /* the trial's cycles and a lower bound of them; -1: not yet */
	double x_excess;
	int64_t *tab, *frg;     /* kind 1 */
	int first, last;
} Entry;

struct Memo {
	Prefix *px;
	int npx;
	Entry *en;
	int nen;
	KeyTab tab;             /* entry_key -> index in en */
};

Memo *planner_memo_new(void)
{
	return xcalloc(1, sizeof(Memo));
}

void planner_memo_free(Memo *mm)
{
	if (!mm)
		return;
	for (int i = 0; i < mm->nen; i++)
		free(mm->en[i].tab), free(mm->en[i].frg);
	free(mm->px);
	free(mm->en);
	keytab_free(&mm->tab);
	free(mm);
}

#define ENTRY_KEY (3 + (int)(sizeof(OpChoice) / sizeof(((OpChoice *)0)->v[0])))

static int entry_key(int prefix, int op, int kind, const OpChoice *k, int64_t *key)
{
	int n = 0;
	key[n++] = prefix, key[n++] = op, key[n++] = kind;
	for (size_t i = 0; i < sizeof k->v / sizeof k->v[0]; i++)
		key[n++] = k->v[i];
	return n;
}

static Entry *memo_find(Memo *mm, int prefix, int op, int kind, const OpChoice *k)
{
	if (!mm)
		return NULL;
	int64_t key[ENTRY_KEY];
	int64_t e = keytab_find(&mm->tab, key, entry_key(prefix, op, kind, k, key));
	return e < 0 ? NULL : &mm->en[e];
}

static Entry *memo_put(Memo *mm, int prefix, int op, int kind, const OpChoice *k)
{
	if ((mm->nen & (mm->nen - 1)) == 0)
		mm->en = xrealloc(mm->en, (size_t)(mm->nen ? 2 * mm->nen : 1) * sizeof *mm->en);
	Entry *x = &mm->en[mm->nen];
	memset(x, 0, sizeof *x);
	x->prefix = prefix, x->op = op, x->kind = kind, x->k = *k;
	int64_t key[ENTRY_KEY];
	keytab_put(&mm->tab, key, entry_key(prefix, op, kind, k, key), mm->nen++);
	return x;
}

void planner_trial_reset(Builder *b)
{
	b->op_set = b->op_have = 0;
}

void planner_trial_decide(Builder *b, const MOp *op, const OpChoice *k)
{
	int opi = (int)(op - b->m->ops);
	if (!b->op_set || memcmp(&b->op_key, k, sizeof *k))
		b->op_have = 0;         /* not the best trial's choice: planner_trial_op lowers it */
	if (!b->memo)
		return;
	Memo *mm = b->memo;
	for (int i = 0; i < mm->npx; i++)
		if (mm->px[i].parent == b->prefix && mm->px[i].op == opi && !memcmp(&mm->px[i].k, k, sizeof *k)) {
			b->prefix = i;
			return;
		}
	if ((mm->npx & (mm->npx - 1)) == 0)
		mm->px = xrealloc(mm->px, (size_t)(mm->npx ? 2 * mm->npx : 1) * sizeof *mm->px);
	mm->px[mm->npx] = (Prefix){ b->prefix, opi, *k };
	b->prefix = mm->npx++;
}

int planner_trial_op(Builder *b, const MOp *op, int first, Err *e)
{
	Plan *pl = b->pl;
	int64_t T = b->mc->tiles, *tt = b->op_tab, *tf = b->op_frg;
	int opi = (int)(op - b->m->ops), last = pl->ns - 1;
	OpChoice none = { { 0 } };
	Entry *x = memo_find(b->memo, b->prefix, opi, 1, &none);

	if (x && x->first == first && x->last == last) {
		tt = x->tab, tf = x->frg;
	} else if (!(b->op_have && b->op_first == first && b->op_last == last)) {
		memset(tt, 0, (size_t)T * sizeof *tt);
		memset(tf, 0, (size_t)T * sizeof *tf);
		if (plan_trial(pl, first, last, WEIGHTS_DEFAULT, tt, tf, NULL, e))
			return -1;
	}
	if (b->memo && !x) {
		x = memo_put(b->memo, b->prefix, opi, 1, &none);
		x->ok = 1, x->first = first, x->last = last;
		x->tab = xmalloc((size_t)T * sizeof *x->tab);
		x->frg = xmalloc((size_t)T * sizeof *x->frg);
		memcpy(x->tab, tt, (size_t)T * sizeof *tt);
		memcpy(x->frg, tf, (size_t)T * sizeof *tf);
	}
	for (int64_t t = 0; t < T; t++)
		b->tab[t] += tt[t], b->frg[t] += tf[t];
	b->op_have = 0;
	return 0;
}

int64_t planner_trial_score(const Builder *b, const MOp *op, int64_t cycles, int64_t table)
{
	int64_t runs = op->rep >= 0 ? b->m->rep[op->rep].count : 1;
	return cycles < 0 ? -1 : cycles * runs + (int64_t)(b->price * (double)table);
}

/* Builds a choice with build(arg), lowers it against what earlier ops put
 * on every tile, fills c's exact fields, and takes the choice back.
 * bound (not NULL): only the choice's tensor_bound is computed, into
 * *bound, and nothing is lowered. lb (not NULL, cycles objective): the
 * trial's cycles are not replayed: *lb gets a lower bound of them
 * (plan_trial_bound) and c->x_cycles is -1, unless they are known (then
 * both are they); b->op_best is not kept. k names the choice (the
 * memo's key). */
void planner_trial_build(Builder *b, const MOp *op, BuildFn build, const void *arg, const OpChoice *k,
			 const int64_t *load, Bound *bound, int64_t *lb, Candidate *c)
{
	Plan *pl = b->pl;
	const Machine *mc = b->mc;
	int64_t T = mc->tiles;
	int64_t *tt = b->scratch, *tf = tt + T, *ob = tf + T;
	int opi = (int)(op - b->m->ops), cyc_obj = b->o->objective == OBJ_CYCLES;
	Entry *x = bound ? NULL : memo_find(b->memo, b->prefix, opi, 0, k);
	Snap sn;
	Err e;

	c->exact = 1;
	c->x_table = c->x_frags = c->x_peak = c->x_bytes = 0;
	c->x_excess = 0;
	if (x && (!cyc_obj || !x->ok || x->cycles >= 0 || lb)) {      /* lowered before */
		if (!x->ok) {
			c->fits = 0;
			c->x_excess = 1e30;
		} else {
			c->x_table = x->x_table, c->x_frags = x->x_frags, c->x_peak = x->x_peak;
			c->x_bytes = x->x_bytes, c->x_excess = x->x_excess;
			c->fits = c->x_excess <= 1.0 - b->margin;
			if (cyc_obj)
				c->x_cycles = x->cycles;
			c->x_score = planner_trial_score(b, op, c->x_cycles, c->x_table);
		}
		if (lb)                         /* (a lowering that failed does not fit: no bound needed) */
			*lb = !x->ok ? 0 : x->cycles >= 0 ? x->cycles : x->lb;
		if (!lb && (!b->op_set || candidate_cmp(c, &b->op_best, b->o->objective) < 0))
			b->op_best = *c, b->op_key = *k, b->op_set = 1, b->op_have = 0;
		return;
	}
	memset(b->scratch, 0, (size_t)(3 * T) * sizeof *b->scratch);
	snap_take(b, &sn);
	build(b, op, arg);
	int64_t cyc = 0;
	int ok = 0;
	int64_t nby = new_bytes_room(pl, sn.np);
	if (nby > b->nby) {
		free(b->by);
		b->by = xmalloc((size_t)nby * sizeof *b->by);
		b->nby = nby;
	}
	new_bytes(pl, sn.np, sn.ns, ob, b->by);
	if (bound) {
		*bound = tensor_bound(b, load, ob);
		c->exact = 0;
	} else if (lb ? plan_trial_bound(pl, sn.ns, pl->ns - 1, WEIGHTS_DEFAULT, tt, tf, &cyc, &e) :
		   plan_trial(pl, sn.ns, pl->ns - 1, WEIGHTS_DEFAULT, tt, tf, cyc_obj ? &cyc : NULL, &e)) {
		c->fits = 0;
		c->x_excess = 1e30;
		if (lb)
			*lb = 0;
	} else {
		ok = 1;
		for (int64_t t = 0; t < T; t++) {
			int64_t tab = b->tab[t] + tt[t], fr = b->frg[t] + tf[t], mem = load[t] + ob[t];
			double xs = planner_limit_excess(mc, tab, fr, mem + tab);
			if (xs > c->x_excess)
				c->x_excess = xs;
			c->x_table = tab > c->x_table ? tab : c->x_table;
			c->x_frags = fr > c->x_frags ? fr : c->x_frags;
			c->x_peak = mem + tab > c->x_peak ? mem + tab : c->x_peak;
			c->x_bytes += ob[t] + tt[t];
		}
		c->fits = c->x_excess <= 1.0 - b->margin;
		if (lb)
			*lb = cyc, c->x_cycles = -1;
		else if (cyc_obj)
			c->x_cycles = cyc;
		c->x_score = planner_trial_score(b, op, c->x_cycles, c->x_table);
	}
	if (!bound) {
		if (b->memo) {
			if (!x)
				x = memo_put(b->memo, b->prefix, opi, 0, k), x->lb = -1;
			x->ok = ok;
			x->x_table = c->x_table, x->x_frags = c->x_frags, x->x_peak = c->x_peak;
			x->x_bytes = c->x_bytes, x->x_excess = c->x_excess;
			x->cycles = ok && cyc_obj && !lb ? cyc : -1;
			x->lb = ok && lb ? cyc : x->lb;
		}
		if (!lb && (!b->op_set || candidate_cmp(c, &b->op_best, b->o->objective) < 0)) {
			b->op_best = *c, b->op_key = *k, b->op_set = 1, b->op_have = ok;
			if (ok) {               /* keep its tables */
				memcpy(b->op_tab, tt, (size_t)T * sizeof *tt);
				memcpy(b->op_frg, tf, (size_t)T * sizeof *tf);
				b->op_first = sn.ns, b->op_last = pl->ns - 1;
			}
		}
	}
	snap_back(b, &sn);
}
