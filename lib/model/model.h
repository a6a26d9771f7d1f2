/* model: the model file (formats/model.md, `amp-model: 1`).
 *
 * A model names its inputs and parameters with shapes and dtypes, lists
 * ops in program order (each defining one new tensor), names its outputs,
 * and may pin choices per op. model_load validates everything it can
 * without a machine: names, keys, ops, dtypes, shapes. Every error names
 * file:line:col. Pins that need the machine (grids) are checked by the
 * planner, which reports them at the pin's mark.
 */
#ifndef AMP_MODEL_H
#define AMP_MODEL_H

#include <stdint.h>

#include "base/diag.h"
#include "base/io.h"
#include "model/layout.h"
#include "model/machine.h"
#include "model/optab.h"

#define MODEL_VERSION 9       /* reads 1 (no repeat, no whole-model ops), 2 (no staging spread), 3 (no rmsnorm,
				 * silu or mul), 4 (no state, append, embed or attention positions), 5 (no rope
				 * head_stride, no attention kv_order), 6 (no rope pairs), 7 (no rope scaling),
				 * 8 (no per-channel mul, no grid rope) and 9 */
#define MAX_RANK 4

/* T_STATE: a resident tensor whose values persist from one run of the
 * program to the next (a KV cache), written only by an append op. */
typedef enum { T_INPUT, T_PARAM, T_ACT, T_STATE } TensorRole;

typedef struct {
	char *name;
	TensorRole role;
	int rank;
	int64_t shape[MAX_RANK];
	Format dtype;
	int has_scale;
	int scale;          /* fp8 power-of-two scale exponent */
	int output;         /* named in outputs: */
	int64_t count;      /* a repeat's per-iteration parameter: instances stacked on a leading axis (1 otherwise) */
	int rep;            /* the repeat whose body defines it (params and op results), or -1 */
	long line, col;
} MTensor;

/* The ops, one per row of the op table (lib/model/optab.h). */
#define OPTAB_KIND(E, ...) OP_##E,
typedef enum { AMP_OPS(OPTAB_KIND) OP_COUNT } OpKind;
#undef OPTAB_KIND

typedef enum { CAST_AUTO, CAST_EARLY, CAST_LATE } CastOrder;
typedef enum { STAGING_AUTO, STAGING_PACK_ONCE, STAGING_DIRECT, STAGING_SPREAD, STAGING_COUNT } Staging;

/* rope (version 8): Llama 3's frequency scaling ("rope_type": "llama3" in a
 * Hugging Face config). factor 0: none, every pair at theta^(-2i/D). Else,
 * with wavelength w = 2 pi / f of pair i's frequency f = theta^(-2i/D):
 * w < original / high keeps f; w > original / low takes f / factor; in
 * between, s = (original / w - low) / (high - low) and f (1 - s) / factor
 * + f s (formats/model.md, "Rope scaling"). */
typedef struct {
	double factor, low, high, original;
} RopeScale;
/* Pair i's frequency of a rope over heads of D columns (radians a position). */
double rope_frequency(double theta, const RopeScale *sc, int64_t i, int64_t D);
/* The `scaling` mapping of a model's rope op and of a plan's rope step
 * (kv its value, op the op's name; every key needed), and its writer (key
 * and value). */
int rope_scale_read(const char *f, const Val *kv, const char *op, RopeScale *sc, Err *e);
/* Llama 3's rule for field i of sc (0 factor, 1 low, 2 high, 3 original;
 * high read after low): what it must be when it breaks the rule (every
 * field finite and above 0, the factor at least 1, high above low), else
 * NULL. The model and stage readers and amp-import all check by it. */
const char *rope_scale_bad(const RopeScale *sc, int i);
void rope_scale_write(YWriter *w, const RopeScale *sc);

/* rope (version 9): 2D rotary positions over a vision transformer's patch
 * grid, as PE-Core's Rope2D has them; rows 0: none (a rope by its
 * positions operand). Token t < cls (a class token) sits at row 0,
 * column 0: no rotation. Patch p = t - cls sits at row p / cols + o and
 * column p % cols + o, o = 1 with class tokens, else 0. Each head's first
 * D/2 columns rotate by the column, its last D/2 by the row, each half as
 * a rope over D/2 columns (pairs as `pairs` says, pair i at frequency
 * theta^(-4i/D)) (formats/model.md, "2D rope"). */
typedef struct {
	int64_t rows, cols, cls;
} RopeGrid;
/* A patch_grid rope op's rule on its x (named x, T tokens an entry): its
 * class tokens and patches are x's tokens. NULL when they are, else why
 * not (free it). The model reader and the stage check both say it so. */
char *rope_grid_bad(const RopeGrid *g, const char *op, const char *x, int64_t T);

