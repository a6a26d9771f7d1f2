/* digest: what a state (a KV cache) means, as a digest (formats/model.md,
 * "State digests").
 *
 * A state's values are what its append writes: the rows x, made by the
 * ops that feed x back to the inputs and parameters, and read by the
 * attentions over it. Two models (a prefill and its decode step) can
 * share a state only when that chain is the same. model_state_digest
 * writes it as a canonical text, one line per tensor of the chain, and
 * returns the text's FNV-1a 64:
 *
 *   amp-state-digest 1
 *   state cache [*, 32, 64] x1 fp16
 *   append x #1 positions #2
 *   #1 = rope heads 2 head_dim 16 theta 1000000 x #3 positions #2
 *   #2 = input pos int32 [*, *, 1]
 *   ...
 *   read by attention heads 4 kv_heads 2 head_dim 16 causal 1
 *
 * Tensors are numbered in the order a depth-first walk from x meets them
 * (operands in their op's order), so names of activations and ops, the
 * order of the file's ops, pins, batch and token counts, an append's
 * `first` and an activation's fp8 cast scale (a calibration) do not
 * count; every op's kind and attributes, the inputs' names and dtypes, the
 * parameters' names, shapes, instance counts, dtypes and fp8 scales (the
 * scales file's, when it names them), and the state's own do. An
 * attention whose kv is a state, or the rows an append writes into one,
 * reads "kv state NAME" (its positions operand not counted): a prefill
 * attending over the rows it appends and a decode step attending over the
 * cache are the same reader.
 */
#ifndef AMP_DIGEST_H
#define AMP_DIGEST_H

#include <stdint.h>

#include "model/model.h"
#include "model/scales.h"

#define STATE_DIGEST_VERSION 1

/* The digest of state s (a T_STATE tensor of m) with scales sc (NULL:
 * none); *text, when text is not NULL, receives the canonical text (free
 * it). */
uint64_t model_state_digest(const Model *m, const Scales *sc, int s, char **text);

#endif
