/* opt.c: the option parser, the --help and the --list-options that every
 * amp tool makes from its one table (opt.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "opt.h"
#include "tool.h"

/* Every tool's own three, after its table. */
static const Opt common[] = {
	{ 'h', 0, "help", OPT_NOARG, NULL, NULL, "print this help and exit" },
	{ 'V', 0, "version", OPT_NOARG, NULL, NULL, "print the version and exit" },
	{ 'L', 0, "list-options", OPT_NOARG, NULL, NULL,
	  "print the options, one per line, tab-separated (name,\n"
	  "short form, value ([=V]: only as --name=V), what\n"
	  "completes the value: file, dir, machine, words:A B\n"
	  "...; - for none) and exit" },
};
#define N_COMMON (int)(sizeof common / sizeof *common)

/* The k-th option: the table's, then the common ones. */
static const Opt *opt_at(const OptTool *t, int k)
{
	int n = 0;
	while (t->opts && t->opts[n].name)
		n++;
	return k < n ? &t->opts[k] : k < n + N_COMMON ? &common[k - n] : NULL;
}

static void list_options(const OptTool *t)
{
	for (int k = 0; opt_at(t, k); k++) {
		const Opt *o = opt_at(t, k);
		printf("--%s\t%s%c\t%s%s%s\t%s\n", o->name, o->letter ? "-" : "", o->letter ? o->letter : '-',
		       o->arg == OPT_OPTARG ? "[=" : "", o->argname ? o->argname : "-", o->arg == OPT_OPTARG ? "]" : "",
		       o->values ? o->values : "-");
	}
	exit(EXIT_OK);
}

/* An option's words in the help: "-o, --output FILE", "    --explain[=N]". */
static int spec(const Opt *o, char *buf, size_t cap)
{
	char first[8] = "    ";
	if (o->letter)
		snprintf(first, sizeof first, "-%c, ", o->letter);
	if (o->arg == OPT_OPTARG)
		return snprintf(buf, cap, "%s--%s[=%s]", first, o->name, o->argname);
	return snprintf(buf, cap, "%s--%s%s%s", first, o->name, o->argname ? " " : "", o->argname ? o->argname : "");
}

/* The help column: 24, or after the longest option's words (up to 30);
 * longer words put their help on the next line. */
void opt_help(const OptTool *t)
{
	char buf[128];
	int col = 24;
	for (int k = 0; opt_at(t, k); k++) {
		int w = 2 + spec(opt_at(t, k), buf, sizeof buf) + 1;
		if (w > col && w <= 30)
			col = w;
	}
	fputs(t->usage, stdout);
	fputs("\n", stdout);
	for (int k = 0; opt_at(t, k); k++) {
		const Opt *o = opt_at(t, k);
		int w = 2 + spec(o, buf, sizeof buf);
		printf("  %s%s", buf, *o->help ? "" : "\n");
		for (const char *h = o->help; *h;) {
			size_t n = strcspn(h, "\n");
			if (w >= col)
				printf("\n"), w = 0;
			printf("%*s%.*s\n", col - w, "", (int)n, h);
			w = 0;
			h += n + (h[n] == '\n');
		}
	}
	if (t->epilogue)
		printf("\n%s", t->epilogue);
	fputs("Long options are whole words: an abbreviation is a usage error.\n" HELP_DOCS, stdout);
	exit(EXIT_OK);
}

void opt_init(OptParse *p, const OptTool *t, int argc, char **argv)
{
	memset(p, 0, sizeof *p);
	p->t = t;
	p->argc = argc;
	p->argv = argv;
	p->i = 1;
	p->opts = xmalloc((size_t)(argc + 1) * sizeof *p->opts);
	p->operands = xmalloc((size_t)(argc + 1) * sizeof *p->operands);
	/* the words that split clusters make: at most 3 bytes a letter */
	static char *pool;
	size_t n = 1;
	for (int i = 1; i < argc; i++)
		n += 3 * strlen(argv[i]) + 3;
	free(pool);
	p->pool = pool = xmalloc(n);
	static char **words;
	free(words);
	p->words = words = xmalloc(n * sizeof *words);
	tool_init(t->name);
}

/* Keeps w as an option's word as parsed (p->words, for provenance) and,
 * when it is a word of argv (orig), for argv's options. */
static void keep(OptParse *p, char *w, int orig)
{
	p->words[p->nwords++] = w;
	if (orig)
		p->opts[p->nopts++] = w;
}

static char *const *parsed;
static int nparsed;

