/* Phase matching (lib/study/compare_match.h) against brute-force references on
 * randomized small label sequences: the groups against the longest chain
 * of valid cuts (a cut between A's first p and B's first q phases that
 * no pair of partners crosses), the pairing inside each group against
 * every order-keeping one-to-one choice, and the kind of every line
 * against its definition. */
#include <stdlib.h>
#include <string.h>

#include "study/compare_match.h"
#include "t.h"

#define MAXP 6
#define MAXL 6        /* labels a phase holds at most (random ones: 4) */

typedef struct {
	int lab[MAXP][MAXL];
	LabelSet s[MAXP];
	int n;
} Side;

/* A side of n phases, each a sorted set of up to 4 labels in [0, nl). */
static void random_side(Side *d, int n, int nl)
{
	d->n = n;
	for (int i = 0; i < n; i++) {
		int k = 0;
		unsigned used = 0;
		int want = (int)t_pick(0, 4);
		for (int t = 0; t < want; t++)
			used |= 1u << t_upto(nl);
		for (int l = 0; l < nl; l++)
			if (used >> l & 1)
				d->lab[i][k++] = l;
		d->s[i] = (LabelSet){ d->lab[i], k };
	}
}

static int shares(const LabelSet *x, const LabelSet *y)
{
	for (int i = 0; i < x->n; i++)
		for (int j = 0; j < y->n; j++)
			if (x->lab[i] == y->lab[j])
				return 1;
	return 0;
}

static int equal(const LabelSet *x, const LabelSet *y)
{
	return x->n == y->n && !memcmp(x->lab, y->lab, (size_t)x->n * sizeof *x->lab);
}

/* The weight as formats/compare.md defines it: the labels shared, plus
 * the group's label count + 1 for an exact pair; 0 for no partners. */
static int64_t ref_weight(const LabelSet *x, const LabelSet *y, int64_t total)
{
	int64_t k = 0;
	for (int i = 0; i < x->n; i++)
		for (int j = 0; j < y->n; j++)
			k += x->lab[i] == y->lab[j];
	return !k ? 0 : k + (equal(x, y) ? total + 1 : 0);
}

/* A cut (p, q) is valid when no partners lie on opposite sides of it. */
static int cut_ok(const Side *a, const Side *b, int p, int q)
{
	for (int i = 0; i < a->n; i++)
		for (int j = 0; j < b->n; j++)
			if ((i < p) != (j < q) && shares(&a->s[i], &b->s[j]))
				return 0;
	return 1;
}

/* The most blocks any order-keeping partition into valid blocks has: the
 * longest chain of valid cuts from (0, 0) to (na, nb), each step going
 * forward on at least one side. */
static int finest_blocks(const Side *a, const Side *b)
{
	int len[MAXP + 1][MAXP + 1];
	for (int p = 0; p <= a->n; p++)
		for (int q = 0; q <= b->n; q++) {
			len[p][q] = -1;
			if (!cut_ok(a, b, p, q))
				continue;
			if (!p && !q) {
				len[p][q] = 0;
				continue;
			}
			for (int u = 0; u <= p; u++)
				for (int v = 0; v <= q; v++)
					if ((u < p || v < q) && len[u][v] >= 0 && len[u][v] + 1 > len[p][q])
						len[p][q] = len[u][v] + 1;
		}
	return len[a->n][b->n];
}

/* The heaviest order-keeping one-to-one pairing of partners among A's
 * phases [i0, i1) and B's [j0, j1): every choice of a B phase (or none)
 * for each A phase, kept when the chosen B phases increase. */
