/* amp-import: a Hugging Face decoder's config.json -> an amp model file
 * (formats/import.md; lib/model/import.c does the work). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/import.h"
#include "model/machine.h"
#include "model/model.h"
#include "planner/planner.h"
#include "tool.h"

static const char usage[] =
	"Usage: amp-import (--decode | --prefill) [OPTION]... CONFIG   (a decoder)\n"
	"  or:  amp-import [OPTION]... CONFIG                           (a vision tower)\n"
	"Read a Hugging Face model's configuration (CONFIG: its config.json, or\n"
	"the directory holding it) and write the amp model file (formats/model.md)\n"
	"of a decoder's decode step or prefill, or of a vision tower over a batch\n"
	"of images. Architectures: LlamaForCausalLM (SmolLM2, Llama 3.x with its\n"
	"llama3 rope scaling), Qwen2ForCausalLM (biases on q, k and v),\n"
	"SiglipVisionModel (and SiglipModel's vision tower, MAP head included).\n"
	"What the configuration describes and amp does not run (another\n"
	"rope_scaling type, a sliding window, experts, an MLP bias, another\n"
	"activation) is refused by name (formats/import.md).\n";

static const char epilogue[] =
	"Exit status: 0 success, 1 bad input or a write error, 2 usage error.\n";

enum { K_DECODE = 256, K_PREFILL, K_PROMPT, K_CONTEXT, K_LAYERS, K_MATMULS, K_HEAD, K_CACHE, K_NAME, K_CKPT, K_WDIR };

static const Opt opts[] = {
	{ K_DECODE, 0, "decode", OPT_NOARG, NULL, NULL,
	  "a decode step: one token for each sequence at its\n"
	  "runtime position, appending to each layer's KV cache" },
	{ K_PREFILL, 0, "prefill", OPT_NOARG, NULL, NULL,
	  "a prefill: the prompt of each sequence, its cache\n"
	  "written from row 0, the logits of its last position" },
	{ 'b', 'b', "batch", OPT_ARG, "N", NULL,
	  "sequences (default 8 for --decode, 1 for --prefill)" },
	{ K_PROMPT, 0, "prompt", OPT_ARG, "N", NULL,
	  "a prefill's tokens (default 512)" },
	{ K_CONTEXT, 0, "context", OPT_ARG, "N", NULL,
	  "positions each layer's KV cache holds (default 2048)" },
	{ K_LAYERS, 0, "layers", OPT_ARG, "N", NULL,
	  "the first N layers only (a copy for validation; default\n"
	  "all; the default name then says N)" },
	{ K_MATMULS, 0, "matmuls", OPT_ARG, "FORMAT", "words:fp8 fp16",
	  "the layers' matmul weights (default fp8)" },
	{ K_HEAD, 0, "head", OPT_ARG, "FORMAT", "words:auto fp8 fp16",
	  "the embedding table, which a tied lm_head reads, and an\n"
	  "untied lm_head's weights; auto (the default): fp16 when\n"
	  "amp-plan finds a plan of the model that fits the\n"
	  "machine at its own limits, else fp8, and says which" },
	{ 'm', 'm', "machine", OPT_ARG, "FILE", "machine",
	  "the machine --head auto plans for (default amp1472)" },
	{ K_CACHE, 0, "cache", OPT_ARG, "FORMAT", "words:fp8 fp16",
	  "the KV cache (default fp16)" },
	{ K_NAME, 0, "name", OPT_ARG, "NAME", NULL,
	  "the model's name (default CONFIG's base name, or its\n"
	  "directory's, then -Nlayer with --layers, then -decode\n"
	  "or -prefill); A-Z, a-z, 0-9, '.', '_' and '-'" },
	{ 'o', 'o', "output", OPT_ARG, "FILE", "file",
	  "write the model to FILE (default standard output)" },
	{ K_WDIR, 0, "weights-dir", OPT_ARG, "DIR", "dir",
	  "also write the checkpoint's weights as the model's\n"
	  "parameters: DIR/<parameter>.npy and DIR/weights.yaml,\n"
	  "for amp-run --weights DIR (formats/import.md)" },
	{ K_CKPT, 0, "checkpoint", OPT_ARG, "PATH", "file",
	  "the weights: a .safetensors, a model.safetensors.index.json\n"
	  "or their directory (default CONFIG's directory)" },
	{ 0 },
};

static const OptTool tool = { "amp-import", usage, opts, epilogue };

/* Does the model text fit machine mc: a plan that fits at its own limits,
 * as amp-plan's default objective finds? 0, or -1 with why. */
