/* run: executing a program on the machine model (docs/machine.md §3, §8; amp-run).
 *
 * Values. Every tensor has its logical values as floats: machine-exact
 * (what its format holds: fp16 rounded to nearest even, fp8 F143 with the
 * tensor's power-of-two scale). Inputs and parameters come from .npy files
 * or are generated from a seed; every other tensor's values are read back
 * from the tiles after the compute step that writes it.
 *
 * Execution. Each tile has its own SRAM. Initial placements are written
 * with their tensor's bytes (padding zero). Steps run in order. A phase
 * runs its transfers in record order and takes every SEND and RECV from
 * the program's decoded rows: the row's next instruction must be the
 * fragment's, and its addresses are used, so the encoded tables are what
 * moves the bytes (multicast, loopback and forwarding as encoded). Before a
 * phase every copy destination (but aliases of their source) is filled
 * with 0xA5, so a missing byte shows; after it, every destination is
 * checked byte for byte against its tensor's values in its layout, padding
 * zero (lib/run/sim.h), naming tile, phase, offset, tensor, expected, found.
 *
 * Numbers (this machine's definition). matmul: each tile sums a*b over its
 * K range in fp32, in K order, adds the bias (when K is not split) and
 * rounds once to fp16; reduce: the K partials (fp16) summed in fp32 in K
 * order, plus the bias, rounded once to fp16; gelu (tanh form), add and
 * layernorm (fp32 mean and variance, two passes) compute in fp32 and round
 * to nearest even into their output's format; cast re-encodes (fp8 with
 * the target's scale, saturating); pack copies values into amp-left with
 * zero padding.
 */
#ifndef AMP_RUN_H
#define AMP_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "stage/plan.h"
#include "model/model.h"
#include "lower/program.h"
#include "model/scales.h"

/* Stacked parameters made from the seed, as the machine encoded every
 * instance of them (run_program puts them here): the reference decodes
 * an instance whose description (name, shape, format, scale,
 * distribution, seed) is the same instead of making it again, the same
 * bits. Start from run_cache_new(); run_cache_free() frees it. */
typedef struct RunCache RunCache;
RunCache *run_cache_new(void);
void run_cache_free(RunCache *c);
/* The machine will fill c: the reference, running alongside, waits for
 * it before it looks an instance up (run_program marks it filled once
 * its parameters are encoded, or when it ends). */
void run_cache_expect(RunCache *c);

typedef struct OpCheck OpCheck;

/* amp-run holds every value as a float, int32 ones too (token ids,
 * positions): those are exact up to this magnitude, and refused past it. */
#define RUN_EXACT_INT (1 << 24)

/* States carried from one run to the next (amp-run --steps, --prefill):
 * each by name, the machine's values and the reference's. A state that is
 * not here starts at zero. */
typedef struct {
	int n;
	char **name;
	float **mach, **ref;    /* [n]: values, each the state's whole tensor */
	int64_t *count;         /* [n]: their number */
} Carry;
void carry_free(Carry *c);
/* Keeps a copy of values v (n of them) of state name, the machine's
 * (ref 0) or the reference's (ref 1). */
void carry_keep(Carry *c, const char *name, const float *v, int64_t n, int ref);
/* The same, taking v over (the machine's values) instead of copying it. */
void carry_take(Carry *c, const char *name, float *v, int64_t n);
/* A parameter's key in RunOpts.params: its name, format and scale, in a
 * new string (free it). */
char *param_key(const PTensor *x);
/* Values of name (n of them) in c (NULL: none), the machine's (ref 0) or
 * the reference's (ref 1), or NULL. */
float *carry_find(const Carry *c, const char *name, int64_t n, int ref);
/* A prefill's states carried into a program: the states plans a (path
 * apath) and b share, by name, must have one shape and dtype but for the
 * batch, which a's may divide (the same part for every state): a then
 * runs once per part of b's batch. Returns the parts (*batch: a's batch),
 * or -1 with *e naming the state that differs, or that none is shared. */
int64_t carry_parts(const Plan *a, const char *apath, const Plan *b, const char *bpath, int64_t *batch, Err *e);
/* The same states, by what writes them: each state of model b (path
 * bpath, scales bsc) that model a (the prefill's) declares too must have
 * a's digest (lib/model/digest.h); else -1 with *e naming the state, both
 * paths, both digests and the first line of the digests' texts that
 * differs. A NULL model (a program that carries none) is refused: -1. */
int carry_digests(const Model *a, const Scales *asc, const char *apath, const Model *b, const Scales *bsc,
		  const char *bpath, Err *e);
/* Stacks the states one prefill run of plan pl left (one) after those of
 * the runs before (all): each a further part of the batch, its outermost
 * axis, in every instance of a stacked state. */
