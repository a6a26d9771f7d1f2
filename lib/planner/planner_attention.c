/* planner_attention.c: attention's plan (lib/planner/planner.h): its
 * grid of query and key blocks, its staging of keys and values (direct,
 * relay, or on the tiles of a state's home) costed exactly by
 * planner_cost.c, and its build. */
#include "planner/planner_int.h"

/* Attention tiles: (batch, query block, head, key block). Tile
 * (b, qb, h, kb) sits at base + ((b*QB + qb)*H + h)*KB + kb, or, in a
 * causal segment (attn_segments), heads outermost, at
 * base + ((b*H + h)*QB + qb)*KB + kb: there the tiles that take one key
 * block of a kv head (its q heads' query blocks) are every KB-th tile of
 * one run, which a key's row reaches in one multicast (Qwen2.5-0.5B's
 * 1-layer 512-token prefill in 4 segments: that phase 5,829 cycles
 * against 7,877 in the first order, the layer 161,391 against 164,722
 * with one grid). With one key
 * block it holds its query rows and the whole head's keys and values and
 * writes the head's output columns. With KB > 1 it holds a block of the
 * keys and values (multicast to the head's query blocks) and writes an
 * fp32 partial [m, l, o] per query row; the partials of a query block are
 * gathered on its kb = 0 tile and merged there in key-block order (online
 * softmax, formats/plan.md). The output returns to the owners. */
typedef struct {
	int64_t QB, KB, tq, tk, bytes;
	int64_t S;              /* causal segments (attn_segments), 0 or 1: none */
} AttnGrid;

/* Bytes a tile holds for attention with QB query and KB key blocks: q,
 * k, v, the score scratch of one row, and the partials, their gathered
 * block and the output when KB > 1 (the output alone otherwise). */
static int64_t attn_bytes(int64_t Tq, int64_t Tk, int64_t D, int64_t QB, int64_t KB, int64_t *tq,
			  int64_t *tk)
{
	*tq = cdiv(Tq, QB), *tk = cdiv(Tk, KB);
	int64_t b = 2 * *tq * D + 2 * 2 * *tk * D + 4 * *tk + 2 * *tq * D;
	if (KB > 1)
		b += 4 * *tq * (D + 2) * (1 + KB);
	return b;
}

/* The fewest key blocks whose tile fits beside what is in use (with the
 * table budget kept free), then the most query blocks; when none fits,
 * the smallest tile. */
static AttnGrid attn_grid(Builder *b, int64_t Tq, int64_t Tk, int64_t D, int64_t per, int op, int64_t kb_min)
{
	int64_t room = machine_avail(b->mc) - planner_base_load(b, op) - b->mc->table_budget_bytes;
	AttnGrid best = { 0, 0, 0, 0, INT64_MAX, 0 }, small = best;
	for (int64_t KB = kb_min; KB <= Tk && KB <= per; KB++) {
		if (!uniform_ok(Tk, KB))
			continue;
		for (int64_t QB = per / KB; QB >= 1; QB--) {
			if (QB > Tq || !uniform_ok(Tq, QB))
				continue;
			AttnGrid g = { QB, KB, 0, 0, 0, 0 };
			g.bytes = attn_bytes(Tq, Tk, D, QB, KB, &g.tq, &g.tk);
			if (g.bytes < small.bytes)
				small = g;
			if (g.bytes <= room && !best.QB)
				best = g;
			break;          /* the most query blocks for this KB */
		}
		if (best.QB)
			break;
	}
	return best.QB ? best : small;
}

/* Causal self-attention in S segments (attn_segments): the fewest key
 * blocks k0 (at least k0_min) a segment's length cuts uniformly whose
 * largest tile fits beside what is in use (the table budget kept free),
 * then the most query blocks a segment; QB 0 when none fits. */
static AttnGrid attn_seg_grid(Builder *b, int64_t B, int64_t H, int64_t T, int64_t D, int64_t S, int op,
			      int64_t k0_min)
{
	int64_t room = machine_avail(b->mc) - planner_base_load(b, op) - b->mc->table_budget_bytes, L = T / S;
	int64_t units = B * H * S * (S + 1) / 2;         /* tiles per query block and k0 */
	AttnGrid g = { 0, 0, 0, 0, 0, S };
	for (int64_t k0 = k0_min; k0 <= L && units * k0 <= b->mc->tiles; k0++) {
		if (!uniform_ok(L, k0))
			continue;
		for (int64_t QB = b->mc->tiles / (units * k0); QB >= 1; QB--) {
			if (QB > L || !uniform_ok(L, QB))
				continue;
			int64_t tq, tk, bytes = attn_bytes(L, S * L, D, QB, S * k0, &tq, &tk);
			if (bytes <= room)
				return (AttnGrid){ QB, k0, tq, tk, bytes, S };
			break;          /* the most query blocks for this k0 */
		}
	}
	return g;
}

