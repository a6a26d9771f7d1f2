/* npy: NumPy .npy reading and writing (see npy.h). The header parser
 * never reads past the header's bytes (they are not NUL-terminated). */
#include "base/npy.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/io.h"
#include "base/num.h"

#define GROWTH 21 /* NumPy's GROWTH_AXIS_MAX_DIGITS */

static const char *const descrs[] = { "<f4", "<f2", "|u1", "<f8", "<i4" };

size_t npy_size(NpyType t)
{
	static const size_t sizes[] = { 4, 2, 1, 8, 4 };
	return (unsigned)t < 5 ? sizes[t] : 0;
}

int64_t npy_count(const Npy *a)
{
	int64_t n = 1;
	int i;

	for (i = 0; i < a->rank; i++)
		n *= a->shape[i];
	return n;
}

void npy_free(Npy *a)
{
	free(a->data);
	memset(a, 0, sizeof *a);
}

/* Bytes the shape needs, or -1 for a negative dimension or when that
 * overflows int64_t or size_t. */
static int64_t need(const Npy *a)
{
	int64_t n = (int64_t)npy_size(a->type);
	int i;

	for (i = 0; i < a->rank; i++)
		if (a->shape[i] <= 0)
			return a->shape[i] ? -1 : 0;
	for (i = 0; i < a->rank; i++) {
		if (n > INT64_MAX / a->shape[i])
			return -1;
		n *= a->shape[i];
	}
	return (uint64_t)n > SIZE_MAX ? -1 : n;
}

/* The header being parsed: p to end, start at file offset 0. */
typedef struct { const char *p, *end, *start, *name; Err *e; } Hdr;

static int bad(Hdr *h, const char *what)
{
	return errf(h->e, "'%s': bad header at byte %ld: expected %s", h->name,
		(long)(h->p - h->start), what);
}

static void ws(Hdr *h)
{
	while (h->p < h->end && strchr(" \t\r\n", *h->p) && *h->p)
		h->p++;
}

static int eat(Hdr *h, char c)
{
	ws(h);
	if (h->p < h->end && *h->p == c) {
		h->p++;
		return 1;
	}
	return 0;
}

/* A quoted string without escapes, into buf (cut to cap - 1 bytes, which
 * no accepted word is near, so a cut string is still refused). */
static int str(Hdr *h, char *buf, size_t cap, const char *what)
{
	const char *q;
	size_t n;
	char c;

	ws(h);
	if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
		return bad(h, what);
	c = *h->p;
	for (q = h->p + 1; q < h->end && *q != c; q++)
		if (*q == '\\' || *q == '\n' || *q == '\0')
			break;
	if (q >= h->end || *q != c) {
		h->p = q;
		return bad(h, "a closing quote");
	}
	n = (size_t)(q - h->p - 1) < cap ? (size_t)(q - h->p - 1) : cap - 1;
	memcpy(buf, h->p + 1, n);
	buf[n] = '\0';
	h->p = q + 1;
	return 0;
}

static int dim(Hdr *h, int64_t *d)
{
	int64_t v = 0;
	const char *s;

	ws(h);
	if (h->p < h->end && *h->p == '-')
		return errf(h->e, "'%s': negative dimension at byte %ld",
			h->name, (long)(h->p - h->start));
	for (s = h->p; h->p < h->end && *h->p >= '0' && *h->p <= '9'; h->p++) {
		if (v > (INT64_MAX - (*h->p - '0')) / 10)
			return errf(h->e, "'%s': dimension at byte %ld is too "
				"large", h->name, (long)(s - h->start));
		v = v * 10 + (*h->p - '0');
	}
	if (h->p == s || (*s == '0' && h->p - s > 1)) {
		h->p = s;
		return bad(h, "a dimension (decimal integer)");
	}
	*d = v;
	return 0;
}

static int shape(Hdr *h, Npy *a)
{
	if (!eat(h, '('))
		return bad(h, "'(' starting the shape tuple");
	for (;;) {
		if (eat(h, ')'))
			return 0;
		if (a->rank == NPY_MAX_RANK)
			return errf(h->e, "'%s': shape has more than %d "
				"dimensions", h->name, NPY_MAX_RANK);
		if (dim(h, &a->shape[a->rank++]) < 0)
			return -1;
		if (eat(h, ','))
			continue;
		if (!eat(h, ')'))
			return bad(h, "',' or ')' in the shape tuple");
		if (a->rank == 1) /* "(5)" is an integer, not a tuple */
			return bad(h, "',' after a single dimension");
		return 0;
	}
}

