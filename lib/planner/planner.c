/* planner.c: model + machine -> plan (lib/planner/planner.h). The plan's records,
 * canonical ownership and parameter homes, and the whole model: each op in
 * turn (matmuls in planner_gemm.c, the others in planner_ops.c), the check
 * that the machine holds the plan, and the ownerships and attempts tried. */
#include "planner/planner_int.h"
#include "cost/floor.h"

/* ---- records ---- */

int add_tensor(Plan *pl, const char *name, PRole role, int rank, const int64_t *shape,
	       Format fmt, int scale)
{
	PTensor t;
	memset(&t, 0, sizeof t);
	t.name = xstrdup(name);
	t.role = role;
	t.rank = rank;
	memcpy(t.shape, shape, (size_t)rank * sizeof *shape);
	t.fmt = fmt;
	t.scale = scale;
	t.count = 1;
	pl->t = xrealloc(pl->t, (size_t)(pl->nt + 1) * sizeof *pl->t);
	pl->t[pl->nt] = t;
	return pl->nt++;
}

/* Adds p under name (made unique), or returns the identical placement that
 * already exists and sets *existed. */
int add_place(Plan *pl, Placement *p, int tensor, const char *name, int *existed)
{
	const PTensor *t = &pl->t[tensor];
	char buf[256];

	p->tensor = tensor;
	p->fmt = t->fmt;
	p->rank = t->rank;
	if (place_windowed(p))          /* the caller set the window: off, shape and whole */
		memcpy(p->whole, t->shape, sizeof p->whole);
	else
		memcpy(p->shape, t->shape, sizeof p->shape), memset(p->whole, 0, sizeof p->whole);
	*existed = 0;
	for (int i = 0; i < pl->np; i++)
		if (place_same(&pl->p[i], p)) {
			*existed = 1;
			return i;
		}
	snprintf(buf, sizeof buf, "%s@%s", t->name, name);
	for (int n = 2;; n++) {
		int clash = 0;
		for (int i = 0; i < pl->np; i++)
			if (strcmp(pl->p[i].name, buf) == 0)
				clash = 1;
		if (!clash)
			break;
		snprintf(buf, sizeof buf, "%s@%s.%d", t->name, name, n);
	}
	p->name = xstrdup(buf);
	pl->p = xrealloc(pl->p, (size_t)(pl->np + 1) * sizeof *pl->p);
	pl->p[pl->np] = *p;
	return pl->np++;
}

void add_copy(Plan *pl, const char *op, Operand opd, Movement mv, int src, int dst)
{
	Step s;
	memset(&s, 0, sizeof s);
	s.kind = STEP_COPY;
	s.op = xstrdup(op);
	s.operand = opd;
	s.move = mv;
	s.src = src;
	s.dst = dst;
	s.map = copy_mapping(&pl->p[src], &pl->p[dst]);
	pl->s = xrealloc(pl->s, (size_t)(pl->ns + 1) * sizeof *pl->s);
	pl->s[pl->ns++] = s;
}

int add_compute(Plan *pl, const char *op, ComputeKind k, const int *in, int nin,
		int out, double eps)
{
	Step s;
	memset(&s, 0, sizeof s);
	s.kind = STEP_COMPUTE;
	s.op = xstrdup(op);
	s.compute = k;
	memcpy(s.in, in, (size_t)nin * sizeof *in);
	s.nin = nin;
	s.out = out;
	s.eps = eps;
	pl->s = xrealloc(pl->s, (size_t)(pl->ns + 1) * sizeof *pl->s);
	pl->s[pl->ns++] = s;
	return pl->ns - 1;
}

/* ---- canonical ownership and homes ---- */

static int64_t largest_uniform(int64_t n, int64_t limit)
{
	int64_t p = n < limit ? n : limit;
	while (p > 1 && !uniform_ok(n, p))
		p--;
	return p;
}

/* [batch, tokens, features] owned by token rows; when the tokens leave
 * tiles over, the batch is split across owners too (as far as the tiles
 * allow and the cut is uniform), unless the plan keeps it together
 * (--ownership tokens, or auto resolved to it by plan_build). Owner (b, t)
 * sits on tile base + b*owners_t + t. */
void canonical_of(const Builder *b, const PTensor *t, Placement *p)
{
	int64_t tiles = b->mc->tiles, owners = largest_uniform(t->shape[1], tiles);
	int split = b->o->ownership == OWN_BATCH;      /* auto is resolved by plan_build */
	int64_t bs = split ? largest_uniform(t->shape[0], tiles / owners) : 1;
	memset(p, 0, sizeof *p);
	p->layout = LAYOUT_ROW_MAJOR;
	p->split[0] = bs, p->split[1] = owners, p->split[2] = 1;
	p->block[0] = cdiv(t->shape[0], bs), p->block[1] = cdiv(t->shape[1], owners), p->block[2] = t->shape[2];
	p->stride[0] = bs > 1 ? owners : 0, p->stride[1] = 1;
}

