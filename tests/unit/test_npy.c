/* test_npy: lib/npy round trips for every type at ranks 0..4 (empty dims
 * too), NumPy's exact header bytes, hand-built files of versions 1-3, each
 * malformed case refused naming the file, and float conversion. */
#include "base/npy.h"
#include "base/num.h"
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

static char dir[64];

static char *at(const char *name)
{
	static char buf[4][256];
	static int k;
	char *p = buf[k++ % 4];

	snprintf(p, sizeof buf[0], "%s/%s", dir, name);
	return p;
}

static void put(const char *path, const void *data, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* The raw bytes of a file (malloc'd), or NULL. */
static unsigned char *get(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	unsigned char *p;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	rewind(f);
	p = xmalloc(*n + 1);
	if (fread(p, 1, *n, f) != *n) {
		free(p);
		p = NULL;
	}
	fclose(f);
	return p;
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* A file of magic, version maj.min, the header length (2 bytes for major
 * version 1 or unknown, 4 for 2 and 3), hdr, then ndata bytes 0..ndata-1. */
static void hand(const char *path, int maj, int min, const char *hdr,
	size_t ndata)
{
	size_t hl = strlen(hdr), w = maj == 2 || maj == 3 ? 4 : 2, n = 0, i;
	unsigned char *b = xmalloc(12 + hl + ndata);

	memcpy(b, "\x93NUMPY", 6);
	b[6] = (unsigned char)maj;
	b[7] = (unsigned char)min;
	for (i = 0; i < w; i++)
		b[8 + i] = (unsigned char)(hl >> 8 * i);
	n = 8 + w;
	memcpy(b + n, hdr, hl);
	n += hl;
	for (i = 0; i < ndata; i++)
		b[n++] = (unsigned char)i;
	put(path, b, n);
	free(b);
}

/* Reading path fails with an error that names it and contains word. */
static void refused(const char *path, const char *word)
{
	Npy a;
	Err e = { "" };
	int rc = npy_read(path, &a, &e);

	CHECK(rc == -1, "accepted (rc %d)", rc);
	CHECK(strstr(e.msg, path) != NULL, "error does not name the file: %s",
		e.msg);
	CHECK(strstr(e.msg, word) != NULL, "error lacks '%s': %s", word, e.msg);
	CHECK(!a.data && !a.bytes && !a.rank, "array not left empty");
	npy_free(&a);
}

static const struct {
	int rank;
	int64_t s[4];
} shapes[] = {
	{ 0, { 0 } }, { 1, { 5 } }, { 1, { 0 } }, { 1, { 1000 } },
	{ 2, { 2, 3 } }, { 2, { 3, 0 } }, { 2, { 0, 0 } },
	{ 2, { 0, 4611686018427387904 } }, { 3, { 2, 1, 3 } },
	{ 3, { 4, 0, 2 } }, { 4, { 1, 2, 3, 2 } }, { 4, { 2, 2, 0, 3 } },
	{ 4, { 3, 5, 7, 11 } },
};

static void test_roundtrip(void)
{
	static const char *const tn[] = { "f32", "f16", "u8", "f64" };
	char name[128];
	uint64_t x = 0x12345678;
	size_t i, j, n1, n2, hl;
	int t, r;

	for (t = 0; t < 4; t++)
		for (i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
			Npy a = { (NpyType)t, shapes[i].rank, { 0 }, NULL, 0 }, b;
			Err e = { "" };
			unsigned char *f1, *f2, *z;
			size_t zn;

			snprintf(name, sizeof name, "round trip %s rank %d "
				"case %zu", tn[t], shapes[i].rank, i);
			t_case(name);
			memcpy(a.shape, shapes[i].s, sizeof shapes[i].s);
			a.bytes = (size_t)npy_count(&a) * npy_size(a.type);
			a.data = xmalloc(a.bytes + 1);
			for (j = 0; j < a.bytes; j++)
				((unsigned char *)a.data)[j] = (unsigned char)rnd(&x);
			CHECK(npy_write(at("a.npy"), &a, &e) == 0, "write: %s", e.msg);
			CHECK(npy_read(at("a.npy"), &b, &e) == 0, "read: %s", e.msg);
			CHECK(b.type == a.type && b.rank == a.rank, "type %d rank %d",
				(int)b.type, b.rank);
			for (r = 0; r < a.rank; r++)
				CHECK(b.shape[r] == a.shape[r], "dim %d: %lld", r,
					(long long)b.shape[r]);
			CHECK(b.bytes == a.bytes && (!a.bytes ||
				!memcmp(a.data, b.data, a.bytes)), "data differs");
			/* layout: header block a multiple of 64, then the data */
			f1 = get(at("a.npy"), &n1);
			CHECK(f1 && n1 >= 10 && !memcmp(f1, "\x93NUMPY\x01\x00", 8),
				"bad prefix");
			hl = f1 ? f1[8] | (size_t)f1[9] << 8 : 0;
			CHECK(f1 && (10 + hl) % 64 == 0 && f1[9 + hl] == '\n' &&
				n1 == 10 + hl + a.bytes, "header %zu, file %zu", hl, n1);
			/* read -> write gives identical bytes */
			CHECK(npy_write(at("b.npy"), &b, &e) == 0, "rewrite: %s", e.msg);
			f2 = get(at("b.npy"), &n2);
			CHECK(f1 && f2 && n1 == n2 && !memcmp(f1, f2, n1),
				"rewrite differs");
			/* zstd-compressed input reads the same */
			npy_free(&b);
			z = xmalloc(zn = ZSTD_compressBound(n1));
			zn = ZSTD_compress(z, zn, f1, n1, 3);
			CHECK(!ZSTD_isError(zn), "zstd");
			put(at("a.npy.zst"), z, zn);
			CHECK(npy_read(at("a.npy.zst"), &b, &e) == 0, "zstd read: %s",
				e.msg);
			CHECK(b.bytes == a.bytes && (!a.bytes ||
				!memcmp(a.data, b.data, a.bytes)), "zstd data differs");
			npy_free(&b);
			free(z);
			free(f1);
			free(f2);
			free(a.data);
			unlink(at("a.npy"));
			unlink(at("b.npy"));
			unlink(at("a.npy.zst"));
		}
}

/* The file np.save writes, from its _write_array_header / _wrap_header:
 * the dict, 21 - len(str(shape[0])) spaces of room to grow, padding to a
 * multiple of 64 (a full 64 when already aligned), "\n". */
static void header_is(const Npy *a, const char *dict, size_t total)
{
	unsigned char *f;
	size_t n, i, dl = strlen(dict);
	Err e = { "" };

	CHECK(npy_write(at("h.npy"), a, &e) == 0, "write: %s", e.msg);
	f = get(at("h.npy"), &n);
	CHECK(f && n == 10 + total + a->bytes, "file is %zu bytes", n);
	if (!f || n != 10 + total + a->bytes) {
		free(f);
		return;
	}
	CHECK(!memcmp(f, "\x93NUMPY\x01\x00", 8), "magic or version");
	CHECK(f[8] == (total & 255) && f[9] == total >> 8, "length %d",
		f[8] | f[9] << 8);
	CHECK(!memcmp(f + 10, dict, dl), "dict: %.*s", (int)dl, (char *)f + 10);
	for (i = 10 + dl; i < 9 + total; i++)
		CHECK(f[i] == ' ', "byte %zu is %#x, not a space", i, f[i]);
	CHECK(f[9 + total] == '\n', "no final newline");
	CHECK(!a->bytes || !memcmp(f + 10 + total, a->data, a->bytes),
		"data bytes");
	free(f);
	unlink(at("h.npy"));
}

static void test_header(void)
{
	float v[6] = { 0, 1, 2, 3, 4, 5 };
	double d[5] = { 0 };
	unsigned char u = 7;
	Npy a = { NPY_F32, 2, { 2, 3 }, v, sizeof v };

	t_case("header of a (2, 3) '<f4' array is numpy's, 128 bytes");
	header_is(&a, "{'descr': '<f4', 'fortran_order': False, "
		"'shape': (2, 3), }", 118);
	t_case("header of a (5,) '<f8' array is numpy's");
	a = (Npy){ NPY_F64, 1, { 5 }, d, sizeof d };
	header_is(&a, "{'descr': '<f8', 'fortran_order': False, "
		"'shape': (5,), }", 118);
	t_case("header of a rank 0 '|u1' array is numpy's");
	a = (Npy){ NPY_U8, 0, { 0 }, &u, 1 };
	header_is(&a, "{'descr': '|u1', 'fortran_order': False, "
		"'shape': (), }", 118);
	t_case("header of a (0, 3) '<f2' array is numpy's");
	a = (Npy){ NPY_F16, 2, { 0, 3 }, NULL, 0 };
	header_is(&a, "{'descr': '<f2', 'fortran_order': False, "
		"'shape': (0, 3), }", 118);
	/* dict 97 + growth 20 = 117 bytes: 10 + 117 + 1 is aligned, and
	 * numpy then pads a full 64 */
	t_case("header already aligned gets numpy's full 64 bytes of padding");
	a = (Npy){ NPY_F32, 3, { 0, 1000000000000000000, 100000000000000000 },
		NULL, 0 };
	header_is(&a, "{'descr': '<f4', 'fortran_order': False, 'shape': "
		"(0, 1000000000000000000, 100000000000000000), }", 182);
	t_case("header spills into a second 64-byte block for a long shape");
	a = (Npy){ NPY_U8, 8, { 0, 1000000000000000000, 1000000000000000000,
		1000000000000000000, 1, 1, 1, 1 }, NULL, 0 };
	header_is(&a, "{'descr': '|u1', 'fortran_order': False, 'shape': "
		"(0, 1000000000000000000, 1000000000000000000, "
		"1000000000000000000, 1, 1, 1, 1), }", 182);
}

static void accepted(const char *what, int maj, const char *hdr,
	size_t ndata, NpyType type, int rank, const int64_t *shape)
{
	Npy a;
	Err e = { "" };
	int r;

	t_case(what);
	hand(at("ok.npy"), maj, 0, hdr, ndata);
	CHECK(npy_read(at("ok.npy"), &a, &e) == 0, "read: %s", e.msg);
	CHECK(a.type == type && a.rank == rank && a.bytes == ndata,
		"type %d rank %d bytes %zu", (int)a.type, a.rank, a.bytes);
	for (r = 0; r < rank && r < a.rank; r++)
		CHECK(a.shape[r] == shape[r], "dim %d is %lld", r,
			(long long)a.shape[r]);
	for (r = 0; r < (int)a.bytes; r++)
		CHECK(((unsigned char *)a.data)[r] == (unsigned char)r,
			"data byte %d", r);
	npy_free(&a);
	unlink(at("ok.npy"));
}

static void test_accept(void)
{
	static const int64_t s23[] = { 2, 3 }, s5[] = { 5 }, s0n[] = { 0,
		INT64_MAX }, s8[] = { 1, 2, 1, 2, 1, 2, 1, 2 };

	accepted("version 1.0 as numpy writes it", 1, "{'descr': '<f4', "
		"'fortran_order': False, 'shape': (2, 3), }          \n", 24,
		NPY_F32, 2, s23);
	accepted("version 2.0 with a 4-byte header length", 2, "{'descr': "
		"'<f2', 'fortran_order': False, 'shape': (2, 3), }\n", 12,
		NPY_F16, 2, s23);
	accepted("version 3.0 with a 4-byte header length", 3, "{'descr': "
		"'<f8', 'fortran_order': False, 'shape': (5,), }\n", 40,
		NPY_F64, 1, s5);
	accepted("keys in any order, no trailing comma, odd spacing", 1,
		"{ 'shape' :(2,3 ,) ,'fortran_order':False,\n'descr':'|u1'}",
		6, NPY_U8, 2, s23);
	accepted("double-quoted strings and '<u1'", 1, "{\"descr\": \"<u1\", "
		"\"fortran_order\": False, \"shape\": (5,)}", 5, NPY_U8, 1, s5);
	accepted("rank 0 is one element", 1, "{'descr': '<f4', "
		"'fortran_order': False, 'shape': (), }", 4, NPY_F32, 0, NULL);
	accepted("rank 8 is accepted", 1, "{'descr': '|u1', 'fortran_order': "
		"False, 'shape': (1, 2, 1, 2, 1, 2, 1, 2), }", 16, NPY_U8, 8, s8);
	accepted("a huge dimension beside a zero is empty", 1, "{'descr': "
		"'<f8', 'fortran_order': False, 'shape': "
		"(0, 9223372036854775807), }", 0, NPY_F64, 2, s0n);
}

static void bad(const char *what, const char *hdr, size_t ndata,
	const char *word)
{
	t_case(what);
	hand(at("bad.npy"), 1, 0, hdr, ndata);
	refused(at("bad.npy"), word);
	unlink(at("bad.npy"));
}

#define H(descr, fo, shape) \
	"{'descr': " descr ", 'fortran_order': " fo ", 'shape': " shape ", }"

static void test_malformed(void)
{
	static const char *const descrs[] = { "'>f4'", "'>f2'", "'>f8'",
		"'>i4'", "'=f4'", "'<f4 '", "'|b1'", "'>u1'", "'<c8'", "'f4'",
		"'<f16'", "''" };
	char buf[256], w[64];
	size_t i;

	t_case("bad magic is refused");
	put(at("m.npy"), "\x93NUMPZ\x01\x00\x00\x00", 10);
	refused(at("m.npy"), "magic");
	t_case("an empty file is refused");
	put(at("m.npy"), "", 0);
	refused(at("m.npy"), "magic");
	t_case("a file of 7 bytes is refused");
	put(at("m.npy"), "\x93NUMPY\x01", 7);
	refused(at("m.npy"), "magic");
	t_case("a file ending inside the 4-byte header length is refused");
	put(at("m.npy"), "\x93NUMPY\x02\x00\x05\x00", 10);
	refused(at("m.npy"), "header length");
	t_case("a header length past the end of the file is refused");
	put(at("m.npy"), "\x93NUMPY\x01\x00\xff\x00{}", 12);
	refused(at("m.npy"), "past the end");
	t_case("a missing file is refused naming it");
	refused(at("none.npy"), "cannot open");
	unlink(at("m.npy"));

	t_case("version 4.0 is refused");
	hand(at("v.npy"), 4, 0, H("'<f4'", "False", "()"), 4);
	refused(at("v.npy"), "version 4.0");
	t_case("version 1.1 is refused");
	hand(at("v.npy"), 1, 1, H("'<f4'", "False", "()"), 4);
	refused(at("v.npy"), "version 1.1");
	t_case("version 0.0 is refused");
	hand(at("v.npy"), 0, 0, H("'<f4'", "False", "()"), 4);
	refused(at("v.npy"), "version 0.0");
	unlink(at("v.npy"));

	bad("a list header is refused", "[1, 2]", 0, "'{'");
	bad("an empty header is refused", "", 0, "'{'");
	bad("an unclosed dict is refused", "{'descr': '<f4', "
		"'fortran_order': False, 'shape': (2, 3)", 24, "'}'");
	bad("a missing 'shape' key is refused", "{'descr': '<f4', "
		"'fortran_order': False}", 4, "no 'shape'");
	bad("a missing 'descr' key is refused", "{'fortran_order': False, "
		"'shape': ()}", 4, "no 'descr'");
	bad("an empty dict is refused", "{}", 0, "no 'descr'");
	bad("an extra key is refused", "{'descr': '<f4', 'fortran_order': "
		"False, 'shape': (), 'foo': 1}", 4, "unexpected key 'foo'");
	bad("a duplicate key is refused", "{'descr': '<f4', 'descr': '<f4', "
		"'fortran_order': False, 'shape': ()}", 4, "duplicate key 'descr'");
	bad("an unquoted key is refused", "{descr: '<f4', 'fortran_order': "
		"False, 'shape': ()}", 4, "quoted key");
	bad("a key without ':' is refused", "{'descr' '<f4'}", 0, "':'");
	bad("lowercase true is refused", H("'<f4'", "true", "()"), 4,
		"True or False");
	bad("fortran_order 0 is refused", H("'<f4'", "0", "()"), 4,
		"True or False");
	bad("fortran_order Falsey is refused", H("'<f4'", "Falsey", "()"), 4,
		"True or False");
	bad("fortran_order True is refused", H("'<f4'", "True", "(2, 3)"), 24,
		"fortran_order True");
	bad("an integer shape (6) is refused", H("'<f4'", "False", "(6)"), 24,
		"',' after a single dimension");
	bad("a list shape is refused", H("'<f4'", "False", "[2, 3]"), 24,
		"'('");
	bad("a shape without commas is refused", H("'<f4'", "False",
		"(2 3)"), 24, "',' or ')'");
	bad("a shape with a double comma is refused", H("'<f4'", "False",
		"(2,, 3)"), 24, "dimension");
	bad("a shape (,) is refused", H("'<f4'", "False", "(,)"), 4,
		"dimension");
	bad("a dimension with a leading zero is refused", H("'<f4'", "False",
		"(06,)"), 24, "dimension");
	bad("a float dimension is refused", H("'<f4'", "False", "(6.0,)"), 24,
		"',' or ')'");
	bad("text after the dict is refused", H("'<f4'", "False", "()")
		" x", 4, "white space");
	bad("a second dict is refused", H("'<f4'", "False", "()")
		"{}", 4, "white space");
	bad("a key missing its closing quote is refused", "{'descr: '<f4'}",
		0, "unexpected key 'descr: '");
	bad("a string running to the end is refused", "{'descr", 0,
		"closing quote");
	bad("an escape in a string is refused", H("'<f\\4'", "False", "()"),
		4, "closing quote");
	bad("a structured descr is refused", H("[('a', '<f4')]", "False",
		"()"), 4, "type string");
	for (i = 0; i < sizeof descrs / sizeof descrs[0]; i++) {
		snprintf(buf, sizeof buf, "descr %s is refused", descrs[i]);
		t_case(buf);
		snprintf(buf, sizeof buf, H("%s", "False", "()"), descrs[i]);
		hand(at("d.npy"), 1, 0, buf, 8);
		snprintf(w, sizeof w, "unsupported descr %s", descrs[i]);
		refused(at("d.npy"), w);
	}
	unlink(at("d.npy"));
	bad("a negative dimension is refused", H("'<f4'", "False", "(-1,)"),
		0, "negative dimension");
	bad("a negative second dimension is refused", H("'<f4'", "False",
		"(0, -2)"), 0, "negative dimension");
	bad("a dimension over int64 is refused", H("'|u1'", "False",
		"(9223372036854775808,)"), 0, "too large");
	bad("a shape whose product overflows is refused", H("'|u1'", "False",
		"(4294967296, 4294967296)"), 0, "too large");
	bad("a shape whose byte size overflows is refused", H("'<f8'",
		"False", "(2305843009213693952,)"), 0, "too large");
	bad("rank 9 is refused", H("'|u1'", "False",
		"(1, 1, 1, 1, 1, 1, 1, 1, 1)"), 1, "more than 8");
	bad("a short file is refused", H("'<f4'", "False", "(2, 3)"), 23,
		"too short");
	bad("an empty data part is refused", H("'<f4'", "False", "(2, 3)"), 0,
		"too short");
	bad("a long file is refused", H("'<f4'", "False", "(2, 3)"), 25,
		"too long");
	bad("data for an empty shape is refused", H("'<f4'", "False",
		"(0, 3)"), 4, "too long");
	bad("a rank 0 file with no data is refused", H("'<f8'", "False",
		"()"), 0, "too short");
}

static void test_write_errors(void)
{
	float v[6] = { 0 };
	Npy a = { NPY_F32, 2, { 2, 3 }, v, 20 };
	Err e = { "" };
	size_t n;

	t_case("write refuses bytes that do not match the shape");
	CHECK(npy_write(at("w.npy"), &a, &e) == -1, "accepted");
	CHECK(strstr(e.msg, at("w.npy")) != NULL, "unnamed: %s", e.msg);
	CHECK(access(at("w.npy"), F_OK) != 0, "file left behind");
	t_case("write refuses rank 9");
	a = (Npy){ NPY_U8, 9, { 1, 1, 1, 1, 1, 1, 1, 1 }, v, 1 };
	CHECK(npy_write(at("w.npy"), &a, &e) == -1, "accepted");
	CHECK(strstr(e.msg, "rank 9") != NULL, "%s", e.msg);
	t_case("write refuses a negative dimension");
	a = (Npy){ NPY_U8, 2, { -2, -3 }, v, 6 };
	CHECK(npy_write(at("w.npy"), &a, &e) == -1, "accepted");
	CHECK(strstr(e.msg, "negative") != NULL, "%s", e.msg);
	t_case("write refuses a bad type");
	a = (Npy){ (NpyType)7, 1, { 1 }, v, 1 };
	CHECK(npy_write(at("w.npy"), &a, &e) == -1, "accepted");
	CHECK(strstr(e.msg, "type 7") != NULL, "%s", e.msg);
	t_case("write refuses missing data");
	a = (Npy){ NPY_F32, 1, { 1 }, NULL, 4 };
	CHECK(npy_write(at("w.npy"), &a, &e) == -1, "accepted");
	t_case("write into a missing directory fails naming the file");
	a = (Npy){ NPY_F32, 1, { 1 }, v, 4 };
	CHECK(npy_write(at("no/w.npy"), &a, &e) == -1, "accepted");
	CHECK(strstr(e.msg, at("no/w.npy")) != NULL, "unnamed: %s", e.msg);
	t_case("write replaces an existing file atomically");
	put(at("w.npy"), "old", 3);
	CHECK(npy_write(at("w.npy"), &a, &e) == 0, "%s", e.msg);
	free(get(at("w.npy"), &n));
	CHECK(n == 128 + 4, "file is %zu bytes", n);
	unlink(at("w.npy"));
}

/* '<i4' (token ids, positions): written and read back, and npy_floats
 * gives each integer exactly. */
static void test_int32(void)
{
	static const int32_t iv[] = { 0, 1, -2, 151935, 16777216, -16777216 };
	unsigned char le[sizeof iv];
	Npy a = { NPY_I32, 1, { 6 }, le, sizeof le }, b;
	Err e = { "" };
	float *f = NULL;
	for (size_t i = 0; i < 6; i++)
		for (int k = 0; k < 4; k++)
			le[4 * i + (size_t)k] = (unsigned char)((uint32_t)iv[i] >> (8 * k));
	t_case("'<i4' arrays round-trip and convert to their integers");
	CHECK(npy_write(at("i.npy"), &a, &e) == 0, "%s", e.msg);
	CHECK(npy_read(at("i.npy"), &b, &e) == 0 && b.type == NPY_I32, "%s", e.msg);
	CHECK(npy_floats(&b, &f, &e) == 0, "%s", e.msg);
	for (size_t i = 0; f && i < 6; i++)
		CHECK(f[i] == (float)iv[i], "[%zu] %g, want %d", i, (double)f[i], iv[i]);
	free(f);
	npy_free(&b);
	unlink(at("i.npy"));
}

static void test_floats(void)
{
	static const uint16_t h[] = { 0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00,
		0x3555, 0x8000, 0x0000 };
	static const float hf[] = { 1, -2, 65504, 0x1p-24f, INFINITY,
		0.333251953125f, -0.0f, 0 };
	double d[4] = { 1.5, -0.1, 1e300, 3.0e-46 };
	float v[3] = { 1.25f, -3, 1e-40f };
	unsigned char le[sizeof h], u[2] = { 1, 2 };
	Npy a = { NPY_F16, 2, { 2, 4 }, le, sizeof le }, b;
	Err e = { "" };
	float *f;
	size_t i;

	t_case("f16 values convert through npy_floats after a round trip");
	for (i = 0; i < 8; i++) {
		le[2 * i] = (unsigned char)h[i];
		le[2 * i + 1] = (unsigned char)(h[i] >> 8);
	}
	CHECK(npy_write(at("f.npy"), &a, &e) == 0, "%s", e.msg);
	CHECK(npy_read(at("f.npy"), &b, &e) == 0, "%s", e.msg);
	CHECK(npy_floats(&b, &f, &e) == 0, "%s", e.msg);
	for (i = 0; f && i < 8; i++)
		CHECK(f[i] == hf[i] && signbit(f[i]) == signbit(hf[i]) &&
			f[i] == f16_to_f32(h[i]), "[%zu] %g, want %g", i,
			(double)f[i], (double)hf[i]);
	free(f);
	npy_free(&b);
	t_case("f16 NaN stays NaN");
	le[0] = 0x00;
	le[1] = 0x7e;
	CHECK(npy_floats(&a, &f, &e) == 0 && isnan(f[0]), "not NaN");
	free(f);

	t_case("f64 values are cast to float");
	a = (Npy){ NPY_F64, 1, { 4 }, d, sizeof d };
	CHECK(npy_floats(&a, &f, &e) == 0, "%s", e.msg);
	CHECK(f[0] == 1.5f && f[1] == (float)-0.1 && isinf(f[2]) && f[3] == 0,
		"%g %g %g %g", (double)f[0], (double)f[1], (double)f[2],
		(double)f[3]);
	free(f);
	t_case("f32 values pass through exactly");
	a = (Npy){ NPY_F32, 0, { 0 }, v, 4 };
	CHECK(npy_floats(&a, &f, &e) == 0 && f[0] == 1.25f, "rank 0");
	free(f);
	a = (Npy){ NPY_F32, 1, { 3 }, v, sizeof v };
	CHECK(npy_floats(&a, &f, &e) == 0 && !memcmp(f, v, sizeof v), "f32");
	free(f);
	t_case("an empty f32 array gives no floats");
	a = (Npy){ NPY_F32, 2, { 3, 0 }, NULL, 0 };
	CHECK(npy_floats(&a, &f, &e) == 0 && f, "empty");
	free(f);
	t_case("u8 is refused by npy_floats");
	a = (Npy){ NPY_U8, 1, { 2 }, u, 2 };
	f = (float *)1;
	CHECK(npy_floats(&a, &f, &e) == -1 && !f, "accepted");
	CHECK(strstr(e.msg, "'|u1'") != NULL, "%s", e.msg);
	t_case("npy_floats refuses bytes that do not match the shape");
	a = (Npy){ NPY_F32, 1, { 3 }, v, 8 };
	CHECK(npy_floats(&a, &f, &e) == -1, "accepted");
	t_case("npy_count is the product of the shape, 1 at rank 0");
	a = (Npy){ NPY_F32, 0, { 0 }, NULL, 0 };
	CHECK(npy_count(&a) == 1, "rank 0");
	a = (Npy){ NPY_F32, 3, { 2, 3, 4 }, NULL, 0 };
	CHECK(npy_count(&a) == 24, "2x3x4");
	a.shape[1] = 0;
	CHECK(npy_count(&a) == 0, "2x0x4");
	unlink(at("f.npy"));
}

int main(void)
{
	strcpy(dir, "/tmp/test_npy.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_roundtrip();
	test_header();
	test_accept();
	test_malformed();
	test_write_errors();
	test_floats();
	test_int32();
	t_case("nothing is left in the temporary directory");
	CHECK(rmdir(dir) == 0, "'%s' not empty", dir);
	return t_summary();
}
