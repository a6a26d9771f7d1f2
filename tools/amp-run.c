/* amp-run: execute a program on the machine model and check it. The
 * options, then run_drive (lib/run/drive.h), which runs it; printed here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "base/num.h"
#include "model/scales.h"
#include "run/drive.h"
#include "run/run.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-run [OPTION]... PROGRAM\n"
	"       amp-run --calibrate MODEL -o SCALES [OPTION]...\n"
	"Execute a program written by amp-emit on the machine model: every tile's\n"
	"SRAM, the encoded exchange tables in their order, and the compute steps\n"
	"with the numbers of docs/machine.md §3. Two checks: after every exchange\n"
	"phase each destination holds exactly its tensor's bytes (padding zero),\n"
	"else the first wrong byte is named (tile, phase, offset, tensor,\n"
	"expected, found), and no write (receive, local copy or zero fill) lands\n"
	"outside its step's destination;\n"
	"and each output against an FP32 reference: minimum cosine similarity and\n"
	"maximum absolute error. The reference interprets the model file's ops on\n"
	"data made from the model's tensors and scales, never the stage's records,\n"
	"when the program names its model (--model, or amp-emit --model embedded\n"
	"it); otherwise it follows the stage's own ops, which checks movement and\n"
	"arithmetic only. The report's second line says which one ran. With the\n"
	"model, each op is also checked after its last compute step, every\n"
	"iteration: interpreted in FP32 on the machine's own inputs, within a\n"
	"tolerance derived from its formats (docs/machine.md §8); the third line\n"
	"names the op closest to it, and an op over it fails the run.\n";

static const char epilogue[] =
	"It runs on two threads; AMP_THREADS=1 in the environment runs on one, with\n"
	"the same results. The matrix products use the widest vectors the CPU has\n"
	"(16 floats with AVX-512, else 8; --timing says which); AMP_GEMM_WIDTH=8\n"
	"holds them to 8, with the same results.\n"
	"\n"
	"Exit status: 0 both checks pass, 1 bad input, a wrong byte, an output\n"
	"below --min-cosine or a write error, 2 usage error.\n";

static const Opt opts[] = {
	{ 'D', 0, "data", OPT_ARG, "DIR", "dir",
	  "read inputs and parameters from DIR/<tensor>.npy;\n"
	  "missing ones are generated from the seed (an int32\n"
	  "positions input: each row's token index); int32 ones\n"
	  "(token ids, positions) from int32 files only; a stacked\n"
	  "parameter's [count, ...] (count 1: or one instance's);\n"
	  "a --prefill run once per part of the decode's batch\n"
	  "reads its part of DIR/<input>.npy, which holds the\n"
	  "whole batch's [B, ...]; a tensor whose name holds '/'\n"
	  "is refused, never read outside DIR" },
	{ 'W', 0, "weights", OPT_ARG, "DIR", "dir",
	  "read every parameter from DIR/<tensor>.npy as amp-import\n"
	  "--weights-dir wrote them (before --data), for the\n"
	  "machine and the reference alike; DIR/weights.yaml must\n"
	  "name each with the program's shape and its file's\n"
	  "digest (formats/import.md)" },
	{ 'S', 0, "seed", OPT_ARG, "N", NULL,
	  "seed for generated data (default 1)" },
	{ 'A', 0, "save", OPT_ARG, "DIR", "dir",
	  "write each output as DIR/<tensor>.npy and its FP32\n"
	  "reference as DIR/<tensor>.ref.npy; with --steps or\n"
	  "--prefill every run's, in DIR/prefill.<Q>/ (prefill run\n"
	  "Q) and DIR/step.<S>/ (PROGRAM's run S), from 0; a name\n"
	  "that holds '/' is refused, never written outside" },
	{ 'C', 0, "min-cosine", OPT_ARG, "X", NULL,
	  "exit 1 when an output's (or a carried state's) cosine\n"
	  "is below X (default 0.99)" },
	{ 'N', 0, "steps", OPT_ARG, "N", NULL,
	  "run the program N times (default 1), each run's states\n"
	  "(a KV cache) starting from the previous run's, on the\n"
	  "machine and in the reference alike; from the second\n"
	  "run on, inputs are made from the seed and the run, and\n"
	  "made positions advance by each run's tokens" },
	{ 'P', 0, "position", OPT_ARG, "P", NULL,
	  "the first run's made positions start at P (default 0,\n"
	  "or the prefill's tokens; at most 16777216, as far as\n"
	  "floats hold integers exactly)" },
	{ 'F', 0, "prefill", OPT_ARG, "PROG", "file",
	  "run program PROG (its embedded model) first, at\n"
	  "position 0; PROGRAM's runs continue from its states,\n"
	  "each of one shape (but for the batch) and written by\n"
	  "the same chain of ops: both programs' models must give\n"
	  "it one digest (formats/model.md, state digests; an\n"
	  "fp8 state's scale among them). With --calibrate, PROG\n"
	  "is the prefill's model file" },
	{ 'G', 0, "generate", OPT_ARG, "N", NULL,
	  "--steps N, each run's token ids (an embed's, one per\n"
	  "sequence) the reference's greedy tokens from the run\n"
	  "before, for both (teacher-forced); prints each\n"
	  "sequence's greedy tokens, the machine's and the\n"
	  "reference's, and where they part" },
	{ 'T', 0, "timing", OPT_NOARG, NULL, NULL,
	  "print on stderr the machine's and the reference's matrix\n"
	  "products (GFLOP, GFLOP/s, vector width; CPU seconds and\n"
	  "GFLOP/s per core) and where the wall time went:\n"
	  "data; the machine's setup (encoding, filling SRAM),\n"
	  "compute steps, phases with their checks (tables,\n"
	  "matching them with the schedule, poisoning, moves\n"
	  "(with the poisoning when done tile by tile), checks);\n"
	  "the reference\n"
	  "(which runs alongside the machine; AMP_THREADS=1 runs\n"
	  "everything on one thread)" },
	{ 'M', 0, "model", OPT_ARG, "FILE", "file",
	  "the model the program claims to lower (default: the\n"
	  "one amp-emit --model embedded, if any): its stage must\n"
	  "agree with it (every tensor's shape, dtype and fp8\n"
	  "scale; every compute step derived again from its op\n"
	  "and the plan's choices, field by field: operands,\n"
	  "result and attributes, a matmul's GEMM record's m,\n"
	  "k, n and format; no step for anything else; the file\n"
	  "must be the one amp-plan planned from), else the\n"
	  "first difference is named" },
	{ 'L', 0, "scales", OPT_ARG, "FILE", "file",
	  "with --model: the fp8 scales the program was planned\n"
	  "with (amp-plan --scales), checked the same way" },
	{ 'K', 0, "calibrate", OPT_ARG, "MODEL", "file",
	  "write fp8 scales (formats/scales.md) from the FP32\n"
	  "reference's amax to -o (amp-plan --scales reads them);\n"
	  "with --prefill PMODEL (a model file then), PMODEL's\n"
	  "too, one file for both programs, each name at the\n"
	  "larger scale: a state keeps one range" },
	{ 'm', 'm', "machine", OPT_ARG, "FILE", "machine",
	  "the machine file the program was planned for, or NAME\n"
	  "for the shared machines/NAME.yaml (default:\n"
	  "the file its provenance names, from the shared\n"
	  "machines directory): its machine header must equal\n"
	  "it and the provenance's hash match it, so limits and\n"
	  "rates come from the machine; with --calibrate, the\n"
	  "machine the model must fit (its size is checked)" },
	{ 'o', 'o', "output", OPT_ARG, "FILE", "file",
	  "the scales file for --calibrate" },
	{ 0 },
};

static const OptTool tool = { "amp-run", usage, opts, epilogue };

/* Scales from the reference's amax, for a model the machine (machine_path,
 * else the default) can hold: a model over the machine's SRAM is refused
 * before the reference allocates for it. */