int canonical(Builder *b, int tensor)
{
	Placement p;
	int existed;
	if (b->canon[tensor] >= 0)
		return b->canon[tensor];
	canonical_of(b, &b->pl->t[tensor], &p);
	return b->canon[tensor] = add_place(b->pl, &p, tensor, "canon", &existed);
}

static void add_home_bytes(Builder *b, const Placement *p);

/* A parameter's home: transposed-right panels when a matmul consumes it as
 * b, row-major otherwise; cut on panel (or 16-element) boundaries into as
 * many shards as the tiles allow, placed from the rotating pointer. */
static int home(Builder *b, int tensor, int panels)
{
	const PTensor *t = &b->pl->t[tensor];
	int64_t T = b->mc->tiles;
	Placement p;
	int existed;

	memset(&p, 0, sizeof p);
	if (panels) {
		int64_t ks = cdiv(t->shape[0], fmt_mu(t->fmt)), cg = cdiv(t->shape[1], 16);
		int64_t pc = largest_uniform(cg, T), pk = largest_uniform(ks, T / pc);
		p.layout = LAYOUT_TRANSPOSED_RIGHT;
		p.split[0] = pk, p.block[0] = cdiv(ks, pk) * fmt_mu(t->fmt), p.stride[0] = pc;
		p.split[1] = pc, p.block[1] = cdiv(cg, pc) * 16, p.stride[1] = 1;
	} else {
		int last = t->rank - 1;
		int64_t units = cdiv(t->shape[last], 16), pc = largest_uniform(units, T);
		p.layout = LAYOUT_ROW_MAJOR;
		p.split[last] = pc, p.block[last] = cdiv(units, pc) * 16, p.stride[last] = 1;
		if (t->rank == 2) {
			int64_t pr = largest_uniform(t->shape[0], T / pc);
			p.split[0] = pr, p.block[0] = cdiv(t->shape[0], pr), p.stride[0] = pc;
		}
	}
	p.base = b->next_tile;
	int i = add_place(b->pl, &p, tensor, "home", &existed);
	b->canon[tensor] = i;
	b->next_tile = (b->next_tile + place_shards(&b->pl->p[i])) % T;
	add_home_bytes(b, &b->pl->p[i]);
	return i;
}

int add_bytes(void *ctx, const Placement *p, const int64_t *idx, const int64_t *rep,
	      int64_t tile)
{
	int64_t *acc = ctx;
	(void)rep;
	acc[tile] += place_shard_bytes(p, idx);
	return 0;
}

/* A stacked parameter's home holds every instance. */
static void add_home_bytes(Builder *b, const Placement *p)
{
	for (int64_t k = 0; k < b->pl->t[p->tensor].count; k++)
		place_each(p, b->mc->tiles, add_bytes, b->base);
}

/* A state's home [B, P, W]: row-major, whole rows, cut by batch entry
 * and then into as many uniform blocks of positions as the tiles allow,
 * placed to end at tile top (from the last tile down, away from the
 * first tiles, where the owners of a decode step's few rows are).
 * Resident like a parameter. Returns where the next one ends. */
static int64_t state_home(Builder *b, int tensor, int64_t top)
{
	const PTensor *t = &b->pl->t[tensor];
	int64_t T = b->mc->tiles, bs = largest_uniform(t->shape[0], T), ps = largest_uniform(t->shape[1], T / bs);
	Placement p;
	int existed;

	memset(&p, 0, sizeof p);
	p.layout = LAYOUT_ROW_MAJOR;
	p.split[0] = bs, p.block[0] = cdiv(t->shape[0], bs), p.stride[0] = ps;
	p.split[1] = ps, p.block[1] = cdiv(t->shape[1], ps), p.stride[1] = 1;
	p.split[2] = 1, p.block[2] = t->shape[2];
	int64_t n = bs * ps;
	p.base = top - n >= 0 ? top - n : T - n;
	int i = add_place(b->pl, &p, tensor, "home", &existed);
	b->canon[tensor] = i;
	add_home_bytes(b, &b->pl->p[i]);
	return p.base;
}

/* Is parameter t an embed's table that no op on the tiles reads? It
 * stays on the host. */
static int host_only(const Model *m, int t)
{
	int embed = 0;
	for (int i = 0; i < m->nops; i++)
		for (int k = 0; k < m->ops[i].nin; k++)
			if (m->ops[i].in[k] == t) {
				if (m->ops[i].kind != OP_EMBED)
					return 0;
				embed = 1;
			}
	return embed;
}

static int consumed_as_b(const Model *m, int t)
{
	for (int i = 0; i < m->nops; i++)
		if (m->ops[i].kind == OP_MATMUL && m->ops[i].in[1] == t)
			return 1;
	return 0;
}

/* Bytes in use on every tile before op i (acc[tiles]): homes plus the
 * canonical shards of every activation live across op i. */
void tile_load(Builder *b, int op, int64_t *acc)
{
	int64_t T = b->mc->tiles;
	memcpy(acc, b->base, (size_t)T * sizeof *acc);
	for (int t = 0; t < b->m->nt; t++) {
		const MTensor *mt = &b->m->t[t];
		int pt = plan_find_tensor(b->pl, mt->name);
		if (mt->role == T_PARAM || mt->role == T_STATE || pt < 0 || b->canon[pt] < 0)
			continue;
		if (b->last_use[t] >= op || mt->output)
			place_each(&b->pl->p[b->canon[pt]], T, add_bytes, acc);
	}
}

