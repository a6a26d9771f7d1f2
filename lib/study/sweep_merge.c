/* sweep_merge.c: merging a sweep's results (lib/study/sweep.h, formats/sweep.md). */
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

/* ---- merging ---- */

typedef struct {
	char **cell;            /* index.tsv's row: job id, then the axis labels */
	int cls;                /* 0 ok, 1 failed, 2 missing */
	Val *res;               /* the result, copied out of its reader */
	int64_t key;
} Row;

/* A Val tree copied onto the heap, so that each result's reader (its
 * parser's buffers and arena) is closed as soon as it is read. */
static void val_copy(Val *to, const Val *v)
{
	*to = *v;
	to->s = v->s ? xstrdup(v->s) : NULL;
	int n = v->kind == VAL_MAP ? 2 * v->n : v->kind == VAL_SEQ ? v->n : 0;
	to->items = n ? xcalloc((size_t)n, sizeof *to->items) : NULL;
	for (int i = 0; i < n; i++)
		val_copy(&to->items[i], &v->items[i]);
}

static void val_release(Val *v)
{
	int n = v->kind == VAL_MAP ? 2 * v->n : v->kind == VAL_SEQ ? v->n : 0;
	for (int i = 0; i < n; i++)
		val_release(&v->items[i]);
	free(v->items);
	free(v->s);
}

static int split_tabs(char *line, char ***out)
{
	int n = 0;
	*out = NULL;
	for (char *p = line;;) {
		char *t = strchr(p, '\t');
		*out = xrealloc(*out, (size_t)(n + 1) * sizeof **out);
		(*out)[n++] = p;
		if (!t)
			break;
		*t = 0;
		p = t + 1;
	}
	return n;
}

static const char *sget(const Val *m, const char *k)
{
	const Val *v = m ? map_get(m, k) : NULL;
	return v && v->kind == VAL_SCALAR ? v->s : NULL;
}

static const char *limit_fit(const Val *res, int k)
{
	const Val *l = map_get(res, "limits");
	const Val *x = l ? map_get(l, sweep_limit_names[k]) : NULL;
	const char *s = sget(x, "fit");
	return s ? s : "-";
}

