#include "capture/capture.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "cost/bound.h"
#include "cost/floor.h"
#include "base/json.h"
#include "cost/replay.h"
#include "stage/plan_memory.h"
#include "stage/table.h"

/* One pass over a phase's rows: its largest row and fragment count, and
 * the rows of the tiles with the largest tables and fragment totals. */
typedef struct {
	Metrics *m;
	int64_t table_tile, frag_tile;
	int64_t best_bytes, best_frags;
	int phase, best_bphase, best_fphase;
} RowScan;

static void scan_row(RowScan *r, int64_t t, int64_t b, int64_t n)
{
	if (b > r->m->max_row_bytes)
		r->m->max_row_bytes = b;
	if (n > r->m->max_fragments)
		r->m->max_fragments = n;
	if (t == r->table_tile && b > r->best_bytes)
		r->best_bytes = b, r->best_bphase = r->phase;
	if (t == r->frag_tile && n > r->best_frags)
		r->best_frags = n, r->best_fphase = r->phase;
}

static int count_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt,
			int64_t da)
{
	Metrics *mt = ctx;
	(void)m, (void)st, (void)sa, (void)dt, (void)da;
	mt->transfers++;
	mt->bytes += x->len;
	return 0;
}

/* The phase holding each step, -1 for compute steps and copy steps that
 * move nothing between tiles. */
static int *step_phases(const Plan *pl)
{
	int *of = xcalloc((size_t)pl->ns + 1, sizeof *of);
	for (int s = 0; s < pl->ns; s++)
		of[s] = -1;
	for (int p = 0; p < pl->nph; p++)
		for (int s = pl->ph[p].first; s <= pl->ph[p].last; s++)
			of[s] = p;
	return of;
}

/* Compute steps cost their slowest tile; a copy step in no phase costs
 * its local copies (a phase's are in its own figures). */
static void step_metrics(const Plan *pl, const int *phase_of, Metrics *st)
{
	char *local = xcalloc((size_t)pl->ns + 1, 1);
	for (int i = 0; i < pl->nx; i++)
		local[pl->x[i].step] |= pl->x[i].kind == X_LOCAL;
	for (int s = 0; s < pl->ns; s++) {
		Metrics *m = &st[s];
		memset(m, 0, sizeof *m);
		m->count = plan_step_count(pl, s);       /* a repeat body's step runs count times */
		if (pl->s[s].kind == STEP_COMPUTE) {
			m->compute_cycles = step_cycles(pl, s, &m->worst_compute_tile);
			m->compute_tiles = step_tiles(pl, s);
		} else {
			m->worst_compute_tile = -1;
			if (phase_of[s] < 0 && local[s])
				m->local_copy_cycles = local_copy_cycles(pl, s, s, NULL);
		}
		m->total_cycles = m->compute_cycles + m->local_copy_cycles;
	}
	int *lead = xcalloc((size_t)pl->ns + 1, sizeof *lead);
	int64_t *own = xcalloc((size_t)pl->ns + 1, 8), *ch = xcalloc((size_t)pl->ns + 1, 8);
	compute_sets(pl, 0, pl->ns - 1, lead);
	for (int s = 0; s < pl->ns; s++)
		own[s] = st[s].compute_cycles;
	compute_charge(lead, own, 0, pl->ns - 1, ch);
	for (int s = 0; s < pl->ns; s++) {
		st[s].set = lead[s];
		st[s].charged_cycles = ch[s];
		st[s].total_cycles = ch[s] + st[s].local_copy_cycles;
	}
	free(lead), free(own), free(ch);
	free(local);
}

