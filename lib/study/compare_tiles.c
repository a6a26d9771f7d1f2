/* compare_tiles.c: tiles files read and compared (lib/study/compare_tiles.h). */
#include "study/compare_tiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/io.h"

const char *const tile_fig_name[TF_FIGS] = { "sent_bytes", "received_bytes", "fragments", "table_bytes",
					     "sram_peak_bytes" };

#define HEADER "tile\tphase\tsent_bytes\treceived_bytes\tfragments\ttable_bytes\tsram_peak_bytes"
#define HEADER2 HEADER "\tbusy_cycles"     /* version 2 */

void tiles_free(TileFigs *t)
{
	free(t->file), free(t->model), free(t->machine), free(t->v);
	memset(t, 0, sizeof *t);
}

/* A count: digits only, no sign, no overflow. */
static int count_of(const char *s, size_t n, int64_t *out)
{
	int64_t v = 0;
	if (!n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (INT64_MAX - (s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

/* Line 1: "# amp-tiles V: model M on MACHINE (N tiles)", V 1 or 2 (*version). */
static int format_line(TileFigs *t, const char *f, const char *s, int *version, Err *e)
{
	static const char pre[] = "# amp-tiles ";
	if (strncmp(s, pre, sizeof pre - 1))
		return err_at(e, f, 1, 1, "expected '# amp-tiles 1: model M on MACHINE (N tiles)' (a tiles file of amp-capture --tiles)");
	const char *p = s + sizeof pre - 1;
	if (strncmp(p, "1: model ", 9) && strncmp(p, "2: model ", 9))
		return err_at(e, f, 1, (long)(p - s) + 1, "unsupported tiles version (this amp reads 1 and 2)");
	*version = *p - '0';
	p += 9;
	const char *on = strstr(p, " on "), *open = strrchr(p, '(');
	size_t n = strlen(s);
	int64_t nt;
	if (!on || !open || open < on || n < 8 || strcmp(s + n - 7, " tiles)") ||
	    count_of(open + 1, (size_t)(s + n - 7 - (open + 1)), &nt) || nt < 1 || nt > INT32_MAX || open[-1] != ' ')
		return err_at(e, f, 1, (long)(p - s) + 1, "expected 'M on MACHINE (N tiles)' after 'model'");
	t->model = xcalloc((size_t)(on - p) + 1, 1), memcpy(t->model, p, (size_t)(on - p));
	t->machine = xcalloc((size_t)(open - 1 - (on + 4)) + 1, 1), memcpy(t->machine, on + 4, (size_t)(open - 1 - (on + 4)));
	t->ntiles = (int)nt;
	return 0;
}

/* A data line: seven fields (version 2: eight, busy_cycles last, '-' on
 * an `all` line); an `all` line's figures kept. */
static int data_line(TileFigs *t, const char *f, long ln, char *s, char *seen, int version, Err *e)
{
	const char *fld[8];
	size_t len[8];
	int nf = 0, want = version == 2 ? 8 : 7;
	char *p = s;
	for (;;) {
		char *tab = strchr(p, '\t');
		if (nf == want)
			return err_at(e, f, ln, (long)(p - s), "expected %d tab-separated fields, found more", want);
		fld[nf] = p, len[nf] = tab ? (size_t)(tab - p) : strlen(p), nf++;
		if (!tab)
			break;
		p = tab + 1;
	}
	if (nf != want)
		return err_at(e, f, ln, (long)strlen(s) + 1, "expected %d tab-separated fields, found %d", want, nf);
	int64_t tile, x[TF_FIGS];
	if (count_of(fld[0], len[0], &tile) || tile >= t->ntiles)
		return err_at(e, f, ln, 1, "expected a tile below %d, found '%.*s'", t->ntiles, (int)len[0], fld[0]);
	int all = len[1] == 3 && !memcmp(fld[1], "all", 3);
	int64_t ph;
	if (!all && count_of(fld[1], len[1], &ph))
		return err_at(e, f, ln, (long)(fld[1] - s) + 1, "expected a phase id or 'all', found '%.*s'", (int)len[1],
			      fld[1]);
	for (int k = 0; k < TF_FIGS; k++) {
		const char *v = fld[2 + k];
		if (!all && k == TF_SRAM && len[2 + k] == 1 && *v == '-') {
			x[k] = 0;
			continue;
		}
		if (count_of(v, len[2 + k], &x[k]))
			return err_at(e, f, ln, (long)(v - s) + 1, "expected a count for %s, found '%.*s'", tile_fig_name[k],
				      (int)len[2 + k], v);
	}
	if (want == 8) {
		int64_t busy;
		if (all ? len[7] != 1 || *fld[7] != '-' : count_of(fld[7], len[7], &busy))
			return err_at(e, f, ln, (long)(fld[7] - s) + 1, "expected %s for busy_cycles, found '%.*s'",
				      all ? "'-' (an all line)" : "a count", (int)len[7], fld[7]);
	}
	if (!all)
		return 0;
	if (seen[tile])
		return err_at(e, f, ln, 1, "tile %lld has a second 'all' line", (long long)tile);
	seen[tile] = 1;
	memcpy(t->v[tile], x, sizeof x);
	return 0;
}

int tiles_load(TileFigs *t, const char *path, Err *e)
{
	char *data;
	size_t len;
	memset(t, 0, sizeof *t);
	if (input_slurp(path, &data, &len, e))
		return -1;
	t->file = xstrdup(path);
	if (memchr(data, 0, len)) {
		free(data);
		err_at(e, path, 1, 1, "expected text (a tiles file), found a NUL byte");
		goto bad;
	}
	char *s = data, *seen = NULL;
	long ln = 0;
	int rc = 0, version = 1;
	while (*s && !rc) {
		char *nl = strchr(s, '\n');
		if (!nl) {
			rc = err_at(e, path, ln + 1, (long)strlen(s) + 1, "expected a newline at the end of the line");
			break;
		}
		*nl = 0, ln++;
		if (ln == 1) {
			if (!(rc = format_line(t, path, s, &version, e))) {
				t->v = xcalloc((size_t)t->ntiles, sizeof *t->v);
				seen = xcalloc((size_t)t->ntiles, 1);
			}
		} else if (ln == 2) {
			if (strcmp(s, version == 2 ? HEADER2 : HEADER))
				rc = err_at(e, path, 2, 1, "expected the header '%s'", "tile<TAB>phase<TAB>sent_bytes<TAB>...");
		} else
			rc = data_line(t, path, ln, s, seen, version, e);
		s = nl + 1;
	}
	if (!rc && ln < 2)
		rc = err_at(e, path, ln + 1, 1, "expected %s", ln ? "the header line" : "'# amp-tiles 2: ...' (the file is empty)");
	free(seen);
	free(data);
	if (!rc)
		return 0;
bad:
	{
		char *f = t->file;
		t->file = NULL;
		tiles_free(t);
		free(f);
	}
	return -1;
}

int64_t tile_fig(const TileFigs *t, int tile, int fig)
{
	return tile < t->ntiles ? t->v[tile][fig] : 0;
}

static int by_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return (a > b) - (a < b);
}

void tiles_stat(const TileFigs *a, const TileFigs *b, int fig, TileStat *s)
{
	const TileFigs *side[2] = { a, b };
	memset(s, 0, sizeof *s);
	for (int k = 0; k < 2; k++) {
		const TileFigs *t = side[k];
		int64_t *v = xcalloc((size_t)t->ntiles + 1, sizeof *v);
		for (int i = 0; i < t->ntiles; i++) {
			v[i] = t->v[i][fig];
			if (!i || v[i] > s->max[k])
				s->max[k] = v[i], s->max_tile[k] = i;
		}
		qsort(v, (size_t)t->ntiles, sizeof *v, by_i64);
		int n = t->ntiles;
		s->median[k] = n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
		free(v);
	}
	int n = a->ntiles > b->ntiles ? a->ntiles : b->ntiles;
	for (int i = 0; i < n; i++) {
		int64_t d = tile_fig(b, i, fig) - tile_fig(a, i, fig);
		if (!i || d > s->inc)
			s->inc = d, s->inc_tile = i;
	}
}