static int fits(char *text, size_t len, const Machine *mc, Err *why)
{
	Model m;
	Plan pl;
	Scales none = { NULL, NULL, 0 };
	Err fit = { { 0 } };
	int fell_back = 0;
	PlanOpts po;
	memset(&po, 0, sizeof po);
	po.objective = OBJ_CYCLES, po.scales = &none, po.ownership = OWN_AUTO;
	po.no_fit_check = 1, po.fit = &fit, po.fell_back = &fell_back;
	if (model_load_input(&m, input_open_mem("the model", text, len, why), why))
		return -1;
	int rc = model_check_size(&m, mc, why) || plan_build(&pl, &m, mc, &po, NULL, why) ? -1 : 0;
	if (!rc) {
		plan_free(&pl);
		if (fit.msg[0])
			*why = fit, rc = -1;
	}
	model_free(&m);
	return rc;
}

/* Error text of the model's size check or plan, on its first line and
 * without the line and column in the text amp-import made. */
static void why_line(Err *why)
{
	char *nl = strchr(why->msg, '\n'), *at = why->msg;
	if (nl)
		*nl = 0;
	if (!strncmp(at, "the model:", 10))
		for (int colons = 0; *at && colons < 3; at++)
			colons += *at == ':';
	while (*at == ' ')
		at++;
	memmove(why->msg, at, strlen(at) + 1);
}

/* Does the model of hc under o fit mc: with plan, a plan that fits (fits
 * above), else the parameters and operands by the size check alone? */
static int model_fits(const HfConfig *hc, const ImportOpts *o, const Machine *mc, int plan, Err *why)
{
	Err e;
	char *text = NULL;
	size_t len = 0;
	Output *mem = output_open_mem(&text, &len, &e);
	if (!mem || import_model(hc, o, mem, &e) || output_commit(mem, &e))
		fail(&e);
	int rc;
	if (plan)
		rc = fits(text, len, mc, why);
	else {
		Model m;
		rc = model_load_input(&m, input_open_mem("the model", text, len, why), why);
		if (!rc)
			rc = model_check_size(&m, mc, why), model_free(&m);
	}
	free(text);
	if (rc)
		why_line(why);
	return rc;
}

/* The model with the embedding table and lm_head fp16 when a plan of it
 * fits the machine, else fp8; says which on stderr, and when even the fp8
 * model's parameters cannot fit the machine, says so too. */
static void choose_head(const HfConfig *hc, ImportOpts *o, const char *machine_path)
{
	Machine mc;
	Err e, why;
	const char *mpath = machine_path ? machine_path : default_machine();
	if (machine_load(&mc, mpath, &e) || machine_check_one_chip(&mc, mpath, &e))
		fail(&e);
	o->head = FMT_FP16;
	if (model_fits(hc, o, &mc, 1, &why)) {
		o->head = FMT_FP8;
		fprintf(stderr, "amp-import: the embedding table and lm_head are fp8: at fp16, %s\n", why.msg);
		if (model_fits(hc, o, &mc, 0, &why))
			fprintf(stderr, "amp-import: at fp8 too, %s\n", why.msg);
	} else {
		fprintf(stderr, "amp-import: the embedding table and lm_head stay fp16: a plan fits %s at its limits\n",
			mc.name);
	}
}

static Format format_arg(const char *opt, const char *arg)
{
	if (!strcmp(arg, "fp8"))
		return FMT_FP8;
	if (!strcmp(arg, "fp16"))
		return FMT_FP16;
	usage_error("%s takes fp8 or fp16, not '%s'", opt, arg);
}

static int64_t positive_arg(const char *opt, const char *arg)
{
	int64_t n = count_arg(opt, arg);
	if (n < 1 || n > (INT64_C(1) << 30))
		usage_error("%s takes a count from 1 to 2^30, not '%s'", opt, arg);
	return n;
}

/* CONFIG's base name without ".json", or its directory's when it is a
 * directory or a config.json. */
static char *stem(const char *path)
{
	char *p = xstrdup(path), *s;
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = 0;
	s = strrchr(p, '/');
	if (!strcmp(s ? s + 1 : p, "config.json") && s)
		*s = 0, s = strrchr(p, '/');
	char *base = xstrdup(s ? s + 1 : p);
	free(p);
	n = strlen(base);
	if (n > 5 && !strcmp(base + n - 5, ".json"))
		base[n - 5] = 0;
	return base;
}

/* The directory of CONFIG: itself when it is one, else the file's. */
static char *config_dir(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return xstrdup(path);
	const char *s = strrchr(path, '/');
	return s ? xasprintf("%.*s", (int)(s - path) + (s == path), path) : xstrdup(".");
}

