/* plan: the plan stage (formats/plan.md, `format: amp-plan`).
 *
 * A plan is the program before lowering: tensors (logical values), GEMM
 * plans (one record per matmul: grid, cast order, staging, layouts),
 * placements (lib/stage/place.h) and steps in program order. A step is either a
 * copy, which moves one tensor from a source placement to a destination
 * placement (same tensor, same format: a precision cast is never a copy),
 * or a compute, which reads placements and writes one on the same tiles.
 *
 * Aliasing: where a copy's destination shard on a tile has the same region,
 * layout and format as a source shard on that tile, it is the same buffer
 * and no bytes move. Memory accounting and lowering both follow this rule.
 */
#ifndef AMP_PLAN_H
#define AMP_PLAN_H

#include <stdint.h>

#include "base/diag.h"
#include "model/machine.h"
#include "model/model.h"
#include "stage/place.h"
#include "stage/xfer.h"

#define PLAN_VERSION 17          /* written; 4 (no provenance), 5 (no staging spread), 6 (no rmsnorm,
				 * silu or mul), 7 (no state, append, embed or attention positions), 8 (attention
				 * tiles of one head, partials unchunked), 9 (no sumsq, rmsnorm on whole rows), 10
				 * (no rope head_stride, no attention kv_order), 11 (no rope pairs), 12 (no folded
				 * rmsnorm), 13 (attention partials fp32 only), 14 (no rope scaling), 15 (no
				 * grid rope) and 16 (attention results fp16 only) are still read */
#define PLAN_VERSION_OLDEST 4
#define STAGE_NAME_MAX 1024      /* bytes of a name a stage defines: a tensor's, a placement's, an op's (formats/stage.md) */

/* The stage files that carry a plan: each adds to the one before it.
 * amp-expand: placement addresses and transfers; amp-exchange: phases
 * (transfers cut and joined); amp-group: phases merged, forwarding. */
typedef enum { STAGE_PLAN, STAGE_EXPAND, STAGE_EXCHANGE, STAGE_GROUP, STAGE_COUNT } StageKind;
const char *stage_format(StageKind k);

/* An exchange phase: the copy steps first..last and the transfers serving
 * them. */
typedef struct {
	int first, last;
	char *label;
} Phase;

/* R_STATE: resident across runs of the program (a KV cache); its home
 * holds the values the run starts with and is written in place by an
 * append step. */
typedef enum { R_INPUT, R_PARAM, R_ACT, R_OUTPUT, R_PARTIAL, R_STATE, R_COUNT } PRole;

typedef struct {
	char *name;
	PRole role;
	int rank;
	int64_t shape[MAX_RANK];
	Format fmt;
	int scale;
	int64_t count;              /* instances (a repeat's stacked parameter), 1 otherwise */
} PTensor;

/* The one GEMM-plan record. */
typedef struct {
	char *op;
	int a, b, bias, out;        /* tensor indices (bias -1 when absent) */
	int64_t m, k, n;            /* rows (batch x tokens), inner, columns */
	Format fmt;                 /* operand format (fp8 or fp16) */
	int64_t grid[3];            /* rows, k, cols partitions */
	CastOrder cast;             /* auto when a needs no cast */
	Staging staging;
	int unpack;                 /* out staging: the result unpacked to row-major on its tiles, then returned */
	int scatter;                /* reduce: 0 gather (the K partials on the k = 0 tile), 1 scatter (a part of the rows on each k tile) */
	int pinned;
	int64_t tiles;              /* grid[0]*grid[1]*grid[2] */
	int64_t peak_bytes;         /* largest per-tile memory while it runs */
} Gemm;

typedef enum { STEP_COPY, STEP_COMPUTE } StepKind;
typedef enum { MAP_IDENTITY, MAP_NATIVE_PANEL, MAP_RELAYOUT, MAP_COUNT } Mapping;
typedef enum { MOVE_PARAMETER, MOVE_ACTIVATION, MOVE_REDUCTION, MOVE_OUTPUT,
	       MOVE_COPY, MOVE_RELAY, MOVE_COUNT } Movement;
/* The compute kinds, one row each: X(E, name, since, cost)
 *   E      ComputeKind C_<E>
 *   name   its spelling in a stage file (formats/plan.md)
 *   since  the first stage version with it (4: every version read)
 *   cost   how a tile's cycles follow from its shards (lib/cost/cost.c):
 *          MATMUL, REDUCTION (per input element), ATTENTION, APPEND,
 *          COPY (its output's bytes at local-copy speed) or ELEMENTWISE
 *          (per output element); the column names cost/'s kinds, which
 *          only cost/ expands. */
