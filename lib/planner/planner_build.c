/* planner_build.c: one build of the whole model: its parameters homed,
 * every op in order (planner_ops.c, planner_gemm.c), then the checks that
 * the machine holds it (planner_int.h). plan_build (planner.c) and the
 * descent (planner_descent.c) call it. */
#include "planner/planner_int.h"
#include "stage/plan_check.h"

/* Is attempt i past the first that fit (stop may be NULL)? */
int planner_past_stop(Stop *stop, int i)
{
	if (!stop)
		return 0;
	pthread_mutex_lock(&stop->mu);
	int past = i > stop->stop;
	pthread_mutex_unlock(&stop->mu);
	return past;
}

/* ---- sibling products in step ---- */

/* Two GEMMs that read the same a, one after the other in the model (q
 * and k/v, gate and up): when they have few rows (a decode step's), or
 * whatever their rows with PlanOpts.zip_all (plan_build's alternative),
 * their steps [f0, f1) and [f1, f2) are zipped run by run (the computes
 * of both, then the copies of both), so that their deliveries, partials
 * and results share exchange phases: one sync each instead of two. Each
 * keeps its own order, and a step of the second waits for any step of the
 * first it depends on. Both a's and both b's buffers are then live
 * together: with many rows a plan may then not fit (Qwen2.5-0.5B's
 * 1,024-token prefill), hence an alternative, kept when it fits and is
 * faster (its 512-token prefill: 3 phases a layer fewer). */
void planner_zip_siblings(Builder *b, const int *op_first, const int *op_end)
{
	const Model *m = b->m;
	for (int i = 0; i + 1 < m->nops; i++) {
		const MOp *p = &m->ops[i], *q = &m->ops[i + 1];
		const MTensor *a = &m->t[p->in[0]];
		/* adjacent: no repeat's carry between them (nor after: op_end) */
		if (p->kind != OP_MATMUL || q->kind != OP_MATMUL || p->in[0] != q->in[0] || p->rep != q->rep ||
		    a->rank != 3 || (!b->o->zip_all && a->shape[0] * a->shape[1] * WIDE_MIN_COLS > b->mc->tiles) ||
		    op_end[i] != op_first[i + 1])
			continue;
		planner_zip_steps(b->pl, op_first[i], op_first[i + 1], op_end[i + 1]);
		i++;            /* a pair at a time */
	}
}

/* One build; as attempt i of stop, abandoned between two ops once past
 * the first attempt that fit (its plan would not be read). */
/* b ready to build pl for m on mc: its per-tile and per-tensor records,
 * the wide tensors' classes, and pl's tensors (fp8 scales from o). */
static void builder_init(Builder *b, Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o)
{
	memset(pl, 0, sizeof *pl);
	pl->machine = *mc;
	pl->model = xstrdup(m->name);
	pl->owners_batch = o->ownership == OWN_BATCH;   /* (auto is resolved by plan_build) */
	b->canon = xmalloc((size_t)(2 * m->nt + 4 * m->nops + 1) * sizeof *b->canon);
	b->fold_pre = xmalloc((size_t)(2 * m->nt + 4 * m->nops + 1) * sizeof *b->fold_pre);
	b->fold_part = xmalloc((size_t)(2 * m->nt + 4 * m->nops + 1) * sizeof *b->fold_part);
	b->fused = xmalloc((size_t)(2 * m->nt + 4 * m->nops + 1) * sizeof *b->fused);
	for (int i = 0; i < 2 * m->nt + 4 * m->nops + 1; i++)
		b->canon[i] = b->fold_pre[i] = b->fold_part[i] = b->fused[i] = -1;
	b->base = xcalloc((size_t)mc->tiles, sizeof *b->base);
	b->tab = xcalloc((size_t)mc->tiles, sizeof *b->tab);
	b->frg = xcalloc((size_t)mc->tiles, sizeof *b->frg);
	b->op_tab = xcalloc((size_t)mc->tiles, sizeof *b->op_tab);
	b->op_frg = xcalloc((size_t)mc->tiles, sizeof *b->op_frg);
	b->scratch = xcalloc((size_t)(3 * mc->tiles), sizeof *b->scratch);
	b->last_use = xcalloc((size_t)m->nt, sizeof *b->last_use);
	for (int i = 0; i < m->nops; i++)
		for (int k = 0; k < m->ops[i].nin; k++)
			if (m->ops[i].in[k] >= 0)
				b->last_use[m->ops[i].in[k]] = i;
	b->cls = xmalloc((size_t)(m->nt + 1) * sizeof *b->cls);
	b->cls_place = xmalloc((size_t)(m->nt + 1) * sizeof *b->cls_place);
	for (int i = 0; i < m->nt; i++)
		b->cls_place[i] = -1;
	b->wunit = o->wide_unit ? o->wide_unit : WIDE_UNIT;
	b->maker_cuts = !o->wide_unit;
	b->wroot = xmalloc((size_t)(m->nt + 1) * sizeof *b->wroot);
	b->wide = planner_wide_tensors(m, mc, b->wunit, b->cls, b->wroot);
	for (int i = 0; !b->maker_cuts && i < m->nt; i++)
		b->cls[i] = -1;

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
		int pt = planner_add_tensor(pl, t->name, r, t->rank, t->shape, t->dtype, sc);
		pl->t[pt].count = t->count;
	}
}

