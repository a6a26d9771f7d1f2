/* bound: a lower bound on the modelled cycles of any program of a model on
 * a machine, independent of the plan (formats/capture.md, "The bound").
 *
 * It reads only what every plan of the model shares: the tensors' logical
 * shapes, the ops (one essential compute step each, a GEMM record per
 * matmul), the repeats' counts and the machine's rates. Two plans of the
 * same model on the same machine get the same bound; a plan that moves
 * more, splits more or syncs more cannot raise it. Four terms:
 *
 *   compute   the essential compute (floor.h's) spread over every tile
 *   calls     matmul_call_cycles x the products on the longest chain of
 *             dependent products (an attention is two: q.k^T, then p.v)
 *   sync      sync_cycles x the exchanges the dependencies force on the
 *             longest chain: a norm reads whole rows, and a row that
 *             depends on a product whose resident operand (its weights, or
 *             an attention's cache) exceeds one tile was computed across
 *             tiles, so it is gathered (or its statistics combined) first
 *   movement  per group of GEMMs sharing their a operand (one run): the
 *             Loomis-Whitney argument, jointly with the group's compute.
 *             A tile doing f multiply-adds touches a, b, c elements of
 *             A, B, C with abc >= f^2, so a + b + c >= 3 f^(2/3); over all
 *             tiles, with none doing more than fmax, the touches are at
 *             least 3 F / fmax^(1/3), and each input element (and each
 *             output) is resident once, so at least
 *             3 F / fmax^(1/3) - (|A| + |B| + |C|) elements are received.
 *             The group's time is at least
 *             g(fmax) = fmax / rate + received x bytes / (exchange rate x tiles),
 *             minimised over fmax in [F / tiles, F]; the term is that
 *             minimum less the F / (tiles x rate) the compute term holds.
 *
 * Attention's own movement is not counted (0, a valid if weak bound).
 * The terms are computed exactly (integers) but movement, whose minimum
 * is real, is rounded down.
 */
#ifndef AMP_BOUND_H
#define AMP_BOUND_H

#include <stdint.h>

#include "stage/plan.h"

typedef struct {
	int64_t compute, calls, sync, movement, total;
	int64_t products;       /* products on the longest chain (calls / matmul_call_cycles) */
	int64_t syncs;          /* forced exchanges on the longest chain */
	int64_t spread;         /* GEMMs and attentions whose resident operand exceeds a tile */
} ModelBound;

void model_bound(const Plan *pl, ModelBound *b);

/* One group's movement term (cycles, rounded down): F multiply-adds,
 * R = |A| + |B| + |C| elements of the smallest element size eb bytes,
 * at rate MACs a cycle, on tiles tiles moving x bytes a cycle each. */
int64_t bound_movement(double F, double R, double eb, double rate, double tiles, double x);

#endif