/* The same on the busiest tile. */
int64_t base_load(Builder *b, int op)
{
	int64_t T = b->mc->tiles, best = 0;
	int64_t *acc = xcalloc((size_t)T, sizeof *acc);
	tile_load(b, op, acc);
	for (int64_t t = 0; t < T; t++)
		if (acc[t] > best)
			best = acc[t];
	free(acc);
	return best;
}

/* The parameters alone exceed the machine: no pin or batch helps. */
static const char NO_PLAN_NEXT[] = " Next: no plan of this model fits this machine; use a machine file with "
				   "more tiles (share/machines/amp5888.yaml has 4x amp1472's)";

/* ---- the whole model ---- */

static int check_params(Builder *b, Err *e)
{
	int64_t T = b->mc->tiles, avail = machine_avail(b->mc), total = 0, worst = 0;
	int state = 0;
	for (int i = 0; i < b->pl->np; i++) {
		total += place_total_bytes(&b->pl->p[i]) * b->pl->t[b->pl->p[i].tensor].count;
		state |= b->pl->t[b->pl->p[i].tensor].role == R_STATE;
	}
	const char *what = state ? "parameters and state" : "parameters";
	if (total > T * avail)
		return err_at(e, b->m->file, b->m->params_line, b->m->params_col,
			      "model '%s': %s need %lld bytes; %lld tiles hold at most %lld "
			      "(%lld bytes each after reserved_bytes).%s", b->m->name, what, (long long)total,
			      (long long)T, (long long)(T * avail), (long long)avail, NO_PLAN_NEXT);
	for (int64_t t = 1; t < T; t++)
		if (b->base[t] > b->base[worst])
			worst = t;
	if (b->base[worst] > avail)
		return err_at(e, b->m->file, b->m->params_line, b->m->params_col,
			      "model '%s': %s homes put %lld bytes on tile %lld; %lld are available",
			      b->m->name, state ? "parameter and state" : "parameter", (long long)b->base[worst], (long long)worst, (long long)avail);
	return 0;
}

static int check_memory(Builder *b, Err *e)
{
	Plan *pl = b->pl;
	int64_t worst, avail = machine_avail(b->mc);
	int at;
	int64_t *step_peak = xcalloc((size_t)pl->ns + 1, sizeof *step_peak);
	int64_t peak = plan_memory(pl, NULL, NULL, step_peak, &worst, &at);

	for (int g = 0; g < pl->ng; g++)
		for (int s = 0; s < pl->ns; s++)
			if (strcmp(pl->s[s].op, pl->g[g].op) == 0 && step_peak[s] > pl->g[g].peak_bytes)
				pl->g[g].peak_bytes = step_peak[s];
	free(step_peak);
	if (peak > avail) {
		/* at the op of that step in the model (its pin when pinned);
		 * a step of no model op: the params mapping */
		const Model *m = b->m;
		long line = m->params_line, col = m->params_col;
		for (int i = 0; i < m->nops; i++)
			if (strcmp(m->ops[i].name, pl->s[at].op) == 0) {
				line = m->ops[i].pinned ? m->ops[i].pin_line : m->ops[i].line;
				col = m->ops[i].pinned ? m->ops[i].pin_col : m->ops[i].col;
				break;
			}
		char next[400];
		plan_next_steps(pl, pl->s[at].op, next, sizeof next);
		return err_at(e, m->file, line, col, "tile %lld needs %lld bytes at step %d (op '%s'); "
			      "%lld are available (sram_bytes - reserved_bytes).%s", (long long)worst,
			      (long long)peak, at, pl->s[at].op, (long long)avail, next);
	}
	return 0;
}

/* The memory and cycles objectives promise a plan the machine holds: the
 * plan is lowered as amp-compose, amp-expand, amp-exchange and amp-group
 * do (amp-group's default weights) and checked as amp-emit checks it.
 * When it does not fit, the error names the tile and the figure, and says
 * what no plan can avoid: the parameters, each byte once, spread evenly.
 * plan_fit: the whole plan lowered so, its worst tiles' figures (Fit,
 * lib/planner/planner_int.h). */