int main(int argc, char **argv)
{
	ImportOpts o = { IMPORT_DECODE, 0, 512, 2048, 0, FMT_FP8, FMT_FP8, FMT_FP16, NULL, NULL };
	const char *out_path = NULL, *arg, *wdir = NULL, *ckpt_path = NULL;
	int kind = -1, c, prompt_given = 0, decoder_only = 0, head_auto = 1;
	const char *machine_path = NULL;
	OptParse op;
	opt_init(&op, &tool, argc, argv);
	while ((c = opt_next(&op, &arg)) != -1) {
		switch (c) {
		case K_DECODE:
		case K_PREFILL:
			if (kind >= 0 && kind != (c == K_PREFILL))
				usage_error("--decode and --prefill: one model at a time");
			kind = c == K_PREFILL;
			break;
		case 'b': o.batch = positive_arg("--batch", arg); break;
		case K_PROMPT: o.prompt = positive_arg("--prompt", arg), prompt_given = 1; break;
		case K_CONTEXT: o.context = positive_arg("--context", arg), decoder_only = 1; break;
		case K_LAYERS: o.layers = positive_arg("--layers", arg); break;
		case K_MATMULS: o.weights = format_arg("--matmuls", arg); break;
		case K_HEAD:
			head_auto = !strcmp(arg, "auto");
			o.head = head_auto ? FMT_FP8 : format_arg("--head", arg), decoder_only = 1;
			break;
		case 'm': machine_path = machine_arg(arg); break;
		case K_CACHE: o.cache = format_arg("--cache", arg), decoder_only = 1; break;
		case K_NAME: o.name = arg; break;
		case 'o': out_path = arg; break;
		case K_WDIR: wdir = arg; break;
		case K_CKPT: ckpt_path = arg; break;
		}
	}
	const char *in = one_input(argc, argv, op.optind, "configuration");
	if (!in)
		usage_error("name the configuration (a config.json, or its directory)");
	distinct_outputs((ToolFile[]){ { "-o", out_path }, { "the configuration", in }, { "--machine", machine_path } }, 1,
			 3);
	if (o.name && !import_name_ok(o.name))
		usage_error("--name '%s': a name is 1 to 128 of A-Z, a-z, 0-9, '.', '_' and '-'", o.name);
	HfConfig hc;
	Err e;
	if (hf_config_load(&hc, in, &e))
		fail(&e);
	if (hc.vision && (kind >= 0 || prompt_given || decoder_only))
		usage_error("'%s' is a vision tower (%s): --decode, --prefill, --prompt, --context, --head and --cache "
			    "are a decoder's", in, hc.arch);
	if (!hc.vision && kind < 0)
		usage_error("say --decode or --prefill (a decoder)");
	if (kind == 0 && prompt_given)
		usage_error("--prompt is a prefill's (with --decode, each sequence brings one token)");
	o.kind = kind > 0 ? IMPORT_PREFILL : IMPORT_DECODE;
	o.batch = o.batch ? o.batch : hc.vision || kind ? 1 : 8;
	int layers_given = o.layers > 0;
	o.layers = layers_given ? o.layers : hc.layers;
	char *base = stem(in), *name = NULL;
	o.source = base;
	if (!o.name) {
		char layers[32] = "";
		if (layers_given && o.layers != hc.layers)
			snprintf(layers, sizeof layers, "-%lldlayer", (long long)o.layers);
		name = xasprintf("%s%s%s", base, layers, hc.vision ? "" : kind ? "-prefill" : "-decode");
		if (!import_name_ok(name))
			usage_error("'%s' is no model name (A-Z, a-z, 0-9, '.', '_' and '-'): give one with --name", name);
		o.name = name;
	}
	if (head_auto && !hc.vision)
		choose_head(&hc, &o, machine_path);
	/* the model is committed only when the weights are written too */
	Output *out = output_open(out_path, 0, &e);
	if (!out)
		fail(&e);
	if (import_model(&hc, &o, out, &e)) {
		output_abort(out);      /* no partial model */
		fail(&e);
	}
	if (wdir) {
		char *dir = ckpt_path ? NULL : config_dir(in);
		const char *cp = ckpt_path ? ckpt_path : dir;
		Checkpoint ck;
		if (ckpt_open(&ck, cp, &e) || import_weights(&hc, &o, &ck, wdir, &e)) {
			output_abort(out);
			fail(&e);
		}
		ckpt_close(&ck);
		free(dir);
	}
	if (output_commit(out, &e))
		fail(&e);
	free(name);
	free(base);
	hf_config_free(&hc);
	return EXIT_OK;
}