/* Adds the cycles of a step or phase, count times. */
static void add_cycles(Metrics *sum, const Metrics *m)
{
	sum->compute_cycles += m->charged_cycles * m->count;
	sum->cycles += m->cycles * m->count;
	sum->sync_cycles += m->sync_cycles * m->count;
	sum->local_copy_cycles += m->local_copy_cycles * m->count;
	sum->total_cycles += m->total_cycles * m->count;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

void capture_metrics(const Plan *pl, Metrics *ph, Metrics *st, Metrics *sum)
{
	capture_metrics_tiles(pl, ph, st, sum, NULL, NULL, NULL);
}

void capture_metrics_tiles(const Plan *pl, Metrics *ph, Metrics *st, Metrics *sum, int64_t *table_out,
			   int64_t *peak_out, int *peak_step_out)
{
	int64_t T = pl->machine.tiles;
	int64_t *table = xcalloc((size_t)T, 8), *frags = xcalloc((size_t)T, 8);
	Metrics *own = st ? NULL : xcalloc((size_t)pl->ns + 1, sizeof *own);
	int *phase_of = step_phases(pl);

	memset(sum, 0, sizeof *sum);
	sum->count = 1;
	sum->worst_compute_tile = -1;
	table_totals(pl, table, frags, NULL);
	int64_t *peak = xcalloc((size_t)T, sizeof *peak);
	int *peak_step = xcalloc((size_t)T, sizeof *peak_step);
	sum->max_tensor_bytes = plan_memory(pl, peak, peak_step, NULL, &sum->worst_tensor_tile,
					    &sum->worst_tensor_step);
	for (int64_t t = 0; t < T; t++) {
		if (table[t] > sum->max_table_bytes)
			sum->max_table_bytes = table[t], sum->worst_table_tile = t;
		if (frags[t] > sum->max_fragments)
			sum->max_fragments = frags[t], sum->worst_fragment_tile = t;
		if (peak[t] + table[t] > sum->max_sram_bytes)
			sum->max_sram_bytes = peak[t] + table[t], sum->worst_sram_tile = t;
	}
	int64_t *sorted = xmalloc((size_t)T * sizeof *sorted);
	memcpy(sorted, table, (size_t)T * sizeof *sorted);
	qsort(sorted, (size_t)T, sizeof *sorted, cmp_i64);
	sum->median_table_bytes = T % 2 ? sorted[T / 2] : (sorted[T / 2 - 1] + sorted[T / 2]) / 2;
	free(sorted);
	if (table_out)
		memcpy(table_out, table, (size_t)T * sizeof *table);
	if (peak_out)
		memcpy(peak_out, peak, (size_t)T * sizeof *peak);
	if (peak_step_out)
		memcpy(peak_step_out, peak_step, (size_t)T * sizeof *peak_step);
	free(peak);
	free(peak_step);
	RowScan rs = { NULL, sum->worst_table_tile, sum->worst_fragment_tile, -1, -1, 0, 0, 0 };
	int64_t *rt = xmalloc((size_t)T * sizeof *rt), *rb = xmalloc((size_t)T * sizeof *rb);
	int64_t *rf = xmalloc((size_t)T * sizeof *rf);
	for (int p = 0; p < pl->nph; p++) {
		Metrics *m = &ph[p];
		memset(m, 0, sizeof *m);
		m->count = plan_step_count(pl, pl->ph[p].first);
		m->phases = 1;
		m->worst_compute_tile = -1;
		for (int i = 0; i < pl->nx; i++) {
			const Xfer *x = &pl->x[i];
			if (x->kind == X_SEND && x->step >= pl->ph[p].first && x->step <= pl->ph[p].last)
				xfer_each(x, T, count_member, m);
		}
		rs.m = m;
		rs.phase = p;
		for (int64_t k = 0, n = phase_row_list(pl, p, rt, rb, rf, NULL); k < n; k++)
			scan_row(&rs, rt[k], rb[k], rf[k]);     /* the rows' sizes, not the rows */
		m->cycles = phase_cycles(pl, p);
		m->sync_cycles = pl->machine.sync_cycles;
		m->local_copy_cycles = local_copy_cycles(pl, pl->ph[p].first, pl->ph[p].last, NULL);
		m->total_cycles = m->cycles + m->sync_cycles + m->local_copy_cycles;
		sum->phases += m->count;
		sum->transfers += m->transfers * m->count;
		sum->bytes += m->bytes * m->count;
		add_cycles(sum, m);
		if (m->max_row_bytes > sum->max_row_bytes)
			sum->max_row_bytes = m->max_row_bytes;
	}
	if (!st)
		st = own;
	step_metrics(pl, phase_of, st);
	for (int s = 0; s < pl->ns; s++)
		add_cycles(sum, &st[s]);
	sum->worst_table_phase = rs.best_bphase;
	sum->worst_fragment_phase = rs.best_fphase;
	free(rt), free(rb), free(rf);
	free(table);
	free(frags);
	free(own);
	free(phase_of);
}

/* ---- per op ---- */

typedef struct {
	const char *op;
	Metrics m;
} OpCost;

static OpCost *op_find(OpCost *ops, int *n, const char *name)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(ops[i].op, name))
			return &ops[i];
	memset(&ops[*n], 0, sizeof ops[*n]);
	ops[*n].op = name;
	ops[*n].m.count = 1;
	return &ops[(*n)++];
}

