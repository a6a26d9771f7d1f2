/* model_int.h: what the parts of the model reader share (lib/model/model.h
 * is the module's contract).
 *
 * The parts, highest first; each calls only those below it (never back):
 *
 *   model_read.c   model_load: the file's version, its declared inputs,
 *                  states and parameters, the ops list with its repeats,
 *                  the outputs and the pins
 *   model_ops.c    one item of an ops list: an op with the rules on its
 *                  operands, and the tensor it defines; the MAP head as
 *                  the ten ops it stands for
 *   model.c        the names of ops, cast orders and stagings, the
 *                  lookups, the tensor primitives below, model_free
 *   model_size.c   the size bounds (model_elements, model_check_size)
 */
#ifndef AMP_MODEL_INT_H
#define AMP_MODEL_INT_H

#include "base/yio.h"
#include "model/model.h"

/* ---- the record's primitives (model.c) ---- */

/* The op named name, or -1. */
int model_find_op(const Model *m, const char *name);
/* Is the name at v one a model may give (a tensor's when tensor, else an
 * op's or a repeat's; what says which in the error): 1 to MODEL_NAME_MAX
 * bytes (libyaml has checked that they are UTF-8), no control character,
 * no '@' (a stage's placement is named tensor@place), and a tensor's no
 * suffix amp gives the tensors it makes (model_reserved)? */
int model_name_ok(const char *f, const Val *v, const char *what, int tensor, Err *e);
/* A new tensor named by key (at its mark), role and shape left for the
 * caller; NULL, with the error, when the name is defined already or is
 * not one a model may give (model_name_ok). */
MTensor *model_new_tensor(Model *m, const char *f, const Val *key, Err *e);
/* A dtype's name at v (fp32, fp16, fp8 or int32) into *fmt. */
int model_dtype(const char *f, const Val *v, Format *fmt, Err *e);
/* The tensor a name refers to from inside repeat rep (-1: outside any):
 * defined already, and not local to another repeat's body. */
int model_visible(Model *m, const char *f, const Val *v, int rep, int *idx, Err *e);
/* Equal ranks and shapes. */
int model_same_shape(const MTensor *a, const MTensor *b);

/* ---- the ops (model_ops.c) ---- */

/* An item of an ops list, inside repeat rep (-1: outside any): the MAP
 * head, or one op. */
int model_an_op(Model *m, const char *f, const Val *v, int rep, Err *e);

#endif
