/* run_tokens.c: what a decoder's runs are driven by (lib/run/run.h):
 * the token ids an embed reads and the logits over its vocabulary, each
 * batch entry's greedy next token, the tokens of a run, and the
 * calibration of a prefill and its decode as one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/run_int.h"

int run_token_ids(const Plan *pl, int *logits)
{
	int ids = -1;
	*logits = -1;
	for (int h = 0; h < pl->nh && ids < 0; h++)
		if (pl->h[h].kind == HOST_EMBED) {
			int64_t V = pl->t[pl->h[h].table].shape[pl->h[h].transposed ? 1 : 0];
			ids = pl->h[h].in;
			for (int t = 0; t < pl->nt && *logits < 0; t++)
				if (pl->t[t].role == R_OUTPUT && pl->t[t].rank == 3 && pl->t[t].shape[2] == V)
					*logits = t;
		}
	return ids;
}

void run_next_tokens(const float *v, const PTensor *t, int64_t *tok)
{
	int64_t B = t->shape[0], T = t->shape[1], V = t->shape[2];
	for (int64_t b = 0; b < B; b++) {
		const float *row = v + ((b + 1) * T - 1) * V;
		int64_t best = 0;
		for (int64_t i = 1; i < V; i++)
			best = row[i] > row[best] ? i : best;
		tok[b] = best;
	}
}

int64_t run_tokens(const Plan *pl)
{
	for (int t = 0; t < pl->nt; t++)
		if (pl->t[t].role == R_INPUT && pl->t[t].fmt == FMT_I32)
			return pl->t[t].shape[1];
	return 0;
}

static int calibrate_file(const char *path, const Machine *mc, const RunOpts *ro, Scales *sc, Err *e)
{
	Model md;
	char head[8] = { 0 };
	FILE *fp = path ? fopen(path, "rb") : NULL;
	size_t got = fp ? fread(head, 1, sizeof head, fp) : 0;
	if (fp)
		fclose(fp);
	if (got == sizeof head && !memcmp(head, PROGRAM_MAGIC, sizeof head))
		return errf(e, "%s: a program; calibration reads model files (with --prefill, the prefill's model)",
			    path);
	if (model_load(&md, path, e))
		return -1;
	int rc = model_check_size(&md, mc, e) || run_calibrate(&md, ro, sc, e) ? -1 : 0;
	model_free(&md);
	return rc;
}

int run_calibrate_files(const char *model, const char *prefill, const Machine *mc, const RunOpts *ro, Scales *sc,
			Err *e)
{
	Scales pre = { NULL, NULL, 0 };
	if (calibrate_file(model, mc, ro, sc, e) || (prefill && calibrate_file(prefill, mc, ro, &pre, e))) {
		scales_free(&pre);
		return -1;
	}
	scales_merge_max(sc, &pre);
	scales_free(&pre);
	return 0;
}