typedef struct {
	AttnGrid ag;
	int relay;
	int home;               /* on the tiles of the state's home (kv_staging home) */
	int64_t chunks;         /* home: each head's merge chunks (home_chunks), 0: ATTN_CHUNK_MIN wide */
} AttnTry;

static void build_attention(Builder *b, const MOp *op, const void *arg);

/* Attention on the tiles of its keys' and values' home: when kv is a
 * state whose home holds one batch entry's block of positions, whole
 * rows, per tile, each such tile attends over its block for every head
 * in place (nothing moves but q, the positions and the partials), its
 * KB = the home's position blocks; the partials of head h merge on the
 * tile of block h of its batch entry. Returns KB, or 0 when the home
 * does not allow it: not a state's home, a tile holding several batch
 * entries, or fewer blocks than heads (but one). Whether its tiles fit
 * is the trial's to judge, as for every candidate. */
static int64_t home_blocks(Builder *b, const MOp *op)
{
	const Plan *pl = b->pl;
	const Model *m = b->m;
	int q = plan_find_tensor(pl, m->t[op->in[0]].name), kv = plan_find_tensor(pl, m->t[op->in[1]].name);
	if (q == kv || pl->t[kv].role != R_STATE || b->canon[kv] < 0)
		return 0;
	const Placement *h = &pl->p[b->canon[kv]];
	int64_t B = pl->t[q].shape[0], H = op->heads, KB = h->split[1], G = h->split[2];
	/* (cut by kv head: each tile holds one's keys and values, kv_order heads) */
	if (h->split[0] != B || (G != 1 && !(op->kv_order && G == op->kv_heads)) || (KB * G > 1 && KB * G < H))
		return 0;
	return KB;
}

/* The home attention's merge chunks (build_home_attention): the most
 * chunks n, each at least minw of the D columns wide, that D cuts into
 * and whose H x n merges the KB x G tiles hold (1 with one tile). */
static int64_t home_chunks(int64_t D, int64_t H, int64_t KB, int64_t G, int64_t minw)
{
	int64_t n = 1;
	for (int64_t c = 2; KB * G > 1 && c * minw <= D; c++)
		if (D % c == 0 && H * c <= KB * G)
			n = c;
	return n;
}

/* Causal self-attention over a prefill's own tokens (the mask static,
 * no positions) wastes the tiles of (query block, key block) pairs above
 * the diagonal, which a uniform grid cannot leave out. In S segments of
 * L = T / S query rows each, segment s's rows see keys [0, (s + 1) L)
 * only: a grid of its own (QB query blocks, (s + 1) k0 key blocks of
 * L / k0 keys) on tiles of its own, its own partials and merge, its
 * result a window of the output. Writes the candidates (S = 2 and 4, at
 * the fewest key blocks that fit and twice as many, direct and relay)
 * to t; returns how many. */
static int attn_segments(Builder *b, const MOp *op, AttnTry *t)
{
	const Plan *pl = b->pl;
	const Model *m = b->m;
	int q = plan_find_tensor(pl, m->t[op->in[0]].name), kv = plan_find_tensor(pl, m->t[op->in[1]].name);
	int out = plan_find_tensor(pl, m->t[op->out].name), n = 0;
	int64_t B = pl->t[q].shape[0], T = pl->t[q].shape[1], H = op->heads, D = pl->t[out].shape[2] / H;
	if (b->o->no_segments || !op->causal || T != pl->t[kv].shape[1] || op->in[2] >= 0 || op->grid[0] ||
	    op->kv_staging)
		return 0;
	static const int64_t segs[ATTN_SEGS] = { 2, 4 };
	for (int i = 0; i < ATTN_SEGS; i++) {
		if (T % segs[i])
			continue;
		AttnGrid g = attn_seg_grid(b, B, H, T, D, segs[i], (int)(op - m->ops), 1);
		for (int twice = 0; twice < 3 && g.QB; twice++) {
			for (int r = 0; r < 2; r++)
				t[n++] = (AttnTry){ g, r, 0, 0 };
			g = attn_seg_grid(b, B, H, T, D, segs[i], (int)(op - m->ops), 2 * g.KB);
		}
	}
	return n;
}

