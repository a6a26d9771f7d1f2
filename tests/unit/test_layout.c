/* test_layout: lib/layout against brute-force references written here from
 * the layout definitions (docs/machine.md §4), never against layout.c itself.
 *
 * Each reference builds the storage by walking the layout in storage order,
 * handing out one slot at a time to an element or to padding; the test then
 * asks layout_offset where every element went and layout_elems how much
 * storage there is. mu and element sizes are written out here, not taken
 * from fmt_mu/fmt_bytes, which are checked separately.
 *
 * Deterministic: a fixed-seed xorshift. FUZZ=1 runs 20x more shapes.
 */
#include "model/layout.h"
#include "t.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Written from docs/machine.md §4, independent of lib/model/layout.c. */
static const int ref_size[FMT_COUNT] = { 4, 2, 1, 4 };	/* fp32, fp16, fp8, int32 */
static const int ref_mu[FMT_COUNT] = { 8, 16, 32, 8 };	/* elements in 32 B */
static const char *fmt_str[FMT_COUNT] = { "fp32", "fp16", "fp8", "int32" };
static const char *kind_str[LAYOUT_COUNT] = {
	"row-major", "amp-left", "transposed-right", "amp-output",
};

/* Reference storage: slot i holds element (sr[i], sc[i]), or padding when
 * sr[i] < 0. */
typedef struct {
	int64_t n, cap;
	int64_t *sr, *sc;
} Store;

static void put(Store *s, int64_t r, int64_t c, int64_t R, int64_t C)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->sr = realloc(s->sr, (size_t)s->cap * sizeof *s->sr);
		s->sc = realloc(s->sc, (size_t)s->cap * sizeof *s->sc);
		if (!s->sr || !s->sc)
			abort();
	}
	if (r < R && c < C) {
		s->sr[s->n] = r;
		s->sc[s->n] = c;
	} else {
		s->sr[s->n] = -1;
		s->sc[s->n] = -1;
	}
	s->n++;
}

/* Walk the layout's definition in storage order. */
static void build(Store *s, LayoutKind k, int64_t mu, int64_t R, int64_t C)
{
	s->n = 0;
	switch (k) {
	case LAYOUT_ROW_MAJOR:
		for (int64_t r = 0; r < R; r++)
			for (int64_t c = 0; c < C; c++)
				put(s, r, c, R, C);
		break;
	case LAYOUT_AMP_LEFT:	/* strips mu wide; row by row inside */
		for (int64_t st = 0; st * mu < C; st++)
			for (int64_t r = 0; r < R; r++)
				for (int64_t l = 0; l < mu; l++)
					put(s, r, st * mu + l, R, C);
		break;
	case LAYOUT_TRANSPOSED_RIGHT:	/* panels mu (K) x 16, column group first */
		for (int64_t g = 0; g * 16 < C; g++)
			for (int64_t kb = 0; kb * mu < R; kb++)
				for (int64_t cc = 0; cc < 16; cc++)
					for (int64_t kk = 0; kk < mu; kk++)
						put(s, kb * mu + kk, g * 16 + cc, R, C);
		break;
	case LAYOUT_AMP_OUTPUT:	/* strips 16 wide; row by row inside */
		for (int64_t st = 0; st * 16 < C; st++)
			for (int64_t r = 0; r < R; r++)
				for (int64_t l = 0; l < 16; l++)
					put(s, r, st * 16 + l, R, C);
		break;
	default:
		abort();
	}
}

/* A dimension with a quantum of 8, 16 or 32 in mind: 1, whole multiples,
 * clipped tails just above and below them, or anything. */
static int64_t dim(void)
{
	static const int64_t qs[] = { 8, 16, 32 };
	int64_t q = qs[t_upto(3)];

	switch (t_upto(7)) {
	case 0: return 1;
	case 1: return q * (1 + t_upto(4));
	case 2: return q * t_upto(4) + 1;
	case 3: return q * (1 + t_upto(4)) - 1;
	case 4: return q * t_upto(4) + 1 + t_upto(q - 1);
	default: return 1 + t_upto(140);
	}
}

static Store st;
static int64_t *ref_off;	/* reference slot of (r, c), r*C + c */
static unsigned char *hits;	/* layout_offset hits per reference slot */

