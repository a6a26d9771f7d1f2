/* sweep_run.c: running one job of a sweep (lib/study/sweep.h, formats/sweep.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json.h"
#include "model/machine.h"
#include "model/model.h"
#include "base/num.h"
#include "study/sweep_int.h"

extern char **environ;

/* ---- running one job ---- */

typedef struct {
	char **a;
	int n;
} Argv;

static void arg(Argv *v, const char *s)
{
	v->a = xrealloc(v->a, (size_t)(v->n + 2) * sizeof *v->a);
	v->a[v->n++] = xstrdup(s);
	v->a[v->n] = NULL;
}

static void argv_free(Argv *v)
{
	for (int i = 0; i < v->n; i++)
		free(v->a[i]);
	free(v->a);
	v->a = NULL, v->n = 0;
}

/* Starts the stages as one pipeline: stage 0 reads /dev/null, each reads
 * the one before, each stage's standard error goes to errs[i]. */
static int spawn_pipeline(const char *bindir, Argv *st, int n, char **errs, pid_t *pids, Err *e)
{
	int prev = -1, rc = 0;
	for (int i = 0; i < n; i++)
		pids[i] = -1;
	for (int i = 0; i < n && !rc; i++) {
		int fd[2] = { -1, -1 };
		posix_spawn_file_actions_t fa;
		if (i + 1 < n && pipe(fd)) {
			rc = errf(e, "cannot make a pipe: %s", strerror(errno));
			break;
		}
		posix_spawn_file_actions_init(&fa);
		if (prev >= 0) {
			posix_spawn_file_actions_adddup2(&fa, prev, 0);
			posix_spawn_file_actions_addclose(&fa, prev);
		} else {
			posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		}
		if (fd[1] >= 0) {
			posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
			posix_spawn_file_actions_addclose(&fa, fd[1]);
			posix_spawn_file_actions_addclose(&fa, fd[0]);
		}
		posix_spawn_file_actions_addopen(&fa, 2, errs[i], O_WRONLY | O_CREAT | O_TRUNC, 0666);
		char *path = bindir ? xasprintf("%s/%s", bindir, st[i].a[0]) : xstrdup(st[i].a[0]);
		int err = bindir ? posix_spawn(&pids[i], path, &fa, NULL, st[i].a, environ) :
				   posix_spawnp(&pids[i], path, &fa, NULL, st[i].a, environ);
		if (err) {
			pids[i] = -1;
			rc = errf(e, "cannot run '%s': %s", path, strerror(err));
		}
		free(path);
		posix_spawn_file_actions_destroy(&fa);
		if (prev >= 0)
			close(prev);
		if (fd[1] >= 0)
			close(fd[1]);
		prev = fd[0];
	}
	if (prev >= 0)
		close(prev);
	return rc;
}

/* The first line of a file (the tool's message), or "". */
static char *first_line(const char *path)
{
	char *d;
	size_t n;
	Err ignore;
	if (input_slurp(path, &d, &n, &ignore))
		return xstrdup("");
	char *nl = strchr(d, '\n');
	if (nl)
		*nl = 0;
	return d;
}

typedef struct {
	int failed;             /* a stage refused the candidate: exit 1 or 2 */
	const char *stage;
	char *message;
	int emit_status;        /* amp-emit's exit status */
} Outcome;

/* Waits for the stages; the first stage that failed other than by a
 * broken pipe is the one reported. -1: a stage could not run or crashed. */
static int wait_stages(Argv *st, int n, pid_t *pids, char **errs, Outcome *oc, int *status0, Err *e)
{
	int rc = 0, blamed = 0;
	for (int i = 0; i < n; i++) {
		int status;
		if (pids[i] < 0)
			continue;
		while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
			;
		if (i == 0 && status0)
			*status0 = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (blamed || rc || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
			continue;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE)
			continue;
		if (WIFEXITED(status) && (WEXITSTATUS(status) == 1 || WEXITSTATUS(status) == 2)) {
			if (!status0) {
				oc->failed = 1;
				oc->stage = st[i].a[0];
				oc->message = first_line(errs[i]);
			}
			blamed = 1;
			continue;
		}
		char *m = first_line(errs[i]);
		if (WIFSIGNALED(status))
			rc = errf(e, "%s was killed by signal %d%s%s", st[i].a[0], WTERMSIG(status), *m ? ": " : "", m);
		else
			rc = errf(e, "%s exited with status %d%s%s", st[i].a[0], WEXITSTATUS(status), *m ? ": " : "", m);
		free(m);
	}
	return rc;
}