void plan_fit(const Plan *pl, int want_cycles, Fit *f)
{
	const Machine *mc = &pl->machine;
	int64_t T = mc->tiles;
	int64_t *table = xcalloc((size_t)T, sizeof *table), *frags = xcalloc((size_t)T, sizeof *frags);
	int64_t *peak = xcalloc((size_t)T, sizeof *peak);
	int *peak_step = xcalloc((size_t)T, sizeof *peak_step);
	Plan q;
	Err le;

	memset(f, 0, sizeof *f);
	plan_dup(&q, pl);
	plan_compose(&q);
	if (plan_expand(&q, &le) || plan_exchange(&q, &le) || trial_group(&q, WEIGHTS_DEFAULT, &le)) {
		snprintf(f->why, sizeof f->why, "%s", le.msg);
		f->excess = 1e30;
		goto out;
	}
	f->lowered = 1;
	table_totals(&q, table, frags, NULL);
	plan_memory(&q, peak, peak_step, NULL, NULL, NULL);
	for (int64_t t = 1; t < T; t++) {
		f->wt = table[t] > table[f->wt] ? t : f->wt;
		f->wf = frags[t] > frags[f->wf] ? t : f->wf;
		f->ws = peak[t] + table[t] > peak[f->ws] + table[f->ws] ? t : f->ws;
	}
	f->table = table[f->wt], f->frags = frags[f->wf];
	f->peak = peak[f->ws], f->sram_table = table[f->ws];
	f->excess = limit_excess(mc, f->table, f->frags, f->peak + f->sram_table);
	if (f->peak + f->sram_table > machine_avail(mc)) {   /* what the worst tile holds most of */
		int64_t *part = xmalloc(((size_t)q.np + 1) * sizeof *part);
		plan_memory_parts(&q, f->ws, peak_step[f->ws], part);
		f->big_step = peak_step[f->ws];
		for (int i = 0; i < q.np; i++)
			if (part[i] > f->big_bytes)
				f->big_bytes = part[i], snprintf(f->big, sizeof f->big, "%s", q.p[i].name);
		free(part);
	}
	if (want_cycles == FIT_CYCLES || (want_cycles == FIT_CYCLES_IF_FITS && fit_ok(f))) {
		Metrics *ph = xcalloc((size_t)q.nph + 1, sizeof *ph), sum;
		capture_metrics(&q, ph, NULL, &sum);
		f->cycles = sum.total_cycles;
		free(ph);
	}
out:
	plan_free(&q);
	free(table);
	free(frags);
	free(peak);
	free(peak_step);
}

int fit_why(const Fit *f, const Machine *mc, char *why, size_t size)
{
	int64_t avail = machine_avail(mc);
	if (!f->lowered)
		snprintf(why, size, "%s", f->why);
	else if (f->table > mc->table_budget_bytes)
		snprintf(why, size, "tile %lld: exchange tables need %lld bytes, over the table budget of "
			 "%lld", (long long)f->wt, (long long)f->table, (long long)mc->table_budget_bytes);
	else if (f->frags > mc->fragment_limit)
		snprintf(why, size, "tile %lld: %lld send and receive fragments, over the fragment limit "
			 "of %lld", (long long)f->wf, (long long)f->frags, (long long)mc->fragment_limit);
	else if (f->peak + f->sram_table > avail)
		snprintf(why, size, "tile %lld: %lld bytes of tensors at their peak and %lld of exchange "
			 "tables need %lld, over the %lld available", (long long)f->ws, (long long)f->peak,
			 (long long)f->sram_table, (long long)(f->peak + f->sram_table), (long long)avail);
	else
		return 0;
	return 1;
}

/* The next steps after "does not fit", most direct first (op: the GEMM to
 * pin, or NULL). */
void plan_next_steps(const Plan *pl, const char *op, char *out, size_t size)
{
	int64_t batch = 0;
	size_t n = (size_t)snprintf(out, size, " Next:");
	for (int t = 0; t < pl->nt && !batch; t++)
		if (pl->t[t].role == R_INPUT && pl->t[t].rank > 1)
			batch = pl->t[t].shape[0];
	if (op && n < size)
		n += (size_t)snprintf(out + n, size - n, " pin '%s' to a grid over more tiles in the model's plan: "
				      "(amp-plan --explain lists its grids);", op);
	if (batch > 1 && n < size)
		n += (size_t)snprintf(out + n, size - n, " plan a smaller batch (this one is %lld);", (long long)batch);
	if (n < size)
		snprintf(out + n, size - n, " or use a machine file with more tiles (share/machines/amp5888.yaml has "
			 "4x amp1472's)");
}

/* fit_error's next steps: the GEMM whose operand holds most of the worst
 * tile (placement names are tensor@op.operand). */
static void next_steps(const Plan *pl, const Fit *f, int64_t per_tile, char *out, size_t size)
{
	char op[64] = "";
	if (per_tile > machine_avail(&pl->machine)) {
		snprintf(out, size, "%s", NO_PLAN_NEXT);
		return;
	}
	const char *at = strchr(f->big, '@'), *dot = at ? strchr(at, '.') : NULL;
	if (f->big_bytes && dot)
		snprintf(op, sizeof op, "%.*s", (int)(dot - at - 1), at + 1);
	int n = snprintf(out, size, "%s", "");
	if (f->big_bytes)
		n = snprintf(out, size, " Tile %lld holds most for '%s' (%lld bytes at step %lld).", (long long)f->ws,
			     f->big, (long long)f->big_bytes, (long long)f->big_step);
	if (n >= 0 && (size_t)n < size)
		plan_next_steps(pl, *op ? op : NULL, out + n, size - (size_t)n);
}