static void builder_free(Builder *b)
{
	free(b->canon);
	free(b->wroot);
	free(b->fold_pre);
	free(b->fold_part);
	free(b->fused);
	free(b->base);
	free(b->tab);
	free(b->frg);
	free(b->op_tab);
	free(b->op_frg);
	free(b->scratch);
	free(b->by);
	free(b->last_use);
	free(b->wide);
	free(b->cls);
	free(b->cls_place);
}

/* Op i's placements, copies and steps, by its kind. */
static int plan_op(Builder *b, const Model *m, int i, Explain *ex, Err *e)
{
	Plan *pl = b->pl;
	const MOp *op = &m->ops[i];
	switch (op->kind) {
	case OP_MATMUL:
		if (plan_matmul(b, op, ex ? &ex[i] : NULL, e))
			return -1;
		break;
	case OP_ATTENTION:
		if (plan_attention(b, op, e))
			return -1;
		break;
	case OP_BROADCAST:
		plan_broadcast(b, op);
		break;
	case OP_APPEND:
		plan_append(b, op);
		break;
	case OP_LAST:
		plan_last(b, op);
		break;
	case OP_EMBED: {        /* on the host: a row that data picks is no static transfer */
		Host h = { xstrdup(op->name), HOST_EMBED, op->in[0], op->out, 0, 0, op->in[1], op->transposed };
		pl->h = xrealloc(pl->h, (size_t)(pl->nh + 1) * sizeof *pl->h);
		pl->h[pl->nh++] = h;
		planner_canonical(b, op->out);
		break;
	}
	case OP_PATCHIFY: {
		Host h = { xstrdup(op->name), HOST_PATCHIFY, op->in[0], op->out, op->patch, op->cls, -1, 0 };
		pl->h = xrealloc(pl->h, (size_t)(pl->nh + 1) * sizeof *pl->h);
		pl->h[pl->nh++] = h;
		planner_canonical(b, op->out);
		break;
	}
	default:
		plan_rowlocal(b, op);
		break;
	}
	return 0;
}

int planner_build_one(Plan *pl, const Model *m, const Machine *mc, const PlanOpts *o,
		      Explain *ex, double margin, double price, Memo *memo, Stop *stop, int attempt, Err *e)
{
	Builder b;
	int *op_first = NULL, *op_end = NULL;
	memset(&b, 0, sizeof b);
	b.pl = pl, b.m = m, b.mc = mc, b.o = o, b.body = -1, b.margin = margin;
	b.price = price, b.memo = memo, b.prefix = -1;
	int rc = -1;

	builder_init(&b, pl, m, mc, o);
	/* States first: their homes are fixed (planner_state_home), and the
	 * parameters' then go where room is left. */
	int64_t top = mc->tiles;
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_STATE)
			top = planner_state_home(&b, i, top);
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_PARAM && !planner_param_host_only(m, i))
			planner_param_home(&b, i, planner_param_consumed_as_b(m, i));
	if (planner_fit_check_params(&b, e))
		goto out;
	for (int i = 0; i < m->nt; i++)
		if (m->t[i].role == T_INPUT && m->t[i].rank == 3)
			planner_canonical(&b, i);
	op_first = xcalloc((size_t)m->nops + 1, sizeof *op_first);
	op_end = xcalloc((size_t)m->nops + 1, sizeof *op_end);
	for (int i = 0; i < m->nops; i++) {
		const MOp *op = &m->ops[i];
		int r = op->rep, first = -1, ns0 = pl->ns;
		if (r >= 0 && m->rep[r].first == i) {
			plan_carry(&b, m->rep[r].name, m->rep[r].in, m->rep[r].carry);
			first = pl->ns;
		}
		if (planner_past_stop(stop, attempt)) {
			errf(e, "attempt %d abandoned: an earlier attempt fits", attempt);
			goto out;
		}
		if (o->progress) {
			char *what = xasprintf("attempt %d: %s", attempt + 1, op->name);
			plan_progress(o, what, i + 1, m->nops);
			free(what);
		}
		planner_trial_reset(&b);
		if (plan_op(&b, m, i, ex, e))
			goto out;
		if (first >= 0)
			b.body = first;
		op_first[i] = first >= 0 ? first : ns0;
		/* What the op put on every tile's tables, for the ops after it. */
		if (o->objective >= OBJ_MEMORY && pl->ns > ns0 && planner_trial_op(&b, op, ns0, e))
			goto out;
		op_end[i] = pl->ns;             /* before a repeat's closing carry */
		if (r >= 0 && m->rep[r].last == i) {
			plan_carry(&b, m->rep[r].name, op->out, m->rep[r].carry);
			Repeat x = { xstrdup(m->rep[r].name), b.body, pl->ns - 1, m->rep[r].count };
			pl->r = xrealloc(pl->r, (size_t)(pl->nr + 1) * sizeof *pl->r);
			pl->r[pl->nr++] = x;
		}
	}
	planner_zip_siblings(&b, op_first, op_end);
	if (plan_check(pl, m->file, e) || planner_fit_check_memory(&b, e))
		goto out;
	rc = 0;
out:
	builder_free(&b);
	free(op_first);
	free(op_end);
	if (rc)
		plan_free(pl);
	return rc;
}