static int run_stages(const char *bindir, Argv *st, int n, char **errs, Outcome *oc, int *status0, Err *e)
{
	pid_t pids[8];
	int rc = spawn_pipeline(bindir, st, n, errs, pids, e);
	Err we;
	if (wait_stages(st, n, pids, errs, oc, status0, &we) && !rc) {
		*e = we;
		rc = -1;
	}
	return rc;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	for (struct dirent *de; d && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char *p = xasprintf("%s/%s", dir, de->d_name);
		unlink(p);
		free(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* A job's flags, held to the spec's rules (a job directory may be
 * shared, and its job.yaml edited): words a shell or make would leave
 * alone, none of the flags the sweep sets itself (-o among them: a job
 * writes only inside its own directory). plan: amp-plan's. */
static int words(const char *f, const Val *job, const char *key, int plan, Argv *v, Err *e)
{
	const Val *l;
	if (map_need(f, job, key, &l, e))
		return -1;
	if (l->kind != VAL_SEQ)
		return val_err(f, l, e, "expected '%s' to be a list of words", key);
	for (int i = 0; i < l->n; i++) {
		const Val *w = &l->items[i];
		const char *r;
		char c;
		if (w->kind != VAL_SCALAR || !*w->s || strpbrk(w->s, " \t"))
			return val_err(f, w, e, "expected a word");
		if ((c = sweep_word_char(w->s)))
			return val_err(f, w, e, "flag '%s' has a character a shell or make would change ('%c')",
				       w->s, c);
		if ((r = sweep_reserved(w->s, plan)))
			return val_err(f, w, e, "flag '%s' is the sweep's own ('%s'): a job names its output itself",
				       w->s, r);
		arg(v, w->s);
	}
	return 0;
}

/* A job's model or machine: the sweep's own copy, ../../DIR/NAME.yaml
 * (amp-sweep plan writes no other), NAME letters, digits and . _ + -. */
static int job_file(const char *f, const Val *job, const char *key, const char *dir, const char **path, Err *e)
{
	const Val *v = map_get(job, key);
	if (!v)
		return 0;
	if (val_str(f, v, path, e))
		return -1;
	size_t d = strlen(dir), n = strlen(*path), pre = 7 + d;      /* ../../DIR/ */
	char *name = n > pre + 5 ? xasprintf("%.*s", (int)(n - pre - 5), *path + pre) : NULL;
	int ok = name && !strncmp(*path, "../../", 6) && !strncmp(*path + 6, dir, d) && (*path)[6 + d] == '/' &&
		 !strcmp(*path + n - 5, ".yaml") && sweep_safe(name, 0);
	free(name);
	if (!ok)
		return val_err(f, v, e, "%s '%s' is not the sweep's own copy (../../%s/NAME.yaml, NAME letters, "
			       "digits and . _ + -)", key, *path, dir);
	return 0;
}

static int fig(const char *f, const Val *m, const char *key, int64_t *x, Err *e)
{
	return get_int(f, m, key, INT64_MIN, INT64_MAX, x, e);
}

/* The capture summary's integer figures, its objects' (floor before
 * version 7; bound and plan_floor) flattened in
 * at its place; ratios (numbers with decimals, or null), microseconds and
 * throughput are left out. */
static int summary_figs(Json *j, const char *f, const Val *sum, int nested, Err *e)
{
	for (int i = 0; i < sum->n; i++) {
		const char *k = sum->items[2 * i].s;
		const Val *v = &sum->items[2 * i + 1];
		size_t n = strlen(k);
		int64_t x;
		if (!nested && v->kind == VAL_MAP &&
		    (!strcmp(k, "floor") || !strcmp(k, "bound") || !strcmp(k, "plan_floor"))) {
			if (summary_figs(j, f, v, 1, e))
				return -1;
			continue;
		}
		if ((n >= 6 && !strcmp(k + n - 6, "_ratio")) || (nested && !strcmp(k, "ratio")))
			continue;
		/* the time at the machine's clock (capture version 6): it follows
		 * from total_cycles, and is no integer */
		if (!nested && (!strcmp(k, "microseconds") || !strcmp(k, "throughput")))
			continue;
		if (val_int(f, v, INT64_MIN, INT64_MAX, &x, e))
			return -1;
		json_kint(j, k, x);
	}
	return 0;
}

int sweep_job_hash(const char *jobdir, char hex[17], Err *e)
{
	char *path = xasprintf("%s/job.yaml", jobdir), *data;
	size_t n;
	int rc = input_slurp(path, &data, &n, e);
	free(path);
	if (rc)
		return -1;
	snprintf(hex, 17, "%016" PRIx64, fnv1a(data, n));
	free(data);
	return 0;
}

static int write_result(const char *path, const char *id, const char *hash, const Outcome *oc, const char *capture,
			const int64_t lim[3], const char *emit_msg, Err *e)
{
	YReader r;
	Val *root = NULL;
	const Val *sum = NULL, *mach = NULL;
	int64_t value[3], limit[3];
	int rc = -1;

	memset(&r, 0, sizeof r);
	if (!oc->failed) {
		const char *f = capture;
		if (yr_open(&r, capture, e) || yr_node(&r, &root, e) || map_need(f, root, "summary", &sum, e) ||
		    map_need(f, root, "machine", &mach, e) || fig(f, sum, "max_table_bytes", &value[0], e) ||
		    fig(f, sum, "max_fragments", &value[1], e) || fig(f, sum, "max_sram_bytes", &value[2], e) ||
		    fig(f, mach, "table_budget_bytes", &limit[0], e) || fig(f, mach, "fragment_limit", &limit[1], e) ||
		    fig(f, mach, "available_bytes", &limit[2], e))
			goto out;
		if (sum->kind != VAL_MAP)
			goto out;
		if (lim[2] >= 0)
			limit[2] = lim[2];
	}
	Output *o = output_open(path, 0, e);
	if (!o)
		goto out;
	Json j;
	json_init(&j, o);
	json_open(&j, '{', 0);
	json_kstr(&j, "format", "amp-sweep-result");
	json_kint(&j, "version", SWEEP_RESULT_VERSION);
	json_kstr(&j, "job", id);
	json_kstr(&j, "job_fnv1a", hash);
	if (oc->failed) {
		json_kstr(&j, "status", "failed");
		json_kstr(&j, "stage", oc->stage);
		json_kstr(&j, "message", oc->message);
	} else {
		int all = value[0] <= limit[0] && value[1] <= limit[1] && value[2] <= limit[2];
		json_kstr(&j, "status", "ok");
		json_kstr(&j, "fit", oc->emit_status == 0 ? "fit" : all ? "refused" : "OVER");
		if (oc->emit_status)
			json_kstr(&j, "emit_message", emit_msg);
		json_key(&j, "limits");
		json_open(&j, '{', 0);
		for (int k = 0; k < 3; k++) {
			json_key(&j, sweep_limit_names[k]);
			json_open(&j, '{', 1);
			json_kint(&j, "value", value[k]);
			json_kint(&j, "limit", limit[k]);
			json_kstr(&j, "fit", value[k] <= limit[k] ? "fit" : "OVER");
			json_close(&j, '}');
		}
		json_close(&j, '}');
		json_key(&j, "summary");
		json_open(&j, '{', 1);
		if (summary_figs(&j, capture, sum, 0, e)) {
			output_abort(o);
			goto out;
		}
		json_close(&j, '}');
	}
	json_close(&j, '}');
	if (json_end(&j, e)) {
		output_abort(o);
		goto out;
	}
	rc = output_commit(o, e);
out:
	yr_close(&r);
	return rc;
}

/* The job's command lines: the five lowering stages into st (their
 * stderr files into errs), then amp-emit (emit) and amp-capture (cap) of
 * the grouped stage, with the job's model, machine, flags and limits. */
static void job_argvs(const char *jobdir, const char *work, const char *model, const char *machine, const Argv *plan,
		      const Argv *group, const int64_t *lim, const char *grouped, const char *capture, Argv *st,
		      char **errs, Argv *emit, Argv *cap)
{
	static const char *const tools[5] = { "amp-plan", "amp-compose", "amp-expand", "amp-exchange", "amp-group" };
	for (int i = 0; i < 5; i++) {
		arg(&st[i], tools[i]);
		errs[i] = xasprintf("%s/%s.err", work, tools[i]);
	}
	char *mp = xasprintf("%s/%s", jobdir, model);
	if (machine) {
		char *mc = xasprintf("%s/%s", jobdir, machine);
		arg(&st[0], "--machine");
		arg(&st[0], mc);
		free(mc);
	}
	arg(emit, "amp-emit");
	/* the program carries the job's model (amp-emit --model), unless the
	 * plan had fp8 scales, whose file the emit cannot be sure of */
	int scaled = 0;
	for (int i = 0; i < plan->n; i++)
		scaled |= strncmp(plan->a[i], "--scales", 8) == 0;
	if (scaled) {
		arg(emit, "--no-model");
	} else {
		char *em = xasprintf("%s/%s", jobdir, model);
		arg(emit, "--model");
		arg(emit, em);
		free(em);
	}
	arg(cap, "amp-capture");
	if (machine) {          /* limits and rates come from the machine file */
		char *mc = xasprintf("%s/%s", jobdir, machine);
		arg(emit, "--machine");
		arg(emit, mc);
		arg(cap, "--machine");
		arg(cap, mc);
		free(mc);
	}
	for (int i = 0; i < plan->n; i++)
		arg(&st[0], plan->a[i]);
	arg(&st[0], mp);
	free(mp);
	for (int i = 0; i < group->n; i++)
		arg(&st[4], group->a[i]);
	arg(&st[4], "-z");
	arg(&st[4], "-o");
	arg(&st[4], grouped);
	for (int k = 0; k < 3; k++) {
		char b[64];
		if (lim[k] < 0)
			continue;
		snprintf(b, sizeof b, "%" PRId64, lim[k]);
		arg(emit, sweep_limit_opts[k]);
		arg(emit, b);
		if (k < 2) {
			arg(cap, sweep_limit_opts[k]);
			arg(cap, b);
		}
	}
	arg(emit, "-o");
	arg(emit, "/dev/null");
	arg(emit, grouped);
	arg(cap, "-o");
	arg(cap, capture);
	arg(cap, grouped);
}

int sweep_run(const char *jobdir, const char *bindir, int *skipped, Err *e)
{
	char *jobpath = xasprintf("%s/job.yaml", jobdir), *result = xasprintf("%s/result.json", jobdir);
	char *work = xasprintf("%s/work", jobdir);
	YReader r;
	Val *job;
	const Val *lims;
	const char *id, *model, *machine = NULL;
	char hash[17];
	Argv st[5], emit = { NULL, 0 }, cap = { NULL, 0 }, plan = { NULL, 0 }, group = { NULL, 0 };
	char *errs[5] = { NULL };
	Outcome oc = { 0, NULL, NULL, 0 };
	int64_t lim[3] = { -1, -1, -1 };
	int rc = -1;
	struct stat sb;

	memset(st, 0, sizeof st);
	*skipped = 0;
	if (stat(result, &sb) == 0) {
		*skipped = 1;
		free(jobpath), free(result), free(work);
		return 0;
	}
	if (yr_open(&r, jobpath, e)) {
		free(jobpath), free(result), free(work);
		return -1;
	}
	const char *f = jobpath;
	int64_t version;
	if (yr_node(&r, &job, e))
		goto out;
	if (job->kind != VAL_MAP) {
		val_err(f, job, e, "expected a job (a mapping starting 'amp-sweep-job: 1')");
		goto out;
	}
	if (get_int(f, job, "amp-sweep-job", 0, INT64_MAX, &version, e) || get_str(f, job, "job", &id, e) ||
	    get_str(f, job, "model", &model, e) || job_file(f, job, "model", "models", &model, e) ||
	    words(f, job, "plan_flags", 1, &plan, e) || words(f, job, "group_flags", 0, &group, e) ||
	    map_need(f, job, "limits", &lims, e))
		goto out;
	if (version != SWEEP_VERSION) {
		val_err(f, map_get(job, "amp-sweep-job"), e, "unsupported job version %" PRId64, version);
		goto out;
	}
	if (job_file(f, job, "machine", "machines", &machine, e) || sweep_job_hash(jobdir, hash, e))
		goto out;
	for (int k = 0; k < 3; k++)
		if (map_get(lims, sweep_limit_keys[k]) && get_int(f, lims, sweep_limit_keys[k], 0, INT64_MAX, &lim[k], e))
			goto out;

	/* an interrupted run's leftovers go first */
	remove_dir(work);
	if (mkdir(work, 0777)) {
		errf(e, "cannot create directory '%s': %s", work, strerror(errno));
		goto out;
	}
	char *grouped = xasprintf("%s/grouped.yaml.zst", work), *capture = xasprintf("%s/capture.json", work);
	char *emit_err = xasprintf("%s/emit.txt", work), *cap_err = xasprintf("%s/amp-capture.err", work);
	job_argvs(jobdir, work, model, machine, &plan, &group, lim, grouped, capture, st, errs, &emit, &cap);
	int bad = run_stages(bindir, st, 5, errs, &oc, NULL, e);
	char *emit_msg = NULL;
	if (!bad && !oc.failed) {
		bad = run_stages(bindir, &emit, 1, &emit_err, &oc, &oc.emit_status, e);
		if (!bad && oc.emit_status != 0 && oc.emit_status != 1)
			bad = errf(e, "amp-emit exited with status %d: %s", oc.emit_status, (emit_msg = first_line(emit_err)));
	}
	if (!bad && !oc.failed)
		bad = run_stages(bindir, &cap, 1, &cap_err, &oc, NULL, e);
	if (!bad) {
		free(emit_msg);
		emit_msg = oc.emit_status ? first_line(emit_err) : xstrdup("");
		char *cap_final = xasprintf("%s/capture.json", jobdir), *emit_final = xasprintf("%s/emit.txt", jobdir);
		char *tmp = xasprintf("%s/result.tmp", work);
		bad = write_result(tmp, id, hash, &oc, capture, lim, emit_msg, e);
		if (!bad && !oc.failed && rename(capture, cap_final))
			bad = errf(e, "cannot rename '%s': %s", capture, strerror(errno));
		if (!bad && !oc.failed && rename(emit_err, emit_final))
			bad = errf(e, "cannot rename '%s': %s", emit_err, strerror(errno));
		free(cap_final);
		free(emit_final);
		/* the result last: its presence means the job is done */
		if (!bad && rename(tmp, result))
			bad = errf(e, "cannot rename '%s': %s", tmp, strerror(errno));
		free(tmp);
	}
	free(emit_msg);
	if (!bad)
		remove_dir(work);
	rc = bad ? -1 : 0;
	free(grouped), free(capture), free(emit_err), free(cap_err);
out:
	for (int i = 0; i < 5; i++) {
		argv_free(&st[i]);
		free(errs[i]);
	}
	argv_free(&emit), argv_free(&cap), argv_free(&plan), argv_free(&group);
	free(oc.message);
	yr_close(&r);
	free(jobpath), free(result), free(work);
	return rc;
}

void sweep_progress(const char *jobdir, int *done, int *total)
{
	char *jobs = xasprintf("%s/..", jobdir);
	DIR *d = opendir(jobs);
	struct stat sb;
	*done = *total = 0;
	for (struct dirent *de; d && (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		char *r = xasprintf("%s/%s/result.json", jobs, de->d_name);
		++*total;
		*done += stat(r, &sb) == 0;
		free(r);
	}
	if (d)
		closedir(d);
	free(jobs);
}
