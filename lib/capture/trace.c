#include "capture/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "cost/cost.h"
#include "base/json.h"
#include "cost/replay.h"
#include "stage/plan_memory.h"
#include "stage/table.h"

int trace_tiles_parse(const char *spec, int64_t tiles, char *sel, Err *e)
{
	const char *p = spec;
	memset(sel, 0, (size_t)tiles);
	if (!*p)
		return errf(e, "--trace-tiles: an empty list (give tiles such as 0-45,775)");
	for (;;) {
		char *end;
		long long a = strtoll(p, &end, 10), b;
		if (end == p || *p == '-' || *p == '+')
			return errf(e, "--trace-tiles '%s': expected a tile number at '%s'", spec, p);
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			b = strtoll(p, &end, 10);
			if (end == p || *p == '-' || *p == '+')
				return errf(e, "--trace-tiles '%s': expected a tile number at '%s'", spec, p);
			p = end;
		}
		if (a > b)
			return errf(e, "--trace-tiles '%s': the range %lld-%lld runs backwards", spec, a, b);
		if (b >= tiles)
			return errf(e, "--trace-tiles '%s': tile %lld, but the machine has %lld tiles (0 to %lld)",
				    spec, b, (long long)tiles, (long long)tiles - 1);
		memset(sel + a, 1, (size_t)(b - a + 1));
		if (!*p)
			return 0;
		if (*p != ',')
			return errf(e, "--trace-tiles '%s': expected ',' or '-' at '%s'", spec, p);
		p++;
	}
}

/* One unit of the program's order: a compute step, an exchange phase, or
 * a copy step's local copies outside every phase. */
typedef enum { U_COMPUTE, U_PHASE, U_LOCAL } UnitKind;

typedef struct {
	const Plan *pl;
	Json j;
	int64_t T, hz;
	const char *sel;
	int64_t **comp;         /* [steps]: each tile's compute cycles (compute steps) */
	int64_t **busy;         /* [phases]: 3 x tiles from phase_cycles_tiles */
	int64_t **mem;          /* [steps]: sampled tiles' live tensor bytes, by sample index */
	int64_t *table;         /* [tiles]: table bytes */
	int64_t *last_mem;      /* [samples]: the last counter value written, -1 none */
	int64_t *idx;           /* [samples]: the tiles sampled, ascending */
	int n;
	Metrics *ph, *st, sum;
	int *phase_of;
	int64_t t;              /* cycles so far */
	int64_t set_t;          /* when the compute set of the step being written began */
} Trace;

static void ts(Trace *tr, const char *key, int64_t cycles)
{
	json_key(&tr->j, key);
	json_fixed(&tr->j, tr->hz ? (double)cycles * 1e6 / (double)tr->hz : (double)cycles);
}

/* A complete slice ("X") on pid's lane. */
static void slice(Trace *tr, int64_t pid, const char *name, const char *cat, int64_t start, int64_t dur)
{
	json_open(&tr->j, '{', 1);
	json_kstr(&tr->j, "ph", "X");
	json_kint(&tr->j, "pid", pid);
	json_kint(&tr->j, "tid", 0);
	json_kstr(&tr->j, "name", name);
	json_kstr(&tr->j, "cat", cat);
	ts(tr, "ts", start);
	ts(tr, "dur", dur);
	json_key(&tr->j, "args");
	json_open(&tr->j, '{', 1);
}

static void slice_end(Trace *tr)
{
	json_close(&tr->j, '}');
	json_close(&tr->j, '}');
}

static void meta(Trace *tr, int64_t pid, const char *what, const char *key, const char *s, int64_t v)
{
	json_open(&tr->j, '{', 1);
	json_kstr(&tr->j, "ph", "M");
	json_kint(&tr->j, "pid", pid);
	json_kint(&tr->j, "tid", 0);
	json_kstr(&tr->j, "name", what);
	json_key(&tr->j, "args");
	json_open(&tr->j, '{', 1);
	if (s)
		json_kstr(&tr->j, key, s);
	else
		json_kint(&tr->j, key, v);
	json_close(&tr->j, '}');
	json_close(&tr->j, '}');
}