/* The candidates on the state's home of HB key blocks (0: none), heads
 * D wide: its merge chunks at least 8, 4, 2 and 1 columns wide, each
 * count once.
 * Narrower chunks spread the merge over more tiles (each chunk brings
 * its own m and l, so every key block sends more): Qwen's decode at
 * batch 1 merges 683 key blocks a kv head, 8 chunks a head leaving
 * 14,144 cycles of merging on 112 tiles. Writes them to t; returns
 * how many. */
static int home_tries(Builder *b, const MOp *op, int64_t HB, int64_t D, AttnTry *t)
{
	if (!HB)
		return 0;
	int64_t G = b->pl->p[b->canon[plan_find_tensor(b->pl, b->m->t[op->in[1]].name)]].split[2];
	static const int64_t minw[ATTN_HOME_CHUNKS] = { ATTN_CHUNK_MIN, 4, 2, 1 };
	int n = 0;
	for (int i = 0; i < ATTN_HOME_CHUNKS; i++) {
		int64_t ch = home_chunks(D, op->heads, HB, G, minw[i]);
		if (!n || ch != t[n - 1].chunks)
			t[n++] = (AttnTry){ { 1, HB, 0, 0, 0, 0 }, 0, 1, ch };
	}
	return n;
}

int plan_attention(Builder *b, const MOp *op, Err *e)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int q = plan_find_tensor(pl, m->t[op->in[0]].name), kv = plan_find_tensor(pl, m->t[op->in[1]].name);
	int out = plan_find_tensor(pl, m->t[op->out].name), F = planner_fused_cast(b, op);
	if (F >= 0)                     /* before the trials, which keep the tensors made before them */
		b->fused[out] = planner_cast_tensor(b, out, (Format)F);
	const PTensor *qt = &pl->t[q], *kt = &pl->t[kv];
	int64_t B = qt->shape[0], Tq = qt->shape[1], Tk = kt->shape[1], C = pl->t[out].shape[2];
	int64_t H = op->heads, D = C / H, T = b->mc->tiles;

	if (B * H > T)
		return err_at(e, m->file, op->line, op->col,
			      "attention '%s': %lld batch entries x %lld heads need more tiles than the "
			      "machine's %lld", op->name, (long long)B, (long long)H, (long long)T);
	AttnGrid ag = attn_grid(b, Tq, Tk, D, T / (B * H), (int)(op - m->ops), 1);
	if (op->grid[0]) {
		int64_t QB = op->grid[0], KB = op->grid[1];
		const char *why = QB > Tq ? "more query blocks than query tokens" :
				  KB > Tk ? "more key blocks than keys" :
				  !uniform_ok(Tq, QB) ? "query blocks that do not cut the queries uniformly" :
				  !uniform_ok(Tk, KB) ? "key blocks that do not cut the keys uniformly" :
				  B * H * QB * KB > T ? "more tiles than the machine has" : NULL;
		if (why)
			return err_at(e, m->file, op->pin_line, op->pin_col,
				      "pin for '%s': blocks [%lld, %lld] need %s (%lld queries, %lld keys, "
				      "%lld x %lld x %lld x %lld tiles of %lld)", op->name, (long long)QB,
				      (long long)KB, why, (long long)Tq, (long long)Tk, (long long)B,
				      (long long)H, (long long)QB, (long long)KB, (long long)T);
		ag.QB = QB, ag.KB = KB;
		ag.bytes = attn_bytes(Tq, Tk, D, QB, KB, &ag.tq, &ag.tk);
	}
	/* Keys and values: direct multicast from the owners, or relay (each
	 * block gathered once on its first query block's tile, then sent on
	 * whole). With exact costing both are lowered and the better kept. */
	/* Or on the tiles of a state's home, reading it in place. */
	int64_t HB = op->grid[0] && op->kv_staging != 3 ? 0 : home_blocks(b, op);
	if (op->kv_staging == 3 && !HB)
		return err_at(e, m->file, op->pin_line, op->pin_col,
			      "pin for '%s': kv_staging home needs kv to be a state whose home holds one batch "
			      "entry's block of positions per tile, and at least as many blocks as heads (or one)",
			      op->name);
	if (op->kv_staging == 3 && op->grid[0])
		return err_at(e, m->file, op->pin_line, op->pin_col,
			      "pin for '%s': kv_staging home takes its blocks from the state's home; pin no blocks",
			      op->name);
	AttnTry at = { ag, op->kv_staging == 2, op->kv_staging == 3, 0 };
	if (at.home)
		at.ag.QB = 1, at.ag.KB = HB;
	if (b->o->objective >= OBJ_MEMORY && (!op->kv_staging || at.home)) {
		/* Candidates: direct and relay at the fewest key blocks that fit
		 * (or the pinned ones) and, unpinned, at the fewest of at least
		 * 1.5, 2, 3 and 4 times as many (each tile then receives fewer
		 * keys, and merges more partials; SigLIP-so400m's batch 2 takes
		 * 3 where 2 fit); then the state's home, if any, in its merge
		 * chunk widths. A pin of kv_staging home leaves those alone. */
		int64_t *load = xcalloc((size_t)T, sizeof *load);
		AttnTry t[2 * ATTN_KB_TRIES + ATTN_HOME_CHUNKS + 6 * ATTN_SEGS];
		Candidate c[2 * ATTN_KB_TRIES + ATTN_HOME_CHUNKS + 6 * ATTN_SEGS];
		int n = 0, best = 0;
		memset(c, 0, sizeof c);
		planner_tile_load(b, (int)(op - m->ops), load);
		static const int twice[ATTN_KB_TRIES] = { 2, 3, 4, 6, 8 };     /* twice the multiple */
		int tries = at.home ? 0 : op->grid[0] ? 1 : ATTN_KB_TRIES;
		for (int g = 0; g < tries; g++) {
			int64_t want = (ag.KB * twice[g] + 1) / 2;
			AttnGrid gg = g ? attn_grid(b, Tq, Tk, D, T / (B * H), (int)(op - m->ops), want) : ag;
			if (g && !gg.QB)
				break;          /* no more key blocks to try */
			if (g && gg.KB == t[n - 1].ag.KB)
				continue;       /* (x1.5 of one key block is one) */
			for (int r = 0; r < 2; r++)
				t[n++] = (AttnTry){ gg, r, 0, 0 };
		}
		n += at.home ? 0 : attn_segments(b, op, t + n);
		int h0 = n, hi = -1;    /* the home's candidates: t[h0..n), the best of them */
		n += home_tries(b, op, HB, D, t + n);
		for (int i = 0; i < n; i++) {
			OpChoice k = { { t[i].ag.QB, t[i].ag.KB, t[i].home ? 2 : t[i].relay, t[i].ag.S, t[i].chunks,
					 -1, -1 } };
			planner_trial_build(b, op, build_attention, &t[i], &k, load, NULL, NULL, &c[i]);
			if (i && candidate_cmp(&c[i], &c[best], b->o->objective) < 0)
				best = i;       /* ties: the earlier */
			if (i >= h0 && (hi < 0 || candidate_cmp(&c[i], &c[hi], b->o->objective) < 0))
				hi = i;
		}
		/* A trial weighs the attention's own steps alone. Beside a
		 * state's home, which moves no keys, more key blocks that move
		 * them also cost in the phases they share with q, kv and the
		 * append: they are taken only when their trial beats the home's
		 * by ATTN_HOME_MARGIN (Qwen's decode at batch 4: 12,824 cycles
		 * against the home's 15,255 in the trial, 651,556 against
		 * 633,700 whole; at batch 1: 12,504 against 36,569, 615,148
		 * against 941,860). */
		if (hi >= 0 && best < h0 && t[best].ag.KB != ag.KB && b->o->objective == OBJ_CYCLES && c[hi].fits &&
		    c[best].x_cycles >= 0 && (double)c[best].x_cycles * ATTN_HOME_MARGIN > (double)c[hi].x_cycles) {
			best = hi;
			for (int i = 0; i < h0; i++)    /* the best at the fewest key blocks, or the home */
				if (t[i].ag.KB == ag.KB && candidate_cmp(&c[i], &c[best], b->o->objective) < 0)
					best = i;
		}
		at = t[best];
		free(load);
	}
	build_attention(b, op, &at);
	OpChoice k = { { at.ag.QB, at.ag.KB, at.home ? 2 : at.relay, at.ag.S, at.chunks, -1, -1 } };
	planner_trial_decide(b, op, &k);
	return 0;
}

