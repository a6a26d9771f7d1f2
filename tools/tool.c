/* tool.c: what every amp-* program shares (tool.h): messages and exit
 * codes, the shared data directory and the machine, provenance, and the
 * stage tools' common main. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/diag.h"
#include "base/io.h"
#include "base/num.h"
#include "model/machine.h"
#include "stage/plan.h"
#include "tool.h"

const char *tool_name = "amp";
static int tool_failing;       /* fail or usage_error is exiting: its status and message stand */
static int tool_progress_shown; /* a progress line is on the terminal: cleared before a message */

/* Progress on a terminal: one line on standard error, rewritten in place
 * ("amp-plan: attempt 1: mlp_up (12/45)"). Nothing when standard error is
 * not a terminal (a pipe, a file, CI). */
int tool_progress_on(void)
{
	return isatty(STDERR_FILENO);
}

void tool_progress_clear(void)
{
	if (tool_progress_shown)
		fputs("\r\033[K", stderr), tool_progress_shown = 0;
}

void tool_progress(void *ctx, const char *what, int done, int total)
{
	(void)ctx;
	fprintf(stderr, "\r%s: %s (%d/%d)\033[K", tool_name, what, done, total);
	fflush(stderr);
	tool_progress_shown = 1;
}

/* At exit, whatever the tool wrote to standard output and standard error
 * must have reached them: a write error (a full disk, /dev/full) that
 * would lose output turns the exit status into 1, with a message when
 * standard error still works. */
static void close_std(void)
{
	if (tool_failing)
		return;
	errno = 0;
	int out = fflush(stdout) != 0 || ferror(stdout);
	int why = errno;
	out |= fclose(stdout) != 0;
	why = why ? why : errno;
	int err = fflush(stderr) != 0 || ferror(stderr);
	if (out && !err) {
		fprintf(stderr, "%s: error writing standard output%s%s\n", tool_name, why ? ": " : "",
			why ? strerror(why) : "");
		err = fflush(stderr) != 0 || ferror(stderr);
	}
	if (out || err)
		_exit(EXIT_BAD);
}

void tool_init(const char *name)
{
	tool_name = name;
	/* Standard output not a terminal: one 64 KiB buffer, so that a text
	 * such as --help reaches it in one write at exit, where close_std
	 * sees the write's error and its cause (a buffer that fills earlier
	 * fails inside printf, and its errno is gone by then). */
	static char outbuf[1 << 16];
	if (!isatty(STDOUT_FILENO))
		setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
	io_cleanup_on_signal();
	atexit(close_std);
}

void fail(const Err *e)
{
	tool_progress_clear();
	tool_failing = 1;
	fprintf(stderr, "%s: %s\n", tool_name, e->msg);
	exit(EXIT_BAD);
}

/* fail, the message after the input's name (in_path, NULL for stdin). */
void fail_in(const char *in_path, const Err *e)
{
	tool_progress_clear();
	tool_failing = 1;
	fprintf(stderr, "%s: '%s': %s\n", tool_name, in_path ? in_path : "<stdin>", e->msg);
	exit(EXIT_BAD);
}