static int value(Hdr *h, Npy *a, int key)
{
	char s[16];
	const char *w;
	int i;

	if (key == 1) {
		ws(h);
		for (w = h->p; h->p < h->end && isalnum((unsigned char)*h->p);)
			h->p++;
		if (h->p - w == 4 && !memcmp(w, "True", 4))
			return errf(h->e, "'%s': fortran_order True is not "
				"supported (C order only)", h->name);
		if (h->p - w == 5 && !memcmp(w, "False", 5))
			return 0;
		h->p = w;
		return bad(h, "True or False for 'fortran_order'");
	}
	if (key == 2)
		return shape(h, a);
	if (str(h, s, sizeof s, "a quoted type string for 'descr'") < 0)
		return -1;
	for (i = 0; i < 5 && strcmp(s, descrs[i]); i++)
		;
	if (!strcmp(s, "<u1"))
		i = NPY_U8;
	if (i == 5)
		return errf(h->e, "'%s': unsupported descr '%s' (expected "
			"'<f4', '<f2', '|u1', '<f8' or '<i4')", h->name, s);
	a->type = (NpyType)i;
	return 0;
}

static int dict(Hdr *h, Npy *a)
{
	static const char *const keys[] = { "descr", "fortran_order", "shape" };
	char k[32];
	int seen = 0, i;

	if (!eat(h, '{'))
		return bad(h, "'{' starting the header dict");
	while (!eat(h, '}')) {
		if (str(h, k, sizeof k, "a quoted key or '}'") < 0)
			return -1;
		for (i = 0; i < 3 && strcmp(k, keys[i]); i++)
			;
		if (i == 3)
			return errf(h->e, "'%s': unexpected key '%s' in the "
				"header", h->name, k);
		if (seen & 1 << i)
			return errf(h->e, "'%s': duplicate key '%s' in the "
				"header", h->name, k);
		seen |= 1 << i;
		if (!eat(h, ':'))
			return bad(h, "':' after the key");
		if (value(h, a, i) < 0)
			return -1;
		if (eat(h, ','))
			continue;
		if (!eat(h, '}'))
			return bad(h, "',' or '}' in the header dict");
		break;
	}
	ws(h);
	if (h->p != h->end)
		return bad(h, "only white space after the header dict");
	for (i = 0; i < 3; i++)
		if (!(seen & 1 << i))
			return errf(h->e, "'%s': header has no '%s' key",
				h->name, keys[i]);
	return 0;
}

int npy_read(const char *path, Npy *a, Err *e)
{
	const char *name = path && strcmp(path, "-") ? path : "<stdin>";
	unsigned char *b;
	char *buf;
	size_t len, off, hl;
	int64_t n;
	Hdr h;

#define FAIL(...) do { errf(e, __VA_ARGS__); goto fail; } while (0)
	memset(a, 0, sizeof *a);
	if (input_slurp(path, &buf, &len, e) < 0)
		return -1;
	b = (unsigned char *)buf;
	if (len < 8 || memcmp(b, "\x93NUMPY", 6))
		FAIL("'%s': not a .npy file (bad magic)", name);
	if (b[6] < 1 || b[6] > 3 || b[7] != 0)
		FAIL("'%s': unsupported .npy version %d.%d", name, b[6], b[7]);
	off = b[6] == 1 ? 10 : 12;
	if (len < off)
		FAIL("'%s': file ends inside the header length", name);
	hl = b[8] | (size_t)b[9] << 8;
	if (off == 12)
		hl |= (size_t)b[10] << 16 | (size_t)b[11] << 24;
	if (hl > len - off)
		FAIL("'%s': header of %zu bytes runs past the end of the file",
			name, hl);
	h = (Hdr){ buf + off, buf + off + hl, buf, name, e };
	if (dict(&h, a) < 0)
		goto fail;
	off += hl;
	if ((n = need(a)) < 0)
		FAIL("'%s': shape is too large (size overflows)", name);
	if ((uint64_t)n != len - off)
		FAIL("'%s': data is %zu bytes but the shape needs %" PRId64
			" (file too %s)", name, len - off, n,
			(uint64_t)n > len - off ? "short" : "long");
#undef FAIL
	memmove(b, b + off, (size_t)n);
	a->data = b;
	a->bytes = (size_t)n;
	return 0;
fail:
	free(b);
	memset(a, 0, sizeof *a);
	return -1;
}

