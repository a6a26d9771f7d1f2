/* diag: errors as values.
 *
 * lib/ never prints and never exits. A failing function fills an Err with a
 * message that starts with its location ("model.yaml:3:7: ", or a tile and
 * phase for limits) and returns -1; the tool prefixes its own name, prints,
 * and chooses the exit status. Messages are lowercase, subjects in quotes,
 * no full stop.
 */
#ifndef AMP_DIAG_H
#define AMP_DIAG_H

#include <stddef.h>

typedef struct {
	char msg[1024];
} Err;

/* Always return -1, so callers can write `return errf(e, ...)`. */
int errf(Err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "file:line:col: " + message; line and col count from 1. */
int err_at(Err *e, const char *file, long line, long col, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Allocation that never returns NULL: on exhaustion it aborts, the one
 * place lib/ stops the process (there is no useful recovery). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
/* n * size zero bytes, zeroed by writing them: the pages are the
 * process's own at once. (calloc may leave fresh pages mapped to the
 * kernel's zero page; the first write to one after a read then faults
 * and flushes every core's TLB.) For buffers read before written. */
void *xzeroed(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* The printf of fmt in a new string of its measured length (free it):
 * for names built from names, which have no length limit. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growing string: each piece measured, then appended (no fixed-size
 * buffer); s is NUL-terminated once anything was appended. */
typedef struct {
	char *s;
	size_t n, cap;
} Str;
void str_printf(Str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