/* Adds v to the Metrics field at offset `field` of ops who[n], split by
 * weights w[n]: floor shares, the remainder to the heaviest (the first
 * among equals), so the shares add up to v. */
static void split(int64_t v, OpCost **who, const int64_t *w, int n, size_t field)
{
	int64_t total = 0, given = 0;
	int heavy = 0;
	for (int i = 0; i < n; i++) {
		total += w[i];
		if (w[i] > w[heavy])
			heavy = i;
	}
	for (int i = 0; i < n; i++)
		given += total ? v * w[i] / total : 0;
	for (int i = 0; i < n; i++) {
		int64_t part = (total ? v * w[i] / total : 0) + (i == heavy ? v - given : 0);
		*(int64_t *)((char *)&who[i]->m + field) += part;
	}
}

/* Cycles by op, in order of first appearance: each compute step and each
 * copy step outside phases to its op; a phase's exchange, sync and local
 * copy cycles to the ops of its copy steps, split by the bytes each op's
 * steps move in it (sent, each send once, and copied locally). Returns
 * the number of ops in ops[pl->ns]. */
static int op_metrics(const Plan *pl, const Metrics *ph, const Metrics *st, OpCost *ops)
{
	int n = 0;
	int64_t *bytes = xcalloc((size_t)pl->ns + 1, sizeof *bytes);
	int64_t *w = xcalloc((size_t)pl->ns + 1, sizeof *w);
	OpCost **who = xcalloc((size_t)pl->ns + 1, sizeof *who);

	for (int i = 0; i < pl->nx; i++)
		if (pl->x[i].kind != X_ZERO)
			bytes[pl->x[i].step] += pl->x[i].len * xfer_members(&pl->x[i]);
	for (int s = 0; s < pl->ns; s++) {
		Metrics *m = &op_find(ops, &n, pl->s[s].op)->m;
		m->compute_cycles += st[s].charged_cycles * st[s].count;
		m->local_copy_cycles += st[s].local_copy_cycles * st[s].count;
	}
	for (int p = 0; p < pl->nph; p++) {
		int k = 0;
		for (int s = pl->ph[p].first; s <= pl->ph[p].last; s++) {
			OpCost *o = op_find(ops, &n, pl->s[s].op);
			int i = 0;
			while (i < k && who[i] != o)
				i++;
			if (i == k)
				who[k] = o, w[k++] = 0;
			w[i] += bytes[s];
		}
		split(ph[p].cycles * ph[p].count, who, w, k, offsetof(Metrics, cycles));
		split(ph[p].sync_cycles * ph[p].count, who, w, k, offsetof(Metrics, sync_cycles));
		split(ph[p].local_copy_cycles * ph[p].count, who, w, k, offsetof(Metrics, local_copy_cycles));
	}
	for (int i = 0; i < n; i++) {
		Metrics *m = &ops[i].m;
		m->total_cycles = m->compute_cycles + m->cycles + m->sync_cycles + m->local_copy_cycles;
	}
	free(bytes);
	free(w);
	free(who);
	return n;
}

/* ---- movement classes ---- */

typedef struct {
	int64_t sends, src_payload, rcv_payload, replication;
	int64_t lens[64], counts[64];
	int nlens;
	unsigned char *src_seen, *rcv_seen;
	int64_t src_tiles, rcv_tiles, tiles;
} Class;

