/* compare_match.c: phases lined up by their labels (lib/study/compare_match.h). */
#include "study/compare_match.h"

#include <stdlib.h>

#include "base/diag.h"

int match_overlap(const LabelSet *x, const LabelSet *y)
{
	int i = 0, j = 0, n = 0;
	while (i < x->n && j < y->n) {
		if (x->lab[i] < y->lab[j])
			i++;
		else if (x->lab[i] > y->lab[j])
			j++;
		else
			n++, i++, j++;
	}
	return n;
}

int64_t match_weight(const LabelSet *x, const LabelSet *y, int64_t total)
{
	int k = match_overlap(x, y);
	if (!k)
		return 0;
	return k + (k == x->n && k == y->n ? total + 1 : 0);
}

const char *line_kind_name(LineKind k)
{
	static const char *names[] = { "same", "changed", "regrouped", "removed", "added" };
	return names[k];
}

/* For each phase of one side, the first and last phase of the other side
 * that shares a label with it (-1, -1 when none). */
static void partners(const LabelSet *s, int ns, const int *lo, const int *hi, int *pmin, int *pmax)
{
	for (int i = 0; i < ns; i++) {
		pmin[i] = pmax[i] = -1;
		for (int k = 0; k < s[i].n; k++) {
			int l = s[i].lab[k];
			if (lo[l] < 0)
				continue;
			if (pmin[i] < 0 || lo[l] < pmin[i])
				pmin[i] = lo[l];
			if (hi[l] > pmax[i])
				pmax[i] = hi[l];
		}
	}
}

/* Where each label occurs on one side: its first and last phase. */
static void spans(const LabelSet *s, int ns, int nl, int *lo, int *hi)
{
	for (int l = 0; l < nl; l++)
		lo[l] = hi[l] = -1;
	for (int i = 0; i < ns; i++)
		for (int k = 0; k < s[i].n; k++) {
			int l = s[i].lab[k];
			if (lo[l] < 0)
				lo[l] = i;
			hi[l] = i;
		}
}

static int label_count(const LabelSet *s, int ns)
{
	int nl = 0;
	for (int i = 0; i < ns; i++)
		for (int k = 0; k < s[i].n; k++)
			nl = s[i].lab[k] + 1 > nl ? s[i].lab[k] + 1 : nl;
	return nl;
}

int match_groups(const LabelSet *a, int na, const LabelSet *b, int nb, int *ga, int *gb)
{
	int la = label_count(a, na), lb = label_count(b, nb);
	int nl = la > lb ? la : lb;
	int *alo = xcalloc((size_t)nl + 1, sizeof *alo), *ahi = xcalloc((size_t)nl + 1, sizeof *ahi);
	int *blo = xcalloc((size_t)nl + 1, sizeof *blo), *bhi = xcalloc((size_t)nl + 1, sizeof *bhi);
	int *amin = xcalloc((size_t)na + 1, sizeof *amin), *amax = xcalloc((size_t)na + 1, sizeof *amax);
	int *bmin = xcalloc((size_t)nb + 1, sizeof *bmin), *bmax = xcalloc((size_t)nb + 1, sizeof *bmax);
	spans(a, na, nl, alo, ahi);
	spans(b, nb, nl, blo, bhi);
	partners(a, na, blo, bhi, amin, amax);
	partners(b, nb, alo, ahi, bmin, bmax);
	int i = 0, j = 0, g = 0;
	while (i < na || j < nb) {
		if (i < na && amin[i] < 0) {
			ga[i++] = g++;
			continue;
		}
		if (j < nb && bmin[j] < 0) {
			gb[j++] = g++;
			continue;
		}
		/* both have partners, all of them at or after (i, j): one block,
		 * grown until it holds every partner of its members */
		int i1 = i < na ? i : na - 1, j1 = j < nb ? j : nb - 1, si = i, sj = j;
		while (si <= i1 || sj <= j1) {
			for (; si <= i1 && si < na; si++)
				j1 = amax[si] > j1 ? amax[si] : j1;
			for (; sj <= j1 && sj < nb; sj++)
				i1 = bmax[sj] > i1 ? bmax[sj] : i1;
		}
		for (; i <= i1; i++)
			ga[i] = g;
		for (; j <= j1; j++)
			gb[j] = g;
		g++;
	}
	free(alo), free(ahi), free(blo), free(bhi);
	free(amin), free(amax), free(bmin), free(bmax);
	return g;
}

/* Whether phase s shares a label with any phase of the other side o. */
static int has_partner(const LabelSet *s, const LabelSet *o, int no)
{
	for (int k = 0; k < no; k++)
		if (match_overlap(s, &o[k]))
			return 1;
	return 0;
}

int match_phases(const LabelSet *a, int na, const LabelSet *b, int nb, PhaseLine **out)
{
	int *ga = xcalloc((size_t)na + 1, sizeof *ga), *gb = xcalloc((size_t)nb + 1, sizeof *gb);
	int ng = match_groups(a, na, b, nb, ga, gb), n = 0;
	PhaseLine *l = xcalloc((size_t)(na + nb) + 1, sizeof *l);
	int i0 = 0, j0 = 0;
	for (int g = 0; g < ng; g++) {
		int i1 = i0, j1 = j0;
		while (i1 < na && ga[i1] == g)
			i1++;
		while (j1 < nb && gb[j1] == g)
			j1++;
		int p = i1 - i0, q = j1 - j0;
		int64_t total = 0;
		for (int i = i0; i < i1; i++)
			total += a[i].n;
		for (int j = j0; j < j1; j++)
			total += b[j].n;
		/* best[x][y]: the heaviest pairing of A's x.. and B's y.. */
		int64_t *best = xcalloc((size_t)(p + 1) * (size_t)(q + 1), sizeof *best);
#define BEST(x, y) best[(size_t)(x) * (size_t)(q + 1) + (size_t)(y)]
		for (int x = p - 1; x >= 0; x--)
			for (int y = q - 1; y >= 0; y--) {
				int64_t w = match_weight(&a[i0 + x], &b[j0 + y], total), v = BEST(x + 1, y);
				if (BEST(x, y + 1) > v)
					v = BEST(x, y + 1);
				if (w && w + BEST(x + 1, y + 1) > v)
					v = w + BEST(x + 1, y + 1);
				BEST(x, y) = v;
			}
		int x = 0, y = 0;
		while (x < p || y < q) {
			int64_t w = x < p && y < q ? match_weight(&a[i0 + x], &b[j0 + y], total) : 0;
			PhaseLine *e = &l[n++];
			e->group = g;
			if (w && w + BEST(x + 1, y + 1) == BEST(x, y)) {
				const LabelSet *s = &a[i0 + x], *t = &b[j0 + y];
				e->a = i0 + x++, e->b = j0 + y++;
				e->kind = s->n == t->n && match_overlap(s, t) == s->n ? LINE_SAME : LINE_CHANGED;
			} else if (x < p && (y == q || BEST(x + 1, y) == BEST(x, y))) {
				e->a = i0 + x++, e->b = -1;
				e->kind = has_partner(&a[e->a], b + j0, q) ? LINE_REGROUPED : LINE_REMOVED;
			} else {
				e->a = -1, e->b = j0 + y++;
				e->kind = has_partner(&b[e->b], a + i0, p) ? LINE_REGROUPED : LINE_ADDED;
			}
		}
#undef BEST
		free(best);
		i0 = i1, j0 = j1;
	}
	free(ga), free(gb);
	*out = l;
	return n;
}
