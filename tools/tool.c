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
#include "stage/stage_io.h"
#include "opt.h"
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

static int listed(const char *s, const char *const *list, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (!strcmp(s, list[k]))
			return 1;
	return 0;
}

/* tool.h; the words from opt_parsed. */
void tool_prov(Prov *pr)
{
	char *const *argv;
	int nw = opt_parsed(&argv);
	static const char *const out_opts[] = { "-o", "--output", "--tiles" };
	static const char *const dropped[] = { "-z", "--compress", "--report", "--explain" };
	static const char *const file_opts[] = { "--machine", "-m", "--scales", "--model", "--data", "--save" };
#define N_OF(a) (sizeof a / sizeof *a)
	size_t cap = 1, n = 0;
	for (int i = 0; i < nw; i++)
		cap += strlen(argv[i]) + 1;     /* the record only ever shortens a word */
	char *s = xmalloc(cap);
	s[0] = 0;
	for (int i = 0; i < nw; i++) {
		const char *a = argv[i];
		/* the option's name: a long one's up to '=', a short one's two
		 * characters; what follows in the same word is its value */
		size_t ol = a[0] == '-' && a[1] == '-' ? strcspn(a, "=") : a[0] == '-' && a[1] ? 2 : strlen(a);
		char opt[64];
		snprintf(opt, sizeof opt, "%.*s", (int)(ol < sizeof opt ? ol : sizeof opt - 1), a);
		const char *attached = a[ol] ? a + ol + (a[ol] == '=') : NULL;
		if (listed(opt, out_opts, N_OF(out_opts))) {
			i += !attached;         /* its argument too */
			continue;
		}
		if (listed(opt, dropped, N_OF(dropped)))
			continue;
		const char *file = NULL;
		if (listed(opt, file_opts, N_OF(file_opts)))
			file = attached ? attached : i + 1 < nw ? argv[++i] : "";
		n += (size_t)snprintf(s + n, cap - n, "%s%s", n ? " " : "", file ? opt : a);
		if (file)
			n += (size_t)snprintf(s + n, cap - n, "%s%s", attached && a[1] == '-' ? "=" : attached ? "" : " ",
					      base_name(file));
	}
#undef N_OF
	memset(pr, 0, sizeof *pr);
	pr->tool = xstrdup(tool_name);
	pr->version = xstrdup(AMP_VERSION);
	pr->options = s;
}

/* Adds a file read (role "model", "machine", "scales") by base name and
 * the digest of its len bytes of content. */
void prov_file(Prov *pr, const char *role, const char *path, const void *data, size_t len)
{
	if (pr->nf == PROV_FILES)
		return;
	ProvFile *f = &pr->f[pr->nf++];
	f->role = xstrdup(role);
	f->name = xstrdup(base_name(path));
	f->fnv1a = fnv1a(data, len);
}

/* The same, reading path (a small file: a machine, scales); fails on error. */
void prov_path(Prov *pr, const char *role, const char *path)
{
	char *d;
	size_t n;
	Err e;
	if (input_slurp(path, &d, &n, &e))
		fail(&e);
	prov_file(pr, role, path, d, n);
	free(d);
}

/* The value of option opt (a count) in a provenance record's options, as
 * "opt N" or "opt=N": sets *v when present and well formed. */
void prov_option(const char *options, const char *opt, int64_t *v)
{
	size_t n = strlen(opt);
	for (const char *p = options; p && *p;) {
		const char *q = p + strcspn(p, " ");
		if (!strncmp(p, opt, n) && (p + n == q || p[n] == '=')) {
			const char *a = p + n == q ? (*q ? q + 1 : q) : p + n + 1;
			char num[32];
			size_t l = strcspn(a, " ");
			int64_t x;
			snprintf(num, sizeof num, "%.*s", (int)(l < sizeof num ? l : sizeof num - 1), a);
			if (!parse_i64(num, &x) && x >= 0)
				*v = x;
		}
		p = *q ? q + 1 : q;
	}
}

/* The file amp-plan's provenance record names in role ("model",
 * "machine", "scales"), or NULL; *planned (when not NULL) is set when the
 * stage has an amp-plan record at all. */
static const ProvFile *planned_file(const Plan *pl, const char *role, int *planned)
{
	const ProvFile *rec = NULL;
	if (planned)
		*planned = 0;
	for (int i = 0; i < pl->nprov; i++) {
		if (strcmp(pl->prov[i].tool, "amp-plan"))
			continue;
		if (planned)
			*planned = 1;
		for (int k = 0; k < pl->prov[i].nf; k++)
			if (!strcmp(pl->prov[i].f[k].role, role))
				rec = &pl->prov[i].f[k];
	}
	return rec;
}

/* The model or scales text given with a stage (shown: its name) must be
 * the file amp-plan planned from, by the FNV-1a its provenance records;
 * scales given to a stage planned without them are refused. A stage
 * without an amp-plan record, or a model record (made or edited by
 * hand), has nothing to compare: the check of stage against model runs.
 * Fails on error, naming the input (in_path, NULL for stdin). */
void check_planned_file(const Plan *pl, const char *role, const void *text, size_t len,
				      const char *shown, const char *in_path)
{
	int planned;
	const ProvFile *rec = planned_file(pl, role, &planned);
	uint64_t h = fnv1a(text, len);
	char hex[2][17];
	if (!planned || (rec && rec->fnv1a == h) || (!rec && strcmp(role, "scales")))
		return;
	Err e;
	prov_hex(h, hex[0]);
	if (!rec) {
		errf(&e, "the stage was planned without a %s file; '%s' (fnv1a %s) is not its %s", role, shown,
		     hex[0], role);
	} else {
		prov_hex(rec->fnv1a, hex[1]);
		errf(&e, "%s file '%s' (fnv1a %s) is not the one the stage was planned from ('%s', fnv1a %s)", role,
		     shown, hex[0], rec->name, hex[1]);
	}
	fail_in(in_path, &e);
}