static int class_member(void *ctx, const Xfer *x, int64_t m, int64_t st, int64_t sa, int64_t dt,
			int64_t da)
{
	Class *c = ctx;
	(void)m, (void)sa, (void)da;
	c->sends++;
	c->src_payload += x->len;
	c->rcv_payload += x->len * x->nrecv;
	if (x->nrecv > c->replication)
		c->replication = x->nrecv;
	int k;
	for (k = 0; k < c->nlens && c->lens[k] != x->len; k++)
		;
	if (k == c->nlens && k < 64)
		c->lens[c->nlens++] = x->len, c->counts[k] = 0;
	if (k < 64)
		c->counts[k]++;
	if (!c->src_seen[st])
		c->src_seen[st] = 1, c->src_tiles++;
	for (int64_t j = 0; j < x->nrecv; j++) {
		int64_t t = tile_mod(dt + j * x->recv_step, c->tiles);
		if (!c->rcv_seen[t])
			c->rcv_seen[t] = 1, c->rcv_tiles++;
	}
	return 0;
}

static void shard_dims(Json *j, const char *key, const Placement *p)
{
	json_key(j, key);
	json_open(j, '[', 1);
	for (int a = 0; a < p->rank; a++)
		json_int(j, place_extent(p, a, 0));
	json_close(j, ']');
}

static void write_class(Json *j, const Plan *pl, int step)
{
	const Step *s = &pl->s[step];
	const Placement *S = &pl->p[s->src], *D = &pl->p[s->dst];
	int64_t T = pl->machine.tiles;
	Class c;

	memset(&c, 0, sizeof c);
	c.tiles = T;
	c.src_seen = xcalloc((size_t)T, 1);
	c.rcv_seen = xcalloc((size_t)T, 1);
	for (int i = 0; i < pl->nx; i++)
		if (pl->x[i].step == step && pl->x[i].kind == X_SEND)
			xfer_each(&pl->x[i], T, class_member, &c);
	/* send_bytes keys ascend */
	for (int a = 1; a < c.nlens; a++)
		for (int b = a; b > 0 && c.lens[b - 1] > c.lens[b]; b--) {
			int64_t t = c.lens[b]; c.lens[b] = c.lens[b - 1]; c.lens[b - 1] = t;
			t = c.counts[b]; c.counts[b] = c.counts[b - 1]; c.counts[b - 1] = t;
		}
	json_open(j, '{', 1);
	json_kstr(j, "op", s->op);
	json_kstr(j, "operand", operand_name(s->operand));
	json_kstr(j, "tensor", pl->t[S->tensor].name);
	json_kstr(j, "movement", movement_name(s->move));
	json_kstr(j, "src_format", fmt_name(S->fmt));
	json_kstr(j, "src_layout", layout_name(S->layout));
	json_kstr(j, "dst_format", fmt_name(D->fmt));
	json_kstr(j, "dst_layout", layout_name(D->layout));
	shard_dims(j, "src_shard", S);
	shard_dims(j, "dst_view", D);
	json_kint(j, "sends", c.sends);
	json_key(j, "send_bytes");
	json_open(j, '{', 1);
	for (int k = 0; k < c.nlens; k++) {
		char b[32];
		snprintf(b, sizeof b, "%lld", (long long)c.lens[k]);
		json_kint(j, b, c.counts[k]);
	}
	json_close(j, '}');
	json_kint(j, "source_payload_bytes", c.src_payload);
	json_kint(j, "receiver_payload_bytes", c.rcv_payload);
	json_kint(j, "replication", c.replication);
	json_kint(j, "source_tiles", c.src_tiles);
	json_kint(j, "receiver_tiles", c.rcv_tiles);
	json_kstr(j, "src", S->name);
	json_kstr(j, "dst", D->name);
	json_kint(j, "step", step);
	json_close(j, '}');
	free(c.src_seen);
	free(c.rcv_seen);
}