/* 0 when f fits; else -1 with the error at the model's params mark. */
static int fit_error(const Plan *pl, const Model *m, const Fit *f, Err *e)
{
	const Machine *mc = &pl->machine;
	int64_t T = mc->tiles, avail = machine_avail(mc), params = 0;
	char why[sizeof e->msg], next[600];
	int state = 0;

	if (!fit_why(f, mc, why, sizeof why))
		return 0;
	for (int i = 0; i < pl->np; i++) {
		int home = plan_state_home(pl, i);      /* resident too: a state's home */
		if ((pl->t[pl->p[i].tensor].role == R_PARAM && plan_writer(pl, i) < 0) || home)
			params += place_total_bytes(&pl->p[i]) * pl->t[pl->p[i].tensor].count;
		state |= home;
	}
	next_steps(pl, f, cdiv(params, T), next, sizeof next);
	return err_at(e, m->file, m->params_line, m->params_col,
		      "model '%s' does not fit machine '%s' at its limits: %s. No plan avoids the parameters%s: "
		      "%lld bytes, at least %lld per tile, which leaves at most %lld of the %lld available for "
		      "activations, working buffers and exchange tables.%s", m->name, mc->name, why,
		      state ? " and states" : "",
		      (long long)params, (long long)cdiv(params, T), (long long)(avail - cdiv(params, T)),
		      (long long)avail, next);
}

int plan_check_fit(const Plan *pl, const Model *m, Err *e)
{
	Fit f;
	plan_fit(pl, FIT_LIMITS, &f);
	return fit_error(pl, m, &f, e);
}

int plan_batch_split(const Plan *pl)
{
	for (int i = 0; i < pl->np; i++) {
		const Placement *p = &pl->p[i];
		size_t n = strlen(p->name);
		if (n > 6 && strcmp(p->name + n - 6, "@canon") == 0 && p->rank == 3 && p->split[0] > 1)
			return 1;
	}
	return 0;
}

/* What the ownerships' builds share: the first attempt at which one of
 * them fits (none yet: NATTEMPTS). Each build stops past it. */
struct Stop {
	pthread_mutex_t mu;
	int stop;
};

/* Is attempt i past the first that fit (stop may be NULL)? */
static int past_stop(Stop *stop, int i)
{
	if (!stop)
		return 0;
	pthread_mutex_lock(&stop->mu);
	int past = i > stop->stop;
	pthread_mutex_unlock(&stop->mu);
	return past;
}

/* One build; as attempt i of stop, abandoned between two ops once past
 * the first attempt that fit (its plan would not be read). */