/* Checks the stage's machine header against the machine file, so that
 * limits and rates come from the machine, never from a stage's copy of
 * it. The file: path (--machine) if given; else the machine file amp-plan
 * recorded in the provenance, by its base name in share_dir()/machines;
 * else the default machine. When the provenance records a machine file,
 * the file's FNV-1a must be the one recorded; and the header must be the
 * file's machine, parameter by parameter. The file's clock, which headers
 * do not carry, is copied into pl->machine. Fails on error, naming the
 * input (in_path, NULL for stdin). */
int machine_mismatch(Plan *pl, const char *path, Err *e)
{
	const ProvFile *rec = planned_file(pl, "machine", NULL);
	static char *found;     /* the file found for the stage (kept: messages name it) */
	char hex[2][17];
	free(found);
	found = NULL;
	if (path)
		path = machine_arg(path);
	if (!path && rec) {
		found = xasprintf("%s/machines/%s", share_dir(), rec->name);
		if (strchr(rec->name, '/') || access(found, R_OK))
			return errf(e, "the stage was planned with machine file '%s' (fnv1a %016" PRIx64 "), which is "
				    "not in %s/machines: name it with --machine FILE", rec->name, rec->fnv1a, share_dir());
		path = found;
	}
	if (!path)
		path = found = xstrdup(default_machine());
	const char *shown = path == found ? base_name(path) : path;
	char *d;
	size_t n;
	Machine m;
	if (input_slurp(path, &d, &n, e))
		return -1;
	uint64_t h = fnv1a(d, n);
	if (rec && h != rec->fnv1a) {
		free(d);
		prov_hex(h, hex[0]);
		prov_hex(rec->fnv1a, hex[1]);
		return errf(e, "machine file '%s' (fnv1a %s) is not the one the stage was planned with ('%s', fnv1a "
			    "%s): plan again, or name that file with --machine FILE", shown, hex[0], rec->name, hex[1]);
	}
	int rc = machine_load_input(&m, input_open_mem(path, d, n, e), e);     /* the bytes hashed */
	free(d);
	if (rc)
		return -1;
	/* a program's header carries the table budget and fragment limit
	 * amp-emit checked it against: the file's, or the override its
	 * provenance record names */
	for (int i = 0; i < pl->nprov; i++)
		if (!strcmp(pl->prov[i].tool, "amp-emit")) {
			prov_option(pl->prov[i].options, "--table-budget", &m.table_budget_bytes);
			prov_option(pl->prov[i].options, "--fragment-limit", &m.fragment_limit);
		}
	if (machine_check_header(&pl->machine, &m, shown, e))
		return -1;
	/* the clock is the file's alone (a stage header does not carry it) */
	pl->machine.clock_hz = m.clock_hz;
	memcpy(pl->machine.clock_source, m.clock_source, sizeof m.clock_source);
	return 0;
}

void check_machine(Plan *pl, const char *path, const char *in_path)
{
	Err e;
	if (machine_mismatch(pl, path, &e))
		fail_in(in_path, &e);
}

/* Appends this run's record (no files) to pl's provenance. */
void add_prov(Plan *pl)
{
	Prov pr;
	tool_prov(&pr);
	plan_add_prov(pl, &pr);
	prov_free(&pr);
}

/* Writes pl as its stage (pl->stage) to path, atomically, or fails. */
void write_plan(const Plan *pl, const char *path, int compress)
{
	Err e;
	Output *o = output_open(path, compress, &e);
	if (!o)
		fail(&e);
	if (stage_write(pl, o, &e)) {
		output_abort(o);
		fail(&e);
	}
	if (output_commit(o, &e))
		fail(&e);
}

int stage_tool(const StageTool *t, int argc, char **argv)
{
	static const Opt common[] = {
		{ 'o', 'o', "output", OPT_ARG, "FILE", "file", "write to FILE, atomically (default: stdout)" },
		{ 'z', 'z', "compress", OPT_NOARG, NULL, NULL, "compress the output with zstd" },
	};
	Opt opts[16];
	OptParse op;
	const char *out_path = NULL, *in_path, *arg;
	int n = 0, compress = 0, c;
	Plan pl;
	Err e;

	for (; t->opts && t->opts[n].name; n++)
		opts[n] = t->opts[n];
	for (size_t k = 0; k < sizeof common / sizeof *common; k++)
		opts[n++] = common[k];
	memset(&opts[n], 0, sizeof opts[n]);
	OptTool ot = { t->name, t->usage, opts, t->epilogue };
	opt_init(&op, &ot, argc, argv);
	while ((c = opt_next(&op, &arg)) != -1) {
		if (c == 'o')
			out_path = arg;
		else if (c == 'z')
			compress = 1;
		else
			t->option(c, arg);
	}
	in_path = one_input(argc, argv, op.optind, t->what);
	distinct_outputs((ToolFile[]){ { "-o", out_path }, { "the input", in_path } }, 1, 2);
	if (stage_read(&pl, in_path, t->in, &e) || t->run(&pl, &e))
		fail(&e);
	add_prov(&pl);
	write_plan(&pl, out_path, compress);
	plan_free(&pl);
	return EXIT_OK;
}
