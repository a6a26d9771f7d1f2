/* run_int.h: what the parts of the run module share; not a public
 * header: lib/run/run.h stays the module's contract.
 *
 * The parts, highest first; each calls only those below it (never back):
 *
 *   run_check.c     the stage against the model it lowers: tensors, ops,
 *                   GEMM records, then step by step
 *   run_check_fields.c every compute step's fields derived again from its
 *                   op and the plan's choices
 *   run_program.c   run_program: the values encoded into SRAM, the steps
 *                   in order, a repeat's body once per iteration
 *   run_exchange.c  a phase's exchange from the program's rows, its
 *                   writes and destinations checked byte for byte
 *   run_opcheck.c   each op checked against the model's reference on the
 *                   machine's own inputs
 *   run_model.c     the model's FP32 reference and the fp8 calibration
 *   run_ref.c       the references' arithmetic, the stage's reference,
 *                   the comparison of outputs
 *   run_data.c      the inputs' and parameters' values, the instance cache
 *   run_carry.c     the states carried from one run to the next
 *   run_compute.c   the machine's compute steps
 *   run_attention.c a tile's attention and the merge of its partials
 *   run_shard.c     a tile's shards decoded from and rounded into SRAM
 *   run_gemm.c      the matrix-product kernels
 *   run_save.c      --save: a run's outputs as .npy files
 *   run.c           the numbers' encoding and decoding, the timing
 */
#ifndef AMP_RUN_INT_H
#define AMP_RUN_INT_H

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

#include "run/run.h"
#include "run/sim.h"

/* ---- the stage's compute steps against the model's ops (run_check.c) ---- */

/* Every compute step serves a model op (or a repeat's carry) in a kind
 * it lowers to; every op but matmul and patchify has one step, reading
 * the model's operands in order and writing its result, with the model's
 * attention heads and score scale. Run by run_check_model. */
int run_check_steps(const Plan *pl, const Model *m, Err *e);

/* ---- every compute step field by field (run_check_fields.c) ---- */

/* Each model op's compute steps derived again from the op and the plan's
 * choices: a matmul's GEMM record (m, k, n, format) from the model's
 * shapes, its cast, pack, product and reduction steps (their operand
 * counts, the tensor of every operand and result) from that record; an
 * attention's merge and chunks, an rmsnorm's sums of squares, an append's
 * first; a repeat's carries. Refuses the first disagreement at the op's
 * mark, naming the step, the field, the stage's value and the plan's. Run
 * by run_check_model after run_check_steps. */
int run_check_fields(const Plan *pl, const Model *m, Err *e);
/* The name of the tensor placement place holds ("" when out of range). */
const char *run_held(const Plan *pl, int place);
/* Is rmsnorm op folded into the GEMMs that read it (formats/plan.md,
 * version 13): the stage has a mul step for it and no rmsnorm step? */
int run_norm_folded(const Plan *pl, const char *op);
/* The folded rmsnorm (run_norm_folded) whose result is model tensor mt,
 * or NULL. */
const MOp *run_fold_of(const Plan *pl, const Model *m, int mt);
/* Model tensor mt's fused cast (formats/plan.md, "Fused casts"): the
 * stage's tensor '<mt>.<F>', in format F, that mt's maker writes instead
 * of mt, when mt itself is placed nowhere and only matmuls read it, each
 * as a, each of a b in F (not mt's format); else -1. */
int run_fused_cast(const Plan *pl, const Model *m, int mt);

/* ---- the per-op check (run_opcheck.c) ---- */

/* The FP32 arithmetic's own share of an op's tolerance: the machine and
 * the reference sum in different orders and precisions (fp32 and double). */
#define OPCHECK_ARITH (1.0 / 65536)
/* Called by run_program after step s (iteration iter of its repeat) with
 * every tensor's encoded values: when s is a model op's last compute
 * step, the op is checked (run_opcheck_op). */
int run_opcheck_step(OpCheck *c, int s, int64_t iter, uint8_t *const *enc, Err *e);
/* One op of the model reference on fp32 values (run_model.c). */
void run_model_op(const Model *m, ModelRef *r, int k, int64_t iter);

