#include "planner/trial.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "lower/exchange.h"
#include "lower/expand.h"
#include "lower/lower.h"
#include "lower/group.h"
#include "base/keytab.h"
#include "cost/replay.h"
#include "stage/plan_memory.h"
#include "stage/table.h"

/* Does every shard of dst sit where src holds the same region, on every
 * tile both use (lib/stage/alloc.h's condition for one buffer)? */
typedef struct {
	const Placement *src;
	int64_t *src_at;
} Share;

static int differs(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
		   int64_t tile)
{
	Share *sh = ctx;
	int64_t sidx[MAX_RANK], lin = sh->src_at[tile];
	(void)rep;
	if (lin < 0)
		return 0;
	place_shard_idx(sh->src, lin, sidx);
	return !place_same_region(sh->src, sidx, p, idx);
}

static int can_share(const Plan *q, int src, int dst)
{
	int64_t T = q->machine.tiles;
	Share sh = { &q->p[src], xmalloc((size_t)T * sizeof *sh.src_at) };
	place_shard_at(&q->p[src], T, sh.src_at);
	int ok = !place_each(&q->p[dst], T, differs, &sh);
	free(sh.src_at);
	return ok;
}

/* ---- the forward decisions of amp-group's auto weights ----
 *
 * Under WEIGHTS_AUTO, plan_group forwards a phase's parameters when its
 * replay (lib/cost/replay.h) and its rows say so, for each phase alone; before
 * grouping a phase is one copy step (plan_exchange). The phase's transfers
 * are the expansion of that copy, a function of its two placements' shapes
 * and tiles and of whether they share an address on a tile that holds
 * both; other addresses only move them, and no decision depends on where
 * a buffer sits: the copy's two buffers never share bytes on a tile but
 * where one is the other (a trial keeps every buffer apart; in a whole
 * plan both are live at the copy). Its rows depend also on whether its
 * sends move each iteration (lib/stage/table.h). So whether auto forwarded a
 * copy's phase is kept by those, for all threads (the two ownerships
 * deliver the same parameters), as plan_group decided it. A plan whose
 * every phase that may forward was decided before, and not forwarded, is
 * grouped with WEIGHTS_DIRECT: the same records and phases as auto would
 * give, without the replays. */
enum { DEC_DIRECT = 1, DEC_FORWARD };

#define DKEY_MAX (2 * PLACE_KEY_MAX + 3)

/* Shared by the threads (the two ownerships deliver the same parameters):
 * under dec_mu. Key: dkey; value: DEC_DIRECT or DEC_FORWARD. */
static pthread_mutex_t dec_mu = PTHREAD_MUTEX_INITIALIZER;
static KeyTab dec_tab;

static _Thread_local char *on_src;     /* per tile: the copy's source has a shard there */
static _Thread_local int64_t on_src_tiles;

static int mark_src(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	(void)ctx, (void)p, (void)idx, (void)rep;
	on_src[t] = 1;
	return 0;
}

static int on_marked(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep, int64_t t)
{
	(void)ctx, (void)p, (void)idx, (void)rep;
	return on_src[t];
}

/* Do S and D share an address on a tile that holds both? (Sharing one
 * elsewhere changes nothing: every figure is a tile's.) */
static int shares(const Plan *q, const Placement *S, const Placement *D)
{
	int64_t T = q->machine.tiles;
	if (S->addr != D->addr)
		return 0;
	if (on_src_tiles != T) {
		free(on_src);
		on_src = xmalloc((size_t)T);
		on_src_tiles = T;
	}
	memset(on_src, 0, (size_t)T);
	place_each(S, T, mark_src, NULL);
	return place_each(D, T, on_marked, NULL);
}

/* The key of step s's copy (after compose) in q. */
static int dkey(const Plan *q, int s, int64_t *k)
{
	const Step *st = &q->s[s];
	const Placement *S = &q->p[st->src], *D = &q->p[st->dst];
	int n = place_key(S, k);
	n += place_key(D, k + n);
	k[n++] = shares(q, S, D);
	k[n++] = st->move;
	/* a send from a stacked home moves each iteration (lib/stage/table.h) */
	k[n++] = q->nr && plan_stacked(q, st->src) ? plan_step_count(q, s) : 0;
	return n;
}

static int dec_find(const Plan *q, int s)
{
	int64_t k[DKEY_MAX];
	int n = dkey(q, s, k);
	pthread_mutex_lock(&dec_mu);
	int64_t dec = keytab_find(&dec_tab, k, n);
	pthread_mutex_unlock(&dec_mu);
	return dec < 0 ? 0 : (int)dec;
}

