/* gemm: GEMM grids, their placements and their scores.
 *
 * A grid (rows, k, cols) puts tile (r, k, c) at r*K*C + k*C + c. Rows cut
 * the token axis (batch kept together, docs/machine.md §5), K is cut in whole
 * mu-element strips of the operand format, columns in whole 16-column
 * groups; every cut is uniform (lib/stage/place.h), so the last part takes the
 * clipped tail. gemm_placements gives every placement the GEMM uses; the
 * planner emits exactly these, and the scores are computed from them, so
 * costing and lowering read one description.
 */
#ifndef AMP_GEMM_H
#define AMP_GEMM_H

#include "model/machine.h"
#include "stage/plan.h"

/* The placements of one GEMM, by role. Unused ones have rank 0. */
enum {
	GP_A_STAGE,     /* a, row-major (pack-once: each block on its c = 0 tile;
			 * spread: in gemm_stage_pieces pieces on its C tiles) */
	GP_A_PACKED,    /* a, amp-left, same tiles (pack-once, spread) */
	GP_A_MOVED,     /* a in its moved format, amp-left, replicated over cols */
	GP_A_OP,        /* a in the operand format (late cast: cast of GP_A_MOVED) */
	GP_B_STAGE,     /* b, transposed-right, on the rows=0 tiles */
	GP_B_OP,        /* b replicated over rows */
	GP_BIAS_STAGE,  /* bias, row-major, on tiles (0, 0, c) */
	GP_BIAS_OP,     /* bias replicated over rows on the k=0 tiles */
	GP_PARTIAL,     /* [K, batch, tokens, n] partials, amp-output */
	GP_RED,         /* the K partials of a block: gathered on its k=0 tile, or
			 * (reduce scatter) a part of its rows on each of its K tiles */
	GP_OUT,         /* the result, amp-output, on the tiles of GP_RED */
	GP_OUT_ROWS,    /* the result unpacked to row-major, same tiles (out staging unpack) */
	GP_COUNT
};

typedef struct {
	int64_t batch, tokens, k, n;
	Format fmt;             /* operand format */
	Format a_fmt;           /* a's format before any cast */
	int has_bias;
	int64_t owners;         /* canonical owners of a */
	int64_t owner_batch;    /* batch entries each owner holds (all of them unless split) */
	int64_t b_home_shards, bias_home_shards;
	int reduce_rows;        /* 1: a is a folded rmsnorm's rows before their scale, which the
				 * reduction applies: K is cut in two or more */
} GemmShape;

typedef struct {
	int64_t grid[3];
	CastOrder cast;
	Staging staging;
	int unpack;             /* out staging: 1 unpacks the result to row-major before it returns */
	int scatter;            /* reduce (K > 1): 0 gathers a block's K partials on its k = 0
				 * tile, 1 reduces a part of its rows on each of its K tiles */
	int64_t tiles;
	int64_t total;          /* bytes of all its placements, all tiles */
	int64_t largest;        /* largest single shard */
	int64_t tile_bytes;     /* per-tile bound: sum of its largest shards */
	int64_t rows;           /* estimated exchange rows (tile x phase) */
	int64_t cycles;         /* estimated cycles */
	int64_t tables;         /* estimated exchange table bytes, all tiles */
	/* The exact figures of a trial lowering (amp-plan's memory and cycles
	 * objectives; lib/planner/trial.h), every tile's earlier ops included: */
	int exact;              /* 1 when the fields below are set */
	int fits;               /* every tile within tables, fragments and SRAM */
	int64_t x_table;        /* largest tile's table bytes */
	int64_t x_frags;        /* largest tile's fragments */
	int64_t x_peak;         /* largest tile's tensors while the op runs, plus its table bytes */
	int64_t x_bytes;        /* the op's tensor and table bytes, all tiles */
	double x_excess;        /* worst ratio of a figure to its limit (fits: <= 1) */
	int64_t x_cycles;       /* cycles objective: the trial's modelled cycles (replay, sync,
				 * local copies, compute), beside the estimate in cycles */
	int64_t x_score;        /* cycles objective: what fitting candidates rank by, x_cycles
				 * times the op's runs plus the table price times x_table */
} Candidate;

/* 0 if the grid is valid for the shape; else -1 and why (no location). */
int gemm_grid_ok(const GemmShape *s, const int64_t grid[3], int64_t tiles, Err *e);
/* Staging spread's pieces per a block: C when the block's K strips divide
 * into C whole-strip pieces, none of them empty (piece j of block (r, k)
 * then sits on tile (r, k, j), and in amp-left it is one contiguous span
 * of the block); else 1: the grid cannot spread. */
int64_t gemm_stage_pieces(const GemmShape *s, const int64_t grid[3]);
/* Fills pl[GP_COUNT]; tensor fields are left -1 for the planner to set. */
void gemm_placements(const GemmShape *s, const Candidate *c, Placement pl[GP_COUNT]);
/* Reduce scatter's cut of a block's rows over its K tiles: the batch when
 * K divides it (axis 0), else the tokens (axis 1), in parts of *block;
 * but one row block whose tokens make fewer parts than the batch's
 * largest divisor below K cuts the batch in that many parts (axis 0), on
 * the first parts of its K tiles. */
int gemm_scatter_axis(const GemmShape *s, const int64_t grid[3], int64_t *parts, int64_t *block);
void gemm_score(const GemmShape *s, const Machine *m, Candidate *c);
/* gemm_score in parts, for scoring every staging of one grid: the
 * placements of c's grid and cast (all of them, both reductions) and
 * their largest shards (gemm_figures), then their total bytes
 * (gemm_figures_total), then the score of any staging, out staging and
 * reduction of that grid and cast from them, equal to gemm_score's
 * (gemm_score_from; it makes the totals when they are not yet).
 * gemm_tile_bytes is that score's tile_bytes, from the largest shards
 * alone. */
typedef struct {
	Placement pl[2][GP_COUNT];                      /* [scatter][placement] */
	int64_t max[2][GP_COUNT], total[2][GP_COUNT];
	Placement spread[2];                            /* staging spread's GP_A_STAGE, GP_A_PACKED */
	int64_t spread_max[2], spread_total[2];
	int64_t pieces;                                 /* gemm_stage_pieces */
	int64_t red_tiles[2];
	int nsc, totals;
} GemmFigures;
void gemm_figures(const GemmShape *s, const Candidate *c, GemmFigures *f);
void gemm_figures_total(GemmFigures *f);
int64_t gemm_tile_bytes(const GemmShape *s, const GemmFigures *f, const Candidate *c);
void gemm_score_from(const GemmShape *s, const Machine *m, GemmFigures *f, Candidate *c);

/* memory (default): the fitting candidate with the least tensor + table
 * bytes, by trial lowering; cycles: the fitting candidate with the fewest
 * modelled cycles of its trial lowering (replay, local copies, compute); capacity and capacity+tables: the formula alone (the
 * baseline kept for comparison). */
typedef enum { OBJ_CAPACITY, OBJ_CAPACITY_TABLES, OBJ_MEMORY, OBJ_CYCLES } Objective;
const char *objective_name(Objective o);
/* Ranking: <0 when a is better. Capacity: total, largest, rows, cycles;
 * capacity+tables: total + tables first. Ties fall to the smaller grid. */
int candidate_cmp(const Candidate *a, const Candidate *b, Objective o);


#endif