/* ---- the references' arithmetic (run_ref.c; run_model.c shares it) ---- */

/* C[M x N] += A[M x K] B[K x N] (+ bias), fp32, rows split over two
 * threads. */
void run_ref_gemm2(const float *A, const float *B, const float *bias, float *C, int64_t M, int64_t K,
		   int64_t N);
/* Attention on two threads: q [B, Tq, qw], kv [B, Tk, kw] (fused: kv ==
 * q, keys after the C query columns), y [B, Tq, C]; G heads of k and v
 * (order 1: kv_order heads, each kv head's keys then its values), causal
 * or not, or causal by the query rows' positions pos. */
void run_ref_attend(const float *q, const float *kv, const float *pos, float *y, int64_t B, int64_t Tq,
		    int64_t Tk, int64_t qw, int64_t kw, int64_t C, int64_t H, int64_t G, int causal, int order,
		    int fused, double scale);
/* Layernorm and RMSNorm of rows of C values, in double. */
void run_ref_layernorm(const float *x, const float *g, const float *b, float *y, int64_t rows, int64_t C,
		       double eps);
void run_ref_rmsnorm(const float *x, const float *g, float *y, int64_t rows, int64_t C, double eps);
/* y[i] = x[i] * sigmoid(x[i]), in double. */
void run_ref_silu(const float *x, float *y, int64_t n);
/* Rotary positions on rows of C values, in double: each row's heads of D
 * columns (head h at column h*S) rotated by pos[row], pair i of a head
 * its elements i and i + D/2, or (interleaved) 2i and 2i + 1. */
void run_ref_rope(const float *x, const float *pos, float *y, int64_t rows, int64_t C, int64_t heads, int64_t D,
		  int64_t S, int interleaved, double theta, const RopeScale *sc);
/* The same by a patch grid (RopeGrid; T tokens an entry), as PE-Core's
 * Rope2D: no positions read. */
void run_ref_rope_grid(const float *x, float *y, int64_t rows, int64_t C, int64_t heads, int64_t D, int64_t S,
		       int interleaved, double theta, const RopeGrid *g, int64_t T);
/* The state c [B, P, W] with rows x [B, T, W] written at their positions
 * pos [B, T], into y. */
void run_ref_append(const float *c, const float *x, const float *pos, float *y, int64_t B, int64_t T,
		    int64_t P, int64_t W);
/* y [B, 1, C]: each batch entry's last row of x [B, T, C]. */
void run_ref_last(const float *x, float *y, int64_t B, int64_t T, int64_t C);
/* y[i] = a[i] * b[i % nb] (nb < n: a folded rmsnorm's scale, the same for every row). */
void run_ref_mul(const float *a, const float *b, float *y, int64_t n, int64_t nb);
/* y[i] = x[i] + b[i % nb]. */
void run_ref_add(const float *x, const float *b, float *y, int64_t n, int64_t nb);

/* ---- numbers and timing (run.c) ---- */

/* Codes decoded once by run_tables(), which every user calls first: fp8's 256
 * at scale 0 and the power of two of every scale (run_f8_pow2[scale + 126]). */
extern float run_f8_table[256], run_f8_pow2[253];
void run_tables(void);
void run_quantize_encode(float *v, int64_t n, Format f, int scale, uint8_t *enc);
/* run_gemm_width's limit (that is in run_gemm.c; run.c's fp8 decoding
 * obeys it too). */
extern atomic_int run_gemm_pin;
void run_f8_decode(const uint8_t *b, int64_t n, float k, float *v);
void run_decode_run(const uint8_t *mem, const int64_t *off, int64_t n, Format f, int scale, float *v);
void run_encode_run(const float *v, const int64_t *off, int64_t n, Format f, int scale, uint8_t *mem);
/* What run_stats returns: each part adds its own times. */
extern RunStats run_totals;
double run_thread_cpu(void);

/* The tanh form of gelu in fp32: the machine's (run_compute.c, by table
 * where it can) and the references'. */