/* With a prefill's model too: both calibrated, one file for both
 * programs, each name at the larger of its two scales (a state the
 * prefill fills and the decode reads keeps one range). */
static void calibrate(const char *model_path, const char *prefill, const char *machine_path, const char *out,
		      const RunOpts *ro)
{
	Machine mc;
	Err e;
	Scales sc = { NULL, NULL, 0 };

	const char *mpath = machine_path ? machine_path : default_machine();
	if (machine_load(&mc, mpath, &e) || machine_check_one_chip(&mc, mpath, &e) ||
	    run_calibrate_files(model_path, prefill, &mc, ro, &sc, &e) || scales_write(&sc, out, &e))
		fail(&e);
	scales_free(&sc);
}

/* The driver's warning (DriveHooks.warn). */
static void warn(const char *msg)
{
	fprintf(stderr, "%s: warning: %s\n", tool_name, msg);
}

/* --timing: where the run's wall time went, and the matrix products'
 * rates (bench/README.md). */
static void print_timing(const DriveResult *r, int width)
{
	RunStats st;
	run_stats(&st);
	fprintf(stderr, "amp-run: matrix products (the machine's): %.2f GFLOP in %.3f s, %.2f GFLOP/s, %d wide; "
		"%.3f CPU s, %.2f GFLOP/s per core\n",
		st.gemm_flops / 1e9, st.gemm_secs, st.gemm_secs > 0 ? st.gemm_flops / 1e9 / st.gemm_secs : 0,
		width, st.gemm_cpu, st.gemm_cpu > 0 ? st.gemm_flops / 1e9 / st.gemm_cpu : 0);
	fprintf(stderr, "amp-run: wall seconds: data %.3f, machine %.3f (encoding %.3f, filling SRAM %.3f, "
		"compute steps %.3f, phases and checks %.3f (tables %.3f, matching %.3f, poisoning %.3f, "
		"moves %.3f, checks %.3f), other %.3f), reference %.3f\n", r->t_data,
		r->t_prog, st.encode_secs, st.fill_secs, st.compute_secs, st.phase_secs,
		st.table_secs, st.route_secs, st.poison_secs, st.move_secs, st.check_secs,
		r->t_prog - st.encode_secs - st.fill_secs - st.compute_secs - st.phase_secs, r->t_ref);
	fprintf(stderr, "amp-run: the reference %s; its matrix products: %.2f GFLOP in %.3f s, "
		"%.2f GFLOP/s; %.3f CPU s, %.2f GFLOP/s per core\n",
		r->along ? "ran alongside the machine" : "ran after the machine",
		st.ref_gemm_flops / 1e9, st.ref_gemm_secs,
		st.ref_gemm_secs > 0 ? st.ref_gemm_flops / 1e9 / st.ref_gemm_secs : 0, st.ref_gemm_cpu,
		st.ref_gemm_cpu > 0 ? st.ref_gemm_flops / 1e9 / st.ref_gemm_cpu : 0);
}