static int64_t best_pairing(const Side *a, int i0, int i1, const Side *b, int j0, int j1, int64_t total)
{
	int p = i1 - i0, q = j1 - j0, pick[MAXP];
	int64_t best = 0;
	long ways = 1;
	for (int i = 0; i < p; i++)
		ways *= q + 1;
	for (long w = 0; w < ways; w++) {
		long r = w;
		for (int i = 0; i < p; i++)
			pick[i] = (int)(r % (q + 1)) - 1, r /= q + 1;
		int64_t sum = 0, last = -1, ok = 1;
		for (int i = 0; i < p && ok; i++) {
			if (pick[i] < 0)
				continue;
			int64_t wt = ref_weight(&a->s[i0 + i], &b->s[j0 + pick[i]], total);
			ok = pick[i] > last && wt > 0;
			last = pick[i], sum += wt;
		}
		if (ok && sum > best)
			best = sum;
	}
	return best;
}

static void check_case(const Side *a, const Side *b)
{
	int ga[MAXP], gb[MAXP], na = a->n, nb = b->n;
	int ng = match_groups(a->s, na, b->s, nb, ga, gb);
	CHECK(ng == finest_blocks(a, b), "%d groups, the finest partition has %d", ng, finest_blocks(a, b));
	/* groups in order on both sides, none empty, and partners together */
	int seen[2 * MAXP + 1] = { 0 };
	for (int i = 0; i < na; i++) {
		CHECK(i == 0 || ga[i] >= ga[i - 1], "A's groups go back at %d", i);
		seen[ga[i]] = 1;
	}
	for (int j = 0; j < nb; j++) {
		CHECK(j == 0 || gb[j] >= gb[j - 1], "B's groups go back at %d", j);
		seen[gb[j]] = 1;
	}
	for (int g = 0; g < ng; g++)
		CHECK(seen[g], "group %d is empty", g);
	for (int i = 0; i < na; i++)
		for (int j = 0; j < nb; j++)
			if (shares(&a->s[i], &b->s[j]))
				CHECK(ga[i] == gb[j], "partners A%d and B%d in groups %d and %d", i, j, ga[i], gb[j]);
	/* the lines: every phase once, in order, kinds as defined, and the
	 * pairing of each group as heavy as the brute force's best */
	PhaseLine *l;
	int n = match_phases(a->s, na, b->s, nb, &l), ca = 0, cb = 0;
	int64_t got[2 * MAXP + 1] = { 0 }, tot[2 * MAXP + 1] = { 0 };
	for (int i = 0; i < na; i++)
		tot[ga[i]] += a->s[i].n;
	for (int j = 0; j < nb; j++)
		tot[gb[j]] += b->s[j].n;
	for (int k = 0; k < n; k++) {
		const PhaseLine *e = &l[k];
		CHECK(e->a >= 0 || e->b >= 0, "line %d is empty", k);
		if (e->a >= 0) {
			CHECK(e->a == ca, "line %d: A's phase %d, expected %d", k, e->a, ca);
			CHECK(ga[e->a] == e->group, "line %d: group %d, A's phase in %d", k, e->group, ga[e->a]);
			ca = e->a + 1;
		}
		if (e->b >= 0) {
			CHECK(e->b == cb, "line %d: B's phase %d, expected %d", k, e->b, cb);
			CHECK(gb[e->b] == e->group, "line %d: group %d, B's phase in %d", k, e->group, gb[e->b]);
			cb = e->b + 1;
		}
		if (e->a >= 0 && e->b >= 0) {
			const LabelSet *x = &a->s[e->a], *y = &b->s[e->b];
			CHECK(shares(x, y), "line %d pairs A%d and B%d, which share nothing", k, e->a, e->b);
			CHECK(e->kind == (equal(x, y) ? LINE_SAME : LINE_CHANGED), "line %d: kind %s", k,
			      line_kind_name(e->kind));
			got[e->group] += ref_weight(x, y, tot[e->group]);
		} else {
			const LabelSet *x = e->a >= 0 ? &a->s[e->a] : &b->s[e->b];
			const Side *o = e->a >= 0 ? b : a;
			int any = 0;
			for (int j = 0; j < o->n; j++)
				any |= shares(x, &o->s[j]);
			LineKind want = any ? LINE_REGROUPED : e->a >= 0 ? LINE_REMOVED : LINE_ADDED;
			CHECK(e->kind == want, "line %d: kind %s, expected %s", k, line_kind_name(e->kind),
			      line_kind_name(want));
		}
	}
	CHECK(ca == na && cb == nb, "lines hold %d of A's %d phases, %d of B's %d", ca, na, cb, nb);
	for (int g = 0, i0 = 0, j0 = 0; g < ng; g++) {
		int i1 = i0, j1 = j0;
		while (i1 < na && ga[i1] == g)
			i1++;
		while (j1 < nb && gb[j1] == g)
			j1++;
		int64_t want = best_pairing(a, i0, i1, b, j0, j1, tot[g]);
		CHECK(got[g] == want, "group %d: pairing weight %lld, the best is %lld", g, (long long)got[g],
		      (long long)want);
		i0 = i1, j0 = j1;
	}
	free(l);
}