int build_one(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
	      Explain *ex, double margin, double price, Memo *memo, Stop *stop, int attempt, Err *e)
{
	Builder b;
	memset(&b, 0, sizeof b);
	b.pl = pl, b.m = m, b.mc = mc, b.o = o, b.body = -1, b.margin = margin;
	b.price = price, b.memo = memo, b.prefix = -1;
	int rc = -1;

	memset(pl, 0, sizeof *pl);
	pl->machine = *mc;
	pl->model = xstrdup(m->name);
	b.canon = xmalloc((size_t)(2 * m->nt + 4 * m->nops + 1) * sizeof *b.canon);
	for (int i = 0; i < 2 * m->nt + 4 * m->nops + 1; i++)
		b.canon[i] = -1;
	b.base = xcalloc((size_t)mc->tiles, sizeof *b.base);
	b.tab = xcalloc((size_t)mc->tiles, sizeof *b.tab);
	b.frg = xcalloc((size_t)mc->tiles, sizeof *b.frg);
	b.op_tab = xcalloc((size_t)mc->tiles, sizeof *b.op_tab);
	b.op_frg = xcalloc((size_t)mc->tiles, sizeof *b.op_frg);
	b.scratch = xcalloc((size_t)(3 * mc->tiles), sizeof *b.scratch);
	b.last_use = xcalloc((size_t)m->nt, sizeof *b.last_use);
	for (int i = 0; i < m->nops; i++)
		for (int k = 0; k < m->ops[i].nin; k++)
			if (m->ops[i].in[k] >= 0)
				b.last_use[m->ops[i].in[k]] = i;

	for (int i = 0; i < m->nt; i++) {
		const MTensor *t = &m->t[i];
		PRole r = t->role == T_INPUT ? R_INPUT : t->role == T_PARAM ? R_PARAM : t->role == T_STATE ? R_STATE :
			  t->output ? R_OUTPUT : R_ACT;
		int sc = t->scale;
		if (t->dtype == FMT_FP8)
			scales_find(o->scales, t->name, &sc);
		for (int k = 0; k < m->nops; k++)       /* made on the host: an input of the program */
			if ((m->ops[k].kind == OP_PATCHIFY || m->ops[k].kind == OP_EMBED) && m->ops[k].out == i)
				r = R_INPUT;
		int pt = add_tensor(pl, t->name, r, t->rank, t->shape, t->dtype, sc);
		pl->t[pt].count = t->count;
	}
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_PARAM && !host_only(m, i))
			home(&b, i, consumed_as_b(m, i));
	int64_t top = mc->tiles;
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_STATE)
			top = state_home(&b, i, top);
	if (check_params(&b, e))
		goto out;
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_INPUT && m->t[i].rank == 3)
			canonical(&b, i);
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		int r = op->rep, first = -1, ns0 = pl->ns;
		if (r >= 0 && m->rep[r].first == i) {
			plan_carry(&b, m->rep[r].name, m->rep[r].in, m->rep[r].carry);
			first = pl->ns;
		}
		if (past_stop(stop, attempt)) {
			errf(e, "attempt %d abandoned: an earlier attempt fits", attempt);
			goto out;
		}
		if (o->progress) {
			char what[96];
			snprintf(what, sizeof what, "attempt %d: %s", attempt + 1, op->name);
			plan_progress(o, what, i + 1, m->nops);
		}
		trial_reset(&b);
		switch (op->kind) {
		case OP_MATMUL:
			if (plan_matmul(&b, op, ex ? &ex[i] : NULL, e))
				goto out;
			break;
		case OP_ATTENTION:
			if (plan_attention(&b, op, e))
				goto out;
			break;
		case OP_BROADCAST:
			plan_broadcast(&b, op);
			break;
		case OP_APPEND:
			plan_append(&b, op);
			break;
		case OP_LAST:
			plan_last(&b, op);
			break;
		case OP_EMBED: {        /* on the host: a row that data picks is no static transfer */
			Host h = { xstrdup(op->name), HOST_EMBED, op->in[0], op->out, 0, 0, op->in[1], op->transposed };
			pl->h = xrealloc(pl->h, (size_t)(pl->nh + 1) * sizeof *pl->h);
			pl->h[pl->nh++] = h;
			canonical(&b, op->out);
			break;
		}
		case OP_PATCHIFY: {
			Host h = { xstrdup(op->name), HOST_PATCHIFY, op->in[0], op->out, op->patch, op->cls, -1, 0 };
			pl->h = xrealloc(pl->h, (size_t)(pl->nh + 1) * sizeof *pl->h);
			pl->h[pl->nh++] = h;
			canonical(&b, op->out);
			break;
		}
		default:
			plan_rowlocal(&b, op);
			break;
		}
		if (first >= 0)
			b.body = first;
		/* What the op put on every tile's tables, for the ops after it. */
		if (o->objective >= OBJ_MEMORY && pl->ns > ns0 && trial_op(&b, op, ns0, e))
			goto out;
		if (r >= 0 && m->rep[r].last == i) {
			plan_carry(&b, m->rep[r].name, op->out, m->rep[r].carry);
			Repeat x = { xstrdup(m->rep[r].name), b.body, pl->ns - 1, m->rep[r].count };
			pl->r = xrealloc(pl->r, (size_t)(pl->nr + 1) * sizeof *pl->r);
			pl->r[pl->nr++] = x;
		}
	}
	if (plan_check(pl, m->file, e) || check_memory(&b, e))
		goto out;
	rc = 0;
out:
	free(b.canon);
	free(b.base);
	free(b.tab);
	free(b.frg);
	free(b.op_tab);
	free(b.op_frg);
	free(b.scratch);
	free(b.by);
	free(b.last_use);
	if (rc)
		plan_free(pl);
	return rc;
}

/* Does any activation's canonical cut split the batch (ownership batch)? */
static int batch_can_split(const Model *m, const Machine *mc)
{
	for (int i = 0; i < m->nt; i++) {
		const MTensor *t = &m->t[i];
		if (t->rank == 3 && t->shape[0] > 1 && mc->tiles / largest_uniform(t->shape[1], mc->tiles) > 1)
			return 1;
	}
	return 0;
}

/* Is a (the fit of one ownership) better than b under objective o? Fits
 * first; cycles: fewer total modelled cycles; memory (and when neither
 * fits): the most headroom on the worst tile, in steps of 1%, then the
 * smaller SRAM figure of that tile. */
static int fit_better(const Fit *a, const Fit *b, Objective o)
{
	int fa = fit_ok(a), fb = fit_ok(b);
	if (fa != fb)
		return fa;
	if (o == OBJ_CYCLES && fa && a->cycles != b->cycles)
		return a->cycles < b->cycles;
	int64_t ea = (int64_t)(a->excess * 100), eb = (int64_t)(b->excess * 100);
	if (ea != eb)
		return ea < eb;
	return a->peak + a->sram_table < b->peak + b->sram_table;
}

/* Under the cycles objective the fastest candidates sit near the limits,
 * and a trial lowers one op alone: the whole plan (phases merged across
 * ops) can pass a limit the trials did not. Then the plan is built again,
 * attempt after attempt, the least change first: with table bytes
 * priced, so that the ops the greedy order meets first leave the budget
 * to those that gain the most cycles from it, then also with each trial
 * kept margin further inside every limit (on the shipped models a margin
 * alone of up to 3% changed no choice, and prices found every fitting
 * plan). A table byte on the worst tile costs
 * price x F / table budget cycles, F the model's compute floor (lib/cost/floor.h,
 * of the first attempt's plan): at 0.3, the whole budget is worth 30% of
 * the essential compute. */