/* The common tail of both attention forms: the attention step into o, or
 * (pp given) into a [KB, B, Tq, width] fp32 partial placed by pp, reduced
 * to rp and merged into o; then the step's fields and the output's copy
 * back to its canonical owners. */
static void attention_tail(Builder *b, const MOp *op, const int *idx, int nin,
			   Placement *o, Placement *pp, Placement *rp,
			   const int64_t pshape[4], int64_t scratch, int64_t chunks, int64_t seg)
{
	Plan *pl = b->pl;
	int mo = plan_find_tensor(pl, b->m->t[op->out].name), existed, st;
	int out = b->fused[mo] >= 0 ? b->fused[mo] : mo;        /* its fused cast, written in its place */
	int64_t D = pl->t[out].shape[2] / op->heads;
	int op_out = planner_add_place_of(pl, o, out, op->name, "out", &existed);
	if (!pp) {
		st = planner_add_compute(pl, op->name, C_ATTENTION, idx, nin, op_out, 0);
	} else {
		char *name = seg ? xasprintf("%s.partial.%lld", pl->t[mo].name, (long long)seg + 1) :
				   xasprintf("%s.partial", pl->t[mo].name);
		int pt = planner_add_tensor(pl, name, R_PARTIAL, 4, pshape, FMT_FP16, 0);
		free(name);
		int pi = planner_add_place_of(pl, pp, pt, op->name, "partial", &existed);
		st = planner_add_compute(pl, op->name, C_ATTENTION, idx, nin, pi, 0);
		int ri = planner_add_place_of(pl, rp, pt, op->name, "merge", &existed);
		planner_add_copy(pl, op->name, OPD_PARTIAL, MOVE_REDUCTION, pi, ri);
		planner_add_compute(pl, op->name, C_MERGE, &ri, 1, op_out, 0);
	}
	pl->s[st].scale = 1.0 / sqrt((double)D);
	pl->s[st].heads = op->heads;
	pl->s[st].kv_heads = op->kv_heads;
	pl->s[st].kv_order = op->kv_order;
	pl->s[st].causal = op->causal;
	pl->s[st].scratch = scratch;
	pl->s[st].chunks = chunks;
	if (pp && planner_class_claim(b, mo, op_out)) {
		b->canon[out] = op_out;
		return;                 /* the merge's cut is its class's: no copy back */
	}
	Placement cp;
	planner_canonical_of(b, &pl->t[mo], &cp);       /* the result's canonical cut */
	b->canon[out] = planner_add_place(pl, &cp, out, "canon", &existed);
	planner_add_copy(pl, op->name, OPD_OUT, MOVE_OUTPUT, op_out, b->canon[out]);
}