__attribute__((format(printf, 1, 2)))
void usage_error(const char *fmt, ...)
{
	va_list ap;
	tool_failing = 1;
	fprintf(stderr, "%s: ", tool_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", tool_name);
	exit(EXIT_USAGE);
}

void version(void)
{
	printf("%s (amp) %s\n", tool_name, AMP_VERSION);
	exit(EXIT_OK);
}

const char *tool_exe(void)
{
	static char *exe;
	static int done;
	if (done)
		return exe;
	done = 1;
	for (size_t cap = 256; cap <= ((size_t)1 << 20); cap *= 2) {
		char *b = xmalloc(cap);
		ssize_t n = readlink("/proc/self/exe", b, cap);
		if (n > 0 && (size_t)n < cap) {
			b[n] = 0;
			return exe = b;
		}
		free(b);
		if (n <= 0)
			break;
	}
	return NULL;
}

char *tool_exe_dir(void)
{
	const char *exe = tool_exe();
	const char *slash = exe ? strrchr(exe, '/') : NULL;
	return slash ? xasprintf("%.*s", (int)(slash - exe), exe) : NULL;
}

/* A readable file at DIR/REL/FILE? */
static int readable(const char *dir, const char *rel, const char *file)
{
	char *probe = xasprintf("%s%s/%s", dir, rel, file);
	int ok = access(probe, R_OK) == 0;
	free(probe);
	return ok;
}

/* The shared data directory (machines, models, jq queries): $AMP_SHARE
 * when set; else found next to the running binary, installed
 * (PREFIX/bin/amp-x: PREFIX/share/amp) or in the source tree (bin/amp-x:
 * share), so a moved tree or installation still finds its own; else the
 * source tree this was built in. */
const char *share_dir(void)
{
	static char *dir;
	const char *env = getenv("AMP_SHARE");
	if (env && *env)
		return env;
	if (dir)
		return dir;
	char *bin = tool_exe_dir();
	static const char *const rel[] = { "/../share/amp", "/../share" };
	for (size_t i = 0; bin && !dir && i < sizeof rel / sizeof *rel; i++)
		if (readable(bin, rel[i], "machines/amp1472.yaml"))
			dir = xasprintf("%s%s", bin, rel[i]);
	free(bin);
	return dir ? dir : AMP_SHARE_DIR;
}

/* The default machine file: share_dir()/machines/amp1472.yaml. */
const char *default_machine(void)
{
	static char *path;
	if (!path)
		path = xasprintf("%s/machines/amp1472.yaml", share_dir());
	return path;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The machine file that --machine ARG names: ARG itself when it is a file
 * or a path (holds '/' or ends in .yaml; then reading it says what is
 * wrong); else a short name, share_dir()/machines/ARG.yaml. A short name
 * that is not there fails, listing the names that are. */
const char *machine_arg(const char *arg)
{
	static char *path;
	size_t n = strlen(arg);
	if (access(arg, F_OK) == 0 || strchr(arg, '/') || (n >= 5 && !strcmp(arg + n - 5, ".yaml")))
		return arg;
	const char *dir = share_dir();
	free(path);
	path = xasprintf("%s/machines/%s.yaml", dir, arg);
	if (access(path, R_OK) == 0)
		return path;
	char **names = NULL, *mdir = xasprintf("%s/machines", dir);
	size_t nn = 0;
	DIR *d = opendir(mdir);
	for (struct dirent *de; d && (de = readdir(d));) {
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l <= 5 || strcmp(de->d_name + l - 5, ".yaml"))
			continue;
		names = xrealloc(names, (nn + 1) * sizeof *names);
		names[nn++] = xasprintf("%.*s", (int)(l - 5), de->d_name);
	}
	if (d)
		closedir(d);
	qsort(names, nn, sizeof *names, name_cmp);
	Str known = { NULL, 0, 0 };
	for (size_t i = 0; i < nn; i++) {
		str_printf(&known, "%s%s", i ? ", " : "", names[i]);
		free(names[i]);
	}
	free(names);
	Err e;
	errf(&e, "no machine file '%s' and no machine of that name in %s (known: %s); name a machine file or one of "
	     "those", arg, mdir, nn ? known.s : "none");
	fail(&e);
	return NULL;
}

/* A non-negative integer option value, or a usage error naming opt. */
int64_t count_arg(const char *opt, const char *s)
{
	int64_t v;
	if (parse_i64(s, &v) || v < 0)
		usage_error("%s takes a non-negative integer, not '%s'", opt, s);
	return v;
}

/* The input path after the options: at most one, NULL for stdin. */
const char *one_input(int argc, char **argv, int optind_now, const char *what)
{
	if (optind_now + 1 < argc)
		usage_error("one %s at most, found '%s' too", what, argv[optind_now + 1]);
	return optind_now < argc ? argv[optind_now] : NULL;
}

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	if (!a || !b || !strcmp(a, "-") || !strcmp(b, "-"))
		return 0;
	return !strcmp(a, b) ||
	       (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

void distinct_outputs(const ToolFile *f, int nout, int n)
{
	for (int i = 0; i < nout; i++)
		for (int j = i + 1; j < n; j++)
			if (same_file(f[i].path, f[j].path))
				usage_error("%s '%s' is the same file as %s '%s': an output never overwrites %s",
					    f[i].what, f[i].path, f[j].what, f[j].path,
					    j < nout ? "another output" : "what the tool reads");
}

/* The base name of a path ("<stdin>" for NULL or "-"): what provenance
 * records, so a stage names no directory of the machine that made it. */
const char *base_name(const char *path)
{
	if (!path || !strcmp(path, "-"))
		return "<stdin>";
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}
