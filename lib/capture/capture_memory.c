/* capture_memory: the capture's `memory` object (capture.h;
 * formats/capture.md, "memory"): tensor bytes per step over the tiles,
 * and what the tile with the most is holding at its peak. */
#include "capture/capture.h"

#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "stage/plan_memory.h"
#include "stage/table.h"

typedef struct {
	Json *j;
	int64_t T;
	int64_t *sorted;
	int64_t worst;          /* the tile with the most at its peak (summary.max_tensor_tile) */
} Steps;

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void step_line(void *ctx, int step, const int64_t *cur)
{
	Steps *s = ctx;
	int64_t T = s->T, best = 0, tile = 0;
	for (int64_t t = 0; t < T; t++)
		if (cur[t] > best)
			best = cur[t], tile = t;
	memcpy(s->sorted, cur, (size_t)T * sizeof *cur);
	qsort(s->sorted, (size_t)T, sizeof *s->sorted, cmp64);
	int64_t med = T % 2 ? s->sorted[T / 2] : (s->sorted[T / 2 - 1] + s->sorted[T / 2]) / 2;
	json_open(s->j, '{', 1);
	json_kint(s->j, "step", step);
	json_kint(s->j, "max_bytes", best);
	json_kint(s->j, "max_tile", tile);
	json_kint(s->j, "median_bytes", med);
	json_kint(s->j, "worst_tile_bytes", cur[s->worst]);
	json_close(s->j, '}');
}

void capture_memory_write(Json *j, const Plan *pl, const Metrics *sum)
{
	int64_t T = pl->machine.tiles;
	Steps st = { j, T, xmalloc((size_t)T * sizeof *st.sorted), sum->worst_tensor_tile };
	json_key(j, "memory");
	json_open(j, '{', 0);
	json_key(j, "steps");
	json_open(j, '[', 0);
	plan_memory_each(pl, step_line, &st);
	json_close(j, ']');
	free(st.sorted);

	/* the tile with the most tensor bytes at its peak, and what they are */
	int64_t tile = sum->worst_tensor_tile, *part = xmalloc(((size_t)pl->np + 1) * sizeof *part);
	int64_t *table = xcalloc((size_t)T, sizeof *table);
	int step = sum->worst_tensor_step;
	plan_memory_parts(pl, tile, step, part);
	table_totals(pl, table, NULL, NULL);
	json_key(j, "worst");
	json_open(j, '{', 0);
	json_kint(j, "tile", tile);
	json_kint(j, "step", step);
	json_kint(j, "tensor_bytes", sum->max_tensor_bytes);
	json_kint(j, "table_bytes", table[tile]);
	json_key(j, "tensors");
	json_open(j, '[', 0);
	for (int i = 0; i <= pl->np; i++) {
		if (!part[i])
			continue;
		json_open(j, '{', 1);
		if (i < pl->np) {
			json_kstr(j, "tensor", pl->t[pl->p[i].tensor].name);
			json_kstr(j, "placement", pl->p[i].name);
		} else {
			json_kstr(j, "tensor", "(scratch)");
			json_kstr(j, "placement", pl->s[step].op);
		}
		json_kint(j, "bytes", part[i]);
		json_close(j, '}');
	}
	json_close(j, ']');
	json_close(j, '}');
	json_close(j, '}');
	free(part), free(table);
}