/* Builds attention op on the tiles of its state's home (home_blocks): q
 * and the positions multicast to every block of their batch entry, the
 * keys and values read in place, each tile's partial for all heads, its
 * heads' columns cut into n chunks (each with its own m and l; chunks
 * 0: home_chunks at least ATTN_CHUNK_MIN columns wide), chunk c of head h merged on
 * block h*n + c's tile (or, with one block, the output written there). */
static void build_home_attention(Builder *b, const MOp *op, int64_t KB, int64_t chunks)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int q = plan_find_tensor(pl, m->t[op->in[0]].name), kv = plan_find_tensor(pl, m->t[op->in[1]].name);
	int out = plan_find_tensor(pl, m->t[op->out].name), existed, home = b->canon[kv], idx[4];
	const Placement h = pl->p[home];        /* a copy: planner_add_place may move pl->p */
	int64_t B = pl->t[q].shape[0], Tq = pl->t[q].shape[1], C = pl->t[out].shape[2], H = op->heads, D = C / H;
	int64_t s0 = h.stride[0], s1 = h.stride[1], n, G = h.split[2], s2 = h.stride[2];
	/* G > 1: the home cut by kv head (kv_order heads), kv head j's
	 * blocks s2 apart; each tile attends for that kv head's H/G heads */
	n = chunks > 0 ? chunks : home_chunks(D, H, KB, G, ATTN_CHUNK_MIN);
	int64_t dc = D / n;
	int nin = op->in[2] >= 0 ? 4 : 3;

	for (int k = 0; k < nin; k += 3) {      /* q, then the positions */
		int t = k ? plan_find_tensor(pl, m->t[op->in[2]].name) : q;
		Placement p;
		memset(&p, 0, sizeof p);
		p.layout = LAYOUT_ROW_MAJOR;
		p.split[0] = B, p.block[0] = 1, p.stride[0] = s0;
		p.split[1] = 1, p.block[1] = Tq;
		p.split[2] = 1, p.block[2] = pl->t[t].shape[2];
		if (G > 1 && !k)                /* kv head j's heads of q to its tiles */
			p.split[2] = G, p.block[2] = C / G, p.stride[2] = s2;
		else if (G > 1)
			p.rep[p.nrep] = G, p.rstride[p.nrep++] = s2;
		if (KB > 1)
			p.rep[p.nrep] = KB, p.rstride[p.nrep++] = s1;
		p.base = h.base;
		idx[k] = planner_add_place_of(pl, &p, t, op->name, k ? "positions" : "q", &existed);
		if (!existed)
			planner_add_copy(pl, op->name, k ? OPD_POS : OPD_Q, MOVE_ACTIVATION, planner_canonical(b, t),
					 idx[k]);
	}
	idx[1] = idx[2] = home;
	Placement o;
	memset(&o, 0, sizeof o);
	o.layout = LAYOUT_ROW_MAJOR;
	o.split[0] = B, o.block[0] = 1, o.stride[0] = s0;
	o.split[1] = 1, o.block[1] = Tq;
	o.split[2] = KB > 1 ? H * n : G, o.block[2] = KB > 1 ? dc : C / G, o.stride[2] = KB > 1 ? s1 : s2;
	o.base = h.base;
	if (KB == 1) {
		attention_tail(b, op, idx, nin, &o, NULL, NULL, NULL, 4 * h.block[1], 1, 0);
		return;
	}
	/* chunk u = h*n + c merges on the batch entry's tile u*s1: with the
	 * home cut by kv head, s1 is 1 and an entry's KB*G tiles follow on */
	int64_t shape[4] = { KB, B, Tq, H * (D + 2 * n) };
	Placement pp, rp;
	memset(&pp, 0, sizeof pp);
	pp.layout = LAYOUT_ROW_MAJOR;
	pp.split[0] = KB, pp.block[0] = 1, pp.stride[0] = s1;
	pp.split[1] = B, pp.block[1] = 1, pp.stride[1] = s0;
	pp.split[2] = 1, pp.block[2] = Tq;
	pp.split[3] = G, pp.block[3] = H / G * (D + 2 * n), pp.stride[3] = s2;
	pp.base = h.base;
	rp = pp;
	rp.split[0] = 1, rp.block[0] = KB, rp.stride[0] = 0;
	rp.split[3] = H * n, rp.block[3] = dc + 2, rp.stride[3] = s1;
	attention_tail(b, op, idx, nin, &o, &pp, &rp, shape, 4 * h.block[1], n, 0);
}

