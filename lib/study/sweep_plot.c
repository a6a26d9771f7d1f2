/* sweep_plot.c: a figure of the merged table against one axis, drawn by
 * gnuplot as a PNG (lib/study/sweep.h, docs/sweeps.md). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/num.h"
#include "study/sweep_int.h"

extern char **environ;

/* the fields of one TSV line, in place */
static int fields(char *line, char ***out)
{
	int n = 0;
	for (char *p = line;; n++) {
		*out = xrealloc(*out, (size_t)(n + 1) * sizeof **out);
		(*out)[n] = p;
		char *t = strchr(p, '\t');
		if (!t)
			return n + 1;
		*t = 0;
		p = t + 1;
	}
}

static int find(char **cell, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(cell[i], name))
			return i;
	return -1;
}

/* the index of s in *list, appended when new */
static int intern(char ***list, int *n, const char *s)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp((*list)[i], s))
			return i;
	*list = xrealloc(*list, (size_t)(*n + 1) * sizeof **list);
	(*list)[*n] = xstrdup(s);
	return (*n)++;
}

typedef struct {
	char **c;               /* the merged row's cells; c[0] the job id (fixed width) */
	int x, series;
} Point;

static int by_job(const void *a, const void *b)
{
	return strcmp(((const Point *)a)->c[0], ((const Point *)b)->c[0]);
}

/* The gnuplot script: one data block per series (the values of the other
 * axes), x numeric when every label of the axis is an integer, else the
 * labels' places in job order, named by xtic. */
static char *script(const char *figure, const char *axis, char **xs, int nx, char **series, int ns,
		    const Point *pt, int np, int ycol)
{
	Str b = { NULL, 0, 0 };
	int numeric = 1;
	for (int i = 0; i < nx; i++) {
		int64_t v;
		numeric &= parse_i64(xs[i], &v) == 0;
	}
	str_printf(&b, "set terminal pngcairo size 800,500 noenhanced font 'sans,10'\n"
		"set title '%s by %s'\nset xlabel '%s'\nset ylabel '%s'\n"
		"set grid\nset key outside right top\nset format y '%%.0f'\nset offsets graph 0.05, graph 0.05, "
		"graph 0.05, graph 0.05\n", figure, axis, axis, figure);
	if (numeric) {
		str_printf(&b, "set xtics (");
		for (int i = 0; i < nx; i++)
			str_printf(&b, "%s%s", i ? ", " : "", xs[i]);
		str_printf(&b, ")\n");
	}
	for (int s = 0; s < ns; s++) {
		str_printf(&b, "$s%d << EOD\n", s);
		for (int i = 0; i < np; i++)
			if (pt[i].series == s) {
				if (numeric)
					str_printf(&b, "%s %s\n", xs[pt[i].x], pt[i].c[ycol]);
				else
					str_printf(&b, "%d %s %s\n", pt[i].x, pt[i].c[ycol], xs[pt[i].x]);
			}
		str_printf(&b, "EOD\n");
	}
	str_printf(&b, "plot");
	for (int s = 0; s < ns; s++)
		str_printf(&b, "%s $s%d using 1:2%s with linespoints pointtype 7 title '%s'", s ? ",\\\n    " : "", s,
			numeric ? "" : ":xtic(3)", series[s][0] ? series[s] : figure);
	str_printf(&b, "\n");
	return b.s;
}