int opt_parsed(char *const **words)
{
	*words = parsed;
	return nparsed;
}

/* After the last word: argv = argv[0], the options, the operands. */
static int finish(OptParse *p)
{
	int n = 1;
	for (int k = 0; k < p->nopts; k++)
		p->argv[n++] = p->opts[k];
	p->optind = n;
	for (int k = 0; k < p->noperands; k++)
		p->argv[n++] = p->operands[k];
	parsed = p->words;
	nparsed = p->nwords;
	free(p->opts);
	free(p->operands);
	p->opts = p->operands = NULL;
	return -1;
}

static int found(OptParse *p, const Opt *o, const char *val, const char **arg)
{
	*arg = val;
	if (o->key == 'h' && o == &common[0])
		opt_help(p->t);
	if (o->key == 'V' && o == &common[1])
		version();
	if (o->key == 'L' && o == &common[2])
		list_options(p->t);
	return o->key;
}

static int long_option(OptParse *p, const char *w, const char **arg)
{
	size_t n = strcspn(w + 2, "=");
	const char *eq = w[2 + n] == '=' ? w + 3 + n : NULL;
	const Opt *o = NULL, *begun = NULL;
	int nbegun = 0;
	for (int k = 0; opt_at(p->t, k); k++) {
		const Opt *c = opt_at(p->t, k);
		if (!strncmp(c->name, w + 2, n) && c->name[n] == 0)
			o = c;
		else if (n && !strncmp(c->name, w + 2, n))
			begun = begun ? begun : c, nbegun++;
	}
	if (!o && nbegun == 1)
		usage_error("option '%.*s' is an abbreviation; write it whole: '--%s'", (int)n + 2, w, begun->name);
	if (!o && nbegun)
		usage_error("option '%.*s' is an abbreviation of %d options; write one whole (--help lists them)",
			    (int)n + 2, w, nbegun);
	if (!o)
		usage_error("unknown option '%s'", w);
	keep(p, p->argv[p->i++], 1);
	if (o->arg == OPT_NOARG && eq)
		usage_error("option '--%s' takes no value, found '%s'", o->name, w);
	if (o->arg == OPT_ARG && !eq) {
		if (p->i >= p->argc)
			usage_error("option '%s' needs an argument", w);
		eq = p->argv[p->i];
		keep(p, p->argv[p->i++], 1);
	}
	return found(p, o, eq, arg);
}

static int short_option(OptParse *p, const char **arg)
{
	const char *at = p->cluster;
	char c = *p->cluster++;
	const Opt *o = NULL;
	for (int k = 0; opt_at(p->t, k) && !o; k++)
		if (opt_at(p->t, k)->letter == c)
			o = opt_at(p->t, k);
	if (!o)
		usage_error("unknown option '-%c'", c);
	const char *val = NULL;
	/* the option's own word: "-zo FILE" records as "-z", "-o", FILE, so
	 * that provenance sees every option as if given alone */
	size_t own = o->arg != OPT_NOARG ? strlen(at) : 1;
	if (at == p->word + 1 && !at[own]) {
		keep(p, p->word, 0);
	} else {
		p->pool[0] = '-';
		memcpy(p->pool + 1, at, own);
		p->pool[own + 1] = 0;
		keep(p, p->pool, 0);
		p->pool += own + 2;
	}
	if (o->arg != OPT_NOARG) {
		if (*p->cluster) {
			val = p->cluster;
		} else {
			if (p->i >= p->argc)
				usage_error("option '-%c' needs an argument", c);
			val = p->argv[p->i];
			keep(p, p->argv[p->i++], 1);
		}
		p->cluster = NULL;
	} else if (!*p->cluster) {
		p->cluster = NULL;
	}
	return found(p, o, val, arg);
}

int opt_next(OptParse *p, const char **arg)
{
	*arg = NULL;
	if (p->cluster)
		return short_option(p, arg);
	while (p->i < p->argc) {
		const char *w = p->argv[p->i];
		if (p->done || w[0] != '-' || !w[1]) {
			p->operands[p->noperands++] = p->argv[p->i++];
			continue;
		}
		if (!strcmp(w, "--")) {
			keep(p, p->argv[p->i++], 1);
			p->done = 1;
			continue;
		}
		if (w[1] == '-')
			return long_option(p, w, arg);
		p->word = p->argv[p->i++];
		p->opts[p->nopts++] = p->word;
		p->cluster = p->word + 1;
		return short_option(p, arg);
	}
	return p->opts ? finish(p) : -1;
}