static void dec_put(const Plan *q, int s, int dec)
{
	int64_t k[DKEY_MAX];
	int n = dkey(q, s, k);
	pthread_mutex_lock(&dec_mu);
	if (keytab_find(&dec_tab, k, n) < 0)    /* the first decision stays */
		keytab_put(&dec_tab, k, n, dec);
	pthread_mutex_unlock(&dec_mu);
}

/* Is any record of step s one plan_group might forward (a superset of
 * its forwardable ones)? */
static int may_forward(const Plan *q, int s, int lo, int hi)
{
	for (int i = lo; i < hi; i++)
		if (q->x[i].kind == X_SEND && q->x[i].nrecv > 1 && q->s[s].move == MOVE_PARAMETER)
			return 1;
	return 0;
}

int trial_group(Plan *q, int weights, Err *e)
{
	if (weights != WEIGHTS_AUTO)
		return plan_group(q, weights, e);
	int nph = q->nph, known = 1;
	int *step = xmalloc((size_t)(nph + 1) * sizeof *step), *count = xcalloc((size_t)nph + 1, sizeof *count);
	for (int p = 0, i = 0; p < nph; p++) {          /* one copy step per phase, records in step order */
		int s = q->ph[p].first, lo;
		step[p] = q->ph[p].last == s ? s : -1;
		while (i < q->nx && q->x[i].step < s)
			i++;
		for (lo = i; i < q->nx && q->x[i].step == s; i++)
			;
		count[p] = i - lo;
		if (step[p] < 0)
			known = 0;
		else if (!may_forward(q, s, lo, i))
			step[p] = -2;           /* nothing to decide */
		else if (dec_find(q, s) != DEC_DIRECT)
			known = 0;
	}
	int rc;
	if (known) {
		rc = plan_group(q, WEIGHTS_DIRECT, e);
	} else if (!(rc = plan_group(q, WEIGHTS_AUTO, e))) {
		/* Learn: a forwarded record became two (delivery and forward). */
		int ns = q->ns, *made = xcalloc((size_t)ns + 1, sizeof *made);
		for (int i = 0; i < q->nx; i++)
			made[q->x[i].step]++;
		for (int p = 0; p < nph; p++)
			if (step[p] >= 0)
				dec_put(q, step[p], made[step[p]] > count[p] ? DEC_FORWARD : DEC_DIRECT);
		free(made);
	}
	free(step);
	free(count);
	return rc;
}

/* ---- phases already lowered ----
 *
 * After grouping, a phase's rows and replay are a function of its copies
 * alone: each copy's transfers of its placements' shapes (see above), in
 * step order, and which of them share a buffer (a relay reads what the
 * phase wrote); addresses only move them (apart, as plan_trial places
 * them). Trials meet the same phases again and again (one op's candidates
 * share copies; the cycles objective builds the plan again at larger
 * margins), so each phase's row sizes, the lower bound of its cycles
 * (phase_row_list) and, once asked for, its cycles are kept per thread by
 * those. */
#define PKEY_STEP (DKEY_MAX + 2)

typedef struct {
	int32_t *rows;          /* n x (tile, row bytes, fragments); n -1: too big to keep */
	int64_t n, lb;
	int64_t cycles;         /* phase_cycles; -1: not yet */
} Kept;

static pthread_mutex_t replay_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local KeyTab kept_tab;          /* phase key -> index in kept */
static _Thread_local Kept *kept, lone;         /* lone: a phase too big to name */
static _Thread_local int64_t kept_n, kept_cap, *kept_scratch, kept_scratch_tiles;

static void kept_release(void)
{
	for (int64_t i = 0; i < kept_n; i++)
		free(kept[i].rows);
	free(kept);
	keytab_free(&kept_tab);
	free(kept_scratch);
	free(lone.rows);
	memset(&lone, 0, sizeof lone);
	kept = NULL, kept_n = kept_cap = 0;
	kept_scratch = NULL, kept_scratch_tiles = 0;
}