/* Check one shape against the reference; CHECKs report disagreements. */
static void check_shape(LayoutKind k, Format f, int64_t R, int64_t C)
{
	Layout l = { k, f, R, C };
	int64_t mu = ref_mu[f], sz = ref_size[f];
	int bad = 0;

	build(&st, k, mu, R, C);
	ref_off = realloc(ref_off, (size_t)(R * C) * sizeof *ref_off);
	hits = realloc(hits, (size_t)st.n);
	if (!ref_off || !hits)
		abort();
	memset(hits, 0, (size_t)st.n);
	for (int64_t i = 0; i < R * C; i++)
		ref_off[i] = -1;
	for (int64_t i = 0; i < st.n; i++)
		if (st.sr[i] >= 0)
			ref_off[st.sr[i] * C + st.sc[i]] = i;

	CHECK(layout_elems(&l) == st.n, "%s %s %lldx%lld: layout_elems %lld, reference %lld",
	      kind_str[k], fmt_str[f], (long long)R, (long long)C,
	      (long long)layout_elems(&l), (long long)st.n);
	CHECK(layout_bytes(&l) == st.n * sz, "%s %s %lldx%lld: layout_bytes %lld, reference %lld",
	      kind_str[k], fmt_str[f], (long long)R, (long long)C,
	      (long long)layout_bytes(&l), (long long)(st.n * sz));

	for (int64_t r = 0; r < R && !bad; r++)
		for (int64_t c = 0; c < C && !bad; c++) {
			int64_t o = layout_offset(&l, r, c);
			if (o != ref_off[r * C + c]) {
				CHECK(0, "%s %s %lldx%lld: offset(%lld,%lld) = %lld, reference %lld",
				      kind_str[k], fmt_str[f], (long long)R, (long long)C,
				      (long long)r, (long long)c, (long long)o,
				      (long long)ref_off[r * C + c]);
				bad = 1;
			}
			if (o < 0 || o >= st.n) {
				CHECK(0, "%s %s %lldx%lld: offset(%lld,%lld) = %lld outside storage %lld",
				      kind_str[k], fmt_str[f], (long long)R, (long long)C,
				      (long long)r, (long long)c, (long long)o, (long long)st.n);
				bad = 1;
				continue;
			}
			if (hits[o]++) {
				CHECK(0, "%s %s %lldx%lld: offset %lld hit twice, again by (%lld,%lld)",
				      kind_str[k], fmt_str[f], (long long)R, (long long)C,
				      (long long)o, (long long)r, (long long)c);
				bad = 1;
			}
		}
	/* layout_row gives each row's offsets in one pass: the reference's. */
	int64_t *row = malloc((size_t)C * sizeof *row);
	for (int64_t r = 0; r < R && !bad; r++) {
		layout_row(&l, r, row);
		for (int64_t c = 0; c < C && !bad; c++)
			if (row[c] != ref_off[r * C + c]) {
				CHECK(0, "%s %s %lldx%lld: layout_row %lld column %lld = %lld, reference %lld",
				      kind_str[k], fmt_str[f], (long long)R, (long long)C, (long long)r,
				      (long long)c, (long long)row[c], (long long)ref_off[r * C + c]);
				bad = 1;
			}
	}
	/* Runs: within a run of layout_run(l) columns starting at a multiple
	 * of it, the reference's offsets are consecutive. */
	int64_t w = layout_run(&l);
	for (int64_t r = 0; r < R && !bad; r++)
		for (int64_t c = 0; c < C && !bad; c++)
			if (w < 1 || ref_off[r * C + c] != ref_off[r * C + c / w * w] + c % w) {
				CHECK(0, "%s %s %lldx%lld: (%lld,%lld) is not in a run of %lld consecutive elements",
				      kind_str[k], fmt_str[f], (long long)R, (long long)C, (long long)r, (long long)c,
				      (long long)w);
				bad = 1;
			}
	/* Separable: the reference's (r, c) is its (r, 0) plus its (0, c),
	 * which read_shard, write_shard and the checks rely on. */
	for (int64_t r = 0; r < R && !bad; r++)
		for (int64_t c = 0; c < C && !bad; c++)
			if (ref_off[r * C + c] != ref_off[r * C] + ref_off[c] - ref_off[0] || ref_off[0] != 0) {
				CHECK(0, "%s %s %lldx%lld: (%lld,%lld) is not row %lld's first plus row 0's "
				      "column %lld", kind_str[k], fmt_str[f], (long long)R, (long long)C,
				      (long long)r, (long long)c, (long long)r, (long long)c);
				bad = 1;
			}
	free(row);
	if (bad)
		return;
	/* Every non-padding slot exactly once, padding never. */
	for (int64_t i = 0; i < st.n; i++)
		if (hits[i] != (st.sr[i] >= 0)) {
			CHECK(0, "%s %s %lldx%lld: slot %lld (%s) hit %d times",
			      kind_str[k], fmt_str[f], (long long)R, (long long)C, (long long)i,
			      st.sr[i] >= 0 ? "element" : "padding", hits[i]);
			return;
		}
}

