#include "base/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void put(Json *j, const char *s, size_t n)
{
	if (!j->failed && output_write(j->out, s, n, &j->err))
		j->failed = 1;
}

static void puts_(Json *j, const char *s)
{
	put(j, s, strlen(s));
}

void json_init(Json *j, Output *out)
{
	memset(j, 0, sizeof *j);
	j->out = out;
	j->first[0] = 1;
}

/* Separator and indentation before a member of the current container. */
static void member(Json *j)
{
	if (j->pending) {
		j->pending = 0;
		return;
	}
	if (j->depth == 0)
		return;
	if (!j->first[j->depth])
		puts_(j, j->inl[j->depth] ? ", " : ",");
	j->first[j->depth] = 0;
	if (!j->inl[j->depth]) {
		puts_(j, "\n");
		for (int i = 0; i < j->depth; i++)
			puts_(j, "  ");
	}
}

static void string(Json *j, const char *s)
{
	puts_(j, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char b[8];
		if (c == '"' || c == '\\') {
			b[0] = '\\', b[1] = (char)c;
			put(j, b, 2);
		} else if (c < 0x20) {
			snprintf(b, sizeof b, "\\u%04x", c);
			puts_(j, b);
		} else {
			put(j, (const char *)&c, 1);
		}
	}
	puts_(j, "\"");
}

void json_key(Json *j, const char *k)
{
	member(j);
	string(j, k);
	puts_(j, ": ");
	j->pending = 1;
}

void json_open(Json *j, char bracket, int inl)
{
	member(j);
	put(j, &bracket, 1);
	j->depth++;
	j->first[j->depth] = 1;
	j->inl[j->depth] = inl || j->inl[j->depth - 1];
}

void json_close(Json *j, char bracket)
{
	int empty = j->first[j->depth], inl = j->inl[j->depth];
	j->depth--;
	if (!empty && !inl) {
		puts_(j, "\n");
		for (int i = 0; i < j->depth; i++)
			puts_(j, "  ");
	}
	put(j, &bracket, 1);
}

void json_str(Json *j, const char *s)
{
	member(j);
	string(j, s);
}

void json_int(Json *j, int64_t v)
{
	char b[32];
	member(j);
	snprintf(b, sizeof b, "%" PRId64, v);
	puts_(j, b);
}

void json_kint(Json *j, const char *k, int64_t v)
{
	json_key(j, k);
	json_int(j, v);
}

void json_ratio(Json *j, int64_t num, int64_t den)
{
	char b[48];
	member(j);
	if (den <= 0 || num < 0) {
		puts_(j, "null");
		return;
	}
	/* thousandths, halves up; the whole part apart, so that only the
	 * remainder (below den) is scaled */
	int64_t whole = num / den, r = num % den, t;
	if (den <= INT64_MAX / 2000)
		t = (2 * 1000 * r + den) / (2 * den);
	else
		t = (int64_t)(((long double)r * 1000 + (long double)den / 2) / den);
	whole += t / 1000, t %= 1000;
	snprintf(b, sizeof b, "%" PRId64 ".%03" PRId64, whole, t);
	puts_(j, b);
}

void json_fixed(Json *j, double v)
{
	char b[64];
	member(j);
	snprintf(b, sizeof b, "%.3f", v);
	puts_(j, b);
}

void json_null(Json *j)
{
	member(j);
	puts_(j, "null");
}

void json_kratio(Json *j, const char *k, int64_t num, int64_t den)
{
	json_key(j, k);
	json_ratio(j, num, den);
}

void json_kstr(Json *j, const char *k, const char *s)
{
	json_key(j, k);
	json_str(j, s);
}

int json_end(Json *j, Err *e)
{
	puts_(j, "\n");
	if (j->failed) {
		*e = j->err;
		return -1;
	}
	return 0;
}