void carry_stack(Carry *all, const Carry *one, const Plan *pl);

typedef struct {
	const char *data_dir;   /* inputs and parameters as DIR/<name>.npy, or NULL */
	const char *weights_dir;        /* parameters as DIR/<name>.npy (amp-import's, run_weights_check),
					 * before data_dir; or NULL */
	uint64_t seed;
	int quantized;          /* store values in their formats (0: raw fp32, for calibration) */
	RunCache *cache;        /* NULL: nothing shared */
	OpCheck *opcheck;       /* NULL: no per-op check (run_opcheck_new) */
	int64_t step;           /* the run's index: from 1 on, inputs are made from the seed and the step,
				 * never read from data_dir (parameters do not change) */
	int64_t position;       /* added to every made position (an int32 input) */
	int64_t part, parts;    /* a prefill run per part of the decode's batch (parts > 1): this run is part
				 * `part`, and reads its inputs from data_dir whatever its step, each .npy
				 * holding every part's on its outermost axis ([parts x batch, ...]) */
	const char *prog;       /* the program's name, for messages (NULL: none) */
	const Carry *carry;     /* states' values at the start (NULL: zero) */
	const Carry *given;     /* inputs' values by name (its machine's), for both the machine and the
				 * reference (amp-run --generate's token ids), or NULL */
	const Carry *params;    /* parameters' values made by an earlier run (its machine's), shared, not
				 * copied: the caller keeps them (NULL: none) */
	/* progress, for a tool to show on a terminal: before each phase run,
	 * "phase P", done of the run's total phase runs (NULL: none) */
	void (*progress)(void *ctx, const char *what, int done, int total);
	void *progress_ctx;
} RunOpts;

/* amp-run --weights DIR: the manifest DIR/weights.yaml that amp-import
 * wrote names every parameter of pl and no other tensor, each with pl's
 * shape ([count, ...]; with count 1 one instance's too), fp32, and the
 * digest of its file DIR/<name>.npy, which must still be the file's. The
 * first disagreement is an error naming the tensor. */
int run_weights_check(const Plan *pl, const char *dir, Err *e);

/* val[t] for every input, parameter and state of pl (others NULL). The
 * positions an append reads must name rows of its state. */
int run_data(const Plan *pl, const RunOpts *o, float **val, Err *e);
/* Executes prog on the machine model; fills val for every other tensor. A
 * stacked parameter made from the seed has no val (NULL): its users make
 * the instance they need (o), so no layer's weights are kept as floats. */
int run_program(const Program *prog, const Plan *pl, const RunOpts *o, float **val, Err *e);
/* The FP32 reference from the stage's op-level steps (no placement, no
 * cast inside a matmul, every activation fp32), on the same input and
 * parameter values (shared, not copied): ref[t] for every activation and
 * output. It follows the stage, so amp-run uses it only when the program
 * names no model; run_model_reference is the independent one. */
int run_reference(const Plan *pl, const RunOpts *o, float *const *val, float **ref, Err *e);
/* The per-op numerical check (docs/machine.md §8). run_program, given
 * one in RunOpts, checks every model op after its last compute step, in
 * every iteration: the op interpreted in FP32 by the model reference's
 * code on the machine's own values of its inputs, against the machine's
 * result. The relative L2 error ||machine - reference|| / ||reference||
 * must be at most the op's tolerance: twice the sum of the unit roundoffs
 * on its path (its result's format; a matmul's cast of a to fp8 and its
 * fp16 K partials, one rounding per K part; OPCHECK_ARITH for the fp32
 * arithmetic). The first op over it fails the run, named. An op with no
 * compute step (patchify, on the host) is not checked. */
typedef struct {
	const char *op;
	double worst, tol;      /* the largest relative L2 error over its runs; its tolerance */
	int64_t worst_iter;     /* the iteration of the worst (-1: never run) */
	int64_t runs;
} OpCheckResult;
/* m must be the stage's model (run_check_model); sc its scales or NULL. */
OpCheck *run_opcheck_new(const Model *m, const Scales *sc, const Plan *pl, const RunOpts *o);
/* Every model op's result so far (*r, one per op; returns how many). */
int run_opcheck_ops(const OpCheck *c, const OpCheckResult **r);
/* How many ops have a compute step to check. */
int run_opcheck_checked(const OpCheck *c);
/* Checks model op k's machine result out against the reference on the
 * machine's inputs in[j] (one instance each, the op's operand order);
 * iteration iter is recorded. */
