/* run_carry.c: the states carried from one run to the next (lib/run/run.h
 * Carry: amp-run --steps, --prefill): kept, found and freed by name, a
 * prefill's checked against a decode's (shape, and what writes them: the
 * models' state digests) and stacked along the batch into a decode's. */
#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "model/digest.h"
#include "run/run_int.h"

void carry_keep(Carry *c, const char *name, const float *v, int64_t n, int ref)
{
	int i = 0;
	while (i < c->n && strcmp(c->name[i], name))
		i++;
	if (i == c->n) {
		c->name = xrealloc(c->name, (size_t)(c->n + 1) * sizeof *c->name);
		c->mach = xrealloc(c->mach, (size_t)(c->n + 1) * sizeof *c->mach);
		c->ref = xrealloc(c->ref, (size_t)(c->n + 1) * sizeof *c->ref);
		c->count = xrealloc(c->count, (size_t)(c->n + 1) * sizeof *c->count);
		c->name[i] = xstrdup(name), c->mach[i] = c->ref[i] = NULL, c->count[i] = n;
		c->n++;
	}
	float **d = ref ? &c->ref[i] : &c->mach[i];
	free(*d);
	*d = xmalloc((size_t)n * sizeof **d);
	memcpy(*d, v, (size_t)n * sizeof **d);
	c->count[i] = n;
}

void carry_take(Carry *c, const char *name, float *v, int64_t n)
{
	carry_keep(c, name, v, 0, 0);           /* the entry, then its values */
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->name[i], name)) {
			free(c->mach[i]);
			c->mach[i] = v, c->count[i] = n;
		}
}

float *carry_find(const Carry *c, const char *name, int64_t n, int ref)
{
	for (int i = 0; c && i < c->n; i++)
		if (!strcmp(c->name[i], name) && c->count[i] == n)
			return ref ? c->ref[i] : c->mach[i];
	return NULL;
}

void carry_free(Carry *c)
{
	for (int i = 0; i < c->n; i++)
		free(c->name[i]), free(c->mach[i]), free(c->ref[i]);
	free(c->name), free(c->mach), free(c->ref), free(c->count);
	memset(c, 0, sizeof *c);
}

int64_t carry_parts(const Plan *a, const char *apath, const Plan *b, const char *bpath, int64_t *batch, Err *e)
{
	int shared = 0;
	int64_t parts = 0;
	for (int i = 0; i < b->nt; i++) {
		const PTensor *y = &b->t[i];
		int j = y->role == R_STATE ? plan_find_tensor(a, y->name) : -1;
		if (j < 0)
			continue;
		const PTensor *x = &a->t[j];
		int same = x->role == R_STATE && x->rank == y->rank && x->fmt == y->fmt && x->count == y->count &&
			   y->shape[0] % x->shape[0] == 0 &&
			   (!parts || parts == y->shape[0] / x->shape[0]);
		for (int k = 1; same && k < x->rank; k++)
			same = x->shape[k] == y->shape[k];
		parts = y->shape[0] / x->shape[0];
		*batch = x->shape[0];
		if (!same)
			return errf(e, "state '%s' of '%s' differs from the prefill's ('%s'): a tensor of that name must "
				    "be a state of the same shape and dtype, but for a batch that divides the program's "
				    "(the same part of it for every state)", y->name, bpath, apath);
		shared++;
	}
	if (!shared)
		return errf(e, "'%s' and the prefill '%s' share no state: nothing would carry on", bpath, apath);
	return parts;
}

/* Text's first line that differs from other's, in a new string. */
static char *first_diff(const char *text, const char *other)
{
	while (*text) {
		size_t n = strcspn(text, "\n"), k = strcspn(other, "\n");
		if (n != k || memcmp(text, other, n))
			return xasprintf("%.*s", (int)n, text);
		text += n + (text[n] == '\n');
		other += k + (other[k] == '\n');
	}
	return xstrdup("(its end)");
}

int carry_digests(const Model *a, const Scales *asc, const char *apath, const Model *b, const Scales *bsc,
		  const char *bpath, Err *e)
{
	if (!a || !b)           /* what writes a state cannot be known */
		return errf(e, "%s'%s' carries no model%s: what writes its states cannot be checked against the %s's, "
			    "so none is carried on (amp-emit --model embeds it)", a ? "" : "the prefill ", a ? bpath : apath,
			    a ? " and none was given (--model)" : "", a ? "prefill" : "program");
	for (int i = 0; i < b->nt; i++) {
		int j = b->t[i].role == T_STATE ? model_find(a, b->t[i].name) : -1;
		if (j < 0 || a->t[j].role != T_STATE)
			continue;
		char *ta, *tb;
		uint64_t da = model_state_digest(a, asc, j, &ta), db = model_state_digest(b, bsc, i, &tb);
		if (da != db) {
			char *fb = first_diff(tb, ta), *fa = first_diff(ta, tb);
			errf(e, "state '%s' of '%s' is written by a different model chain in the prefill '%s': digest "
			     "%016llx vs %016llx; the first difference: '%s' against '%s' (formats/model.md, state "
			     "digests)", b->t[i].name, bpath, apath, (unsigned long long)db, (unsigned long long)da, fb,
			     fa);
			free(fa), free(fb);
		}
		free(ta), free(tb);
		if (da != db)
			return -1;
	}
	return 0;
}

void carry_stack(Carry *all, const Carry *one, const Plan *pl)
{
	for (int i = 0; i < one->n; i++) {
		int j = 0, t = plan_find_tensor(pl, one->name[i]);
		while (j < all->n && strcmp(all->name[j], one->name[i]))
			j++;
		int64_t inst = pl->t[t].count, had = j < all->n ? all->count[j] : 0, n = had + one->count[i];
		int64_t a = had / inst, b = one->count[i] / inst;       /* values per instance */
		for (int k = 0; k < 2; k++) {
			float *v = xmalloc((size_t)n * sizeof *v);
			for (int64_t q = 0; q < inst; q++) {
				if (had)
					memcpy(v + q * (a + b), (k ? all->ref[j] : all->mach[j]) + q * a, (size_t)a * sizeof *v);
				memcpy(v + q * (a + b) + a, (k ? one->ref[i] : one->mach[i]) + q * b, (size_t)b * sizeof *v);
			}
			carry_keep(all, one->name[i], v, n, k);
			free(v);
		}
	}
}