#define AMP_COMPUTES(X) \
	X(CAST, "cast", 4, ELEMENTWISE) \
	X(PACK, "pack", 4, COPY) \
	X(MATMUL, "matmul", 4, MATMUL) \
	X(REDUCE, "reduce", 4, REDUCTION) \
	X(GELU, "gelu", 4, ELEMENTWISE) \
	X(ADD, "add", 4, ELEMENTWISE) \
	X(LAYERNORM, "layernorm", 4, REDUCTION) \
	X(ATTENTION, "attention", 4, ATTENTION) \
	X(BROADCAST, "broadcast", 4, COPY) \
	X(CARRY, "carry", 4, COPY) \
	X(MERGE, "merge", 4, REDUCTION) \
	X(RMSNORM, "rmsnorm", 7, REDUCTION) \
	X(SILU, "silu", 7, ELEMENTWISE) \
	X(MUL, "mul", 7, ELEMENTWISE) \
	X(ROPE, "rope", 7, ELEMENTWISE) \
	X(APPEND, "append", 8, APPEND) \
	X(LAST, "last", 8, COPY) \
	X(SUMSQ, "sumsq", 10, REDUCTION)
#define COMPUTE_KIND(E, ...) C_##E,
typedef enum { AMP_COMPUTES(COMPUTE_KIND) C_COUNT } ComputeKind;
#undef COMPUTE_KIND
typedef enum { OPD_A, OPD_B, OPD_BIAS, OPD_PARTIAL, OPD_OUT, OPD_X, OPD_SCALE,
	       OPD_Q, OPD_K, OPD_V, OPD_POS, OPD_COUNT } Operand;

typedef struct {
	StepKind kind;
	char *op;                   /* the model op it serves */
	/* copy */
	Operand operand;
	Movement move;
	Mapping map;
	int src, dst;               /* placement indices */
	/* compute */
	ComputeKind compute;
	int in[4], nin;             /* placement indices (attention: q, k, v and, with a runtime mask, positions) */
	int out;
	double eps;                 /* layernorm */
	double scale;               /* attention: the score scale, 1/sqrt(head_dim) */
	int64_t heads;              /* attention: heads of the op (a tile computes those of its q shard) */
	int64_t kv_heads;           /* attention: heads of k and v (grouped-query when fewer) */
	int causal;                 /* attention: query i sees keys up to i + keys - queries, or with
				     * positions (in[3]) keys up to its position */
	int64_t head_dim;           /* rope: width of each rotated head (heads of them, from column 0) */
	int64_t head_stride;        /* rope (version 11): columns from one rotated head's start to the next's */
	int interleaved;            /* rope (version 12): 1 pairs interleaved (2i with 2i + 1), 0 half (i with
				     * i + head_dim/2) */
	int kv_order;               /* attention (version 11): 1 when k and v are in kv_order heads (kv head
				     * j's keys at its 2jD, its values at 2jD + D), 0 all keys then all values */
	double theta;               /* rope: the frequencies' base */
	RopeScale rope_scale;       /* rope (version 15): the frequencies' scaling (factor 0: none) */
	RopeGrid rope_grid;         /* rope (version 16): by the patch grid, reading no positions (rows 0: none) */
	int64_t scratch;            /* bytes each tile of out needs during the step alone (attention: a row of scores) */
	int64_t chunks;             /* attention writing a partial: each head's D columns cut into this many, each
				     * with its own m and l (1: [m, l, o]) */
	int64_t first;              /* append: its rows land at positions first + t (a prefill's), or -1: any */
} Step;

/* An op that runs on the host before the program: patchify turns image
 * [B, C, H, W] into patches [B, (H/p)(W/p), C*p*p]; embed looks token
 * ids [B, T, 1] up in a table's rows (or its columns, transposed): a row
 * that data chooses cannot be fetched by a static exchange
 * (formats/plan.md). */
typedef enum { HOST_PATCHIFY, HOST_EMBED } HostKind;
typedef struct {
	char *op;
	HostKind kind;
	int in, out;                /* tensor indices */
	int64_t patch;
	int64_t cls;                /* zero rows before the patches (class token slots) */
	int table, transposed;      /* embed: the table's tensor index; [C, vocab] when transposed */
} Host;

/* A loop: steps first..last run count times. Placements of stacked
 * tensors (count > 1) that no step writes hold every instance
 * (place_instance); the body's copies from them read instance i in
 * iteration i. */
typedef struct {
	char *name;
	int first, last;
	int64_t count;
} Repeat;