/* Panel rows are 32 contiguous, 32-aligned bytes (amp-output: 16 elements),
 * checked on layout_offset alone, without the reference. */
static void check_runs(LayoutKind k, Format f, int64_t R, int64_t C)
{
	Layout l = { k, f, R, C };
	int64_t mu = ref_mu[f], sz = ref_size[f];

	if (k == LAYOUT_AMP_LEFT)
		for (int64_t r = 0; r < R; r++)
			for (int64_t c0 = 0; c0 < C; c0 += mu) {
				int64_t b0 = layout_offset(&l, r, c0) * sz;
				CHECK(b0 % 32 == 0, "amp-left %s %lldx%lld: strip row (%lld,%lld) starts at byte %lld",
				      fmt_str[f], (long long)R, (long long)C, (long long)r,
				      (long long)c0, (long long)b0);
				for (int64_t c = c0 + 1; c < c0 + mu && c < C; c++)
					CHECK(layout_offset(&l, r, c) * sz == b0 + (c - c0) * sz,
					      "amp-left %s %lldx%lld: (%lld,%lld) not contiguous with (%lld,%lld)",
					      fmt_str[f], (long long)R, (long long)C, (long long)r,
					      (long long)c, (long long)r, (long long)c0);
			}
	if (k == LAYOUT_TRANSPOSED_RIGHT)
		for (int64_t c = 0; c < C; c++)
			for (int64_t r0 = 0; r0 < R; r0 += mu) {
				int64_t b0 = layout_offset(&l, r0, c) * sz;
				CHECK(b0 % 32 == 0, "transposed-right %s %lldx%lld: column run (%lld,%lld) starts at byte %lld",
				      fmt_str[f], (long long)R, (long long)C, (long long)r0,
				      (long long)c, (long long)b0);
				for (int64_t r = r0 + 1; r < r0 + mu && r < R; r++)
					CHECK(layout_offset(&l, r, c) * sz == b0 + (r - r0) * sz,
					      "transposed-right %s %lldx%lld: (%lld,%lld) not contiguous with (%lld,%lld)",
					      fmt_str[f], (long long)R, (long long)C, (long long)r,
					      (long long)c, (long long)r0, (long long)c);
			}
	if (k == LAYOUT_AMP_OUTPUT)
		for (int64_t r = 0; r < R; r++)
			for (int64_t c0 = 0; c0 < C; c0 += 16) {
				int64_t b0 = layout_offset(&l, r, c0) * sz;
				CHECK(b0 % (16 * sz) == 0, "amp-output %s %lldx%lld: strip row (%lld,%lld) at byte %lld",
				      fmt_str[f], (long long)R, (long long)C, (long long)r,
				      (long long)c0, (long long)b0);
				for (int64_t c = c0 + 1; c < c0 + 16 && c < C; c++)
					CHECK(layout_offset(&l, r, c) * sz == b0 + (c - c0) * sz,
					      "amp-output %s %lldx%lld: (%lld,%lld) not contiguous with (%lld,%lld)",
					      fmt_str[f], (long long)R, (long long)C, (long long)r,
					      (long long)c, (long long)r, (long long)c0);
			}
}

static void formats(void)
{
	static const char *bad[] = {
		"", "fp", "FP16", "Fp8", "fp16 ", " fp16", "fp4", "fp64", "bf16",
		"fp8e4m3", "fp1", "fp32x", "16",
	};

	t_case("fmt_bytes, fmt_mu and fmt_name of every format");
	for (int f = 0; f < FMT_COUNT; f++) {
		CHECK(fmt_bytes((Format)f) == ref_size[f], "fmt_bytes(%s) = %d, want %d",
		      fmt_str[f], fmt_bytes((Format)f), ref_size[f]);
		CHECK(fmt_mu((Format)f) == ref_mu[f], "fmt_mu(%s) = %d, want %d",
		      fmt_str[f], fmt_mu((Format)f), ref_mu[f]);
		CHECK(fmt_mu((Format)f) * fmt_bytes((Format)f) == 32,
		      "%s: mu x size is not 32 bytes", fmt_str[f]);
		CHECK(strcmp(fmt_name((Format)f), fmt_str[f]) == 0, "fmt_name(%d) = '%s', want '%s'",
		      f, fmt_name((Format)f), fmt_str[f]);
	}

	t_case("fmt_parse round trips every format name");
	for (int f = 0; f < FMT_COUNT; f++) {
		Format g = (Format)((f + 1) % FMT_COUNT);
		CHECK(fmt_parse(fmt_name((Format)f), &g) == 0, "fmt_parse('%s') failed", fmt_name((Format)f));
		CHECK(g == (Format)f, "fmt_parse('%s') gave %d", fmt_name((Format)f), (int)g);
	}

	t_case("fmt_parse rejects unknown names");
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		Format g = FMT_FP16;
		CHECK(fmt_parse(bad[i], &g) == -1, "fmt_parse('%s') accepted it", bad[i]);
	}
}