static void write_metrics(Json *j, const Metrics *m, int summary)
{
	if (summary)
		json_kint(j, "phases", m->phases);
	else
		json_kint(j, "count", m->count);
	json_kint(j, "transfers", m->transfers);
	json_kint(j, "bytes", m->bytes);
	json_kint(j, "max_row_bytes", m->max_row_bytes);
	if (summary) {
		json_kint(j, "max_table_bytes", m->max_table_bytes);
		json_kint(j, "max_table_tile", m->worst_table_tile);
		json_kint(j, "max_table_phase", m->worst_table_phase);
		json_kint(j, "median_table_bytes", m->median_table_bytes);
	}
	json_kint(j, "max_fragments", m->max_fragments);
	if (summary) {
		json_kint(j, "max_fragments_tile", m->worst_fragment_tile);
		json_kint(j, "max_fragments_phase", m->worst_fragment_phase);
		json_kint(j, "max_tensor_bytes", m->max_tensor_bytes);
		json_kint(j, "max_tensor_tile", m->worst_tensor_tile);
		json_kint(j, "max_tensor_step", m->worst_tensor_step);
		json_kint(j, "max_sram_bytes", m->max_sram_bytes);
		json_kint(j, "max_sram_tile", m->worst_sram_tile);
	}
	json_kint(j, summary ? "exchange_cycles" : "cycles", m->cycles);
	if (summary)
		json_kint(j, "sync_cycles", m->sync_cycles);
	json_kint(j, "local_copy_cycles", m->local_copy_cycles);
	if (summary) {
		json_kint(j, "compute_cycles", m->compute_cycles);
		json_kint(j, "total_cycles", m->total_cycles);
		json_kint(j, "exchange_floor_cycles", m->floor_cycles);
		json_kratio(j, "exchange_floor_ratio", m->cycles, m->floor_cycles);
	} else {
		json_kint(j, "floor_cycles", m->floor_cycles);
		json_kint(j, "floor_tile", m->floor_tile);
		json_kratio(j, "floor_ratio", m->cycles, m->floor_cycles);
	}
}

/* The phases' floors into ph[] and their sum x count into sum, and the
 * plan's movement floor (lib/cost/floor.h). */
static void floors(const Plan *pl, Metrics *ph, Metrics *sum, PlanFloor *mf)
{
	int64_t *c = xcalloc((size_t)pl->nph + 1, sizeof *c), *t = xcalloc((size_t)pl->nph + 1, sizeof *t);
	phase_floors(pl, c, t);
	sum->floor_cycles = 0;
	for (int p = 0; p < pl->nph; p++) {
		ph[p].floor_cycles = c[p], ph[p].floor_tile = t[p];
		sum->floor_cycles += c[p] * ph[p].count;
	}
	free(c);
	free(t);
	plan_movement_floor(pl, mf);
}

static void write_ops(Json *j, const Plan *pl, const Metrics *ph, const Metrics *st)
{
	OpCost *ops = xcalloc((size_t)pl->ns + 1, sizeof *ops);
	int n = op_metrics(pl, ph, st, ops);

	json_key(j, "ops");
	json_open(j, '[', 0);
	for (int i = 0; i < n; i++) {
		const Metrics *m = &ops[i].m;
		json_open(j, '{', 1);
		json_kstr(j, "op", ops[i].op);
		json_kint(j, "compute_cycles", m->compute_cycles);
		json_kint(j, "exchange_cycles", m->cycles);
		json_kint(j, "sync_cycles", m->sync_cycles);
		json_kint(j, "local_copy_cycles", m->local_copy_cycles);
		json_kint(j, "total_cycles", m->total_cycles);
		json_close(j, '}');
	}
	json_close(j, ']');
	free(ops);
}

static void write_compute(Json *j, const Plan *pl, const Metrics *st)
{
	json_key(j, "compute");
	json_open(j, '[', 0);
	for (int s = 0; s < pl->ns; s++) {
		if (pl->s[s].kind != STEP_COMPUTE)
			continue;
		json_open(j, '{', 1);
		json_kint(j, "step", s);
		json_kstr(j, "op", pl->s[s].op);
		json_kstr(j, "compute", compute_name(pl->s[s].compute));
		json_kint(j, "count", st[s].count);
		json_kint(j, "tiles", st[s].compute_tiles);
		json_kint(j, "slowest_tile", st[s].worst_compute_tile);
		json_kint(j, "cycles", st[s].compute_cycles);
		json_kint(j, "set", st[s].set);
		json_kint(j, "charged_cycles", st[s].charged_cycles);
		json_close(j, '}');
	}
	json_close(j, ']');
}

