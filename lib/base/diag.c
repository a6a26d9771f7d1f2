#include "base/diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int errf(Err *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	return -1;
}

int err_at(Err *e, const char *file, long line, long col, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(e->msg, sizeof e->msg, "%s:%ld:%ld: ", file, line, col);
	if (n < 0 || (size_t)n >= sizeof e->msg)
		return -1;
	va_start(ap, fmt);
	vsnprintf(e->msg + n, sizeof e->msg - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static void *oom(void)
{
	fputs("amp: out of memory\n", stderr);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	return p ? p : oom();
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	return p ? p : oom();
}

void *xzeroed(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return oom();
	size_t b = n * size;
	void *p = xmalloc(b);
#ifdef __GNUC__
	__asm__ volatile("" : : "r"(p) : "memory");    /* else GCC makes malloc and memset a calloc */
#endif
	return memset(p, 0, b ? b : 1);
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	return p ? p : oom();
}

char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

void str_printf(Str *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (k < 0)
		abort();        /* an invalid format: a bug of the caller */
	if (b->n + (size_t)k + 1 > b->cap) {
		b->cap = (b->n + (size_t)k + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	va_start(ap, fmt);
	vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
	va_end(ap);
	b->n += (size_t)k;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		abort();        /* an invalid format: a bug of the caller */
	char *s = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}