/* Phase p of q (grouped with weights), its rows and bound made. */
static Kept *phase_kept(const Plan *q, int p, int weights)
{
	int first = q->ph[p].first, last = q->ph[p].last, nk = 0;
	int64_t *k = xmalloc((size_t)((last - first + 1) * PKEY_STEP + 2) * sizeof *k), bufs[2 * 64];
	int nbuf = 0;
	k[nk++] = weights;
	for (int s = first; s <= last; s++) {
		if (q->s[s].kind != STEP_COPY)
			continue;
		nk += dkey(q, s, k + nk);
		for (int side = 0; side < 2; side++) {  /* buffers by first use in the phase */
			int64_t a = q->p[side ? q->s[s].dst : q->s[s].src].addr, id = 0;
			while (id < nbuf && bufs[id] != a)
				id++;
			if (id == nbuf && nbuf < 2 * 64)
				bufs[nbuf++] = a;
			k[nk++] = id;
		}
	}
	Kept *x = &lone;
	if (nbuf < 2 * 64) {
		int64_t i = keytab_find(&kept_tab, k, nk);
		if (i >= 0) {
			free(k);
			return &kept[i];
		}
		if (kept_n == kept_cap)
			kept = xrealloc(kept, (size_t)(kept_cap = kept_cap ? 2 * kept_cap : 256) * sizeof *kept);
		keytab_put(&kept_tab, k, nk, kept_n);
		x = &kept[kept_n++];
	} else {                                        /* too many buffers to name: not kept */
		free(lone.rows);
	}
	free(k);
	memset(x, 0, sizeof *x);
	int64_t T = q->machine.tiles;
	if (kept_scratch_tiles != T) {
		free(kept_scratch);
		kept_scratch = xmalloc((size_t)(3 * T) * sizeof *kept_scratch);
		kept_scratch_tiles = T;
	}
	int64_t *tl = kept_scratch, *tb = tl + T, *fr = tb + T;
	x->n = phase_row_list(q, p, tl, tb, fr, &x->lb);
	x->rows = xmalloc((size_t)(3 * x->n + 1) * sizeof *x->rows);
	for (int64_t i = 0; i < x->n; i++) {
		if (tl[i] > INT32_MAX || tb[i] > INT32_MAX || fr[i] > INT32_MAX) {
			x->n = -1;              /* not kept: walked again each time */
			break;
		}
		x->rows[3 * i] = (int32_t)tl[i], x->rows[3 * i + 1] = (int32_t)tb[i], x->rows[3 * i + 2] = (int32_t)fr[i];
	}
	x->cycles = -1;
	return x;
}

/* A trial's allocator (Lowering.alloc), in place of plan_alloc: copies
 * that may alias share their source's buffer, every other buffer sits
 * apart from all others. */
static int trial_alloc(Plan *pl, Err *e)
{
	(void)e;
	int np = pl->np;
	int *fi = xmalloc((size_t)(np + 1) * sizeof *fi), *la = xmalloc((size_t)(np + 1) * sizeof *la);
	int *alias = xmalloc((size_t)(np + 1) * sizeof *alias);
	plan_lifetimes(pl, fi, la, alias);
	/* A copy destination that may alias its source takes the source's
	 * buffer (its root's, along a chain of such copies). */
	int *root = xmalloc((size_t)(np + 1) * sizeof *root);
	for (int i = 0; i < np; i++)
		root[i] = i;
	for (int s = 0; s < pl->ns; s++) {
		const Step *st = &pl->s[s];
		if (st->kind == STEP_COPY && alias[st->dst] == st->src &&
		    pl->p[st->src].layout == pl->p[st->dst].layout && can_share(pl, st->src, st->dst))
			root[st->dst] = root[st->src];
	}
	/* Every other buffer apart from all others: no receive continues into
	 * another buffer (each holds its placements' largest shard, every
	 * instance of a stacked home). Where they sit changes no figure, only
	 * the replay's lookups by address (lib/cost/replay.c): the buffers the
	 * trial's copies read are packed from address 0 on 4 KiB boundaries
	 * with 4 KiB between them, so a send looks only at writes to its own
	 * buffer; the others sit far beyond, each 4 GiB from the next. */
	int64_t *span = xcalloc((size_t)np + 1, sizeof *span);
	char *read = xcalloc((size_t)np + 1, 1);
	for (int s = 0; s < pl->ns; s++)
		if (pl->s[s].kind == STEP_COPY)
			read[root[pl->s[s].src]] = 1;
	for (int i = 0; i < np; i++) {
		int64_t b = place_instance(&pl->p[i]) * pl->t[pl->p[i].tensor].count;
		span[root[i]] = b > span[root[i]] ? b : span[root[i]];
	}
	int64_t at = 0;
	for (int i = 0; i < np; i++) {
		if (root[i] != i)
			continue;
		if (!read[i]) {
			pl->p[i].addr = ((int64_t)1 << 50) + ((int64_t)i << 32);
			continue;
		}
		pl->p[i].addr = at;
		at += cdiv(span[i], 4096) * 4096 + 4096;
	}
	for (int i = 0; i < np; i++)
		pl->p[i].addr = pl->p[root[i]].addr;
	free(root);
	free(span);
	free(read);
	free(fi);
	free(la);
	free(alias);
	return 0;
}

