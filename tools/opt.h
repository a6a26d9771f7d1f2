/* opt.h: the one option table every amp tool parses its command line
 * from. A tool declares its options once, as an array of Opt; the same
 * table gives the parser (opt_next), the option lines of --help
 * (opt_help), the man page (help2man reads --help) and the bash
 * completion (share/bash-completion/amp reads --list-options).
 *
 * Parsing: a long option is taken only by its whole name ("--output",
 * "--output=FILE" or "--output FILE"); a prefix of one ("--ou") is a
 * usage error naming the option it begins, so that a word a wrapper or a
 * sweep checks by name can never act as another option. Short options
 * cluster ("-zo FILE", "-oFILE"). Operands may come before, between or
 * after options; "--" ends the options. When opt_next returns -1, argv
 * holds the options first, in the order given, then the operands
 * (p->optind is the first); opt_parsed gives the options one by one, as
 * provenance records them. Every
 * tool takes --help, --version and --list-options, which opt_next
 * handles itself (print, exit 0). Errors are usage errors (exit 2). */
#ifndef AMP_OPT_H
#define AMP_OPT_H

enum { OPT_NOARG, OPT_ARG, OPT_OPTARG };

typedef struct {
	int key;                /* what opt_next returns for it: its letter, or another code of the tool's */
	char letter;            /* its short form ('o' for -o), or 0 */
	const char *name;       /* its long form without "--", never abbreviated */
	int arg;                /* OPT_NOARG; OPT_ARG (the next word or "=V"); OPT_OPTARG ("=V" only) */
	const char *argname;    /* its value in the help ("FILE"), NULL without one */
	const char *values;     /* what completes its value: "file", "dir", "machine" or "words:a b c"; NULL */
	const char *help;       /* its help, lines separated by '\n' (opt_help indents them) */
} Opt;

typedef struct {
	const char *name;       /* "amp-plan" */
	const char *usage;      /* the help's "Usage:" lines and the description before the options */
	const Opt *opts;        /* the options, ended by one with name NULL; --help, --version added */
	const char *epilogue;   /* the help after the options (exit status, ...), or NULL */
} OptTool;

typedef struct {
	const OptTool *t;
	int argc;
	char **argv;
	int i;                  /* the next word */
	char *word;             /* the word of the short options being parsed */
	const char *cluster;    /* inside it: the next letter */
	char *pool;             /* where split clusters' words are made */
	int done;               /* "--" seen: the rest are operands */
	char **opts, **operands;        /* argv's words, sorted while parsing */
	int nopts, noperands;
	char **words;           /* the options as parsed, a word each (and its value's) */
	int nwords;
	int optind;             /* after -1: the first operand in argv */
} OptParse;

/* Starts parsing argv[1 .. argc) with t's table; calls tool_init(t->name). */
void opt_init(OptParse *p, const OptTool *t, int argc, char **argv);

/* The next option's key, its value in *arg (NULL without one), or -1
 * after the last: then argv is options first and p->optind the first
 * operand. Unknown options, abbreviations and missing or unwanted values
 * are usage errors. */
int opt_next(OptParse *p, const char **arg);

/* The options parsed (after opt_next's -1) in the order given, each
 * option its own word ("-zo F" is "-z", "-o", "F"), with the words of
 * their values: what provenance records. Returns their number. */
int opt_parsed(char *const **words);

/* Prints t's help (usage, the option lines, the epilogue, where the
 * documents are) to standard output and exits 0. */
void opt_help(const OptTool *t);

#endif