/* The SRAM counter of sample k at step s, written when it changes. */
static void counter(Trace *tr, int k, int s)
{
	int64_t v = tr->mem[s][k];
	if (v == tr->last_mem[k])
		return;
	tr->last_mem[k] = v;
	json_open(&tr->j, '{', 1);
	json_kstr(&tr->j, "ph", "C");
	json_kint(&tr->j, "pid", tr->idx[k] + 1);
	json_kint(&tr->j, "tid", 0);
	json_kstr(&tr->j, "name", "SRAM");
	ts(tr, "ts", tr->t);
	json_key(&tr->j, "args");
	json_open(&tr->j, '{', 1);
	json_kint(&tr->j, "tensors", v);
	json_kint(&tr->j, "tables", tr->table[tr->idx[k]]);
	json_close(&tr->j, '}');
	json_close(&tr->j, '}');
}

static void unit(Trace *tr, UnitKind k, int i, int64_t iter)
{
	const Plan *pl = tr->pl;
	char *name;             /* made to its measured length: names have none */
	int64_t T = tr->T;
	if (k == U_COMPUTE) {
		const Step *s = &pl->s[i];
		int64_t c = tr->st[i].charged_cycles, own_c = tr->st[i].compute_cycles;
		name = xasprintf("%s %s", s->op, compute_name(s->compute));
		if (tr->st[i].set == i)
			tr->set_t = tr->t;
		for (int n = 0; n < tr->n; n++)
			counter(tr, n, i);
		slice(tr, 0, name, "compute", tr->t, c);
		json_kint(&tr->j, "step", i);
		json_kint(&tr->j, "cycles", c);
		json_kint(&tr->j, "step_cycles", own_c);
		json_kint(&tr->j, "set", tr->st[i].set);
		json_kint(&tr->j, "tiles", tr->st[i].compute_tiles);
		json_kint(&tr->j, "slowest_tile", tr->st[i].worst_compute_tile);
		if (iter >= 0)
			json_kint(&tr->j, "iteration", iter);
		slice_end(tr);
		for (int n = 0; n < tr->n; n++) {
			int64_t own = tr->comp[i][tr->idx[n]];
			if (!own)
				continue;
			slice(tr, tr->idx[n] + 1, name, "compute", tr->set_t, own);
			json_kint(&tr->j, "step", i);
			json_kint(&tr->j, "cycles", own);
			json_kint(&tr->j, "step_cycles", own_c);
			slice_end(tr);
		}
		tr->t += c;
		free(name);
		return;
	}
	if (k == U_LOCAL) {
		int64_t c = tr->st[i].local_copy_cycles;
		name = xasprintf("%s local copies", pl->s[i].op);
		slice(tr, 0, name, "local", tr->t, c);
		free(name);
		json_kint(&tr->j, "step", i);
		json_kint(&tr->j, "cycles", c);
		slice_end(tr);
		tr->t += c;
		return;
	}
	const Metrics *m = &tr->ph[i];
	int64_t *b = tr->busy[i];
	for (int n = 0; n < tr->n; n++)
		counter(tr, n, pl->ph[i].first);
	slice(tr, 0, "sync", "sync", tr->t, m->sync_cycles);
	json_kint(&tr->j, "phase", i);
	json_kint(&tr->j, "cycles", m->sync_cycles);
	slice_end(tr);
	for (int n = 0; n < tr->n; n++) {
		slice(tr, tr->idx[n] + 1, "sync", "sync", tr->t, m->sync_cycles);
		json_kint(&tr->j, "phase", i);
		slice_end(tr);
	}
	tr->t += m->sync_cycles;
	name = xasprintf("phase %d: %s", i, pl->ph[i].label);
	slice(tr, 0, name, "exchange", tr->t, m->cycles);
	json_kint(&tr->j, "phase", i);
	json_kint(&tr->j, "cycles", m->cycles);
	json_kint(&tr->j, "transfers", m->transfers);
	json_kint(&tr->j, "bytes", m->bytes);
	if (iter >= 0)
		json_kint(&tr->j, "iteration", iter);
	slice_end(tr);
	for (int n = 0; n < tr->n; n++) {
		int64_t t = tr->idx[n];
		if (!b[t])
			continue;
		slice(tr, t + 1, name, "exchange", tr->t, b[t]);
		json_kint(&tr->j, "phase", i);
		json_kint(&tr->j, "send_cycles", b[T + t]);
		json_kint(&tr->j, "receive_cycles", b[2 * T + t]);
		json_kint(&tr->j, "phase_cycles", m->cycles);
		slice_end(tr);
	}
	tr->t += m->cycles;
	free(name);
	if (m->local_copy_cycles) {
		char lname[48];
		snprintf(lname, sizeof lname, "phase %d local copies", i);
		slice(tr, 0, lname, "local", tr->t, m->local_copy_cycles);
		json_kint(&tr->j, "phase", i);
		json_kint(&tr->j, "cycles", m->local_copy_cycles);
		slice_end(tr);
		tr->t += m->local_copy_cycles;
	}
}