typedef struct {
	OpKind kind;
	char *name;
	int in[3];          /* tensor indices; -1 when absent (matmul bias; attention's positions) */
	int nin;
	int out;            /* append: the state it writes (in[0] the rows, in[1] their positions) */
	double eps;         /* layernorm, rmsnorm */
	Format to;          /* cast */
	int64_t patch;      /* patchify: patch edge */
	int64_t cls;        /* patchify: zero rows put before the patches (a class token's slot) */
	int64_t batch;      /* broadcast: batch size */
	int64_t heads;      /* attention: heads (in[0] holds q, in[1] k and v; fused when equal) */
	int64_t kv_heads;   /* attention: heads of k and v (grouped-query: each serves heads / kv_heads) */
	int causal;         /* attention: query i sees keys up to i + keys - queries, or with positions
			     * (in[2]) keys up to its position */
	int64_t head_dim;   /* rope: width of each rotated head (its first heads x head_dim columns) */
	int64_t head_stride; /* rope (version 6): columns from one rotated head's start to the next's
			      * (head_dim: side by side; 2 x head_dim: a kv tensor in kv_order heads) */
	int interleaved;    /* rope (version 7): 0 pairs half (element i of a head with i + head_dim/2,
			     * Hugging Face's rotate_half), 1 interleaved (2i with 2i + 1) */
	int kv_order;       /* attention (version 6): 0 kv (every kv head's keys, then every one's values);
			     * 1 heads (kv head j's keys, then its values, at columns 2jD .. 2jD + 2D) */
	double theta;       /* rope: the frequencies' base */
	RopeScale rope_scale; /* rope (version 8): the frequencies' scaling */
	RopeGrid rope_grid;   /* rope (version 9): by the patch grid, not by positions (rows 0: by positions) */
	int transposed;     /* embed: the table is [C, vocab] (a tied logits matmul's b), not [vocab, C] */
	int64_t first;      /* append: the rows land at positions first + t (a prefill's), or -1: any */
	int rep;            /* the repeat whose body holds it, or -1 */
	/* pins */
	int pinned;         /* 1: the model pins it; 2: held by the planner */
	int64_t grid[3];    /* rows, k, cols; 0 = not pinned */
	CastOrder cast;
	Staging staging;
	int out_staging;    /* 0 not pinned, 1 direct, 2 unpack */
	int reduce;         /* 0 not pinned, 1 gather, 2 scatter */
	int kv_staging;     /* attention: 0 not pinned, 1 direct, 2 relay, 3 home */
	long line, col, pin_line, pin_col;
} MOp;

/* A loop over identical layers: ops first..last run count times. The
 * carried activation `carry` enters as a copy of `in`; the body's last op
 * result becomes `carry` for the next iteration, and after the loop. */
typedef struct {
	char *name;
	int64_t count;
	int first, last;    /* op indices */
	int in, carry;      /* tensor indices */
	long line, col;
} MRepeat;

typedef struct {
	char *file;
	char *name;
	int version;        /* amp-model: 1 or 2 */
	MTensor *t;
	int nt;
	MOp *ops;
	int nops;
	MRepeat *rep;
	int nrep;
	long params_line, params_col;   /* the params: mapping, for capacity errors */
} Model;

int model_load(Model *m, const char *path, Err *e);
/* The same from an input (taken over), e.g. a program's MODEL section. */
int model_load_input(Model *m, Input *in, Err *e);
void model_free(Model *m);
int model_find(const Model *m, const char *name);   /* tensor index or -1 */

/* lib/model/model_size.c. A tensor's elements (every stacked instance) and
 * bytes, saturating at INT64_MAX. */
int64_t model_elements(const MTensor *t);
int64_t model_tensor_bytes(const MTensor *t);
/* At most MODEL_MAX_ELEMENTS elements in any tensor: the model reader's
 * bound, so that no size computed from a shape overflows. */
#define MODEL_MAX_ELEMENTS (INT64_C(1) << 48)
#define MODEL_NAME_MAX 256      /* bytes of a tensor's, an op's or a repeat's name (formats/model.md) */
/* 0 when the parameters (resident for the whole program) and every op's
 * operands and result (live at once) each fit in the machine's SRAM
 * (tiles x available bytes); else an error at the parameters or the op
 * with that lower bound. The check is a bound: a model that passes may
 * still not fit, which the planner finds. */
int model_check_size(const Model *m, const Machine *mc, Err *e);

/* The refusals' advice ("... Next: ..."), one wording for the size check
 * here and the planner's fit check (lib/planner/planner_fit.c). NEXT_NO_PLAN:
 * the parameters alone exceed the machine, so no pin or batch helps. */
#define NEXT_MORE_TILES "use a machine file with more tiles (share/machines/amp5888.yaml has 4x amp1472's)"
#define NEXT_NO_PLAN " Next: no plan of this model fits this machine; " NEXT_MORE_TILES
const char *op_name(OpKind k);

/* The model layer's columns of op k's row (lib/model/optab.h): the first
 * version with it, its operand slots (NULL after the last), how many the
 * reader requires, and its keys (NULL after the last). */
typedef struct {
	const char *name;
	int since;
	const char *slots[4];
	int need;
	const char *keys[16];
} OpInfo;
const OpInfo *op_info(OpKind k);
const char *cast_name(CastOrder c);
const char *staging_name(Staging s);
int cast_parse(const char *s, CastOrder *c);
int staging_parse(const char *s, Staging *st);

#endif
