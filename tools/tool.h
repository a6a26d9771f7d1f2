/* tool.h: what every amp-* program shares (tool.c): messages, exit codes
 * and usage errors, the shared data directory and the machine file,
 * provenance records, and the common main of the four stage tools.
 * Options are parsed from each tool's one table (opt.h). lib/ never
 * prints or exits; the tools do, here. */
#ifndef AMP_TOOL_H
#define AMP_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "stage/plan.h"
#include "opt.h"

#define AMP_VERSION "0.1.0"
/* The end of every --help: where the formats/ and docs/ it cites are. */
#define HELP_DOCS "The formats/X.md and docs/X.md cited here are installed as\n" \
	"PREFIX/share/doc/amp/formats/X.md and PREFIX/share/doc/amp/docs/X.md.\n"

enum { EXIT_OK = 0, EXIT_BAD = 1, EXIT_USAGE = 2 };

extern const char *tool_name;   /* "amp-plan": every message begins with it */

/* Names the tool, buffers standard output when it is not a terminal, and
 * at exit turns a lost write (a full disk) into exit status 1. */
void tool_init(const char *name);

/* Progress on a terminal: one line on standard error, rewritten in place
 * ("amp-plan: attempt 1: mlp_up (12/45)"). Nothing when standard error is
 * not a terminal (a pipe, a file, CI). */
int tool_progress_on(void);
void tool_progress_clear(void);
void tool_progress(void *ctx, const char *what, int done, int total);

/* Prints "TOOL: message" and exits 1; fail_in puts the input's name
 * (in_path, NULL for stdin) before the message. */
_Noreturn void fail(const Err *e);
_Noreturn void fail_in(const char *in_path, const Err *e);

/* Prints "TOOL: message" and where the help is, and exits 2. */
__attribute__((format(printf, 1, 2))) _Noreturn void usage_error(const char *fmt, ...);

/* Prints "TOOL (amp) VERSION" and exits 0. */
_Noreturn void version(void);

/* The shared data directory (machines, models, jq queries): $AMP_SHARE
 * when set; else found next to the running binary, installed
 * (PREFIX/bin/amp-x: PREFIX/share/amp) or in the source tree (bin/amp-x:
 * share), so a moved tree or installation still finds its own; else the
 * source tree this was built in. */
const char *share_dir(void);
/* This binary's absolute path (/proc/self/exe, read with a measured
 * length), or NULL when the system does not say; and its directory
 * (allocated), or NULL. */
const char *tool_exe(void);
char *tool_exe_dir(void);

/* The default machine file: share_dir()/machines/amp1472.yaml. */
const char *default_machine(void);

/* The machine file that --machine ARG names: ARG itself when it is a file
 * or a path (holds '/' or ends in .yaml; then reading it says what is
 * wrong); else a short name, share_dir()/machines/ARG.yaml. A short name
 * that is not there fails, listing the names that are. */
const char *machine_arg(const char *arg);

/* A non-negative integer option value, or a usage error naming opt. */
int64_t count_arg(const char *opt, const char *s);

/* The input path after the options: at most one, NULL for stdin. */
const char *one_input(int argc, char **argv, int optind_now, const char *what);

/* A tool's files by what they are ("-o", "--tiles", "the model"): an
 * output (the first nout of f) that names the same file as an input or
 * as another output (the same path, or one existing file by device and
 * inode, a link or another spelling of it) is a usage error, before
 * anything is written. A NULL or "-" path (a standard stream) is none. */
typedef struct {
	const char *what, *path;
} ToolFile;
void distinct_outputs(const ToolFile *f, int nout, int n);

/* The base name of a path ("<stdin>" for NULL or "-"): what provenance
 * records, so a stage names no directory of the machine that made it. */
const char *base_name(const char *path);

/* This run's provenance record (lib/stage/plan.h Prov): the tool, its
 * version and its options in the order given, one word each (opt_parsed),
 * without the output (-o, --output, --tiles), -z, the input and the
 * options that change only what is printed (--report, --explain); the
 * file arguments of --machine, -m, --scales, --model, --data and --save
 * by base name. Files are added with prov_file. */
void tool_prov(Prov *pr);

/* Adds a file read (role "model", "machine", "scales") by base name and
 * the digest of its len bytes of content. */
void prov_file(Prov *pr, const char *role, const char *path, const void *data, size_t len);

/* The same, reading path (a small file: a machine, scales); fails on error. */
void prov_path(Prov *pr, const char *role, const char *path);

/* The value of option opt (a count) in a provenance record's options, as
 * "opt N" or "opt=N": sets *v when present and well formed. */
void prov_option(const char *options, const char *opt, int64_t *v);

/* The model or scales text given with a stage (shown: its name) must be
 * the file amp-plan planned from, by the FNV-1a its provenance records;
 * scales given to a stage planned without them are refused. A stage
 * without an amp-plan record, or a model record (made or edited by
 * hand), has nothing to compare: the check of stage against model runs.
 * planned_mismatch returns -1 with *e; check_planned_file fails naming
 * the input (in_path, NULL for stdin). */
int planned_mismatch(const Plan *pl, const char *role, const void *text, size_t len, const char *shown, Err *e);
void check_planned_file(const Plan *pl, const char *role, const void *text, size_t len, const char *shown,
			const char *in_path);

/* Checks the stage's machine header against the machine file, so that
 * limits and rates come from the machine, never from a stage's copy of
 * it. The file: path (--machine) if given; else the machine file amp-plan
 * recorded in the provenance, by its base name in share_dir()/machines;
 * else the default machine. When the provenance records a machine file,
 * the file's FNV-1a must be the one recorded; and the header must be the
 * file's machine, parameter by parameter. The file's clock, which headers
 * do not carry, is copied into pl->machine. machine_mismatch returns -1
 * with *e; check_machine fails naming the input (in_path, NULL: stdin). */
int machine_mismatch(Plan *pl, const char *path, Err *e);
void check_machine(Plan *pl, const char *path, const char *in_path);

/* Appends this run's record (no files) to pl's provenance. */
void add_prov(Plan *pl);

/* Writes pl as its stage (pl->stage) to path, atomically, or fails. */
void write_plan(const Plan *pl, const char *path, int compress);

/* A stage tool: one stage in, the next out (amp-compose, amp-expand,
 * amp-exchange, amp-group). stage_tool parses its options (its own table,
 * then -o/--output and -z/--compress, then the common ones), reads its
 * input, runs it and writes the result atomically. */
typedef struct {
	const char *name;                       /* "amp-expand" */
	const char *usage, *epilogue;           /* its help around the option lines (OptTool) */
	StageKind in;                           /* the stage it reads */
	const char *what;                       /* its input, for messages */
	const Opt *opts;                        /* its own options, ended by {0}, or NULL */
	void (*option)(int key, const char *arg);       /* takes one of its own */
	int (*run)(Plan *pl, Err *e);
} StageTool;

int stage_tool(const StageTool *t, int argc, char **argv);

#endif
