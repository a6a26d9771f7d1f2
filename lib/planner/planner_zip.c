/* planner_zip.c: steps zipped run by run (lib/planner/planner_int.h):
 * sibling GEMMs' (planner_build.c) and causal segments'
 * (planner_attention.c), so that their copies share exchange phases. */
#include "planner/planner_int.h"

/* Which placements step s reads (rd) and writes (wr): -1 ends each. */
static void step_access(const Step *s, int rd[5], int *wr)
{
	int n = 0;
	if (s->kind == STEP_COPY) {
		rd[n++] = s->src;
		*wr = s->dst;
	} else {
		for (int k = 0; k < s->nin; k++)
			if (s->in[k] >= 0)
				rd[n++] = s->in[k];
		*wr = s->out;
	}
	rd[n] = -1;
}

/* Must step b stay after step a (b reads what a writes, writes what a
 * reads, or writes what a writes)? */
static int after(const Step *a, const Step *b)
{
	int ra[5], rb[5], wa, wb;
	step_access(a, ra, &wa);
	step_access(b, rb, &wb);
	if (wa == wb)
		return 1;
	for (int k = 0; rb[k] >= 0; k++)
		if (rb[k] == wa)
			return 1;
	for (int k = 0; ra[k] >= 0; k++)
		if (ra[k] == wb)
			return 1;
	return 0;
}

/* Steps [f0, f1) and [f1, f2) of pl zipped run by run: the computes of
 * the first, then those of the second that depend on none of the first's
 * left, then the copies alike; each keeps its own order (a step of the
 * second waits for any step of the first it depends on). */
void planner_zip_steps(Plan *pl, int f0, int f1, int f2)
{
	Step *out = xmalloc((size_t)(f2 - f0 + 1) * sizeof *out);
	int i = f0, j = f1, n = 0;
	while (i < f1 || j < f2) {
		for (int copies = 0; copies < 2; copies++) {
			StepKind k = copies ? STEP_COPY : STEP_COMPUTE;
			while (i < f1 && pl->s[i].kind == k)
				out[n++] = pl->s[i++];
			for (;;) {
				if (j >= f2 || pl->s[j].kind != k)
					break;
				int wait = 0;
				for (int q = i; q < f1 && !wait; q++)
					wait = after(&pl->s[q], &pl->s[j]);
				if (wait)
					break;
				out[n++] = pl->s[j++];
			}
		}
		if (i >= f1)            /* the rest of the second, in its order */
			while (j < f2)
				out[n++] = pl->s[j++];
	}
	memcpy(&pl->s[f0], out, (size_t)n * sizeof *out);
	free(out);
}
