/* sweep_int.h: what the parts of the sweep module share (lib/study/sweep.c the
 * spec and its derived models, sweep_jobs.c the job directory, sweep_run.c
 * a job's run, sweep_merge.c the merge, sweep_plot.c its plot); not a
 * public header. */
#ifndef AMP_SWEEP_INT_H
#define AMP_SWEEP_INT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study/sweep.h"

/* the amp-emit option, the result record's key and the merged table's
 * column of each limit: table budget, fragment limit, SRAM limit */
extern const char *const sweep_limit_opts[3];
extern const char *const sweep_limit_keys[3];
extern const char *const sweep_limit_names[3];

/* A label, file name part or path: letters, digits and . _ + - (and / in
 * paths), not starting with '-', so it is safe in a file name, a make
 * target and a shell word, and no command takes it for an option. */
static inline int sweep_safe(const char *s, int slash)
{
	if (!*s || *s == '-')   /* a word that a command would read as an option */
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '_' || *p == '+' || *p == '-' || (slash && *p == '/')))
			return 0;
	return 1;
}

/* The first character of flag word w that a shell or make would change
 * (quotes, $, ;, globs, control characters...), or 0. */
char sweep_word_char(const char *w);

/* A flag the sweep sets itself, or one that changes what a job writes:
 * the flag, an abbreviation of it (the tools refuse abbreviations, and a
 * spec is refused before any job runs), or a short one with its value
 * attached; a word after '--' is the tool's to refuse. plan: amp-plan's
 * flags (the machine is an axis). Returns the reserved flag's name, or
 * NULL. The spec's flags and every job.yaml's are held to both rules. */
const char *sweep_reserved(const char *w, int plan);

/* The FNV-1a hash of JOBDIR/job.yaml as 16 hex digits, which a job's
 * result records and the merge checks against the directory it is in. */
int sweep_job_hash(const char *jobdir, char hex[17], Err *e);

/* The base model rewritten with its batch, tokens (every rank-3 input's
 * second dimension), layer count and pins (-1, NULL: kept). */
char *sweep_derive_model(const Val *root, const char *base, int64_t batch, int64_t tokens, int64_t layers,
			  const Val *pins, const char *pins_label);

#endif