static void kinds(void)
{
	static const char *bad[] = {
		"", "row", "row_major", "rowmajor", "Row-Major", "amp-left ", "amp",
		"amp_left", "amp-right", "transposed", "transposed-left", "amp-output2",
		"output", "fp16",
	};

	t_case("layout_name of every layout");
	for (int k = 0; k < LAYOUT_COUNT; k++)
		CHECK(strcmp(layout_name((LayoutKind)k), kind_str[k]) == 0,
		      "layout_name(%d) = '%s', want '%s'", k, layout_name((LayoutKind)k), kind_str[k]);

	t_case("layout_parse round trips every layout name");
	for (int k = 0; k < LAYOUT_COUNT; k++) {
		LayoutKind g = (LayoutKind)((k + 1) % LAYOUT_COUNT);
		CHECK(layout_parse(layout_name((LayoutKind)k), &g) == 0, "layout_parse('%s') failed",
		      layout_name((LayoutKind)k));
		CHECK(g == (LayoutKind)k, "layout_parse('%s') gave %d", layout_name((LayoutKind)k), (int)g);
	}

	t_case("layout_parse rejects unknown names");
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		LayoutKind g = LAYOUT_AMP_LEFT;
		CHECK(layout_parse(bad[i], &g) == -1, "layout_parse('%s') accepted it", bad[i]);
	}

	t_case("only row-major is not a panel layout");
	for (int k = 0; k < LAYOUT_COUNT; k++)
		CHECK(!layout_is_panel((LayoutKind)k) == (k == LAYOUT_ROW_MAJOR),
		      "layout_is_panel(%s) = %d", kind_str[k], layout_is_panel((LayoutKind)k));
}

/* Offsets computed by hand from docs/machine.md §4, so a reference that shares a
 * misreading with lib/model/layout.c still fails somewhere. */
