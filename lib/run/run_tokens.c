/* run_tokens.c: what a decoder's runs are driven by (lib/run/run.h):
 * the token ids an embed reads and the logits over its vocabulary, each
 * batch entry's greedy next token, the tokens of a run, and the
 * calibration of a prefill and its decode as one. */
#include <math.h>
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

void run_next_judge(const float *mv, const float *rv, const PTensor *t, NextToken *nt)
{
	int64_t B = t->shape[0], T = t->shape[1], V = t->shape[2], *m = xmalloc((size_t)B * 2 * sizeof *m), *r = m + B;
	run_next_tokens(mv, t, m);
	run_next_tokens(rv, t, r);
	for (int64_t b = 0; b < B; b++) {
		const float *x = mv + ((b + 1) * T - 1) * V, *y = rv + ((b + 1) * T - 1) * V;
		double second = -INFINITY, ss = 0;
		for (int64_t i = 0; i < V; i++) {
			double d = (double)x[i] - (double)y[i];
			ss += d * d;
			if (i != r[b] && y[i] > second)
				second = y[i];
		}
		nt[b] = (NextToken){ m[b], r[b], V > 1 ? (double)y[r[b]] - second : INFINITY, sqrt(ss / (double)V) };
	}
	free(m);
}

int run_next_decisive(const NextToken *nt)
{
	return nt->margin > RUN_DECISIVE * nt->rms;
}

void run_next_summary(NextToken *const *tok, const int64_t *len, int64_t nseq, NextSummary *s)
{
	memset(s, 0, sizeof *s);
	s->first_seq = -1;
	for (int64_t q = 0; q < nseq; q++)
		for (int64_t i = 0; i < len[q]; i++) {
			const NextToken *nt = &tok[q][i];
			int same = nt->machine == nt->reference, dec = run_next_decisive(nt);
			s->agree += same, s->total++;
			s->decisive_agree += same && dec, s->decisive += dec;
			if (!same && (s->first_seq < 0 || i < s->first_at))
				s->first_seq = q, s->first_at = i, s->first = *nt;
		}
}

static double percent(int64_t n, int64_t of)
{
	return of ? 100.0 * (double)n / (double)of : 100.0;
}

/* Where a disagreement stands: the reference's margin against the RMS of
 * machine minus reference. */
static void print_margin(FILE *f, const NextToken *nt)
{
	fprintf(f, "the reference's margin %.4g, %.2f x the RMS %.4g of machine - reference (%s)", nt->margin,
		nt->rms > 0 ? nt->margin / nt->rms : INFINITY, nt->rms,
		run_next_decisive(nt) ? "decisive" : "not decisive");
}

void run_next_print(FILE *f, NextToken *const *tok, const int64_t *len, int64_t nseq, int generate)
{
	NextSummary s;
	run_next_summary(tok, len, nseq, &s);
	if (s.total) {
		fprintf(f, "next token: the machine's greedy token is the reference's for %lld of %lld (%.1f%%); at decisive "
		       "steps (the reference's margin over %d x the RMS of machine - reference) %lld of %lld (%.1f%%)\n",
		       (long long)s.agree, (long long)s.total, percent(s.agree, s.total), RUN_DECISIVE,
		       (long long)s.decisive_agree, (long long)s.decisive, percent(s.decisive_agree, s.decisive));
		if (s.first_seq < 0) {
			fprintf(f, "next token: no divergence\n");
		} else {
			fprintf(f, "next token: first divergence at sequence %lld, token %lld: machine %lld, reference %lld; ",
			       (long long)s.first_seq, (long long)s.first_at, (long long)s.first.machine,
			       (long long)s.first.reference);
			print_margin(f, &s.first);
			fprintf(f, "\n");
		}
	}
	for (int64_t b = 0; generate && b < nseq; b++) {
		int64_t part = -1;
		for (int k = 0; k < 2; k++) {
			fprintf(f, "generate: sequence %lld, %s:", (long long)b, k ? "reference" : "machine  ");
			for (int64_t r = 0; r < len[b]; r++) {
				const NextToken *nt = &tok[b][r];
				fprintf(f, " %lld", (long long)(k ? nt->reference : nt->machine));
				part = part < 0 && nt->machine != nt->reference ? r : part;
			}
			fprintf(f, "\n");
		}
		if (part >= 0) {
			fprintf(f, "generate: sequence %lld parts at token %lld: ", (long long)b, (long long)part);
			print_margin(f, &tok[b][part]);
			fprintf(f, "\n");
		}
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
