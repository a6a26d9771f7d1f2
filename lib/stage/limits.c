#include "stage/limits.h"

#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "model/machine.h"
#include "stage/plan_memory.h"
#include "stage/table.h"

void limits_measure(const Plan *pl, int64_t avail, Limits *l, int64_t *table_out, int64_t *frags_out,
		    int64_t *peak_out, int *peak_step_out)
{
	int64_t T = pl->machine.tiles;
	int64_t *table = table_out ? table_out : xcalloc((size_t)T, sizeof *table);
	int64_t *frags = frags_out ? frags_out : xcalloc((size_t)T, sizeof *frags);
	int64_t *peak = peak_out ? peak_out : xcalloc((size_t)T, sizeof *peak);
	int *step = peak_step_out ? peak_step_out : xcalloc((size_t)T, sizeof *step);

	memset(l, 0, sizeof *l);
	l->avail = avail >= 0 ? avail : machine_avail(&pl->machine);
	table_totals(pl, table, frags, NULL);
	plan_memory(pl, peak, step, NULL, NULL, NULL);
	for (int64_t t = 1; t < T; t++) {
		l->table_tile = table[t] > table[l->table_tile] ? t : l->table_tile;
		l->frag_tile = frags[t] > frags[l->frag_tile] ? t : l->frag_tile;
		l->sram_tile = peak[t] + table[t] > peak[l->sram_tile] + table[l->sram_tile] ? t : l->sram_tile;
	}
	if (T > 0) {
		l->table = table[l->table_tile], l->frags = frags[l->frag_tile];
		l->peak = peak[l->sram_tile], l->peak_tables = table[l->sram_tile];
		l->sram = l->peak + l->peak_tables, l->peak_step = step[l->sram_tile];
	}
	if (!table_out)
		free(table);
	if (!frags_out)
		free(frags);
	if (!peak_out)
		free(peak);
	if (!peak_step_out)
		free(step);
}

LimitKind limits_over(const Plan *pl, const Limits *l)
{
	const Machine *mc = &pl->machine;
	if (l->table > mc->table_budget_bytes)
		return LIMIT_TABLE;
	if (l->frags > mc->fragment_limit)
		return LIMIT_FRAGMENTS;
	if (l->sram > l->avail)
		return LIMIT_SRAM;
	return LIMIT_NONE;
}

/* The phase of tile's largest row (by bytes, or by fragments): the first
 * of equals; -1 when the tile has no row. */
static int worst_phase(const Plan *pl, int64_t tile, int by_frags)
{
	int64_t T = pl->machine.tiles, best = -1;
	int64_t *rt = xmalloc((size_t)T * sizeof *rt), *rb = xmalloc((size_t)T * sizeof *rb);
	int64_t *rf = xmalloc((size_t)T * sizeof *rf);
	int at = -1;
	for (int p = 0; p < pl->nph; p++)
		for (int64_t k = 0, n = phase_row_list(pl, p, rt, rb, rf, NULL); k < n; k++)
			if (rt[k] == tile && (by_frags ? rf[k] : rb[k]) > best)
				best = by_frags ? rf[k] : rb[k], at = p;
	free(rt);
	free(rb);
	free(rf);
	return at;
}

int limits_error(const Plan *pl, const Limits *l, const char *avail_what, int options, Err *e)
{
	const Machine *mc = &pl->machine;
	LimitKind k = limits_over(pl, l);
	avail_what = avail_what ? avail_what : "sram_bytes - reserved_bytes";
	if (k == LIMIT_TABLE) {
		int p = worst_phase(pl, l->table_tile, 0);
		return errf(e, "tile %lld: exchange tables need %lld bytes (its largest row is in phase %d%s%s), "
			    "over the table budget of %lld bytes%s", (long long)l->table_tile,
			    (long long)l->table, p, options ? ", " : "", options && p >= 0 ? pl->ph[p].label : "",
			    (long long)mc->table_budget_bytes, options ? " (--table-budget)" : "");
	}
	if (k == LIMIT_FRAGMENTS) {
		int p = worst_phase(pl, l->frag_tile, 1);
		return errf(e, "tile %lld: %lld send and receive fragments (most in phase %d%s%s), over the "
			    "fragment limit of %lld%s", (long long)l->frag_tile, (long long)l->frags, p,
			    options ? ", " : "", options && p >= 0 ? pl->ph[p].label : "", (long long)mc->fragment_limit,
			    options ? " (--fragment-limit)" : "");
	}
	if (k == LIMIT_SRAM) {
		/* the phase at or after the step where the tile's tensors peak */
		int s = l->peak_step, p = 0;
		while (p + 1 < pl->nph && pl->ph[p].last < s)
			p++;
		return errf(e, "tile %lld, phase %d%s%s%s: %lld bytes of tensors at their peak (step %d, op %s) and "
			    "%lld bytes of exchange tables need %lld bytes, over the %lld available for planned "
			    "data (%s)", (long long)l->sram_tile, p, options ? " (" : "",
			    options ? (pl->nph ? pl->ph[p].label : "-") : "", options ? ")" : "",
			    (long long)l->peak, s, pl->ns ? pl->s[s].op : "-", (long long)l->peak_tables,
			    (long long)l->sram, (long long)l->avail, avail_what);
	}
	return 0;
}