static void anchors(void)
{
	t_case("hand-computed offsets");
	{
		/* fp16 K=40 x N=20: ceil(40/16) = 3 K blocks; (35,17) is in column
		 * group 1, K block 2: panel 1*3+2 = 5, inside 1*16 + 3. */
		Layout l = { LAYOUT_TRANSPOSED_RIGHT, FMT_FP16, 40, 20 };
		CHECK(layout_offset(&l, 35, 17) == 5 * 256 + 19, "tr fp16 (35,17) = %lld",
		      (long long)layout_offset(&l, 35, 17));
		CHECK(layout_elems(&l) == 6 * 256, "tr fp16 40x20 elems %lld", (long long)layout_elems(&l));
		CHECK(layout_bytes(&l) == 6 * 512, "tr fp16 40x20 bytes %lld", (long long)layout_bytes(&l));
	}
	{
		/* fp8 amp-left 5x70: strips of 32, 3 strips; (4,69) is strip 2,
		 * row 4, lane 5: 2*5*32 + 4*32 + 5. */
		Layout l = { LAYOUT_AMP_LEFT, FMT_FP8, 5, 70 };
		CHECK(layout_offset(&l, 4, 69) == 320 + 128 + 5, "al fp8 (4,69) = %lld",
		      (long long)layout_offset(&l, 4, 69));
		CHECK(layout_elems(&l) == 3 * 5 * 32, "al fp8 5x70 elems %lld", (long long)layout_elems(&l));
	}
	{
		/* fp32 amp-output 3x17: two strips of 16; (2,16) is strip 1, row 2,
		 * lane 0: 1*3*16 + 2*16. */
		Layout l = { LAYOUT_AMP_OUTPUT, FMT_FP32, 3, 17 };
		CHECK(layout_offset(&l, 2, 16) == 48 + 32, "ao fp32 (2,16) = %lld",
		      (long long)layout_offset(&l, 2, 16));
		CHECK(layout_bytes(&l) == 2 * 3 * 16 * 4, "ao fp32 3x17 bytes %lld", (long long)layout_bytes(&l));
	}
	{
		Layout l = { LAYOUT_ROW_MAJOR, FMT_FP16, 7, 9 };
		CHECK(layout_offset(&l, 6, 8) == 62, "rm (6,8) = %lld", (long long)layout_offset(&l, 6, 8));
		CHECK(layout_bytes(&l) == 126, "rm 7x9 fp16 bytes %lld", (long long)layout_bytes(&l));
	}

	t_case("a full transposed-right panel is 512 bytes in every format");
	{
		static const int64_t panel_k[FMT_COUNT] = { 8, 16, 32, 8 };	/* x 16 columns */
		for (int f = 0; f < FMT_COUNT; f++) {
			Layout l = { LAYOUT_TRANSPOSED_RIGHT, (Format)f, panel_k[f], 16 };
			Layout one = { LAYOUT_TRANSPOSED_RIGHT, (Format)f, 1, 1 };
			Layout two = { LAYOUT_TRANSPOSED_RIGHT, (Format)f, panel_k[f] + 1, 16 };
			CHECK(layout_bytes(&l) == 512, "%s %lldx16 panel is %lld bytes", fmt_str[f],
			      (long long)panel_k[f], (long long)layout_bytes(&l));
			CHECK(layout_offset(&l, panel_k[f] - 1, 15) * ref_size[f] == 512 - ref_size[f],
			      "%s: last element of the panel at element %lld", fmt_str[f],
			      (long long)layout_offset(&l, panel_k[f] - 1, 15));
			CHECK(layout_bytes(&one) == 512, "%s 1x1 clipped panel is %lld bytes",
			      fmt_str[f], (long long)layout_bytes(&one));
			CHECK(layout_bytes(&two) == 1024, "%s %lldx16 is %lld bytes, want two panels",
			      fmt_str[f], (long long)(panel_k[f] + 1), (long long)layout_bytes(&two));
		}
	}

	t_case("the fp8 left strip piece is 16x32 in 512 bytes");
	{
		Layout l = { LAYOUT_AMP_LEFT, FMT_FP8, 16, 32 };
		CHECK(layout_bytes(&l) == 512, "fp8 amp-left 16x32 is %lld bytes", (long long)layout_bytes(&l));
		CHECK(layout_offset(&l, 15, 31) == 511, "fp8 amp-left (15,31) = %lld",
		      (long long)layout_offset(&l, 15, 31));
	}
}

int main(void)
{
	const char *fz = getenv("FUZZ");
	int groups = fz && *fz ? 200 : 10;	/* of 50 shapes per layout and format */
	char name[128];

	t_rng = 0x9e3779b97f4a7c15u;
	formats();
	kinds();
	anchors();

	/* Exhaustive small shapes: every R, C up to 40 crosses each tail. */
	for (int k = 0; k < LAYOUT_COUNT; k++)
		for (int f = 0; f < FMT_COUNT; f++) {
			snprintf(name, sizeof name, "%s %s matches the reference on all shapes up to 40x40",
				 kind_str[k], fmt_str[f]);
			t_case(name);
			for (int64_t R = 1; R <= 40; R++)
				for (int64_t C = 1; C <= 40; C++)
					check_shape((LayoutKind)k, (Format)f, R, C);
		}

	for (int k = 0; k < LAYOUT_COUNT; k++)
		for (int f = 0; f < FMT_COUNT; f++)
			for (int g = 0; g < groups; g++) {
				snprintf(name, sizeof name, "%s %s matches the reference on random shapes, group %d",
					 kind_str[k], fmt_str[f], g);
				t_case(name);
				for (int i = 0; i < 50; i++) {
					int64_t R = dim(), C = dim();
					check_shape((LayoutKind)k, (Format)f, R, C);
				}
			}

	for (int k = LAYOUT_AMP_LEFT; k < LAYOUT_COUNT; k++)
		for (int f = 0; f < FMT_COUNT; f++) {
			snprintf(name, sizeof name, "%s %s panel rows are contiguous on random shapes",
				 kind_str[k], fmt_str[f]);
			t_case(name);
			for (int i = 0; i < 10 * groups; i++) {
				int64_t R = dim(), C = dim();
				check_runs((LayoutKind)k, (Format)f, R, C);
			}
		}

	free(st.sr);
	free(st.sc);
	free(ref_off);
	free(hits);
	return t_summary();
}
