/* compare_tiles: the per-tile figures of amp-compare --tiles: two tiles
 * files (formats/capture.md "Per tile", `amp-tiles 1`) read and compared
 * (formats/compare.md "Tiles").
 *
 * Only the `all` lines are kept (a tile without one holds nothing and
 * counts 0); phase lines are checked and skipped. The reader is strict:
 * the format line, the header, seven tab-separated fields, tiles below
 * the count the format line gives, counts in every figure field (`-` for
 * sram_peak_bytes on phase lines only), one `all` line per tile. An
 * error names file:line:col. */
#ifndef AMP_COMPARE_TILES_H
#define AMP_COMPARE_TILES_H

#include <stdint.h>

#include "base/diag.h"

enum { TF_SENT, TF_RECEIVED, TF_FRAGMENTS, TF_TABLE, TF_SRAM, TF_FIGS };
extern const char *const tile_fig_name[TF_FIGS];  /* the TSV's column names */

typedef struct {
	char *file;             /* as given */
	char *model, *machine;  /* from the format line */
	int ntiles;
	int64_t (*v)[TF_FIGS];  /* ntiles rows */
} TileFigs;

/* Reads the tiles file at path. 0 ok; -1 with e naming file:line:col (t
 * is then empty). tiles_free frees it either way. */
int tiles_load(TileFigs *t, const char *path, Err *e);
void tiles_free(TileFigs *t);

/* One figure compared over the tiles: each side's largest value and its
 * tile (the lowest among equals), its median (over all its tiles, those
 * without an `all` line counting 0; the mean of the middle two for an
 * even count, rounded down), and the tile whose figure grows the most
 * from A to B (B − A over the tiles of the larger machine, a tile the
 * other lacks counting 0 there; the lowest among equals: the delta may
 * be 0 or negative when no tile grows). */
typedef struct {
	int64_t max[2], median[2];
	int max_tile[2];
	int inc_tile;
	int64_t inc;
} TileStat;

void tiles_stat(const TileFigs *a, const TileFigs *b, int fig, TileStat *s);

/* Figure fig of tile t, 0 beyond the machine's tiles. */
int64_t tile_fig(const TileFigs *t, int tile, int fig);

#endif