static int cmp_rows(const void *a, const void *b)
{
	const Row *x = *(Row *const *)a, *y = *(Row *const *)b;
	if (x->cls != y->cls)
		return x->cls - y->cls;
	if (x->cls == 0 && x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return strcmp(x->cell[0], y->cell[0]);
}

static char *status_of(const Row *w)
{
	if (w->cls == 2)
		return xstrdup("missing");
	if (w->cls == 1) {
		const char *st = sget(w->res, "stage");
		return xasprintf("failed:%s", st ? st : "-");
	}
	return xstrdup("ok");
}

/* Row w's job result (DIR/jobs/<job>/result.json), when there is one:
 * checked to be a sweep result of this version, of this job and of its
 * job file as it is now, with a summary when its status is ok; w->cls 0
 * (ok), 1 (failed) or 2 (no result). */
static int read_result(const char *dir, Row *w, Err *e)
{
	char *rp = xasprintf("%s/jobs/%s/result.json", dir, w->cell[0]);
	struct stat sb;
	w->cls = 2;
	if (stat(rp, &sb) == 0) {
		const char *fmt, *status;
		YReader r;
		Val *res = NULL;
		int bad = yr_open(&r, rp, e) || yr_node(&r, &res, e);
		if (!bad && res->kind != VAL_MAP)
			bad = val_err(rp, res, e, "expected a result record");
		if (!bad && get_str(rp, res, "format", &fmt, e))
			bad = -1;
		if (!bad && strcmp(fmt, "amp-sweep-result"))
			bad = val_err(rp, map_get(res, "format"), e, "format '%s' is not a sweep result", fmt);
		int64_t version;
		const char *id, *hash;
		char want[17];
		if (!bad)
			bad = get_int(rp, res, "version", 0, INT64_MAX, &version, e);
		if (!bad && version != SWEEP_RESULT_VERSION)
			bad = val_err(rp, map_get(res, "version"), e, "result version %" PRId64 " (this amp reads "
				      "%d): run the job again", version, SWEEP_RESULT_VERSION);
		if (!bad)
			bad = get_str(rp, res, "job", &id, e) || get_str(rp, res, "job_fnv1a", &hash, e);
		if (!bad && strcmp(id, w->cell[0]))
			bad = val_err(rp, map_get(res, "job"), e, "the result of job '%s', in job %s's directory",
				      id, w->cell[0]);
		if (!bad) {
			char *jd = xasprintf("%s/jobs/%s", dir, w->cell[0]);
			bad = sweep_job_hash(jd, want, e);
			free(jd);
		}
		if (!bad && strcmp(hash, want))
			bad = val_err(rp, map_get(res, "job_fnv1a"), e, "the result of a job file with hash %s; "
				      "this job's job.yaml hashes to %s (its inputs changed): run the job again",
				      hash, want);
		if (!bad)
			bad = get_str(rp, res, "status", &status, e);
		if (!bad) {
			w->res = xcalloc(1, sizeof *w->res);
			val_copy(w->res, res);
			status = sget(w->res, "status");
		}
		yr_close(&r);
		if (bad) {
			free(rp);
			return -1;
		}
		w->cls = strcmp(status, "ok") ? 1 : 0;
		if (!w->cls) {
			const Val *sum;
			if (map_need(rp, w->res, "summary", &sum, e)) {
				free(rp);
				return -1;
			}
		}
	}
	free(rp);
	return 0;
}

/* The merged table as TSV: the index's columns, status, fit and the three
 * limits, then each figure of the results' summaries (figs). */
static int write_tsv(Output *o, char **head, int nh, Row **order, int nrows, const Val *figs, Err *e)
{
	Err we;
	int failed = 0;
#define PUT(...) (void)(failed || (failed = output_printf(o, &we, __VA_ARGS__) != 0))
	for (int k = 0; k < nh; k++)
		PUT("%s%s", k ? "\t" : "", head[k]);
	PUT("\tstatus\tfit\ttables\tfragments\tsram");
	for (int i = 0; figs && i < figs->n; i++)
		PUT("\t%s", figs->items[2 * i].s);
	PUT("\n");
	for (int r = 0; r < nrows; r++) {
		Row *w = order[r];
		char *st = status_of(w);
		for (int k = 0; k < nh; k++)
			PUT("%s%s", k ? "\t" : "", w->cell[k]);
		const char *fit = w->cls ? NULL : sget(w->res, "fit");
		PUT("\t%s\t%s", st, fit ? fit : "-");
		for (int k = 0; k < 3; k++)
			PUT("\t%s", w->cls ? "-" : limit_fit(w->res, k));
		const Val *sum = w->cls ? NULL : map_get(w->res, "summary");
		for (int i = 0; figs && i < figs->n; i++) {
			const char *x = sget(sum, figs->items[2 * i].s);
			PUT("\t%s", x ? x : "-");
		}
		PUT("\n");
		free(st);
	}
#undef PUT
	if (failed)
		*e = we;
	return failed ? -1 : 0;
}

/* The merged table as JSON (formats/sweep.md, "merge"). */
static int write_json(Output *o, const char *rank, const SweepMerge *m, char **head, int nh, Row **order,
		      int nrows, Err *e)
{
	Json j;
	json_init(&j, o);
	json_open(&j, '{', 0);
	json_kstr(&j, "format", "amp-sweep-merge");
	json_kint(&j, "version", SWEEP_VERSION);
	json_kstr(&j, "rank", rank);
	json_kint(&j, "jobs", m->jobs);
	json_kint(&j, "finished", m->finished);
	json_kint(&j, "missing", m->missing);
	json_key(&j, "axes");
	json_open(&j, '[', 1);
	for (int k = 1; k < nh; k++)
		json_str(&j, head[k]);
	json_close(&j, ']');
	json_key(&j, "rows");
	json_open(&j, '[', 0);
	for (int r = 0; r < nrows; r++) {
		Row *w = order[r];
		char *st = status_of(w);
		json_open(&j, '{', 1);
		json_kstr(&j, "job", w->cell[0]);
		json_key(&j, "axes");
		json_open(&j, '{', 1);
		for (int k = 1; k < nh; k++)
			json_kstr(&j, head[k], w->cell[k]);
		json_close(&j, '}');
		json_kstr(&j, "status", st);
		if (w->cls == 1)
			json_kstr(&j, "message", sget(w->res, "message") ? sget(w->res, "message") : "");
		if (!w->cls) {
			const char *fit = sget(w->res, "fit");
			json_kstr(&j, "fit", fit ? fit : "-");
			if (sget(w->res, "emit_message"))
				json_kstr(&j, "emit_message", sget(w->res, "emit_message"));
			json_key(&j, "limits");
			json_open(&j, '{', 1);
			for (int k = 0; k < 3; k++)
				json_kstr(&j, sweep_limit_names[k], limit_fit(w->res, k));
			json_close(&j, '}');
			const Val *sum = map_get(w->res, "summary");
			json_key(&j, "summary");
			json_open(&j, '{', 1);
			for (int i = 0; sum && sum->kind == VAL_MAP && i < sum->n; i++) {
				int64_t x = 0;
				parse_i64(sum->items[2 * i + 1].s ? sum->items[2 * i + 1].s : "0", &x);
				json_kint(&j, sum->items[2 * i].s, x);
			}
			json_close(&j, '}');
		}
		json_close(&j, '}');
		free(st);
	}
	json_close(&j, ']');
	json_close(&j, '}');
	return json_end(&j, e);
}

int sweep_merge(const char *dir, const char *rank, int json, Output *o, SweepMerge *m, Err *e)
{
	char *ipath = xasprintf("%s/index.tsv", dir), *text = NULL;
	size_t len;
	char **head = NULL, **lines = NULL;
	Row *rows = NULL, **order = NULL;
	const Val *figs = NULL;
	int nh = 0, nrows = 0, nlines = 0, rc = -1;

	memset(m, 0, sizeof *m);
	if (input_slurp(ipath, &text, &len, e))
		goto out;
	for (char *p = text; *p;) {
		char *nl = strchr(p, '\n');
		if (!nl) {
			errf(e, "'%s': the last line does not end in a newline (not written by amp-sweep jobs)", ipath);
			goto out;
		}
		*nl = 0;
		lines = xrealloc(lines, (size_t)(nlines + 1) * sizeof *lines);
		lines[nlines++] = p;
		p = nl + 1;
	}
	if (!nlines || strncmp(lines[0], "job\t", 4)) {
		errf(e, "'%s': not a sweep's index (its first line is 'job<TAB>...')", ipath);
		goto out;
	}
	nh = split_tabs(lines[0], &head);
	rows = xcalloc((size_t)nlines, sizeof *rows);
	for (int i = 1; i < nlines; i++) {
		Row *w = &rows[nrows++];
		if (split_tabs(lines[i], &w->cell) != nh || !sweep_safe(w->cell[0], 0)) {
			errf(e, "%s:%d:1: expected %d fields, the job first", ipath, i + 1, nh);
			goto out;
		}
		if (read_result(dir, w, e))
			goto out;
		if (!w->cls && !figs)
			figs = map_get(w->res, "summary");
		m->jobs++;
		if (w->cls == 2) {
			m->missing++;
			if (m->nmissing_ids < 20) {
				m->missing_ids = xrealloc(m->missing_ids, (size_t)(m->nmissing_ids + 1) * sizeof *m->missing_ids);
				m->missing_ids[m->nmissing_ids++] = xstrdup(w->cell[0]);
			}
		} else {
			m->finished++;
		}
	}
	if (figs && !map_get(figs, rank)) {
		Str b = { NULL, 0, 0 };
		for (int i = 0; i < figs->n; i++)
			str_printf(&b, "%s%s", i ? ", " : "", figs->items[2 * i].s);
		errf(e, "--rank: no figure '%s' in the results (figures: %s)", rank, b.s);
		free(b.s);
		goto out;
	}
	for (int i = 0; i < nrows; i++) {
		const Val *sum = rows[i].cls ? NULL : map_get(rows[i].res, "summary");
		const char *x = sget(sum, rank);
		int64_t k = INT64_MAX;
		if (x)
			parse_i64(x, &k);
		rows[i].key = k;
	}
	order = xcalloc((size_t)nrows + 1, sizeof *order);
	for (int i = 0; i < nrows; i++)
		order[i] = &rows[i];
	qsort(order, (size_t)nrows, sizeof *order, cmp_rows);

	if (json ? write_json(o, rank, m, head, nh, order, nrows, e) : write_tsv(o, head, nh, order, nrows, figs, e))
		goto out;
	rc = 0;
out:
	for (int i = 0; i < nrows; i++) {
		if (rows[i].res) {
			val_release(rows[i].res);
			free(rows[i].res);
		}
		free(rows[i].cell);
	}
	free(rows);
	free(order);
	free(head);
	free(lines);
	free(text);
	free(ipath);
	return rc;
}

void sweep_merge_free(SweepMerge *m)
{
	for (int i = 0; i < m->nmissing_ids; i++)
		free(m->missing_ids[i]);
	free(m->missing_ids);
	memset(m, 0, sizeof *m);
}