typedef struct {
	double margin, price;
} Attempt;
static const Attempt attempts[] = {
	{ 0, 0 }, { 0, 0.1 }, { 0, 0.3 }, { 0, 0.8 }, { 0.03, 0.3 }, { 0.06, 0.8 }, { 0.10, 0.8 },
};
#define NATTEMPTS (int)(sizeof attempts / sizeof *attempts)

/* One ownership's builds, attempt after attempt (a thread's work). */
typedef struct {
	const Model *m;
	const Machine *mc;
	PlanOpts o;
	int n;                          /* attempts to make */
	int explain;                    /* keep each attempt's Explain */
	Stop *stop;
	Memo *memo;                     /* trials already lowered, for the later attempts */
	int64_t floor;                  /* the first attempt's plan's compute floor */
	Plan pl[NATTEMPTS];
	Explain *ex[NATTEMPTS];
	Err e[NATTEMPTS];
	int rc[NATTEMPTS], built[NATTEMPTS];
	Fit fit[NATTEMPTS];
	double price[NATTEMPTS];        /* each attempt's table price, cycles per byte */
} Own;

int fit_ok(const Fit *f) { return f->lowered && f->excess <= 1.0; }

void plan_progress(const PlanOpts *o, const char *what, int done, int total)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	if (!o->progress)
		return;
	pthread_mutex_lock(&mu);
	o->progress(o->progress_ctx, what, done, total);
	pthread_mutex_unlock(&mu);
}

static void *own_run(void *arg)
{
	Own *w = arg;
	for (int i = 0; i < w->n; i++) {
		if (past_stop(w->stop, i))
			break;
		w->ex[i] = w->explain ? xcalloc((size_t)w->m->nops + 1, sizeof *w->ex[i]) : NULL;
		double price = attempts[i].price * (double)w->floor / (double)w->mc->table_budget_bytes;
		if (i && w->rc[0])
			price = 0;              /* no plan to take a floor from */
		w->price[i] = price;
		w->rc[i] = build_one(&w->pl[i], w->m, w->mc, &w->o, w->ex[i], attempts[i].margin, price,
				     w->memo, w->stop, i, &w->e[i]);
		if (!i && !w->rc[0]) {
			ModelFloor f;
			model_floor(&w->pl[0], &f);
			w->floor = f.compute;
		}
		if (!w->rc[i])          /* (its cycles on this thread: they rank it, and start the descent) */
			plan_fit(&w->pl[i], w->o.objective == OBJ_CYCLES ? FIT_CYCLES_IF_FITS : FIT_LIMITS, &w->fit[i]);
		w->built[i] = 1;
		if (!w->rc[i] && fit_ok(&w->fit[i])) {
			pthread_mutex_lock(&w->stop->mu);
			if (i < w->stop->stop)
				w->stop->stop = i;
			pthread_mutex_unlock(&w->stop->mu);
			break;
		}
	}
	memo_free(w->memo);
	w->memo = NULL;
	table_release();                /* this thread's rows */
	expand_release_thread();        /* and scratch */
	trial_release();                /* and phases */
	return NULL;
}

static void own_free(Own *w)
{
	for (int i = 0; i < w->n; i++) {
		if (w->built[i] && !w->rc[i])
			plan_free(&w->pl[i]);
		explain_free(w->ex[i], w->ex[i] ? w->m->nops : 0);
		free(w->ex[i]);
	}
}

/* With --ownership auto under the memory and cycles objectives, both
 * ownerships are planned and lowered whole when the batch can split (on
 * two threads), and the better kept (ties: batch). Under cycles, attempt
 * after attempt (attempts[]) until the kept plan fits: attempt i's choice
 * is the better of the two builds at i, each of which depends on its own
 * ownership's attempts alone, so each ownership runs its attempts on its
 * own thread, and both stop past the first attempt at which one fits. The fit check's verdict fails
 * the build, or with no_fit_check goes to o->fit when set. */