/* Steps from..to in order, each phase at its first step. */
static void steps(Trace *tr, int from, int to, int64_t iter)
{
	const Plan *pl = tr->pl;
	for (int s = from; s <= to; s++) {
		int p = tr->phase_of[s];
		if (p >= 0) {
			if (s == pl->ph[p].first)
				unit(tr, U_PHASE, p, iter);
			if (pl->s[s].kind != STEP_COMPUTE)
				continue;
		}
		if (pl->s[s].kind == STEP_COMPUTE)
			unit(tr, U_COMPUTE, s, iter);
		else if (tr->st[s].local_copy_cycles)
			unit(tr, U_LOCAL, s, iter);
	}
}

static void sample_mem(void *ctx, int step, const int64_t *cur)
{
	Trace *tr = ctx;
	tr->mem[step] = xmalloc((size_t)(tr->n ? tr->n : 1) * sizeof **tr->mem);
	for (int k = 0; k < tr->n; k++)
		tr->mem[step][k] = cur[tr->idx[k]];
}

int trace_write(const Plan *pl, const char *sel_in, Output *out, Err *e)
{
	Trace tr;
	int64_t T = pl->machine.tiles;
	char *sel = xcalloc((size_t)T, 1);

	memset(&tr, 0, sizeof tr);
	tr.pl = pl, tr.T = T, tr.hz = pl->machine.clock_hz;
	tr.ph = xcalloc((size_t)pl->nph + 1, sizeof *tr.ph);
	tr.st = xcalloc((size_t)pl->ns + 1, sizeof *tr.st);
	capture_metrics(pl, tr.ph, tr.st, &tr.sum);
	tr.phase_of = xcalloc((size_t)pl->ns + 1, sizeof *tr.phase_of);
	for (int s = 0; s < pl->ns; s++)
		tr.phase_of[s] = -1;
	for (int p = 0; p < pl->nph; p++)
		for (int s = pl->ph[p].first; s <= pl->ph[p].last; s++)
			tr.phase_of[s] = p;
	tr.comp = xcalloc((size_t)pl->ns + 1, sizeof *tr.comp);
	for (int s = 0; s < pl->ns; s++)
		if (pl->s[s].kind == STEP_COMPUTE) {
			tr.comp[s] = xmalloc((size_t)T * sizeof **tr.comp);
			step_cycles_tiles(pl, s, tr.comp[s]);
		}
	tr.busy = xcalloc((size_t)pl->nph + 1, sizeof *tr.busy);
	for (int p = 0; p < pl->nph; p++) {
		tr.busy[p] = xmalloc(3 * (size_t)T * sizeof **tr.busy);
		phase_cycles_tiles(pl, p, tr.busy[p]);
	}
	if (sel_in) {
		memcpy(sel, sel_in, (size_t)T);
	} else {                /* tile 0, and each unit's critical tile */
		sel[0] = 1;
		for (int s = 0; s < pl->ns; s++)
			if (tr.comp[s] && tr.st[s].worst_compute_tile >= 0)
				sel[tr.st[s].worst_compute_tile] = 1;
		for (int p = 0; p < pl->nph; p++) {
			int64_t w = -1;
			for (int64_t t = 0; t < T; t++)
				if (tr.busy[p][t] && (w < 0 || tr.busy[p][t] > tr.busy[p][w]))
					w = t;
			if (w >= 0)
				sel[w] = 1;
		}
	}
	tr.idx = xmalloc((size_t)T * sizeof *tr.idx);
	for (int64_t t = 0; t < T; t++)
		if (sel[t])
			tr.idx[tr.n++] = t;
	tr.table = xcalloc((size_t)T, sizeof *tr.table);
	int64_t *frags = xcalloc((size_t)T, sizeof *frags);
	table_totals(pl, tr.table, frags, NULL);
	free(frags);
	tr.mem = xcalloc((size_t)pl->ns + 1, sizeof *tr.mem);
	plan_memory_each(pl, sample_mem, &tr);
	tr.last_mem = xmalloc((size_t)(tr.n ? tr.n : 1) * sizeof *tr.last_mem);
	for (int k = 0; k < tr.n; k++)
		tr.last_mem[k] = -1;

	Json *j = &tr.j;
	char text[48];
	json_init(j, out);
	json_open(j, '{', 0);
	json_kstr(j, "displayTimeUnit", "ns");
	json_key(j, "otherData");
	json_open(j, '{', 1);
	json_kstr(j, "format", "amp-trace");
	json_kint(j, "version", 1);
	json_kstr(j, "model", pl->model);
	json_kstr(j, "machine", pl->machine.name);
	json_kint(j, "tiles", T);
	json_kint(j, "total_cycles", tr.sum.total_cycles);
	char *time = tr.hz ? xasprintf("microseconds at %lld Hz (%s)", (long long)tr.hz, pl->machine.clock_source) :
			     xstrdup("one cycle per microsecond (the machine file has no clock)");
	json_kstr(j, "time", time);
	free(time);
	json_close(j, '}');
	json_key(j, "traceEvents");
	json_open(j, '[', 0);
	meta(&tr, 0, "process_name", "name", "program (the critical path)", 0);
	meta(&tr, 0, "process_sort_index", "sort_index", NULL, -1);
	for (int k = 0; k < tr.n; k++) {
		snprintf(text, sizeof text, "tile %lld", (long long)tr.idx[k]);
		meta(&tr, tr.idx[k] + 1, "process_name", "name", text, 0);
		meta(&tr, tr.idx[k] + 1, "process_sort_index", "sort_index", NULL, tr.idx[k]);
	}
	for (int s = 0; s < pl->ns;) {
		int r = plan_repeat_of(pl, s);
		if (r < 0) {
			steps(&tr, s, s, -1);
			s++;
			continue;
		}
		for (int64_t i = 0; i < pl->r[r].count; i++)
			steps(&tr, pl->r[r].first, pl->r[r].last, i);
		s = pl->r[r].last + 1;
	}
	json_close(j, ']');
	json_close(j, '}');
	int rc = json_end(j, e);

	for (int s = 0; s <= pl->ns; s++)
		free(tr.comp[s]), free(tr.mem[s]);
	for (int p = 0; p <= pl->nph; p++)
		free(tr.busy[p]);
	free(tr.comp), free(tr.mem), free(tr.busy), free(tr.ph), free(tr.st), free(tr.phase_of);
	free(tr.idx), free(tr.table), free(tr.last_mem), free(sel);
	return rc;
}
