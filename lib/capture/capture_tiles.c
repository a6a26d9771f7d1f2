/* capture_tiles: amp-capture --tiles, the per-tile figures as TSV
 * (capture.h; formats/capture.md, "Per tile"). */
#include "capture/capture.h"

#include <stdlib.h>

#include "cost/replay.h"
#include "stage/table.h"

typedef struct {
	Output *out;
	Err *e;
	int failed, phase;
	int64_t count;
	int64_t *sent, *recv;   /* per tile, over every run of every phase */
	int64_t *busy;          /* the phase's replay per tile (phase_cycles_tiles) */
} TilesOut;

/* One phase row of a tile: its sends' and receives' bytes and count. */
static void row_sums(const Instr *ins, int n, int64_t *sent, int64_t *recv)
{
	*sent = *recv = 0;
	for (int i = 0; i < n; i++)
		*(ins[i].kind == I_SEND ? sent : recv) += ins[i].len;
}

static int tiles_sum(void *ctx, int64_t tile, const Instr *ins, int n)
{
	TilesOut *t = ctx;
	int64_t s, r;
	row_sums(ins, n, &s, &r);
	t->sent[tile] += s * t->count, t->recv[tile] += r * t->count;
	return 0;
}

static int tiles_row(void *ctx, int64_t tile, const Instr *ins, int n)
{
	TilesOut *t = ctx;
	int64_t s, r;
	row_sums(ins, n, &s, &r);
	if (!t->failed)
		t->failed = output_printf(t->out, t->e, "%lld\t%d\t%lld\t%lld\t%d\t%lld\t-\t%lld\n", (long long)tile,
					  t->phase, (long long)s, (long long)r, n, (long long)row_bytes(ins, n),
					  (long long)t->busy[tile]);
	return t->failed;
}

int capture_tiles_write(const Plan *pl, Output *out, Err *e)
{
	int64_t T = pl->machine.tiles;
	Metrics *ph = xcalloc((size_t)pl->nph + 1, sizeof *ph), sum;
	int64_t *table = xcalloc((size_t)T, sizeof *table), *peak = xcalloc((size_t)T, sizeof *peak);
	int64_t *frags = xcalloc((size_t)T, sizeof *frags);
	TilesOut t = { out, e, 0, 0, 1, xcalloc((size_t)T, sizeof *t.sent), xcalloc((size_t)T, sizeof *t.recv),
		       xmalloc(3 * (size_t)T * sizeof *t.busy) };

	capture_metrics_tiles(pl, ph, NULL, &sum, table, peak, NULL);
	table_totals(pl, NULL, frags, NULL);
	for (int p = 0; p < pl->nph; p++) {
		t.count = ph[p].count;
		phase_rows(pl, p, tiles_sum, &t);
	}
	t.failed = output_printf(out, e, "# amp-tiles %d: model %s on %s (%lld tiles)\n", TILES_VERSION, pl->model,
				 pl->machine.name, (long long)T) ||
		   output_printf(out, e, "tile\tphase\tsent_bytes\treceived_bytes\tfragments\ttable_bytes\t"
				 "sram_peak_bytes\tbusy_cycles\n");
	for (int64_t i = 0; i < T; i++)
		if (!t.failed && (table[i] || peak[i] || t.sent[i] || t.recv[i]))
			t.failed = output_printf(out, e, "%lld\tall\t%lld\t%lld\t%lld\t%lld\t%lld\t-\n", (long long)i, (long long)t.sent[i],
				  (long long)t.recv[i], (long long)frags[i], (long long)table[i],
				  (long long)(peak[i] + table[i]));
	for (int p = 0; p < pl->nph && !t.failed; p++) {
		t.phase = p;
		phase_cycles_tiles(pl, p, t.busy);
		phase_rows(pl, p, tiles_row, &t);
	}
	table_release();
	free(ph), free(table), free(peak), free(frags), free(t.sent), free(t.recv), free(t.busy);
	return t.failed ? -1 : 0;
}