/* Runs gnuplot on the script, its PNG into o. */
static int draw(const char *gnuplot, const char *text, Output *o, Err *e)
{
	const char *tmp = getenv("TMPDIR");
	char *in = xasprintf("%s/amp-sweep-plot.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	char *out = xasprintf("%s.png", in), *err = xasprintf("%s.err", in);
	int fd = mkstemp(in), rc = -1, status;
	pid_t pid;
	if (fd < 0) {
		errf(e, "cannot create a temporary file '%s': %s", in, strerror(errno));
		goto out;
	}
	size_t n = strlen(text);
	if (write(fd, text, n) != (ssize_t)n) {
		errf(e, "cannot write '%s': %s", in, strerror(errno));
		close(fd);
		goto out;
	}
	close(fd);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, in, O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	char *argv[] = { (char *)gnuplot, NULL };
	int bad = strchr(gnuplot, '/') ? posix_spawn(&pid, gnuplot, &fa, NULL, argv, environ) :
					 posix_spawnp(&pid, gnuplot, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (bad) {
		errf(e, "plot needs gnuplot, and '%s' cannot be run: %s (Debian package gnuplot-nox: "
		     "make sweep-deps, or name it with GNUPLOT=PATH)", gnuplot, strerror(bad));
		goto out;
	}
	pid_t w;
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	char *data = NULL;
	size_t len = 0;
	if (w < 0) {
		errf(e, "cannot wait for gnuplot: %s", strerror(errno));
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		Err ig;
		if (input_slurp(err, &data, &len, &ig) == 0 && len) {
			char *nl = strchr(data, '\n');
			len = nl ? (size_t)(nl - data) : len;
		}
		errf(e, "gnuplot failed%s%.*s", len ? ": " : "", (int)(len > 300 ? 300 : len), data ? data : "");
		free(data);
		goto out;
	}
	if (input_slurp(out, &data, &len, e))
		goto out;
	rc = output_write(o, data, len, e);
	free(data);
out:
	unlink(in), unlink(out), unlink(err);
	free(in), free(out), free(err);
	return rc;
}

int sweep_plot(const char *dir, const char *figure, const char *axis, const char *gnuplot, Output *o, int *left_out,
	       Err *e)
{
	char *tsv = NULL, **lines = NULL, **head = NULL, **xs = NULL, **series = NULL, *text = NULL;
	size_t len = 0;
	int nl = 0, nh, nx = 0, ns = 0, np = 0, rc = -1;
	Point *pt = NULL;
	SweepMerge m;
	Output *mem = output_open_mem(&tsv, &len, e);

	*left_out = 0;
	if (!mem)
		return -1;
	if (sweep_merge(dir, figure, 0, mem, &m, e)) {
		if (!strncmp(e->msg, "--rank: ", 8))   /* the figure is plot's argument here */
			memmove(e->msg, e->msg + 8, strlen(e->msg + 8) + 1);
		output_abort(mem);
		free(tsv);
		return -1;
	}
	sweep_merge_free(&m);
	if (output_commit(mem, e))
		goto out;
	for (char *p = tsv; p && *p;) {
		char *q = strchr(p, '\n');
		if (q)
			*q = 0;
		lines = xrealloc(lines, (size_t)(nl + 1) * sizeof *lines);
		lines[nl++] = p;
		p = q ? q + 1 : NULL;
	}
	nh = nl ? fields(lines[0], &head) : 0;
	int status = find(head, nh, "status"), ycol = find(head, nh, figure), xcol = find(head, nh, axis);
	if (status < 0 || ycol < 0) {
		errf(e, "'%s': the merged table has no column '%s'", dir, status < 0 ? "status" : figure);
		goto out;
	}
	if (xcol < 0 || xcol >= status || xcol == 0) {
		Str b = { NULL, 0, 0 };
		for (int i = 1; i < status; i++)
			str_printf(&b, "%s%s", i > 1 ? ", " : "", head[i]);
		errf(e, "'%s' has no axis '%s' (its axes: %s)", dir, axis, b.n ? b.s : "none");
		free(b.s);
		goto out;
	}
	/* What reaches gnuplot's script was read back from the sweep's
	 * directory, which may be shared: every label and column name is
	 * checked as the spec checks a label (letters, digits and . _ + -:
	 * no quote, newline or space to end a string or a data block) and
	 * every plotted value as a number, else the plot is refused. */
	for (int k = 1; k <= status; k++)
		if (!sweep_safe(head[k], 0)) {
			errf(e, "'%s': column '%s' of the merged table is not letters, digits and . _ + - "
			     "(the sweep's files were changed?)", dir, head[k]);
			goto out;
		}
	pt = xcalloc((size_t)nl, sizeof *pt);
	for (int i = 1; i < nl; i++) {
		char **c = NULL;
		if (fields(lines[i], &c) != nh || strcmp(c[status], "ok") || !c[ycol][0]) {
			++*left_out;
			free(c);
			continue;
		}
		char *end;
		strtod(c[ycol], &end);
		int bad = *end != 0 || end == c[ycol];
		for (int k = 1; !bad && k < status; k++)
			bad = !sweep_safe(c[k], 0);
		if (bad) {
			errf(e, "'%s': job '%s' has a label that is not letters, digits and . _ + -, or a '%s' that is "
			     "not a number (the sweep's files were changed?)", dir, c[0], figure);
			free(c);
			goto out;
		}
		pt[np++] = (Point){ c, -1, -1 };
	}
	if (!np) {
		errf(e, "'%s': no job has a result with '%s' to plot yet", dir, figure);
		goto out;
	}
	/* the axis's values and the series (the other axes' values) in job order */
	qsort(pt, (size_t)np, sizeof *pt, by_job);
	for (int i = 0; i < np; i++) {
		Str b = { NULL, 0, 0 };
		for (int k = 1; k < status; k++)
			if (k != xcol)
				str_printf(&b, "%s%s=%s", b.n ? " " : "", head[k], pt[i].c[k]);
		pt[i].x = intern(&xs, &nx, pt[i].c[xcol]);
		pt[i].series = intern(&series, &ns, b.s ? b.s : "");
		free(b.s);
	}
	text = script(figure, axis, xs, nx, series, ns, pt, np, ycol);
	rc = draw(gnuplot, text, o, e);
out:
	for (int i = 0; i < np; i++)
		free(pt[i].c);
	for (int i = 0; i < nx; i++)
		free(xs[i]);
	for (int i = 0; i < ns; i++)
		free(series[i]);
	free(xs);
	free(series);
	free(pt);
	free(head);
	free(lines);
	free(tsv);
	free(text);
	return rc;
}