/* What wrote a stage: one record per tool, in the order they ran
 * (formats/stage.md): its name and version, its options as given (file
 * arguments by their base name) and the files it read besides its input
 * stage, each by role, base name and FNV-1a digest of its content. */
#define PROV_FILES 4
typedef struct {
	char *role, *name;
	uint64_t fnv1a;
} ProvFile;
typedef struct {
	char *tool, *version, *options;
	ProvFile f[PROV_FILES];
	int nf;
} Prov;

typedef struct {
	Machine machine;
	char *model;
	Prov *prov;
	int nprov;
	PTensor *t;
	int nt;
	Gemm *g;
	int ng;
	Placement *p;
	int np;
	Step *s;
	int ns;
	StageKind stage;            /* which format this plan was read as / is */
	Xfer *x;                    /* transfers, in order (expanded stages) */
	int nx;
	Phase *ph;                  /* phases (exchange and grouped stages) */
	int nph;
	Host *h;
	int nh;
	Repeat *r;
	int nr;
	int owners_batch;           /* the planner's own (no stage file holds it): planned with the
				     * batch split across the owners (ownership batch), else 0 */
} Plan;

/* A file's digest as provenance writes it: 16 hexadecimal digits. */
void prov_hex(uint64_t fnv1a, char hex[17]);
/* Appends a copy of pr to p's provenance. */
void plan_add_prov(Plan *p, const Prov *pr);
void prov_free(Prov *pr);
/* The repeat holding step s, or -1. */
int plan_find_tensor(const Plan *p, const char *name);  /* index or -1 */
int plan_repeat_of(const Plan *p, int step);
/* How many times step s runs (its repeat's count, or 1). */
int64_t plan_step_count(const Plan *p, int step);
/* Does placement i hold every instance of a stacked tensor? Then instance
 * k sits at addr + k * place_instance(). */
int plan_stacked(const Plan *p, int i);

const char *role_name(PRole r);
const char *mapping_name(Mapping m);
const char *movement_name(Movement m);
const char *compute_name(ComputeKind c);
const char *operand_name(Operand o);

void plan_free(Plan *p);
void plan_dup(Plan *dst, const Plan *src);     /* a deep copy */
void plan_add_xfer(Plan *p, const Xfer *x);
/* The names of each enum as the formats spell them (index = value), and
 * the value of name s among names[n], or -1: for the stage readers. */
extern const char *const role_names[R_COUNT];
extern const char *const map_names[MAP_COUNT];
extern const char *const move_names[MOVE_COUNT];
extern const char *const compute_names[C_COUNT];
/* The first stage version with compute kind k (AMP_COMPUTES). */
int compute_since(ComputeKind k);
extern const char *const operand_names[OPD_COUNT];
int plan_name_lookup(const char *const *names, int n, const char *s);
/* Step that writes placement i, or -1 for an initial placement. */
int plan_writer(const Plan *p, int placement);
/* Is placement i a state's home: written before the run with the values
 * it starts with, updated in place by the state's append step (if any),
 * live for the whole program? */
int plan_state_home(const Plan *p, int placement);
/* An attention step's head width D: its output's last dimension over its
 * heads (a partial's: H*(D+2*chunks)). */
int64_t plan_head_dim(const Plan *p, const Step *s);
/* An attention step's chunks (1 when not set). */
int64_t plan_chunks(const Step *s);
/* Is compute step s a folded rmsnorm's first step (version 13): a mul of
 * rows by a vector (its second input of rank 1), the norm's scale, in an
 * op that has a sumsq step (a mul op's per-channel scale, model version
 * 9, is the same product without the sums)? */
int plan_norm_fold(const Plan *p, const Step *s);
/* The rows a folded rmsnorm normalises in the reduction of GEMM op: the
 * tensor its sums of squares were taken of (the input of the sumsq step
 * that wrote the sums its reduce step reads), with *reduce that step;
 * -1 when op's reduction reads no sums. */
int plan_fold_rows(const Plan *p, const char *op, int *reduce);
/* The index of op's GEMM record, or -1. */
int plan_gemm_index(const Plan *p, const char *op);
/* A reduce step's inputs after its partials (version 13: the bias, then a
 * folded rmsnorm's row sums of squares): the index in s->in of its bias
 * (*bias) and of its sums (*sums), each -1 when absent. */
void plan_reduce_inputs(const Plan *p, const Step *s, int *bias, int *sums);

/* Mapping of a copy from its placements. */
Mapping copy_mapping(const Placement *src, const Placement *dst);

#endif