static void fixed(const char *name, int na, const char *sa, int nb, const char *sb, const char *want)
{
	/* sides as strings: phases separated by '|', labels single letters */
	Side a = { .n = 0 }, b = { .n = 0 };
	const char *src[2] = { sa, sb };
	Side *dst[2] = { &a, &b };
	for (int s = 0; s < 2; s++) {
		Side *d = dst[s];
		int k = 0;
		for (const char *c = src[s]; *src[s]; c++) {
			if (*c == '|' || !*c) {
				d->s[d->n] = (LabelSet){ d->lab[d->n], k };
				d->n++, k = 0;
				if (!*c)
					break;
			} else
				d->lab[d->n][k++] = *c - 'a';
		}
	}
	t_case(name);
	CHECK(a.n == na && b.n == nb, "fixture has %d and %d phases", a.n, b.n);
	PhaseLine *l;
	int n = match_phases(a.s, a.n, b.s, b.n, &l);
	char got[256] = "", one[32];
	for (int k = 0; k < n; k++) {
		snprintf(one, sizeof one, "%s%d:%d%c", k ? " " : "", l[k].a, l[k].b, line_kind_name(l[k].kind)[0]);
		strcat(got, one);
	}
	CHECK(!strcmp(got, want), "lines '%s', expected '%s'", got, want);
	check_case(&a, &b);
	free(l);
}

int main(void)
{
	/* lines as A:B and the kind's initial (same, changed, regrouped,
	 * removed, added); letters are labels */
	fixed("a phase split in two pairs the exact half and regroups the other", 3, "a|bc|d", 4, "a|b|bc|d",
	      "0:0s -1:1r 1:2s 2:3s");
	fixed("a phase only B has is added, one only A has removed, in place", 3, "a|x|b", 3, "a|b|y",
	      "0:0s 1:-1r 2:1s -1:2a");
	fixed("two phases merged into one: the larger overlap pairs", 2, "ab|cde", 1, "abcde", "0:-1r 1:0c");
	fixed("an exact label set wins over an equal overlap met first", 1, "abc", 2, "abcd|abc", "-1:0r 0:1s");
	fixed("a label moved to the neighbouring phase: one group, two changed pairs", 2, "a|bc", 2, "ab|c",
	      "0:0c 1:1c");
	fixed("crossing partners share one group and keep order", 2, "a|b", 2, "b|a", "0:-1r 1:0s -1:1r");
	fixed("an empty side: every phase added", 0, "", 2, "a|b", "-1:0a -1:1a");
	for (int c = 0; c < 4000; c++) {
		Side a, b;
		char name[64];
		snprintf(name, sizeof name, "random label sequences, case %d", c);
		t_case(name);
		random_side(&a, (int)t_pick(0, 5), (int)t_pick(1, 6));
		random_side(&b, (int)t_pick(0, 5), (int)t_pick(1, 6));
		check_case(&a, &b);
	}
	return t_summary();
}
