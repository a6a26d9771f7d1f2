/* io: reading inputs and writing outputs, the one place zstd lives.
 *
 * Input: a path, or standard input when the path is NULL or "-". A zstd
 * stream is recognised by its magic number (28 b5 2f fd), never by the
 * file name, and decompressed while it is read; concatenated frames are
 * accepted; a stream that ends mid-frame or is corrupt is an error.
 *
 * Output: standard output when the path is NULL or "-"; otherwise a
 * temporary file beside the target ("FILE.tmp.PID") that output_commit
 * renames into place. output_abort, and a fatal signal (SIGINT, SIGTERM,
 * SIGHUP, SIGPIPE) once io_cleanup_on_signal() has run, remove the
 * temporary file, so a failed run leaves nothing behind. With compress
 * set, the bytes are written as one zstd frame.
 */
#ifndef AMP_IO_H
#define AMP_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/diag.h"

typedef struct Input Input;
typedef struct Output Output;

Input *input_open(const char *path, Err *e);  /* NULL on error */
/* Up to n bytes of decompressed input: returns count, 0 at the end, -1 on
 * error (messages name the input: "'x.zst': truncated zstd stream"). */
ssize_t input_read(Input *in, void *buf, size_t n, Err *e);
const char *input_name(const Input *in);       /* path, or "<stdin>" */
void input_close(Input *in);
/* The same, reading len bytes from memory (not copied; keep them alive). */
Input *input_open_mem(const char *name, const void *data, size_t len, Err *e);
/* The whole (decompressed) input in one NUL-terminated buffer; an input
 * larger than SLURP_MAX is refused. */
#define SLURP_MAX ((size_t)1 << 30)
int input_slurp(const char *path, char **data, size_t *len, Err *e);

/* A regular file (or a new one) is written to a temporary beside it and
 * renamed on commit; an existing target that is not a regular file (a
 * device, a FIFO) is written in place; NULL or "-" is stdout. */
Output *output_open(const char *path, int compress, Err *e);
int output_write(Output *o, const void *buf, size_t n, Err *e);
/* printf into o: 0, or -1 with e set when the write failed. */
int output_printf(Output *o, Err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int output_commit(Output *o, Err *e);  /* finish, close, rename; frees o */
void output_abort(Output *o);          /* remove the temporary; frees o */
/* Output into a malloc'd buffer: *data and *len are final after commit
 * (free *data after commit or abort). */
Output *output_open_mem(char **data, size_t *len, Err *e);

void io_cleanup_on_signal(void);

/* FNV-1a, 64 bits, of n bytes: a content digest (a program's STAGE
 * section, the files a stage's provenance names), not a cryptographic one. */
uint64_t fnv1a(const void *data, size_t n);

#endif