static inline float run_gelu_f32(float x)
{
	return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* silu (x times its sigmoid) in fp32: the machine's. */
static inline float run_silu_f32(float x)
{
	return x / (1.0f + expf(-x));
}

/* ---- data (run_data.c) ---- */

/* How a tensor's values are made when no --data file holds them: normal
 * with this mean and deviation. How a parameter is used decides its
 * realistic scale: a matmul's weight 1/sqrt(K), its bias 0.02, a
 * layernorm's or rmsnorm's scale around 1, anything else 0.02; an input 1. */
typedef struct {
	double mean, sd;
	int64_t vocab;          /* an int32 input: token ids, uniform in 0 .. vocab - 1 (an embed's); 0: positions */
} Dist;

/* What makes one input's or parameter's values: equal descriptions give
 * equal values, so the model's reference shares the program's arrays. */
typedef struct {
	const char *name;
	int rank;
	const int64_t *shape;
	int64_t count;          /* stacked instances */
	Format fmt;
	int scale;
	Dist d;
	int param;              /* a parameter (else an input): its .npy may be [count, ...] when count is 1 */
} DataSpec;

/* Per tensor, the one instance of a lazy tensor made last (by index). */
typedef struct {
	float **buf;
	int64_t *at;
	int n;
} Lazy;

DataSpec run_plan_spec(const Plan *pl, int t);
Dist run_model_dist(const Model *m, int t);
int run_same_spec(const DataSpec *a, const DataSpec *b);
int64_t run_spec_values(const DataSpec *x);
int run_lazy_spec(const DataSpec *x, const RunOpts *o);
void run_instance_data(const DataSpec *x, const RunOpts *o, int64_t iter, float *v, uint8_t *enc);
/* The options inputs are made with in run o->step (run_data). */
RunOpts run_input_opts(const RunOpts *o);
/* A state's n values at the start of the run: carried (the machine's,
 * or the reference's when ref), else zero; the caller frees them. */
float *run_state_values(const RunOpts *o, const char *name, int64_t n, int ref);
int run_tensor_data(const DataSpec *x, const RunOpts *o, float *v, Err *e);
int run_data_dir_ok(const RunOpts *o, Err *e);
void run_patchify(const float *x, int64_t B, int64_t C, int64_t H, int64_t W, int64_t p, int64_t cls,
		  float *y);
int run_cacheable(const DataSpec *x);
void run_cache_put(RunCache *c, const DataSpec *x, uint64_t seed, uint8_t *enc);
void run_cache_filled(RunCache *c);
int run_cache_holds(const RunCache *c, const uint8_t *enc);
void run_lazy_init(Lazy *z, int n);
float *run_lazy_get(Lazy *z, int t, const DataSpec *x, const RunOpts *o, int64_t iter);
void run_lazy_free(Lazy *z);

/* ---- the machine (run_compute.c, run_attention.c, run_shard.c;
 * run_exchange.c runs it) ---- */

/* The values the movement check expects: each tensor's values encoded in
 * its format once (every instance), re-encoded when a compute step
 * replaces them, so a check copies bytes instead of encoding. */
typedef struct {
	const Plan *pl;
	const RunOpts *o;
	float *const *val;
	uint8_t **enc;
} Values;

/* Shard index on each tile of a placement (-1: none), replicas included. */
typedef struct {
	int64_t *shard;
} TileShards;

/* What a decoded operand was made from: a tile whose bytes are the same
 * (its replica of the same shard, in the same run of a step) uses it as
 * it is, since the same bytes decode to the same floats. */
typedef struct {
	int64_t exec;           /* the compute step's run it was made in (-1: none) */
	const uint8_t *raw;
	int64_t bytes, key;     /* key: what else shapes it (rows rounded up) */
	Layout l;
} Made;

/* An attention operand's panels (one head's columns), and what they were
 * made from; and its whole shard decoded, and what that was made from. */
typedef struct {
	Made from, dfrom;
	float *p, *dec;
	int64_t cap, dcap;
} KvPanels;

typedef struct {
	Sim s;
	const Plan *pl;
	float **val;
	TileShards *ts;         /* per placement, built on first use */
	uint8_t *stacked;       /* per placement: plan_stacked, found once */
	Values *vs;
	Err *e;
	float *scr[2][4];       /* per compute thread: buffers kept from step to step */
	int64_t scap[2][4];
	KvPanels kv[2][2];      /* per compute thread: an attention's keys and values, as last made */
	int64_t exec;           /* compute steps run so far */
	struct ExKeep *xk;      /* run_exchange.c's largest arrays, kept from phase to phase */
} RunMachine;

/* A compute thread's share of a step: the tiles t of its output with
 * t % parts == part. */
typedef struct {
	RunMachine *m;
	int step, part, parts;
	double cpu;             /* the thread's CPU seconds on the step, the expected bytes' copies not counted */
	uint8_t *enc;           /* the output tensor's expected bytes */
} Work;

/* Runs compute step i on every tile of its output (run_compute.c). */
int run_compute_step(RunMachine *m, int i);
/* Runs the copy steps first .. last, exchange phase ph (run_exchange.c;
 * ph -1: a step of on-tile copies only): the phase's tables decoded and
 * matched with the schedule, every write checked, the copies made and
 * each destination checked byte for byte. */
int run_phase(RunMachine *m, const Program *prog, int ph, int first, int last);
/* Frees what run_phase kept in m from phase to phase. */
void run_exchange_free(RunMachine *m);

/* Attention step st on tile t (run_attention.c): q (R rows of the tile's
 * heads, qcols wide) into res (R rows, C wide, of its heads' outputs or
 * of their partials). */
void run_attention_tile(RunMachine *m, const Work *w, const Step *st, int64_t t, const float *q, int64_t qcols,
			int64_t R, int64_t C, float *res);
/* The online-softmax merge of KB key blocks' partials (each row m, l,
 * o[D]) into res (R x D); half: an fp16 partial's, o divided by l. */
void run_merge(const float *a, float *res, int64_t KB, int64_t R, int64_t D, int half);

/* ---- a tile's shards (run_shard.c) ---- */

/* Placement p's shard index on each tile (m->ts[p], made on first use). */
const int64_t *run_shards_of(RunMachine *m, int p);
/* Compute thread part's buffer i, at least n floats (its contents lost
 * when it grows). */
float *run_scratch(RunMachine *m, int part, int i, int64_t n);
/* Placement p's shard on tile t: its bytes (a stacked home's: this
 * iteration's instance) and its layout. */
const uint8_t *run_shard_mem(RunMachine *m, int p, int64_t t, Layout *l);
/* The shard at mem (layout l, in fmt and scale sc) decoded into v,
 * row-major. */
void run_decode_shard(const uint8_t *mem, const Layout *l, Format fmt, int sc, float *v);
/* Shard p of tile t decoded into floats, row-major (the caller frees
 * them). */
float *run_read_shard(RunMachine *m, int p, int64_t t, Layout *l);
/* v (row-major) rounded into shard p of tile t, in its format and layout. */
void run_write_shard(RunMachine *m, int p, int64_t t, const float *v);
/* The first index along dimension dim of placement p's shard on tile t. */
int64_t run_shard_first(RunMachine *m, int p, int64_t t, int dim);
/* A matmul's left operand (R x K) in run_gemm_strips's strips of mp
 * rows, and its right operand (K x N) in 16-column panels, in thread
 * w->part's scratch buffers. */
const float *run_read_strips(RunMachine *m, const Work *w, int p, int64_t t, Layout *l, int64_t mp);
const float *run_read_panels(RunMachine *m, const Work *w, int p, int64_t t, Layout *l);
/* Shard lin of placement out, as its first replica's tile holds it, into
 * the tensor's encoded bytes enc (*off, *cap: a row's offsets, kept
 * between calls). */
void run_enc_shard(RunMachine *m, const Placement *out, uint8_t *enc, int64_t lin, int64_t **off, int64_t *cap);

/* ---- the matrix products (run_gemm.c) ---- */

#define GEMM_S RUN_GEMM_S       /* run_gemm_strips's strip width (GEMM_KC a multiple of it) */
void run_pack_strips(const float *A, int64_t lda, int64_t M, int64_t K, int64_t mp, float *d);
/* gemm_kernel.h's 8-wide copy's panel packing. */
void run_pack_panel_8(const float *B, int64_t N, int64_t k0, int64_t kc, int64_t j0, int64_t nj, float *d);

#endif