int run_opcheck_op(OpCheck *c, int k, int64_t iter, float *const *in, const float *out, Err *e);
void run_opcheck_free(OpCheck *c);
/* Minimum-cosine inputs: cosine similarity and largest absolute error. */
void run_compare(const float *a, const float *b, int64_t n, double *cosine, double *max_abs);
/* The FP32 reference from the model's definition and the data alone, never
 * the lowering's records: the model's inputs and parameters made as
 * run_data makes them, but from the model's own tensors (dtype; fp8 scale
 * from sc, else the model's), then every op interpreted in order, a
 * repeat's body count times (formats/model.md). v[i] per model tensor.
 * An input or parameter of the program's data (pval of pl, or NULL) made
 * the same way (name, shape, format, scale, distribution) is shared, not
 * copied. */
typedef struct {
	float **v;              /* NULL for a stacked parameter made from the seed: */
	float **inst;           /* ... its instance being used, made when needed */
	int64_t *at;            /* which instance inst[i] holds */
	char *own;              /* v[i] allocated here */
	double *amax;           /* NULL, or the largest magnitude per tensor over every iteration */
	double *amax_pre;       /* NULL, or per rmsnorm result: the largest of x times the norm's scale
				 * (what a folded norm casts: <out>.prenorm) */
	int n;
	const Scales *sc;
	RunOpts o;
} ModelRef;
int run_model_reference(const Model *m, const Scales *sc, const RunOpts *o, const Plan *pl,
			float *const *pval, ModelRef *r, Err *e);
/* Its two halves: the data, then the ops. */
int run_model_data(const Model *m, const Scales *sc, const RunOpts *o, const Plan *pl, float *const *pval,
		   ModelRef *r, Err *e);
void run_model_ops(const Model *m, ModelRef *r);
void model_ref_free(ModelRef *r);
/* Scales from the model's FP32 reference amax (lib/model/scales.h): fp8
 * parameters and inputs from their own values; each activation a matmul
 * casts to fp8 (its a, when b is fp8) and each cast op's fp8 result from
 * its reference values; for such an a made by an rmsnorm, also
 * <a>.prenorm, the norm's x times its scale (what a folded norm casts,
 * formats/plan.md). Reads the model only: no plan, no machine. */
int run_calibrate(const Model *m, const RunOpts *o, Scales *sc, Err *e);
/* run_calibrate of model file model (which machine mc must hold), and
 * with prefill (or NULL) of that model file too: one set of scales for
 * both programs, each name at the larger of its two (scales_merge_max; a
 * state the prefill writes and the decode reads keeps one range). */
int run_calibrate_files(const char *model, const char *prefill, const Machine *mc, const RunOpts *o, Scales *sc,
			Err *e);

/* ---- a decoder's runs (run_tokens.c) ---- */

/* The token ids an embed (the first) reads, and in *logits the output
 * [B, T, V] over its table's V rows; -1 each when there is none. */
int run_token_ids(const Plan *pl, int *logits);
/* Each batch entry's greedy next token: the largest of its last row of
 * logits v [B, T, V] (the first, on a tie). */
void run_next_tokens(const float *v, const PTensor *t, int64_t *tok);
/* The tokens of one run: the rows of the program's first int32 input
 * (its positions), 0 when it has none. */
int64_t run_tokens(const Plan *pl);

/* One sequence's next token from one run, judged: the machine's and the
 * reference's greedy tokens (run_next_tokens), the reference's margin
 * (its largest logit less its second largest) and the RMS over the row
 * of the machine's logits less the reference's. A step is decisive when
 * the margin is over RUN_DECISIVE times that RMS: a disagreement there is
 * more than the machine's rounding could explain. */
typedef struct {
	int64_t machine, reference;
	double margin, rms;
} NextToken;
#define RUN_DECISIVE 4
/* nt[B]: each batch entry's, from the machine's logits mv and the
 * reference's rv [B, T, V] (their last rows). */
void run_next_judge(const float *mv, const float *rv, const PTensor *t, NextToken *nt);
int run_next_decisive(const NextToken *nt);
/* What the next tokens of nseq sequences add up to (tok[q][0..len[q]-1],
 * in run order): agreements of all, and at decisive steps, and the first
 * divergence (the earliest token, the lowest sequence among equals;
 * first_seq -1 when none). */
typedef struct {
	int64_t agree, total, decisive_agree, decisive;
	int64_t first_seq, first_at;
	NextToken first;
} NextSummary;
void run_next_summary(NextToken *const *tok, const int64_t *len, int64_t nseq, NextSummary *s);
/* Prints the summary's lines ("next token: ..."), and with generate each
 * sequence's tokens, the machine's and the reference's, and where the two
 * part (docs/machine.md §8, "Next tokens"). */
