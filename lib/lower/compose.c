#include "lower/compose.h"

#include <stdlib.h>
#include <string.h>

static int readers(const Plan *pl, int p)
{
	int n = 0;
	for (int i = 0; i < pl->ns; i++) {
		const Step *s = &pl->s[i];
		if (s->kind == STEP_COPY)
			n += s->src == p;
		else
			for (int k = 0; k < s->nin; k++)
				n += s->in[k] == p;
	}
	return n;
}

static int joinable(const Plan *pl, int i)
{
	const Step *a = &pl->s[i], *b = &pl->s[i + 1];
	const Placement *S, *Y;

	if (a->kind != STEP_COPY || b->kind != STEP_COPY || a->dst != b->src)
		return 0;
	if (plan_repeat_of(pl, i) != plan_repeat_of(pl, i + 1))
		return 0;                       /* never across a repeat boundary */
	if (a->map == MAP_RELAYOUT || a->move == MOVE_REDUCTION || b->move == MOVE_REDUCTION ||
	    b->move == MOVE_RELAY)
		return 0;               /* joining a relay would undo it */
	S = &pl->p[a->dst];
	Y = &pl->p[b->dst];
	if (place_replicas(Y) <= place_replicas(S))
		return 0;
	if (pl->t[S->tensor].role == R_OUTPUT)
		return 0;
	if (readers(pl, a->dst) != 1)
		return 0;
	return copy_mapping(&pl->p[a->src], Y) != MAP_RELAYOUT;
}

static void renum(int *r, int p)
{
	if (*r > p)
		(*r)--;
}

static void drop_placement(Plan *pl, int p)
{
	free(pl->p[p].name);
	memmove(&pl->p[p], &pl->p[p + 1], (size_t)(pl->np - p - 1) * sizeof *pl->p);
	pl->np--;
	for (int i = 0; i < pl->ns; i++) {
		Step *s = &pl->s[i];
		if (s->kind == STEP_COPY) {
			renum(&s->src, p);
			renum(&s->dst, p);
		} else {
			renum(&s->out, p);
			for (int k = 0; k < s->nin; k++)
				renum(&s->in[k], p);
		}
	}
}

/* Does step s read or write a placement of tensor t? */
static int touches(const Plan *pl, const Step *s, int t)
{
	if (s->kind == STEP_COPY)
		return pl->p[s->src].tensor == t || pl->p[s->dst].tensor == t;
	for (int k = 0; k < s->nin; k++)
		if (s->in[k] >= 0 && pl->p[s->in[k]].tensor == t)
			return 1;
	return pl->p[s->out].tensor == t;
}

/* Does compute step s write placement p (or, with reads, read it)? */
static int uses(const Step *s, int p, int reads)
{
	if (s->out == p)
		return 1;
	for (int k = 0; reads && k < s->nin; k++)
		if (s->in[k] == p)
			return 1;
	return 0;
}

int plan_hoist(Plan *pl)
{
	int moved = 0;
	for (int i = 1; i < pl->ns; i++) {
		if (pl->s[i].kind != STEP_COPY || pl->s[i - 1].kind != STEP_COMPUTE)
			continue;
		int h = i, j = i;               /* computes [h, i), copies [i, j] */
		while (h > 0 && pl->s[h - 1].kind == STEP_COMPUTE)
			h--;
		while (j + 1 < pl->ns && pl->s[j + 1].kind == STEP_COPY)
			j++;
		int ok = h > 0;                 /* every step of [h - 1, j] in one repeat region */
		for (int k = h; ok && k <= j; k++)
			ok = plan_repeat_of(pl, k) == plan_repeat_of(pl, h - 1);
		for (int k = i; ok && k <= j; k++) {
			const Step *c = &pl->s[k];
			const PTensor *t = &pl->t[pl->p[c->src].tensor];
			if (c->move == MOVE_PARAMETER && t->role == R_PARAM && t->rank == 1 &&
			    pl->p[c->dst].tensor == pl->p[c->src].tensor) {
				for (int q = h; ok && q < i; q++)
					ok = !touches(pl, &pl->s[q], pl->p[c->src].tensor);
			} else {        /* an activation: none of the computes writes its source or uses its destination */
				ok = c->move == MOVE_ACTIVATION;
				for (int q = h; ok && q < i; q++)
					ok = !uses(&pl->s[q], c->src, 0) && !uses(&pl->s[q], c->dst, 1);
			}
		}
		if (ok) {                       /* the copies, then the computes */
			int nc = i - h, nr = j - i + 1;
			Step *tmp = xmalloc((size_t)nc * sizeof *tmp);
			memcpy(tmp, &pl->s[h], (size_t)nc * sizeof *tmp);
			memmove(&pl->s[h], &pl->s[i], (size_t)nr * sizeof *tmp);
			memcpy(&pl->s[h + nr], tmp, (size_t)nc * sizeof *tmp);
			free(tmp);
			moved += nr;
		}
		i = j;
	}
	return moved;
}

int plan_join(Plan *pl)
{
	int joined = 0;

	for (int i = 0; i + 1 < pl->ns;) {
		if (!joinable(pl, i)) {
			i++;
			continue;
		}
		Step *a = &pl->s[i], *b = &pl->s[i + 1];
		int stage = a->dst;
		b->src = a->src;
		b->map = copy_mapping(&pl->p[b->src], &pl->p[b->dst]);
		free(a->op);
		memmove(a, a + 1, (size_t)(pl->ns - i - 1) * sizeof *a);
		pl->ns--;
		for (int r = 0; r < pl->nr; r++) {
			renum(&pl->r[r].first, i);
			renum(&pl->r[r].last, i - 1);
		}
		drop_placement(pl, stage);
		joined++;
	}
	return joined;
}

int plan_compose(Plan *pl)
{
	int joined = plan_join(pl);
	plan_hoist(pl);
	return joined;
}
