/* optab: the op table, one row per op of the model file (formats/model.md).
 *
 * Every layer that treats ops by kind reads its column of this table, by
 * expanding AMP_OPS with a macro that keeps that column:
 *
 *   E        the op's kind, OP_<E> (lib/model/model.h)
 *   name     its spelling in a model file
 *   since    the first amp-model version that has it
 *   slots    its operands in[0], in[1], in[2], by their keys (the state
 *            digest names them so; "positions" and "ids" are the int32
 *            operands, "kv" the one a state may be)
 *   need     how many leading slots the reader requires (the rest are read
 *            when present); -1: the op's attribute reader reads them all
 *   keys     every key its mapping may hold; the reader refuses others
 *   attrs    its attribute reader (lib/model/model_ops.c), after the slots
 *   act      1: in[0] must be an activation [batch, tokens, features]
 *   shape    its shape rule: the tensor it defines (model_ops.c); append
 *            (no shape rule: it writes a state) is read by append_op
 *   compute  the compute step it lowers to (lib/stage: ComputeKind; the
 *            planner's step for a row-local op, the checker's expected
 *            step, and through it the cost and the machine's kernel,
 *            lib/run/run_compute.c); C_COUNT: it runs on the host
 *   lowers   every compute kind its lowering may use (the checker's rule)
 *   ref      its FP32 reference (lib/run/run_model.c)
 *
 * A column names functions and kinds of the layer that reads it; the
 * others never see them. Adding an op: a row here, its attribute reader
 * and shape rule, its reference, its machine kernel (when its compute kind
 * is new), its planning (lib/planner/planner_build.c), and its tests
 * (docs/dev.md, "Adding an op").
 */
#ifndef AMP_OPTAB_H
#define AMP_OPTAB_H

/* The parenthesised lists of a row, unwrapped. */
#define OPTAB_LIST(...) __VA_ARGS__

#define AMP_OPS(X) \
	X(MATMUL, "matmul", 1, ("a", "b", "bias"), 2, ("op", "name", "a", "b", "bias", "out"), \
	  no_attrs, 1, shape_matmul, C_MATMUL, (C_CAST, C_PACK, C_MATMUL, C_REDUCE), opref_matmul) \
	X(GELU, "gelu", 1, ("x"), 1, ("op", "name", "x", "out"), \
	  no_attrs, 1, shape_same, C_GELU, (C_GELU), opref_gelu) \
	X(ADD, "add", 1, ("a", "b"), 2, ("op", "name", "a", "b", "out"), \
	  no_attrs, 1, shape_add, C_ADD, (C_ADD), opref_add) \
	X(LAYERNORM, "layernorm", 1, ("x", "scale", "bias"), 3, ("op", "name", "x", "scale", "bias", "eps", "out"), \
	  norm_attrs, 1, shape_norm, C_LAYERNORM, (C_LAYERNORM), opref_layernorm) \
	X(CAST, "cast", 1, ("x"), 1, ("op", "name", "x", "to", "out"), \
	  no_attrs, 1, shape_cast, C_CAST, (C_CAST), opref_keep) \
	X(PATCHIFY, "patchify", 2, ("x"), 1, ("op", "name", "x", "patch", "class_tokens", "out"), \
	  patchify_attrs, 0, shape_patchify, C_COUNT, (C_COUNT), opref_patchify) \
	X(BROADCAST, "broadcast", 2, ("x"), 1, ("op", "name", "x", "batch", "out"), \
	  broadcast_attrs, 0, shape_broadcast, C_BROADCAST, (C_BROADCAST), opref_broadcast) \
	X(ATTENTION, "attention", 2, ("q", "kv", "positions"), -1, \
	  ("op", "name", "qkv", "q", "kv", "heads", "kv_heads", "causal", "positions", "kv_order", "out"), \
	  attention_attrs, 1, attention_shape, C_ATTENTION, (C_ATTENTION, C_MERGE), opref_attention) \
	X(RMSNORM, "rmsnorm", 4, ("x", "scale"), 2, ("op", "name", "x", "scale", "eps", "out"), \
	  norm_attrs, 1, shape_norm, C_RMSNORM, (C_RMSNORM, C_SUMSQ, C_MUL), opref_rmsnorm) \
	X(SILU, "silu", 4, ("x"), 1, ("op", "name", "x", "out"), \
	  no_attrs, 1, shape_same, C_SILU, (C_SILU), opref_silu) \
	X(MUL, "mul", 4, ("a", "b"), 2, ("op", "name", "a", "b", "out"), \
	  no_attrs, 1, shape_mul, C_MUL, (C_MUL), opref_mul) \
	X(ROPE, "rope", 4, ("x", "positions"), 1, \
	  ("op", "name", "x", "positions", "heads", "head_dim", "head_stride", "pairs", "theta", "scaling", "patch_grid", "class_tokens", "out"), \
	  rope_attrs, 1, shape_rope, C_ROPE, (C_ROPE), opref_rope) \
	X(APPEND, "append", 5, ("x", "positions"), 2, ("op", "name", "cache", "x", "positions", "first"), \
	  append_attrs, 0, NULL, C_APPEND, (C_APPEND), opref_append) \
	X(EMBED, "embed", 5, ("ids", "table"), 2, ("op", "name", "ids", "table", "transposed", "out"), \
	  embed_attrs, 0, shape_embed, C_COUNT, (C_COUNT), opref_embed) \
	X(LAST, "last", 5, ("x"), 1, ("op", "name", "x", "out"), \
	  no_attrs, 1, shape_last, C_LAST, (C_LAST), opref_last)

#endif
