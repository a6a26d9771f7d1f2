/* sweep: a study over many candidates (formats/sweep.md).
 *
 * A sweep spec (`amp-sweep: 1`) names axes — base models, batch sizes,
 * layer counts, machines, pin sets and flag sets — whose cartesian product
 * is the candidates. sweep_load reads and checks it: every error names the
 * spec's file:line:col (a derived model the model reader refuses is
 * reported at the axis value that made it). sweep_write turns it into a
 * job directory: derived model files, copies of the machine files, one
 * job file per candidate, jobs.txt (a command per line), a Makefile and a
 * Slurm array script, all relative to the directory and the same bytes for
 * the same spec. sweep_run runs one job's pipeline into its own directory
 * and writes its result record atomically (nothing when interrupted);
 * sweep_merge reads every job's result into one ranked table, and
 * sweep_plot draws a figure of it against an axis (gnuplot, a child
 * process too).
 *
 * Like all of lib/, nothing here prints or exits: errors come back in Err.
 * sweep_run starts the amp-* tools as child processes (posix_spawn).
 */
#ifndef AMP_SWEEP_H
#define AMP_SWEEP_H

#include <stdint.h>

#include "base/diag.h"
#include "base/io.h"
#include "base/yio.h"

#define SWEEP_VERSION 1         /* the spec and the job file */
#define SWEEP_RESULT_VERSION 2  /* the result record (2: job_fnv1a) */
#define SWEEP_MAX_JOBS 1000000

/* One labelled value of an axis. */
typedef struct {
	char *label;
	const Val *v;           /* its value in the spec (pins: op -> pin map) */
	char *path;             /* models, machines: the file, as opened */
	int64_t n;              /* batch, tokens, layers */
	char **words;           /* flag sets: the words */
	int nwords;
	int64_t lim[3];         /* limits: table budget, fragment limit, SRAM limit; -1 unset */
	YReader *doc;           /* models: the base model, read whole */
	Val *root;
} SweepValue;

enum { AX_MODEL, AX_BATCH, AX_TOKENS, AX_LAYERS, AX_MACHINE, AX_PINS, AX_PLAN, AX_GROUP, AX_LIMITS, AX_COUNT };

typedef struct {
	int present;
	long line, col;
	SweepValue *v;
	int n;
} SweepAxis;

typedef struct {
	YReader r;
	Val *root;
	char *path;             /* the spec */
	char *name;             /* name: (default: the spec's basename) */
	char *text;             /* the spec's bytes, copied into the directory */
	size_t len;
	SweepAxis ax[AX_COUNT];
	int64_t njobs;
} Sweep;

extern const char *const sweep_axis_names[AX_COUNT];

int sweep_load(Sweep *s, const char *path, Err *e);
void sweep_free(Sweep *s);

/* Writes the job directory dir (created when missing). runner is the
 * amp-sweep that jobs.txt, the Makefile and slurm.sbatch call (the tools
 * pass their own absolute path, so a job runs without amp-sweep on PATH);
 * it is written as one shell word. A directory that already holds files
 * this spec would write differently is refused (another sweep, changed
 * inputs, or another runner), before anything is written. */
int sweep_write(const Sweep *s, const char *dir, const char *runner, Err *e);
/* 1 when path is letters, digits, . _ + - and / only, not starting with
 * '-' (a job directory's name goes into shell commands and make targets
 * unquoted). */
int sweep_safe_path(const char *path);

/* Runs the job in jobdir (DIR/jobs/NNNNNN) with the amp-* tools in bindir
 * (NULL: found on PATH). *skipped is set when its result already existed.
 * 0 when the result is recorded (a candidate that does not fit, or whose
 * pipeline refuses it, is a result); -1 when the job could not run. */
int sweep_run(const char *jobdir, const char *bindir, int *skipped, Err *e);

/* The jobs of jobdir's sweep (the directories beside it) and how many of
 * them hold a result: progress for a terminal, never an error. */
void sweep_progress(const char *jobdir, int *done, int *total);

typedef struct {
	int jobs, finished, missing;
	char **missing_ids;     /* the first missing jobs (at most 20), for messages */
	int nmissing_ids;
} SweepMerge;

/* The merged table of dir's jobs, ranked by the summary figure rank
 * (fewest first), as TSV or JSON (formats/sweep.md). */
int sweep_merge(const char *dir, const char *rank, int json, Output *o, SweepMerge *m, Err *e);
void sweep_merge_free(SweepMerge *m);

/* A PNG of the summary figure against the axis (a column of index.tsv)
 * over dir's finished jobs, one line per combination of the other axes'
 * values, drawn by gnuplot (the program named gnuplot, found on PATH when
 * it holds no '/'). The same results give the same bytes (no title from
 * the directory's name, no time). *left_out counts the jobs without the
 * figure (failed, missing). */
int sweep_plot(const char *dir, const char *figure, const char *axis, const char *gnuplot, Output *o, int *left_out,
	       Err *e);

#endif