static int trial(const Plan *pl, int first, int last, int weights, int64_t *table,
		 int64_t *frags, int64_t *cycles, int exact, Err *e)
{
	Plan q;
	int rc = -1;

	/* The steps first..last alone, over copies of every placement, as
	 * amp-compose would leave them. Tensors are shared (read only). */
	memset(&q, 0, sizeof q);
	q.machine = pl->machine;
	q.model = pl->model;
	q.t = pl->t, q.nt = pl->nt;
	q.np = pl->np;
	q.p = xmalloc((size_t)(q.np + 1) * sizeof *q.p);
	for (int i = 0; i < q.np; i++) {
		q.p[i] = pl->p[i];
		q.p[i].name = xstrdup(pl->p[i].name);
	}
	q.ns = last - first + 1;
	q.s = xmalloc((size_t)(q.ns + 1) * sizeof *q.s);
	for (int i = 0; i < q.ns; i++) {
		q.s[i] = pl->s[first + i];
		q.s[i].op = xstrdup(pl->s[first + i].op);
	}
	q.r = xmalloc((size_t)(pl->nr + 1) * sizeof *q.r);
	for (int i = 0; i < pl->nr; i++) {
		int f = pl->r[i].first > first ? pl->r[i].first : first;
		int l = pl->r[i].last < last ? pl->r[i].last : last;
		if (f > l)
			continue;
		q.r[q.nr] = pl->r[i];
		q.r[q.nr].first = f - first, q.r[q.nr].last = l - first;
		q.nr++;
	}
	Lowering lw = lowering_default();       /* record order: lib/lower/lower.h */
	lw.weights = weights, lw.schedule = 0, lw.alloc = trial_alloc, lw.group = trial_group;
	if (lower_plan(&q, &lw, e))
		goto out;
	if (cycles)
		*cycles = local_copy_cycles(&q, 0, q.ns - 1, NULL);
	for (int p = 0; p < q.nph; p++) {
		Kept *k = phase_kept(&q, p, weights);
		if (k->n < 0)
			phase_row_sums(&q, p, table, frags);
		for (int64_t i = 0; i < k->n; i++) {    /* row_bytes of every row, without the rows */
			if (table)
				table[k->rows[3 * i]] += k->rows[3 * i + 1];
			if (frags)
				frags[k->rows[3 * i]] += k->rows[3 * i + 2];
		}
		if (cycles && exact && k->cycles < 0) {
			/* A replay holds every write of its phase (lib/cost/replay.c):
			 * one thread's at a time, so that two large ones do not
			 * add up. */
			pthread_mutex_lock(&replay_mu);
			k->cycles = phase_cycles(&q, p);
			pthread_mutex_unlock(&replay_mu);
		}
		if (cycles)
			*cycles += (exact ? k->cycles : k->lb) + q.machine.sync_cycles;
	}
	if (cycles) {
		int *lead = xcalloc((size_t)pl->ns + 1, sizeof *lead);
		int64_t *own = xcalloc((size_t)pl->ns + 1, 8), *ch = xcalloc((size_t)pl->ns + 1, 8);
		compute_sets(pl, first, last, lead);
		for (int s = first; s <= last; s++)
			own[s] = step_cycles(pl, s, NULL);
		compute_charge(lead, own, first, last, ch);
		for (int s = first; s <= last; s++)
			*cycles += ch[s];
		free(lead), free(own), free(ch);
	}
	rc = 0;
out:
	for (int p = 0; p < q.nph; p++)
		free(q.ph[p].label);
	for (int i = 0; i < q.np; i++)
		free(q.p[i].name);
	for (int i = 0; i < q.ns; i++)
		free(q.s[i].op);
	free(q.ph);
	free(q.x);
	free(q.p);
	free(q.s);
	free(q.r);
	return rc;
}

int plan_trial(const Plan *pl, int first, int last, int weights, int64_t *table,
	       int64_t *frags, int64_t *cycles, Err *e)
{
	return trial(pl, first, last, weights, table, frags, cycles, 1, e);
}

int plan_trial_bound(const Plan *pl, int first, int last, int weights, int64_t *table,
		     int64_t *frags, int64_t *cycles, Err *e)
{
	return trial(pl, first, last, weights, table, frags, cycles, 0, e);
}

void trial_release(void)
{
	kept_release();
	free(on_src);
	on_src = NULL, on_src_tiles = 0;
}

void trial_forget(void)
{
	pthread_mutex_lock(&dec_mu);
	keytab_free(&dec_tab);
	pthread_mutex_unlock(&dec_mu);
}