/* What one run of the program serves: tokens (the elements of its first
 * int32 input: token ids or positions, one per token) or else images (its
 * first input's leading dimension). 0 when it has no input. */
static int64_t run_items(const Plan *pl, const char **unit)
{
	int first = -1;
	for (int t = 0; t < pl->nt; t++) {
		if (pl->t[t].role != R_INPUT)
			continue;
		if (pl->t[t].fmt == FMT_I32) {
			int64_t n = 1;
			*unit = "tokens/s";
			for (int d = 0; d < pl->t[t].rank; d++)
				n *= pl->t[t].shape[d];
			return n;
		}
		if (first < 0)
			first = t;
	}
	*unit = "images/s";
	return first < 0 ? 0 : pl->t[first].shape[0];
}

/* The summary's time at the machine's clock: microseconds per run and
 * the throughput; null when the machine file has no clock. */
static void write_time(Json *j, const Plan *pl, const Metrics *sum)
{
	int64_t hz = pl->machine.clock_hz, cyc = sum->total_cycles;
	const char *unit;
	int64_t items = run_items(pl, &unit);
	json_key(j, "microseconds");
	if (hz && cyc <= INT64_MAX / 1000000)
		json_ratio(j, cyc * 1000000, hz);
	else
		json_null(j);
	json_key(j, "throughput");
	if (!hz || !items || !cyc || items > INT64_MAX / hz) {
		json_null(j);
		return;
	}
	json_open(j, '{', 1);
	json_kstr(j, "unit", unit);
	json_kint(j, "items", items);
	json_kratio(j, "per_second", items * hz, cyc);
	json_close(j, '}');
}