int npy_write(const char *path, const Npy *a, Err *e)
{
	const char *name = path && strcmp(path, "-") ? path : "<stdout>";
	char hd[512], dig[24];
	unsigned char pre[10] = "\x93NUMPY\x01";
	size_t n, total;
	int64_t nb;
	Output *o;
	int i;

	if (!npy_size(a->type) || a->rank < 0 || a->rank > NPY_MAX_RANK)
		return errf(e, "'%s': bad array (type %d, rank %d)", name,
			(int)a->type, a->rank);
	if ((nb = need(a)) < 0)
		return errf(e, "'%s': negative or overflowing shape", name);
	if ((uint64_t)nb != a->bytes || (nb && !a->data))
		return errf(e, "'%s': array holds %zu bytes, its shape needs "
			"%" PRId64, name, a->bytes, nb);
	n = (size_t)snprintf(hd, sizeof hd, "{'descr': '%s', 'fortran_order': "
		"False, 'shape': (", descrs[a->type]);
	for (i = 0; i < a->rank; i++)
		n += (size_t)snprintf(hd + n, sizeof hd - n, "%s%" PRId64,
			i ? ", " : "", a->shape[i]);
	n += (size_t)snprintf(hd + n, sizeof hd - n, "%s), }",
		a->rank == 1 ? "," : "");
	if (a->rank > 0) /* NumPy's spare room for growing axis 0 */
		n += (size_t)snprintf(hd + n, sizeof hd - n, "%*s", GROWTH -
			snprintf(dig, sizeof dig, "%" PRId64, a->shape[0]), "");
	/* like NumPy, a full 64 bytes of padding when n + 11 is aligned */
	total = n + 1 + 64 - (10 + n + 1) % 64;
	memset(hd + n, ' ', total - 1 - n);
	hd[total - 1] = '\n';
	pre[8] = (unsigned char)total;
	pre[9] = (unsigned char)(total >> 8);
	if (!(o = output_open(path, 0, e)))
		return -1;
	if (output_write(o, pre, 10, e) < 0 || output_write(o, hd, total, e) < 0
			|| (a->bytes && output_write(o, a->data, a->bytes, e) < 0)) {
		output_abort(o);
		return -1;
	}
	return output_commit(o, e);
}

int npy_floats(const Npy *a, float **out, Err *e)
{
	const unsigned char *p = a->data;
	size_t sz = npy_size(a->type), k;
	int64_t n, i;
	uint64_t u;
	uint32_t w;
	float *f;
	double d;

	*out = NULL;
	if (a->type == NPY_U8)
		return errf(e, "'|u1' array holds raw bytes, not float values");
	if (!sz || a->rank < 0 || a->rank > NPY_MAX_RANK || (n = need(a)) < 0
			|| (uint64_t)n != a->bytes)
		return errf(e, "bad array: type %d, rank %d, %zu bytes",
			(int)a->type, a->rank, a->bytes);
	n /= (int64_t)sz;
	f = xmalloc(n ? (size_t)n * sizeof *f : 1);
	for (i = 0; i < n; i++, p += sz) {
		for (u = 0, k = sz; k-- > 0;)
			u = u << 8 | p[k]; /* little-endian on any host */
		if (sz == 2)
			f[i] = f16_to_f32((uint16_t)u);
		else if (sz == 4 && a->type == NPY_I32)
			f[i] = (float)(int32_t)(uint32_t)u;
		else if (sz == 4)
			w = (uint32_t)u, memcpy(&f[i], &w, 4);
		else
			memcpy(&d, &u, 8), f[i] = (float)d;
	}
	*out = f;
	return 0;
}