int main(int argc, char **argv)
{
#ifdef __GLIBC__
	/* Shards and steps allocate and free buffers of hundreds of KiB many
	 * thousand times: from the heap, not a fresh mapping each (whose
	 * page faults and unmapping's TLB shootdowns cost both cores). */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
	RunOpts ro = { .seed = 1, .quantized = 1 };
	const char *save_dir = NULL, *calib = NULL, *out = NULL, *in_path, *prefill = NULL;
	const char *model_path = NULL, *scales_path = NULL, *machine_path = NULL;
	double min_cos = 0.99;
	int timing = 0;
	int64_t n, steps = 1, position = -1;
	int generate = 0;
	int c;

	OptParse op;
	const char *arg;
	opt_init(&op, &tool, argc, argv);
	if (tool_progress_on())
		ro.progress = tool_progress;
	const char *gw = getenv("AMP_GEMM_WIDTH");
	int width = run_gemm_width(gw && strcmp(gw, "8") == 0 ? 8 : 0);
	while ((c = opt_next(&op, &arg)) != -1) {
		switch (c) {
		case 'D': ro.data_dir = arg; break;
		case 'W': ro.weights_dir = arg; break;
		case 'S':
			if (parse_i64(arg, &n) || n < 0)
				usage_error("--seed takes a non-negative integer, not '%s'", arg);
			ro.seed = (uint64_t)n;
			break;
		case 'A': save_dir = arg; break;
		case 'C':
			if (parse_f64(arg, &min_cos) || min_cos < -1 || min_cos > 1)
				usage_error("--min-cosine takes a number from -1 to 1, not '%s'", arg);
			break;
		case 'K': calib = arg; break;
		case 'T': timing = 1; break;
		case 'M': model_path = arg; break;
		case 'L': scales_path = arg; break;
		case 'N':
			if (parse_i64(arg, &steps) || steps < 1 || steps > 1 << 20)
				usage_error("--steps takes an integer from 1 to 1048576, not '%s'", arg);
			break;
		case 'P':
			if (parse_i64(arg, &position) || position < 0 || position > RUN_EXACT_INT)
				usage_error("--position takes an integer from 0 to %d (amp-run holds positions as "
					    "floats, exact that far), not '%s'", RUN_EXACT_INT, arg);
			break;
		case 'F': prefill = arg; break;
		case 'G':
			if (parse_i64(arg, &steps) || steps < 1 || steps > 1 << 20)
				usage_error("--generate takes an integer from 1 to 1048576, not '%s'", arg);
			generate = 1;
			break;
		case 'm': machine_path = machine_arg(arg); break;
		case 'o': out = arg; break;
		}
	}
	if (calib) {
		if (!out)
			usage_error("--calibrate needs -o SCALES");
		if (op.optind < argc)
			usage_error("--calibrate takes no program, found '%s'", argv[op.optind]);
		distinct_outputs((ToolFile[]){ { "-o", out }, { "--calibrate", calib }, { "--machine", machine_path },
						{ "--prefill", prefill } }, 1, 4);
		calibrate(calib, prefill, machine_path, out, &ro);
		return EXIT_OK;
	}
	in_path = one_input(argc, argv, op.optind, "program");
	if (scales_path && !model_path)
		usage_error("--scales needs --model");

	DriveOpts d = { .ro = ro, .program = in_path, .prefill = prefill, .model = model_path,
			.scales = scales_path, .machine = machine_path, .save_dir = save_dir, .min_cos = min_cos,
			.steps = steps, .position = position, .generate = generate,
			.hooks = { machine_mismatch, planned_mismatch, warn, tool_progress_clear } };
	DriveResult res;
	Err e;
	if (run_drive(&d, &res, &e))
		res.in ? fail_in(res.in, &e) : fail(&e);
	fputs(res.report, stdout);
	free(res.report);
	if (timing)
		print_timing(&res, width);
	if (res.low) {
		fprintf(stderr, "amp-run: an output's cosine is below %g (--min-cosine)\n", min_cos);
		return EXIT_BAD;
	}
	return EXIT_OK;
}