int capture_write(const Plan *pl, Output *out, Err *e)
{
	const Machine *mc = &pl->machine;
	Metrics *ph = xcalloc((size_t)pl->nph + 1, sizeof *ph), sum;
	Metrics *st = xcalloc((size_t)pl->ns + 1, sizeof *st);
	PlanFloor mf;
	ModelBound bd;
	Json j;

	capture_metrics(pl, ph, st, &sum);
	floors(pl, ph, &sum, &mf);
	model_bound(pl, &bd);
	json_init(&j, out);
	json_open(&j, '{', 0);
	json_kstr(&j, "format", "amp-capture");
	json_kint(&j, "version", CAPTURE_VERSION);
	json_kstr(&j, "model", pl->model);
	json_key(&j, "machine");
	json_open(&j, '{', 1);
	json_kstr(&j, "name", mc->name);
	json_kint(&j, "tiles", mc->tiles);
	json_kint(&j, "exchange_bytes_per_cycle", mc->exchange_bytes_per_cycle);
	json_kint(&j, "sync_cycles", mc->sync_cycles);
	json_kint(&j, "send_control_cycles", mc->send_control_cycles);
	json_kint(&j, "receive_control_cycles", mc->receive_control_cycles);
	json_kint(&j, "max_transfer_bytes", mc->max_transfer_bytes);
	json_kint(&j, "available_bytes", machine_avail(mc));
	json_kint(&j, "table_budget_bytes", mc->table_budget_bytes);
	json_kint(&j, "fragment_limit", mc->fragment_limit);
	json_kint(&j, "local_copy_bytes_per_cycle", mc->local_copy_bytes_per_cycle);
	json_kint(&j, "matmul_call_cycles", mc->matmul_call_cycles);
	json_kint(&j, "elementwise_cycles_per_element", mc->elementwise_cycles_per_element);
	json_kint(&j, "reduction_cycles_per_element", mc->reduction_cycles_per_element);
	json_key(&j, "amp_macs_per_cycle");
	json_open(&j, '{', 1);
	json_kint(&j, "fp16", mc->macs_fp16);
	json_kint(&j, "fp8", mc->macs_fp8);
	json_close(&j, '}');
	json_key(&j, "clock_hz");
	if (mc->clock_hz)
		json_int(&j, mc->clock_hz);
	else
		json_null(&j);
	json_key(&j, "clock_source");
	if (mc->clock_hz)
		json_str(&j, mc->clock_source);
	else
		json_null(&j);
	json_close(&j, '}');
	json_key(&j, "provenance");
	json_open(&j, '[', 0);
	for (int i = 0; i < pl->nprov; i++) {
		const Prov *pr = &pl->prov[i];
		json_open(&j, '{', 1);
		json_kstr(&j, "tool", pr->tool);
		json_kstr(&j, "version", pr->version);
		json_kstr(&j, "options", pr->options);
		json_key(&j, "files");
		json_open(&j, '[', 1);
		for (int k = 0; k < pr->nf; k++) {
			char hex[17];
			prov_hex(pr->f[k].fnv1a, hex);
			json_open(&j, '{', 1);
			json_kstr(&j, "role", pr->f[k].role);
			json_kstr(&j, "name", pr->f[k].name);
			json_kstr(&j, "fnv1a", hex);
			json_close(&j, '}');
		}
		json_close(&j, ']');
		json_close(&j, '}');
	}
	json_close(&j, ']');
	json_key(&j, "summary");
	json_open(&j, '{', 1);
	write_metrics(&j, &sum, 1);
	json_key(&j, "bound");
	json_open(&j, '{', 1);
	json_kint(&j, "bound_compute_cycles", bd.compute);
	json_kint(&j, "bound_calls_cycles", bd.calls);
	json_kint(&j, "bound_sync_cycles", bd.sync);
	json_kint(&j, "bound_movement_cycles", bd.movement);
	json_kint(&j, "bound_cycles", bd.total);
	json_kint(&j, "bound_products", bd.products);
	json_kint(&j, "bound_syncs", bd.syncs);
	json_kint(&j, "bound_spread_products", bd.spread);
	json_kratio(&j, "ratio", sum.total_cycles, bd.total);
	json_close(&j, '}');
	json_key(&j, "plan_floor");
	json_open(&j, '{', 1);
	json_kint(&j, "compute_floor_cycles", mf.compute);
	json_kint(&j, "movement_floor_cycles", mf.movement);
	json_kint(&j, "sync_floor_cycles", mf.sync);
	json_kint(&j, "total_floor_cycles", mf.total);
	json_kratio(&j, "ratio", sum.total_cycles, mf.total);
	json_close(&j, '}');
	write_time(&j, pl, &sum);
	json_close(&j, '}');
	write_ops(&j, pl, ph, st);
	write_compute(&j, pl, st);
	capture_memory_write(&j, pl, &sum);
	json_key(&j, "phases");
	json_open(&j, '[', 0);
	for (int p = 0; p < pl->nph; p++) {
		json_open(&j, '{', 1);
		json_kint(&j, "id", p);
		json_key(&j, "labels");
		json_open(&j, '[', 1);
		char *l = xstrdup(pl->ph[p].label), *save = NULL;
		for (char *tok = strtok_r(l, "+", &save); tok; tok = strtok_r(NULL, "+", &save))
			json_str(&j, tok);
		free(l);
		json_close(&j, ']');
		json_key(&j, "steps");
		json_open(&j, '[', 1);
		json_int(&j, pl->ph[p].first);
		json_int(&j, pl->ph[p].last);
		json_close(&j, ']');
		write_metrics(&j, &ph[p], 0);
		json_close(&j, '}');
	}
	json_close(&j, ']');
	json_key(&j, "phase_traffic");
	json_open(&j, '{', 0);
	for (int p = 0; p < pl->nph; p++) {
		char id[16];
		snprintf(id, sizeof id, "%d", p);
		json_key(&j, id);
		json_open(&j, '[', 0);
		for (int s = pl->ph[p].first; s <= pl->ph[p].last; s++) {
			int sends = 0;
			for (int i = 0; i < pl->nx && !sends; i++)
				sends = pl->x[i].step == s && pl->x[i].kind == X_SEND;
			if (sends)
				write_class(&j, pl, s);
		}
		json_close(&j, ']');
	}
	json_close(&j, '}');
	json_close(&j, '}');
	free(ph);
	free(st);
	return json_end(&j, e);
}