void run_next_print(FILE *f, NextToken *const *tok, const int64_t *len, int64_t nseq, int generate);
/* The stage agrees with the model it claims to lower (m, and the fp8
 * scales sc, or NULL for the model's own): every model tensor is in the
 * stage with its shape, instances, dtype and scale (a cast `<x>.fp8` with
 * x's scale); every op has steps; every matmul's GEMM record reads the
 * model's a, b and bias and writes its out; every layernorm step has the
 * op's eps; the model's outputs are the stage's. The first disagreement
 * is named (the model's reference, run_model_reference, then shows what
 * the disagreement costs). */
int run_check_model(const Plan *pl, const Model *m, const Scales *sc, Err *e);
/* The same from the files' texts (a program's MODEL and SCALES sections,
 * or what amp-emit embeds), named mname and sname in messages; scales may
 * be NULL. */
int run_check_texts(const Plan *pl, const char *model, size_t mlen, const char *mname,
		    const char *scales, size_t slen, const char *sname, Err *e);
/* --save DIR: values v of output t (the machine's; suffix ".ref": the
 * FP32 reference's) as DIR/<name><suffix>.npy, or as
 * DIR/<sub>/<name><suffix>.npy when sub is not NULL (one of several
 * runs: its subdirectory, made when missing). A name holding '/' is
 * refused: no file is written outside DIR. */
int run_save(const char *dir, const char *sub, const PTensor *t, const char *suffix, const float *v, Err *e);
int64_t tensor_count(const PTensor *t);
/* Values of all instances of a tensor (count x tensor_count). */
int64_t tensor_values(const PTensor *t);
/* Where the time went so far (wall seconds): the machine's matrix
 * products (floating-point operations, and seconds including reading and
 * writing shards), its compute steps (all ops) and its phases and
 * on-tile copies with their movement checks; its setup (encoding the
 * inputs and parameters, filling the SRAM images); the reference's matrix
 * products. Each field has one writer: the machine's thread or the
 * reference's. */
typedef struct {
	double gemm_flops, gemm_secs, compute_secs, phase_secs;
	double gemm_cpu;                /* the matmul steps' CPU seconds, both threads' */
	double table_secs, route_secs, poison_secs, move_secs, check_secs;     /* the phases': decoding tables,
						 * matching them with the schedule, poisoning destinations, moving
						 * fragments (a tile's poisoning and moves together, when they run
						 * tile by tile), checking */
	double encode_secs, fill_secs;  /* setup: encoding every tensor, filling the SRAM images */
	double ref_gemm_flops, ref_gemm_secs, ref_gemm_cpu;
} RunStats;
void run_stats(RunStats *s);
double run_now(void);
float quantize(float x, Format f, int scale);
/* v[i] = quantize(v[i], f, scale) for n values. */
void quantize_n(float *v, int64_t n, Format f, int scale);
/* C[M x N] += A[M x K] B[K x N] (row-major, dense), every element summed
 * in K order with one rounding per multiply and per add: the machine's
 * matrix product, blocked. */
void run_gemm(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N);
/* run_gemm's product from operands already packed, so a reader can
 * decode straight into them: A in strips of RUN_GEMM_S columns (strip s
 * at A + s * rs, its row r at r * RUN_GEMM_S in it), rs at least
 * RUN_GEMM_S times M rounded up to run_gemm_rows(), rows from M to that
 * zero; B in panels of 16 columns (panel p at bp + p * K * 16, row k's 16
 * columns at k * 16 in it, zeros past N). The same bits as run_gemm. */
#define RUN_GEMM_S 32
void run_gemm_strips(const float *A, int64_t rs, const float *bp, float *C, int64_t M, int64_t K, int64_t N);
/* n fp8 codes decoded at a scale (-126 to 126), as f8s_to_f32 does each. */
void run_decode_fp8(const uint8_t *b, int64_t n, int scale, float *v);
/* The machine's gelu of n values decoded from fmt at scale (fp16 and
 * fp8 by table, the same bits as computing each). */
void run_gelu(const float *x, int64_t n, Format fmt, int scale, float *y);
/* The rows of run_gemm's register tile at its present width (6 or 12). */
int run_gemm_rows(void);
/* The FP32 reference's C += A B: each element summed in K order with
 * fused multiply-adds (the bits of a plain loop of fmaf), blocked as
 * run_gemm and vectorized where the CPU has AVX2 and FMA. */
void run_gemm_ref(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N);
/* Both products use the widest vectors the CPU has (16 floats with
 * AVX-512, else 8), and so does the fp8 decoding; run_gemm_width(8) holds them to 8 (tests, and
 * AMP_GEMM_WIDTH=8 for amp-run), run_gemm_width(0) lets them go wide
 * again. Returns the width run_gemm now uses. The bits are the same. */
int run_gemm_width(int w);

#endif
