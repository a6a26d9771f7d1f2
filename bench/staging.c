/* staging: the controlled staging experiment (`make experiment-staging`).
 *
 * For each of a model's layer GEMMs (default qkv, proj, mlp_up, mlp_down):
 * the grid amp-plan chooses, pinned with every staging pair (a: direct or
 * pack-once; the result: direct or unpack; with K > 1 the reduction:
 * gather or scatter), and the next best grids of
 * amp-plan's short list with their stagings. Each variant is planned
 * (the op pinned, every other op as amp-plan chooses), lowered as
 * amp-compose, amp-expand, amp-exchange and amp-group (weights direct,
 * its default) do, and measured on that op's transfers alone: send fragments, largest
 * tile's fragments, the largest row, table bytes per tile (median, 90th
 * percentile and largest over the tiles it gives rows), the SRAM peak of
 * tensors during its steps, and the modelled exchange, local-copy and
 * compute cycles of its phases and steps (lib/replay, lib/cost: a phase
 * shared with another op counts whole). Prints a table per op.
 *
 *   staging MODEL MACHINE [OP...]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/capture.h"
#include "cost/cost.h"
#include "lower/lower.h"
#include "planner/planner.h"
#include "stage/plan_memory.h"
#include "stage/table.h"

typedef struct {
	int64_t *table, *frags;
	int64_t max_row, sends;
} Acc;

static int acc_row(void *ctx, int64_t t, const Instr *ins, int n)
{
	Acc *a = ctx;
	int64_t b = row_bytes(ins, n);
	a->table[t] += b;
	a->frags[t] += n;
	a->max_row = b > a->max_row ? b : a->max_row;
	for (int i = 0; i < n; i++)
		a->sends += ins[i].kind == I_SEND;
	return 0;
}

static int cmp64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = xmalloc((size_t)n + 1);
	if (fread(s, 1, (size_t)n, f) != (size_t)n)
		n = 0;
	s[n] = 0;
	fclose(f);
	return s;
}

static int plan_of(const char *path, const Machine *mc, Explain **ex, int *nops, Plan *pl, Err *e)
{
	Model m;
	PlanOpts po = { .objective = OBJ_MEMORY, .explain = ex ? 3 : 0, .ownership = OWN_AUTO, .no_fit_check = 1 };
	if (model_load(&m, path, e))
		return -1;
	if (ex) {
		*nops = m.nops;
		*ex = xcalloc((size_t)m.nops + 1, sizeof **ex);
	}
	int rc = plan_build(pl, &m, mc, &po, ex ? *ex : NULL, e);
	model_free(&m);
	return rc;
}

static void measure(const char *what, const char *op, const char *model_text, const char *tmp,
		    const Machine *mc, const Candidate *c)
{
	FILE *f = fopen(tmp, "w");
	fprintf(f, "%s\npins:\n  %s: {grid: [%lld, %lld, %lld], cast: %s, staging: %s, out_staging: %s, "
		"reduce: %s}\n", model_text, op, (long long)c->grid[0], (long long)c->grid[1],
		(long long)c->grid[2], c->cast == CAST_LATE ? "late" : "early", staging_name(c->staging),
		c->unpack ? "unpack" : "direct", c->scatter ? "scatter" : "gather");
	fclose(f);
	Plan pl;
	Err e;
	if (plan_of(tmp, mc, NULL, NULL, &pl, &e)) {
		printf("  %-9s %-14s %-9s %-6s %-7s  (no plan: %s)\n", what, "", "", "", "", e.msg);
		return;
	}
	if (lower_plan(&pl, NULL, &e)) {
		printf("  %-9s (lowering fails: %s)\n", what, e.msg);
		plan_free(&pl);
		return;
	}
	int64_t T = mc->tiles;
	Acc a = { xcalloc((size_t)T, 8), xcalloc((size_t)T, 8), 0, 0 };
	Metrics *ph = xcalloc((size_t)pl.nph + 1, sizeof *ph), sum;
	int64_t *step_peak = xcalloc((size_t)pl.ns + 1, 8), ex = 0, lc = 0, cc = 0, peak = 0, w, tw;
	int at;
	capture_metrics(&pl, ph, NULL, &sum);
	plan_memory(&pl, NULL, NULL, step_peak, &w, &at);
	/* the op's transfers alone, phase by phase */
	Plan q = pl;
	q.x = xmalloc((size_t)pl.nx * sizeof *q.x + 1);
	q.nx = 0;
	for (int i = 0; i < pl.nx; i++)
		if (strcmp(pl.s[pl.x[i].step].op, op) == 0)
			q.x[q.nx++] = pl.x[i];
	for (int p = 0; p < pl.nph; p++) {
		int mine = 0;
		for (int s = pl.ph[p].first; s <= pl.ph[p].last; s++)
			mine |= strcmp(pl.s[s].op, op) == 0;
		if (!mine)
			continue;
		phase_rows(&q, p, acc_row, &a);
		ex += ph[p].cycles + ph[p].sync_cycles;
		lc += ph[p].local_copy_cycles;
	}
	for (int s = 0; s < pl.ns; s++)
		if (strcmp(pl.s[s].op, op) == 0) {
			if (pl.s[s].kind == STEP_COMPUTE)
				cc += step_cycles(&pl, s, &tw);
			peak = step_peak[s] > peak ? step_peak[s] : peak;
		}
	int64_t n = 0, mf = 0;
	int64_t *tb = xmalloc((size_t)T * 8);
	for (int64_t t = 0; t < T; t++) {
		if (a.table[t])
			tb[n++] = a.table[t];
		mf = a.frags[t] > mf ? a.frags[t] : mf;
	}
	qsort(tb, (size_t)n, 8, cmp64);
	char grid[48];
	snprintf(grid, sizeof grid, "[%lld, %lld, %lld]", (long long)c->grid[0], (long long)c->grid[1],
		 (long long)c->grid[2]);
	printf("  %-9s %-14s %-9s %-6s %-7s %9lld %7lld %7lld %7lld %7lld %7lld %8lld %9lld %7lld %9lld\n",
	       what, grid, staging_name(c->staging), c->unpack ? "unpack" : "direct",
	       c->grid[1] == 1 ? "-" : c->scatter ? "scatter" : "gather", (long long)a.sends,
	       (long long)mf, (long long)a.max_row, (long long)(n ? tb[n / 2] : 0),
	       (long long)(n ? tb[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1] : 0), (long long)(n ? tb[n - 1] : 0),
	       (long long)peak, (long long)ex, (long long)lc, (long long)cc);
	fflush(stdout);
	free(tb), free(a.table), free(a.frags), free(ph), free(step_peak), free(q.x);
	plan_free(&pl);
}