/* One block of attention's query rows and the keys they see: rows
 * [q0, q0 + nq) over keys [0, nk), QB x KB blocks of tq rows and tk keys,
 * on tiles from base; seg numbers its partial (0: the only one). */
typedef struct {
	int64_t q0, nq, nk, QB, KB, tq, tk, base, seg;
	int rows;               /* a segment's: heads outermost, merged by rows (merge_blocks) */
} Seg;

/* A segment's merge: its nq rows cut into the most blocks, at most
 * units, that cut them uniformly; block r on the r-th tile of its head
 * (its q block's key-block tiles, where the rows line up). */
static int64_t merge_blocks(int64_t nq, int64_t units)
{
	int64_t mb = units < nq ? units : nq;
	while (mb > 1 && !uniform_ok(nq, mb))
		mb--;
	return mb;
}

/* A window of t's rows [r0, r0 + nr) and columns [c0, c0 + nc) in p
 * (the whole tensor when it is all of them). */
static void window(Placement *p, const PTensor *t, int64_t r0, int64_t nr, int64_t c0, int64_t nc)
{
	p->shape[0] = t->shape[0], p->shape[1] = nr, p->shape[2] = nc;
	p->off[1] = r0, p->off[2] = c0;
	memcpy(p->whole, t->shape, sizeof p->whole);
	if (r0 == 0 && nr == t->shape[1] && c0 == 0 && nc == t->shape[2]) {
		memset(p->whole, 0, sizeof p->whole);  /* the whole tensor */
		memset(p->off, 0, sizeof p->off);
	}
}