static int build_objective(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
			   Explain *ex, Held *held, Err *e)
{
	if (o->objective < OBJ_MEMORY) {
		PlanOpts c = *o;
		if (c.ownership == OWN_AUTO)
			c.ownership = OWN_TOKENS;
		return build_one(pl, m, mc, &c, ex, 0, 0, NULL, NULL, 0, e);
	}
	int n = o->objective == OBJ_CYCLES && (!o->no_fit_check || o->fit) ? NATTEMPTS : 1;
	int two = o->ownership == OWN_AUTO && batch_can_split(m, mc);
	Stop stop = { PTHREAD_MUTEX_INITIALIZER, NATTEMPTS };
	Own *w = xcalloc(2, sizeof *w);         /* [0]: batch (or the one ownership), [1]: tokens */
	for (int k = 0; k < 1 + two; k++) {
		w[k].m = m, w[k].mc = mc, w[k].o = *o, w[k].n = n, w[k].stop = &stop;
		w[k].explain = ex != NULL;
		w[k].memo = n > 1 ? memo_new() : NULL;
	}
	if (w[0].o.ownership == OWN_AUTO)
		w[0].o.ownership = OWN_BATCH;
	w[1].o.ownership = OWN_TOKENS;
	pthread_t th;
	int threaded = two && pthread_create(&th, NULL, own_run, &w[1]) == 0;
	own_run(&w[0]);
	if (threaded)
		pthread_join(th, NULL);
	else if (two)
		own_run(&w[1]);

	/* Attempt by attempt, as if built one after the other: both failed
	 * is the batch ownership's error; else the better kept, done when it
	 * fits. Every attempt up to the first that fits was built by both. */
	int rc = -1, mi = -1, wi = 0;
	for (int i = 0; i < n && w[0].built[i] && (!two || w[1].built[i]); i++) {
		if (w[0].rc[i] && (!two || w[1].rc[i])) {
			*e = w[0].e[i];
			mi = -1;
			break;
		}
		mi = i, wi = 0;
		if (two && (w[0].rc[i] ? !w[1].rc[i] : !w[1].rc[i] && fit_better(&w[1].fit[i], &w[0].fit[i], o->objective)))
			wi = 1;
		if (fit_ok(&w[wi].fit[i]))
			break;
	}
	if (mi >= 0) {
		Own *win = &w[wi];
		Fit fit = win->fit[mi];
		if (held)
			*held = (Held){ win->o.ownership, attempts[mi].margin, win->price[mi], fit.cycles };
		*pl = win->pl[mi];
		win->built[mi] = 0;             /* the caller's now */
		for (int i = 0; ex && i < m->nops; i++) {
			Explain x = ex[i];
			ex[i] = win->ex[mi][i], win->ex[mi][i] = x;
		}
		rc = 0;
		Err fe;
		if (fit_error(pl, m, &fit, &fe)) {
			if (!o->no_fit_check) {
				*e = fe;
				plan_free(pl);
				rc = -1;
			} else if (o->fit) {
				*o->fit = fe;
			}
		} else if (o->fit) {
			o->fit->msg[0] = 0;
		}
	}
	for (int k = 0; k < 1 + two; k++)
		own_free(&w[k]);
	free(w);
	expand_release();               /* the copies and decisions both threads kept */
	trial_forget();
	return rc;
}

/* Under cycles, the trials rank by cycles and keep only the machine's
 * limits: when no plan they lead to fits (the whole plan's tables pass
 * what the trials saw at every attempt) or none is built (no candidate
 * of an op fits), the memory objective's plan, which keeps the most
 * headroom, is built, and kept when it fits: the fastest fitting plan
 * found. Without a fit verdict (--no-fit-check and no o->fit) there is
 * nothing to fall back on. */
int plan_build(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
	       Explain *ex, Err *e)
{
	Err fit = { 0 };
	PlanOpts c = *o;
	if (o->fell_back)
		*o->fell_back = 0;
	if (o->descent)
		*o->descent = (Descent){ 0 };
	if (o->objective != OBJ_CYCLES || (o->no_fit_check && !o->fit))
		return build_objective(pl, m, mc, o, ex, NULL, e);
	c.no_fit_check = 1, c.fit = &fit;
	/* the descent's changes come with the ops' explanations */
	Explain *dex = ex ? ex : xcalloc((size_t)m->nops + 1, sizeof *dex);
	Held held;
	int crc = build_objective(pl, m, mc, &c, dex, &held, e);
	if (!crc && !fit.msg[0]) {
		plan_descend(pl, m, mc, o, &held, dex, o->descent);
		if (!ex) {
			explain_free(dex, m->nops);
			free(dex);
		}
		goto fits;
	}
	if (!ex) {
		explain_free(dex, m->nops);
		free(dex);
	}
	Plan pm;
	Err me, mfit = { 0 };
	Explain *mex = ex ? xcalloc((size_t)m->nops + 1, sizeof *mex) : NULL;
	PlanOpts mo = c;
	mo.objective = OBJ_MEMORY, mo.fit = &mfit;
	int mrc = build_objective(&pm, m, mc, &mo, mex, NULL, &me);
	/* memory's plan when it fits, or when the cycles search built none
	 * (then with its verdict); else the cycles plan with its own. Both
	 * failing: memory's error. */
	int take = !mrc && (!mfit.msg[0] || crc);
	if (take) {
		if (!crc)
			plan_free(pl);
		*pl = pm;
		for (int i = 0; ex && i < m->nops; i++) {
			Explain x = ex[i];
			ex[i] = mex[i], mex[i] = x;
		}
		fit = mfit;
		if (o->fell_back && !fit.msg[0])
			*o->fell_back = 1;
	} else if (!mrc) {
		plan_free(&pm);
	}
	explain_free(mex, mex ? m->nops : 0);
	free(mex);
	if (crc && mrc) {
		*e = me;
		return -1;
	}
	if (fit.msg[0] && !o->no_fit_check) {
		*e = fit;
		plan_free(pl);
		return -1;
	}
fits:
	if (o->fit)
		*o->fit = fit;
	return 0;
}

void explain_free(Explain *ex, int n)
{
	for (int i = 0; i < n; i++) {
		free(ex[i].op);
		free(ex[i].best);
		free(ex[i].alt);
	}
}
