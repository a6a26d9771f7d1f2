#include "model/layout.h"

#include <string.h>

static const char *fmt_names[FMT_COUNT] = { "fp32", "fp16", "fp8", "int32" };
static const int fmt_size[FMT_COUNT] = { 4, 2, 1, 4 };

static const char *layout_names[LAYOUT_COUNT] = {
	"row-major", "amp-left", "transposed-right", "amp-output",
};

int fmt_bytes(Format f) { return fmt_size[f]; }
int fmt_mu(Format f) { return 32 / fmt_size[f]; }
const char *fmt_name(Format f) { return fmt_names[f]; }
const char *layout_name(LayoutKind k) { return layout_names[k]; }

int fmt_parse(const char *s, Format *f)
{
	for (int i = 0; i < FMT_COUNT; i++)
		if (strcmp(s, fmt_names[i]) == 0) {
			*f = (Format)i;
			return 0;
		}
	return -1;
}

int layout_parse(const char *s, LayoutKind *k)
{
	for (int i = 0; i < LAYOUT_COUNT; i++)
		if (strcmp(s, layout_names[i]) == 0) {
			*k = (LayoutKind)i;
			return 0;
		}
	return -1;
}

int layout_is_panel(LayoutKind k)
{
	return k != LAYOUT_ROW_MAJOR;
}

void layout_row(const Layout *l, int64_t r, int64_t *off)
{
	int64_t mu = fmt_mu(l->fmt), R = l->rows, C = l->cols, c = 0;

	switch (l->kind) {
	case LAYOUT_ROW_MAJOR:
		for (; c < C; c++)
			off[c] = r * C + c;
		return;
	case LAYOUT_AMP_LEFT:           /* runs of mu, R * mu apart */
		for (int64_t base = r * mu; c < C; base += R * mu)
			for (int64_t j = 0; j < mu && c < C; j++)
				off[c++] = base + j;
		return;
	case LAYOUT_TRANSPOSED_RIGHT: { /* 16 columns mu apart per group */
		int64_t step = cdiv(R, mu) * mu * 16;
		for (int64_t base = (r / mu) * mu * 16 + r % mu; c < C; base += step)
			for (int64_t j = 0; j < 16 && c < C; j++)
				off[c++] = base + j * mu;
		return;
	}
	case LAYOUT_AMP_OUTPUT:         /* runs of 16, R * 16 apart */
		for (int64_t base = r * 16; c < C; base += R * 16)
			for (int64_t j = 0; j < 16 && c < C; j++)
				off[c++] = base + j;
		return;
	default:
		for (; c < C; c++)
			off[c] = -1;
	}
}

int64_t layout_run(const Layout *l)
{
	switch (l->kind) {
	case LAYOUT_ROW_MAJOR: return l->cols > 0 ? l->cols : 1;
	case LAYOUT_AMP_LEFT: return fmt_mu(l->fmt);
	case LAYOUT_AMP_OUTPUT: return 16;
	default: return 1;
	}
}

int64_t layout_offset(const Layout *l, int64_t r, int64_t c)
{
	int64_t mu = fmt_mu(l->fmt), R = l->rows;

	switch (l->kind) {
	case LAYOUT_ROW_MAJOR:
		return r * l->cols + c;
	case LAYOUT_AMP_LEFT:
		return (c / mu) * R * mu + r * mu + c % mu;
	case LAYOUT_TRANSPOSED_RIGHT:
		return ((c / 16) * cdiv(R, mu) + r / mu) * mu * 16 +
		       (c % 16) * mu + r % mu;
	case LAYOUT_AMP_OUTPUT:
		return (c / 16) * R * 16 + r * 16 + c % 16;
	default:
		return -1;
	}
}

int64_t layout_elems(const Layout *l)
{
	int64_t mu = fmt_mu(l->fmt), R = l->rows, C = l->cols;

	switch (l->kind) {
	case LAYOUT_ROW_MAJOR:
		return R * C;
	case LAYOUT_AMP_LEFT:
		return cdiv(C, mu) * R * mu;
	case LAYOUT_TRANSPOSED_RIGHT:
		return cdiv(R, mu) * cdiv(C, 16) * mu * 16;
	case LAYOUT_AMP_OUTPUT:
		return cdiv(C, 16) * R * 16;
	default:
		return -1;
	}
}

int64_t layout_bytes(const Layout *l)
{
	return layout_elems(l) * fmt_bytes(l->fmt);
}