static void build_seg(Builder *b, const MOp *op, int relay, const Seg *sg)
{
	Plan *pl = b->pl;
	const Model *m = b->m;
	int q = plan_find_tensor(pl, m->t[op->in[0]].name), kv = plan_find_tensor(pl, m->t[op->in[1]].name);
	int out = plan_find_tensor(pl, m->t[op->out].name), fused = q == kv, existed;
	const PTensor *qt = &pl->t[q];
	int64_t B = qt->shape[0], C = pl->t[out].shape[2];
	int64_t H = op->heads, D = C / H, G = op->kv_heads, g = H / G, KC = G * D;
	int64_t QB = sg->QB, KB = sg->KB, tq = sg->tq, tk = sg->tk, base = sg->base;
	/* tile strides of kb, h, qb and b */
	int64_t sk = 1, sh = KB, sq = H * KB, sb = QB * H * KB;
	if (sg->rows)
		sq = KB, sh = QB * KB;
	/* k and v: G heads of D columns (KC in all) after q's C when fused;
	 * kv head j serves q heads j*g .. j*g + g - 1 */
	int64_t coff[3] = { 0, fused ? C : 0, fused ? C + KC : KC };
	int src[3] = { planner_canonical(b, q), planner_canonical(b, kv), planner_canonical(b, kv) };
	int tensor[3] = { q, kv, kv }, idx[4];
	static const Operand opd[3] = { OPD_Q, OPD_K, OPD_V };
	static const char *what[3] = { "q", "k", "v" };

	for (int k = 0; k < 3; k++) {
		const PTensor *t = &pl->t[tensor[k]];
		if (k == 2 && op->kv_order) {   /* kv_order heads: v in k's shards, D after each kv head's keys */
			idx[2] = idx[1];
			continue;
		}
		Placement p;
		memset(&p, 0, sizeof p);
		p.layout = LAYOUT_ROW_MAJOR;
		int64_t w = k ? KC << op->kv_order : C, dk = k ? D << op->kv_order : D;
		window(&p, t, k ? 0 : sg->q0, k ? sg->nk : sg->nq, coff[k], w);
		p.split[0] = B, p.block[0] = 1, p.stride[0] = sb;
		p.split[2] = k ? G : H, p.block[2] = dk, p.stride[2] = k ? g * sh : sh;
		if (k == 0) {
			p.split[1] = QB, p.block[1] = tq, p.stride[1] = sq;
			if (KB > 1)
				p.nrep = 1, p.rep[0] = KB, p.rstride[0] = sk;
		} else {
			p.split[1] = KB, p.block[1] = tk, p.stride[1] = sk;
			if (sg->rows && QB * g > 1) {
				/* the group's heads and their query blocks: one run of tiles */
				p.rep[p.nrep] = QB * g, p.rstride[p.nrep++] = sq;
			} else {
				if (QB > 1)
					p.rep[p.nrep] = QB, p.rstride[p.nrep++] = sq;
				if (g > 1)      /* the q heads of the group */
					p.rep[p.nrep] = g, p.rstride[p.nrep++] = sh;
			}
		}
		p.base = base;
		if (k > 0 && relay && p.nrep) {
			/* gathered once on the q = 0 tile of its query blocks, then
			 * relayed whole to the others (replica 0 is that buffer) */
			Placement st = p;
			st.nrep = 0, st.rep[0] = 0, st.rstride[0] = 0;
			char *swhat = xasprintf("%s.stage", what[k]);
			int si = planner_add_place_of(pl, &st, tensor[k], op->name, swhat, &existed);
			free(swhat);
			if (!existed)
				planner_add_copy(pl, op->name, opd[k], MOVE_ACTIVATION, src[k], si);
			idx[k] = planner_add_place_of(pl, &p, tensor[k], op->name, what[k], &existed);
			if (!existed)
				planner_add_copy(pl, op->name, opd[k], MOVE_RELAY, si, idx[k]);
			continue;
		}
		idx[k] = planner_add_place_of(pl, &p, tensor[k], op->name, what[k], &existed);
		if (!existed)
			planner_add_copy(pl, op->name, opd[k], MOVE_ACTIVATION, src[k], idx[k]);
	}
	int nin = 3;
	if (op->in[2] >= 0) {           /* positions: each query row's, beside it */
		int pt = plan_find_tensor(pl, m->t[op->in[2]].name);
		Placement p;
		memset(&p, 0, sizeof p);
		p.layout = LAYOUT_ROW_MAJOR;
		window(&p, &pl->t[pt], sg->q0, sg->nq, 0, 1);
		p.split[0] = B, p.block[0] = 1, p.stride[0] = sb;
		p.split[1] = QB, p.block[1] = tq, p.stride[1] = sq;
		p.split[2] = 1, p.block[2] = 1;
		p.rep[p.nrep] = H, p.rstride[p.nrep++] = sh;
		if (KB > 1)
			p.rep[p.nrep] = KB, p.rstride[p.nrep++] = sk;
		p.base = base;
		idx[3] = planner_add_place_of(pl, &p, pt, op->name, "positions", &existed);
		if (!existed)
			planner_add_copy(pl, op->name, OPD_POS, MOVE_ACTIVATION, planner_canonical(b, pt), idx[3]);
		nin = 4;
	}
	/* With key blocks, each head's columns are cut into n = KB chunks
	 * (each with its own m and l) when they cut D evenly, ATTN_CHUNK_MIN
	 * columns wide at least: chunk c merges on the kb = c tile of its
	 * query block and head, so every key block's tile merges a share
	 * (and receives one). Otherwise the kb = 0 tile merges them all.
	 * A segment's heads are merged whole, in MB blocks of rb rows
	 * instead (merge_blocks): row block r of head h on tile r + h*QB*KB,
	 * where query block r / KB's key blocks sit. */
	int64_t n = 1, MB = QB, rb = tq;
	if (sg->rows && KB > 1) {
		MB = merge_blocks(sg->nq, QB * KB);
		rb = cdiv(sg->nq, MB);
	} else if (KB > 1 && D % KB == 0 && D / KB >= ATTN_CHUNK_MIN) {
		n = KB;
	}
	int64_t dc = D / n;
	Placement o;
	memset(&o, 0, sizeof o);
	o.layout = LAYOUT_ROW_MAJOR;
	window(&o, &pl->t[out], sg->q0, sg->nq, 0, C);
	o.split[0] = B, o.block[0] = 1, o.stride[0] = sb;
	o.split[1] = MB, o.block[1] = rb, o.stride[1] = sg->rows && KB > 1 ? 1 : sq;
	o.split[2] = H * n, o.block[2] = dc, o.stride[2] = n > 1 ? 1 : sh;   /* chunk h*n + c: tile h*KB + c */
	o.base = base;
	if (KB == 1) {
		attention_tail(b, op, idx, nin, &o, NULL, NULL, NULL, 4 * tk, 1, sg->seg);
		return;
	}
	/* [KB, B, Tq, H*(D+2n)] fp32: per query row and chunk m, l, then o. */
	int64_t shape[4] = { KB, B, sg->nq, H * (D + 2 * n) };
	Placement pp, rp;
	memset(&pp, 0, sizeof pp);
	pp.layout = LAYOUT_ROW_MAJOR;
	pp.split[0] = KB, pp.block[0] = 1, pp.stride[0] = sk;
	pp.split[1] = B, pp.block[1] = 1, pp.stride[1] = sb;
	pp.split[2] = QB, pp.block[2] = tq, pp.stride[2] = sq;
	pp.split[3] = H, pp.block[3] = D + 2 * n, pp.stride[3] = sh;
	pp.base = base;
	rp = pp;
	rp.split[0] = 1, rp.block[0] = KB, rp.stride[0] = 0;
	rp.split[2] = MB, rp.block[2] = rb, rp.stride[2] = o.stride[1];
	rp.split[3] = H * n, rp.block[3] = dc + 2, rp.stride[3] = o.stride[2];
	attention_tail(b, op, idx, nin, &o, &pp, &rp, shape, 4 * tk, n, sg->seg);
}

