/* prov.c: what the tools record and check about their inputs (tool.h):
 * provenance records from the options as parsed (opt.h), the machine a
 * stage was planned for, and the common main of the four stage tools.
 * Apart from tool.c, which opt.c calls for its messages: no circle. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/diag.h"
#include "base/io.h"
#include "base/num.h"
#include "model/machine.h"
#include "stage/plan.h"
#include "stage/stage_io.h"
#include "opt.h"
#include "tool.h"

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
 * planned_mismatch returns -1 with *e; check_planned_file fails naming
 * the input (in_path, NULL for stdin). */
int planned_mismatch(const Plan *pl, const char *role, const void *text, size_t len, const char *shown, Err *e)
{
	int planned;
	const ProvFile *rec = planned_file(pl, role, &planned);
	uint64_t h = fnv1a(text, len);
	char hex[2][17];
	if (!planned || (rec && rec->fnv1a == h) || (!rec && strcmp(role, "scales")))
		return 0;
	prov_hex(h, hex[0]);
	if (!rec)
		return errf(e, "the stage was planned without a %s file; '%s' (fnv1a %s) is not its %s", role, shown,
			    hex[0], role);
	prov_hex(rec->fnv1a, hex[1]);
	return errf(e, "%s file '%s' (fnv1a %s) is not the one the stage was planned from ('%s', fnv1a %s)", role,
		    shown, hex[0], rec->name, hex[1]);
}

void check_planned_file(const Plan *pl, const char *role, const void *text, size_t len, const char *shown,
			const char *in_path)
{
	Err e;
	if (planned_mismatch(pl, role, text, len, shown, &e))
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
	pl->machine.clock_source = m.clock_source;
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