int main(int argc, char **argv)
{
	static const char *dflt[] = { "qkv", "proj", "mlp_up", "mlp_down" };
	if (argc < 3) {
		fprintf(stderr, "usage: staging MODEL MACHINE [OP...]\n");
		return 2;
	}
	const char **ops = argc > 3 ? (const char **)argv + 3 : dflt;
	int nops = argc > 3 ? argc - 3 : 4, nm = 0;
	char tmp[] = "/tmp/amp-staging-XXXXXX";
	int fd = mkstemp(tmp);
	close(fd);
	char *text = slurp(argv[1]);
	Machine mc;
	Plan pl;
	Explain *ex = NULL;
	Err e;
	if (!text || machine_load(&mc, argv[2], &e) || plan_of(argv[1], &mc, &ex, &nm, &pl, &e)) {
		fprintf(stderr, "staging: %s\n", text ? e.msg : "cannot read the model");
		return 1;
	}
	printf("model %s on %s: each op's own transfers (phases it shares count whole for cycles)\n",
	       pl.model, mc.name);
	for (int k = 0; k < nops; k++) {
		const Gemm *g = NULL;
		const Explain *x = NULL;
		for (int i = 0; i < pl.ng; i++)
			if (strcmp(pl.g[i].op, ops[k]) == 0)
				g = &pl.g[i];
		for (int i = 0; i < nm; i++)
			if (ex[i].op && strcmp(ex[i].op, ops[k]) == 0)
				x = &ex[i];
		if (!g) {
			printf("\n%s: no such matmul\n", ops[k]);
			continue;
		}
		printf("\n%s (m %lld, k %lld, n %lld; amp-plan chose [%lld, %lld, %lld] %s/%s/%s)\n", g->op,
		       (long long)g->m, (long long)g->k, (long long)g->n, (long long)g->grid[0],
		       (long long)g->grid[1], (long long)g->grid[2], staging_name(g->staging),
		       g->unpack ? "unpack" : "direct", g->grid[1] == 1 ? "-" : g->scatter ? "scatter" : "gather");
		printf("  %-9s %-14s %-9s %-6s %-7s %9s %7s %7s %7s %7s %7s %8s %9s %7s %9s\n", "variant", "grid",
		       "staging", "out", "reduce", "transfers", "frags", "max_row", "tab_p50", "tab_p90", "tab_max",
		       "sram", "exchange", "local", "compute");
		Candidate c;
		memset(&c, 0, sizeof c);
		memcpy(c.grid, g->grid, sizeof c.grid);
		c.cast = g->cast;
		for (int v = 0; v < (g->grid[1] > 1 ? 8 : 4); v++) {
			c.staging = v & 1 ? STAGING_PACK_ONCE : STAGING_DIRECT;
			c.unpack = v >> 1 & 1;
			c.scatter = v >> 2;
			measure("same grid", g->op, text, tmp, &mc, &c);
		}
		for (int i = 0, shown = 0; x && i < x->nbest && shown < 2; i++)
			if (memcmp(x->best[i].grid, g->grid, sizeof c.grid)) {
				measure("alternate", g->op, text, tmp, &mc, &x->best[i]);
				shown++;
			}
	}
	unlink(tmp);
	explain_free(ex, nm);
	free(ex);
	plan_free(&pl);
	free(text);
	return 0;
}
