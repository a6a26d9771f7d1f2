/* layout: the one resolver from (layout, format, shard shape) to bytes.
 *
 * docs/machine.md §4. A shard is viewed as a matrix of R rows x C columns (leading
 * axes fold into rows, row-major). mu = elements in 32 bytes (fp16 16, fp8
 * 32, fp32 8). Offsets are in elements; multiply by fmt_bytes for bytes.
 *
 *   RowMajor         r*C + c
 *   AmpLeft          (c/mu)*R*mu + r*mu + c%mu          strips mu wide
 *   TransposedRight  panel(r,c) = (c/16)*ceil(R/mu) + r/mu,
 *                    offset = panel*mu*16 + (c%16)*mu + r%mu   (R = K)
 *   AmpOutput        (c/16)*R*16 + r*16 + c%16          strips 16 wide
 *
 * Storage is rounded up to whole strips or panels; the elements that no
 * (r, c) maps to are padding.
 */
#ifndef AMP_LAYOUT_H
#define AMP_LAYOUT_H

#include <stdint.h>
#include <string.h>

typedef enum { FMT_FP32, FMT_FP16, FMT_FP8, FMT_I32, FMT_COUNT } Format;

typedef enum {
	LAYOUT_ROW_MAJOR,
	LAYOUT_AMP_LEFT,
	LAYOUT_TRANSPOSED_RIGHT,
	LAYOUT_AMP_OUTPUT,
	LAYOUT_COUNT
} LayoutKind;

typedef struct {
	LayoutKind kind;
	Format fmt;
	int64_t rows, cols;
} Layout;

int fmt_bytes(Format f);
int fmt_mu(Format f);
const char *fmt_name(Format f);           /* "fp16" */
int fmt_parse(const char *s, Format *f);  /* 0 ok, -1 unknown */

const char *layout_name(LayoutKind k);    /* "row-major", "amp-left", ... */
int layout_parse(const char *s, LayoutKind *k);
/* Panel layouts hold whole 512-byte panels or 32-byte strip rows. */
int layout_is_panel(LayoutKind k);

int64_t layout_offset(const Layout *l, int64_t r, int64_t c);
/* off[c] = layout_offset(l, r, c) for every column of row r, in one pass
 * with no division per element. Every layout is separable: row r's
 * offsets are row 0's plus layout_offset(l, r, 0), so a shard's rows need
 * row 0's once (tests/unit/test_layout.c checks it on every shape). */
void layout_row(const Layout *l, int64_t r, int64_t *off);
/* How many consecutive elements a row's runs hold: a row is runs of this
 * many, each starting at a column that is a multiple of it (the last may
 * be shorter); 1 when the elements are apart (transposed-right), the
 * whole row for row-major. Checked with layout_row in test_layout. */
int64_t layout_run(const Layout *l);

/* n elements of esz (1, 2 or 4) bytes: gathered from src at element
 * offsets off[i] into packed dst, or scattered from packed src. */
static inline void elems_gather(uint8_t *dst, const uint8_t *src, const int64_t *off, int64_t n, int esz)
{
	switch (esz) {
	case 1: for (int64_t i = 0; i < n; i++) dst[i] = src[off[i]]; return;
	case 2: for (int64_t i = 0; i < n; i++) memcpy(dst + 2 * i, src + 2 * off[i], 2); return;
	default: for (int64_t i = 0; i < n; i++) memcpy(dst + 4 * i, src + 4 * off[i], 4); return;
	}
}

static inline void elems_scatter(uint8_t *dst, const int64_t *off, const uint8_t *src, int64_t n, int esz)
{
	switch (esz) {
	case 1: for (int64_t i = 0; i < n; i++) dst[off[i]] = src[i]; return;
	case 2: for (int64_t i = 0; i < n; i++) memcpy(dst + 2 * off[i], src + 2 * i, 2); return;
	default: for (int64_t i = 0; i < n; i++) memcpy(dst + 4 * off[i], src + 4 * i, 4); return;
	}
}
int64_t layout_elems(const Layout *l);    /* storage, padding included */
int64_t layout_bytes(const Layout *l);

static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

#endif
