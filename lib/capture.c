#include "capture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "replay.h"
#include "table.h"

/* One pass over a phase's rows: its largest row and fragment count, and
 * the rows of the tiles with the largest tables and fragment totals. */
typedef struct {
	Metrics *m;
	int64_t table_tile, frag_tile;
	int64_t best_bytes, best_frags;
	int phase, best_bphase, best_fphase;
} RowScan;

static int scan_row(void *ctx, int64_t t, const Instr *ins, int n)
{
	RowScan *r = ctx;
	int64_t b = row_bytes(ins, n);
	if (b > r->m->max_row_bytes)
		r->m->max_row_bytes = b;
	if (n > r->m->max_fragments)
		r->m->max_fragments = n;
	if (t == r->table_tile && b > r->best_bytes)
		r->best_bytes = b, r->best_bphase = r->phase;
	if (t == r->frag_tile && n > r->best_frags)
		r->best_frags = n, r->best_fphase = r->phase;
	return 0;
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

void capture_metrics(const Plan *pl, Metrics *ph, Metrics *sum)
{
	int64_t T = pl->machine.tiles;
	int64_t *table = xcalloc((size_t)T, 8), *frags = xcalloc((size_t)T, 8);

	memset(sum, 0, sizeof *sum);
	table_totals(pl, table, frags, NULL);
	for (int64_t t = 0; t < T; t++) {
		if (table[t] > sum->max_table_bytes)
			sum->max_table_bytes = table[t], sum->worst_table_tile = t;
		if (frags[t] > sum->max_fragments)
			sum->max_fragments = frags[t], sum->worst_fragment_tile = t;
	}
	RowScan rs = { NULL, sum->worst_table_tile, sum->worst_fragment_tile, -1, -1, 0, 0, 0 };
	for (int p = 0; p < pl->nph; p++) {
		Metrics *m = &ph[p];
		memset(m, 0, sizeof *m);
		m->phases = 1;
		for (int i = 0; i < pl->nx; i++) {
			const Xfer *x = &pl->x[i];
			if (x->kind == X_SEND && x->step >= pl->ph[p].first && x->step <= pl->ph[p].last)
				xfer_each(x, T, count_member, m);
		}
		rs.m = m;
		rs.phase = p;
		phase_rows(pl, p, scan_row, &rs);
		m->cycles = phase_cycles(pl, p);
		m->sync_cycles = pl->machine.sync_cycles;
		sum->phases++;
		sum->transfers += m->transfers;
		sum->bytes += m->bytes;
		sum->cycles += m->cycles;
		sum->sync_cycles += m->sync_cycles;
		if (m->max_row_bytes > sum->max_row_bytes)
			sum->max_row_bytes = m->max_row_bytes;
	}
	sum->worst_table_phase = rs.best_bphase;
	sum->worst_fragment_phase = rs.best_fphase;
	free(table);
	free(frags);
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
	json_kint(j, "transfers", m->transfers);
	json_kint(j, "bytes", m->bytes);
	json_kint(j, "max_row_bytes", m->max_row_bytes);
	if (summary)
		json_kint(j, "max_table_bytes", m->max_table_bytes);
	json_kint(j, "max_fragments", m->max_fragments);
	json_kint(j, summary ? "exchange_cycles" : "cycles", m->cycles);
	if (summary)
		json_kint(j, "sync_cycles", m->sync_cycles);
}

int capture_write(const Plan *pl, Output *out, Err *e)
{
	const Machine *mc = &pl->machine;
	Metrics *ph = xcalloc((size_t)pl->nph + 1, sizeof *ph), sum;
	Json j;

	capture_metrics(pl, ph, &sum);
	json_init(&j, out);
	json_open(&j, '{', 0);
	json_kstr(&j, "format", "amp-capture");
	json_kint(&j, "version", 1);
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
	json_kint(&j, "table_budget_bytes", mc->table_budget_bytes);
	json_kint(&j, "fragment_limit", mc->fragment_limit);
	json_close(&j, '}');
	json_key(&j, "summary");
	json_open(&j, '{', 1);
	write_metrics(&j, &sum, 1);
	json_close(&j, '}');
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
	return json_end(&j, e);
}