/* Builds attention op with the grid and staging of arg (an AttnTry):
 * one block of every query row over every key, or (ag.S > 1) segments,
 * their steps zipped so that their deliveries, partials and results share
 * phases and their computes run side by side. */
static void build_attention(Builder *b, const MOp *op, const void *arg)
{
	const AttnTry *at = arg;
	if (at->home) {
		build_home_attention(b, op, at->ag.KB, at->chunks);
		return;
	}
	Plan *pl = b->pl;
	const Model *m = b->m;
	const PTensor *qt = &pl->t[plan_find_tensor(pl, m->t[op->in[0]].name)];
	const PTensor *kt = &pl->t[plan_find_tensor(pl, m->t[op->in[1]].name)];
	const AttnGrid *ag = &at->ag;
	int64_t B = qt->shape[0], Tq = qt->shape[1], base = planner_op_start(b, op);
	if (ag->S <= 1) {
		Seg sg = { 0, Tq, kt->shape[1], ag->QB, ag->KB, ag->tq, ag->tk, base, 0, 0 };
		build_seg(b, op, at->relay, &sg);
		return;
	}
	int64_t S = ag->S, L = Tq / S;
	int first = pl->ns;
	for (int64_t s = 0; s < S; s++) {
		int from = pl->ns;
		Seg sg = { s * L, L, (s + 1) * L, ag->QB, (s + 1) * ag->KB, ag->tq, ag->tk, base, s, 1 };
		build_seg(b, op, at->relay, &sg);
		base = (base + B * op->heads * sg.QB * sg.KB) % b->mc->tiles;
		if (s)
			planner_zip_steps(pl, first, from, pl->ns);
	}
}
