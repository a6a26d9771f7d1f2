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

#include "diag.h"
#include "layout.h"

#define MODEL_VERSION 1
#define MAX_RANK 4

typedef enum { T_INPUT, T_PARAM, T_ACT } TensorRole;

typedef struct {
	char *name;
	TensorRole role;
	int rank;
	int64_t shape[MAX_RANK];
	Format dtype;
	int has_scale;
	int scale;          /* fp8 power-of-two scale exponent */
	int output;         /* named in outputs: */
	long line, col;
} MTensor;

typedef enum { OP_MATMUL, OP_GELU, OP_ADD, OP_LAYERNORM, OP_CAST, OP_COUNT } OpKind;

typedef enum { CAST_AUTO, CAST_EARLY, CAST_LATE } CastOrder;
typedef enum { STAGING_AUTO, STAGING_PACK_ONCE, STAGING_DIRECT } Staging;

typedef struct {
	OpKind kind;
	char *name;
	int in[3];          /* tensor indices; -1 when absent (matmul bias) */
	int nin;
	int out;
	double eps;         /* layernorm */
	Format to;          /* cast */
	/* pins */
	int pinned;
	int64_t grid[3];    /* rows, k, cols; 0 = not pinned */
	CastOrder cast;
	Staging staging;
	long line, col, pin_line, pin_col;
} MOp;

typedef struct {
	char *file;
	char *name;
	MTensor *t;
	int nt;
	MOp *ops;
	int nops;
	long params_line, params_col;   /* the params: mapping, for capacity errors */
} Model;

int model_load(Model *m, const char *path, Err *e);
void model_free(Model *m);
int model_find(const Model *m, const char *name);   /* tensor index or -1 */
const char *op_name(OpKind k);
const char *cast_name(CastOrder c);
const char *staging_name(Staging s);
int cast_parse(const char *s, CastOrder *c);
int staging_parse(const char *s, Staging *st);

#endif
