/* drive: amp-run's runs of a program on the machine model (run.h), each
 * checked against its FP32 reference, and the report of them.
 *
 * The program is decoded (lower/program.h) with the model it claims to
 * lower: --model (and --scales), else the one amp-emit embedded, checked
 * against the stage (run_check_model), else none, and the reference
 * follows the stage's own ops. It runs steps times, each run's states
 * starting from the previous run's, on the machine and in the reference
 * alike; with a prefill, that program first runs once per part of the
 * decode's batch (carry_parts), its states stacked into the decode's.
 * The reference runs alongside the machine (AMP_THREADS=1: after it).
 * With generate, every run after the first reads as its token ids the
 * reference's greedy tokens from the run before.
 *
 * What a tool finds or prints is its own (tools/, DriveHooks): the
 * machine and planned files a stage is checked against, a warning, the
 * progress line. The report for standard output is returned as text.
 */
#ifndef AMP_DRIVE_H
#define AMP_DRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"
#include "stage/plan.h"
#include "run/run.h"

/* The tool's part; each may be NULL (nothing checked, nothing shown). */
typedef struct {
	/* The stage's machine header against the machine file (machine:
	 * --machine, or NULL for the one its provenance names); may set the
	 * header's clock. -1 with *e on a difference. */
	int (*machine)(Plan *pl, const char *machine, Err *e);
	/* The model or scales text (role "model" or "scales", shown: its
	 * name) is the file the stage was planned from. -1 with *e if not. */
	int (*planned)(const Plan *pl, const char *role, const void *text, size_t len, const char *shown,
		       Err *e);
	/* A warning, for the tool to show: a program that carries no model
	 * and was given none. */
	void (*warn)(const char *msg);
	/* Clears the progress line (RunOpts.progress) after each run's
	 * machine. */
	void (*progress_clear)(void);
} DriveHooks;

typedef struct {
	RunOpts ro;             /* every run's start: seed, data_dir, weights_dir, progress */
	const char *program;    /* PROGRAM, NULL for stdin */
	const char *prefill;    /* the program run first (--prefill), or NULL */
	const char *model;      /* the model PROGRAM claims to lower (--model), or NULL: its embedded one */
	const char *scales;     /* with model: its fp8 scales (--scales), or NULL */
	const char *machine;    /* --machine, for hooks.machine, or NULL */
	const char *save_dir;   /* each output and its reference as DIR/[SUB/]<tensor>[.ref].npy, or NULL */
	double min_cos;         /* an output's (or a carried state's) cosine below it is low */
	int64_t steps;          /* PROGRAM's runs, at least 1 */
	int64_t position;       /* the first run's made positions (-1: 0, or the prefill's tokens) */
	int generate;           /* token ids from the reference's greedy tokens (amp-run --generate) */
	DriveHooks hooks;
} DriveOpts;

/* What the runs came to. */
typedef struct {
	char *report;           /* standard output's text: movement, reference, per op, each output's
				 * cosine, next tokens (free it) */
	int low;                /* an output's or a carried state's cosine is below min_cos */
	double t_data, t_prog, t_ref;   /* wall seconds: making data, the machine, the reference */
	int along;              /* the reference ran alongside the machine */
	const char *in;         /* on an error about one program (its machine, or the model or scales it
				 * was planned from): its name, which the tool puts before the message */
} DriveResult;

/* Loads the programs, runs them and fills *r; -1 with *e on bad input, a
 * wrong byte or an op over its tolerance (nothing in *r then but r->in).
 * An output below min_cos is not an error: r->low says so. */
int run_drive(const DriveOpts *o, DriveResult *r, Err *e);

#endif
