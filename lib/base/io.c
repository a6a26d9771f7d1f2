#include "base/io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

struct Input {
	FILE *f;
	char *name;
	int own;             /* fclose f on close */
	int eof;             /* f has reached its end */
	int rerr;            /* errno of a read failure, 0 if none */
	unsigned char head[4];
	size_t nhead, phead; /* peeked bytes, and how many were passed on */
	ZSTD_DStream *ds;    /* NULL when the input is not zstd */
	unsigned char *ibuf;
	ZSTD_inBuffer zin;
	size_t hint;         /* last ZSTD_decompressStream result; 0: frame done */
	int full;            /* last call filled its output: more may be buffered */
};

struct Output {
	FILE *f;
	int mem;             /* an open_memstream: closed on commit and abort */
	int direct;          /* an existing target that is not a regular file (a device,
			      * a FIFO): written in place, closed on commit and abort */
	char *path;          /* target, or "<stdout>" */
	char *tmp;           /* NULL for stdout */
	int err;             /* errno of the first write failure, 0 if none */
	ZSTD_CStream *cs;    /* NULL unless compressing */
	unsigned char *zbuf;
	size_t zcap;
};

/* Temporaries a fatal signal must remove. Changed only with the fatal
 * signals blocked, so the handler always sees a consistent list. */
enum { NPENDING = 32 };
static char *volatile pending[NPENDING];
static const int fatal[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
#define NFATAL (sizeof fatal / sizeof fatal[0])

/* Replace the first pending entry equal to from by to: track with
 * (NULL, tmp), untrack with (tmp, NULL). -1 if the list is full. */
static int swap(const char *from, char *to)
{
	sigset_t s, old;
	size_t i;
	int rc = -1;

	sigemptyset(&s);
	for (i = 0; i < NFATAL; i++)
		sigaddset(&s, fatal[i]);
	sigprocmask(SIG_BLOCK, &s, &old);
	for (i = 0; i < NPENDING && rc < 0; i++)
		if (pending[i] == from) {
			pending[i] = to;
			rc = 0;
		}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* Installed with SA_RESETHAND: the action is already the default one, so
 * the raised signal, delivered on return, ends the process. Only
 * async-signal-safe calls here. */
static void onfatal(int sig)
{
	int i, saved = errno;

	for (i = 0; i < NPENDING; i++)
		if (pending[i])
			unlink(pending[i]);
	raise(sig);
	errno = saved;
}

void io_cleanup_on_signal(void)
{
	struct sigaction sa, old;
	size_t i;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = onfatal;
	sa.sa_flags = SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < NFATAL; i++)
		sigaddset(&sa.sa_mask, fatal[i]);
	for (i = 0; i < NFATAL; i++) {
		/* a signal ignored by our parent (nohup, sh &) stays ignored */
		if (sigaction(fatal[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaction(fatal[i], &sa, NULL);
	}
}

/* fread that remembers why it stopped short: end of file, or an error */
static size_t get(Input *in, void *buf, size_t n)
{
	size_t r;

	errno = 0;
	r = fread(buf, 1, n, in->f);
	if (r < n) {
		if (ferror(in->f))
			in->rerr = errno ? errno : EIO;
		else
			in->eof = 1;
	}
	return r;
}

static Input *peek(Input *in, Err *e);

Input *input_open(const char *path, Err *e)
{
	Input *in = xcalloc(1, sizeof *in);

	if (!path || !strcmp(path, "-")) {
		in->f = stdin;
		in->name = xstrdup("<stdin>");
	} else if ((in->f = fopen(path, "rb"))) {
		in->own = 1;
		in->name = xstrdup(path);
	} else {
		errf(e, "cannot open '%s': %s", path, strerror(errno));
		free(in);
		return NULL;
	}
	return peek(in, e);
}

Input *input_open_mem(const char *name, const void *data, size_t len, Err *e)
{
	Input *in = xcalloc(1, sizeof *in);
	static const char empty[1];

	in->name = xstrdup(name);
	in->f = fmemopen((void *)(len ? data : empty), len ? len : 1, "rb");
	if (!in->f) {
		errf(e, "'%s': cannot read from memory: %s", name, strerror(errno));
		free(in->name);
		free(in);
		return NULL;
	}
	in->own = 1;
	if (!len)
		in->eof = 1;
	return peek(in, e);
}

/* After the stream is open: look at the first bytes for the zstd magic. */
static Input *peek(Input *in, Err *e)
{
	in->nhead = in->eof ? 0 : get(in, in->head, sizeof in->head);
	if (in->rerr) {
		errf(e, "'%s': read error: %s", in->name, strerror(in->rerr));
		goto fail;
	}
	if (in->nhead == 4 && !memcmp(in->head, "\x28\xb5\x2f\xfd", 4)) {
		if (!(in->ds = ZSTD_createDStream())) {
			errf(e, "'%s': cannot create zstd decompressor", in->name);
			goto fail;
		}
		in->ibuf = xmalloc(ZSTD_DStreamInSize());
		memcpy(in->ibuf, in->head, 4);
		in->zin.src = in->ibuf;
		in->zin.size = 4;
		in->hint = 1;
	}
	return in;
fail:
	input_close(in);
	return NULL;
}

const char *input_name(const Input *in)
{
	return in->name;
}

static ssize_t rdplain(Input *in, unsigned char *buf, size_t n, Err *e)
{
	size_t got = 0;

	while (got < n && in->phead < in->nhead)
		buf[got++] = in->head[in->phead++];
	if (got < n && !in->eof && !in->rerr)
		got += get(in, buf + got, n - got);
	if (got == 0 && in->rerr)
		return errf(e, "'%s': read error: %s", in->name,
		    strerror(in->rerr));
	return (ssize_t)got;
}

static ssize_t rdzstd(Input *in, unsigned char *buf, size_t n, Err *e)
{
	ZSTD_outBuffer out = { buf, n, 0 };
	size_t r;

	for (;;) {
		if (in->zin.pos == in->zin.size && !in->full) {
			if (in->rerr)
				return errf(e, "'%s': read error: %s", in->name,
				    strerror(in->rerr));
			if (in->eof)  /* the hint is 0 only between frames */
				return in->hint ? errf(e, "'%s': truncated zstd "
				    "stream", in->name) : 0;
			in->zin.size = get(in, in->ibuf, ZSTD_DStreamInSize());
			in->zin.pos = 0;
			continue;
		}
		r = ZSTD_decompressStream(in->ds, &out, &in->zin);
		if (ZSTD_isError(r))
			return errf(e, "'%s': corrupt zstd stream: %s", in->name,
			    ZSTD_getErrorName(r));
		in->hint = r;
		in->full = out.pos == out.size;
		if (out.pos)
			return (ssize_t)out.pos;
	}
}

ssize_t input_read(Input *in, void *buf, size_t n, Err *e)
{
	if (n > SSIZE_MAX)
		n = SSIZE_MAX;
	if (n == 0)
		return 0;
	return in->ds ? rdzstd(in, buf, n, e) : rdplain(in, buf, n, e);
}

void input_close(Input *in)
{
	if (!in)
		return;
	if (in->own)
		fclose(in->f);
	ZSTD_freeDStream(in->ds);
	free(in->ibuf);
	free(in->name);
	free(in);
}

int input_slurp(const char *path, char **data, size_t *len, Err *e)
{
	Input *in = input_open(path, e);
	size_t n = 0, cap = 1 << 16;
	char *buf;
	ssize_t r;

	if (!in)
		return -1;
	buf = xmalloc(cap);
	while ((r = input_read(in, buf + n, cap - n - 1, e)) > 0)
		if ((n += (size_t)r) == cap - 1) {
			if (cap >= SLURP_MAX) { /* an endless input (/dev/zero) stops here */
				r = errf(e, "'%s': input larger than %d MiB, more than any amp file "
					 "holds", input_name(in), (int)(SLURP_MAX >> 20));
				break;
			}
			buf = xrealloc(buf, cap *= 2);
		}
	input_close(in);
	if (r < 0) {
		free(buf);
		return -1;
	}
	buf[n] = '\0';
	*data = buf;
	*len = n;
	return 0;
}

static void release(Output *o)
{
	if (o->tmp)
		swap(o->tmp, NULL);
	ZSTD_freeCStream(o->cs);
	free(o->zbuf);
	free(o->tmp);
	free(o->path);
	free(o);
}

Output *output_open_mem(char **data, size_t *len, Err *e)
{
	Output *o = xcalloc(1, sizeof *o);
	o->path = xstrdup("<memory>");
	o->mem = 1;
	if (!(o->f = open_memstream(data, len))) {
		errf(e, "cannot write to memory: %s", strerror(errno));
		release(o);
		return NULL;
	}
	return o;
}

Output *output_open(const char *path, int compress, Err *e)
{
	Output *o = xcalloc(1, sizeof *o);
	size_t n;
	int fd;

	struct stat st;
	if (!path || !strcmp(path, "-")) {
		o->f = stdout;
		o->path = xstrdup("<stdout>");
	} else if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		/* a device or a FIFO: written in place, as sort -o and gzip do;
		 * a rename would replace it with a regular file */
		o->path = xstrdup(path);
		o->direct = 1;
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
			errf(e, "cannot open '%s': %s", path, strerror(errno));
			if (fd >= 0)
				close(fd);
			goto fail;
		}
	} else {
		o->path = xstrdup(path);
		o->tmp = xmalloc(n = strlen(path) + 32);
		snprintf(o->tmp, n, "%s.tmp.%ld", path, (long)getpid());
		/* tracked before it exists, so no signal can orphan it */
		if (swap(NULL, o->tmp) < 0) {
			errf(e, "cannot create '%s': %s", path, strerror(EMFILE));
			goto fail;
		}
		fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
			errf(e, "cannot create '%s': %s", path, strerror(errno));
			if (fd >= 0) {
				close(fd);
				unlink(o->tmp);
			}
			goto fail;
		}
	}
	if (compress) {
		o->cs = ZSTD_createCStream();
		if (!o->cs || ZSTD_isError(ZSTD_CCtx_setParameter(o->cs,
		    ZSTD_c_compressionLevel, 3)) || ZSTD_isError(
		    ZSTD_CCtx_setParameter(o->cs, ZSTD_c_checksumFlag, 1))) {
			errf(e, "'%s': cannot create zstd compressor", o->path);
			output_abort(o);
			return NULL;
		}
		o->zcap = ZSTD_CStreamOutSize();
		o->zbuf = xmalloc(o->zcap);
	}
	return o;
fail:
	release(o);
	return NULL;
}

static int wrerr(Output *o, Err *e)
{
	if (!o->err)
		o->err = errno ? errno : EIO;
	return errf(e, "cannot write '%s': %s", o->path, strerror(o->err));
}

static int put(Output *o, const void *buf, size_t n, Err *e)
{
	if (o->err)
		return wrerr(o, e);
	errno = 0;
	if (n && fwrite(buf, 1, n, o->f) != n)
		return wrerr(o, e);
	return 0;
}

/* Feed n bytes to the compressor, writing what it produces; with
 * ZSTD_e_end, loop until the frame is complete. */
static int compress(Output *o, const void *buf, size_t n,
    ZSTD_EndDirective end, Err *e)
{
	ZSTD_inBuffer in = { buf, n, 0 };
	size_t r;

	do {
		ZSTD_outBuffer out = { o->zbuf, o->zcap, 0 };

		r = ZSTD_compressStream2(o->cs, &out, &in, end);
		if (ZSTD_isError(r))
			return errf(e, "'%s': zstd compression failed: %s",
			    o->path, ZSTD_getErrorName(r));
		if (put(o, o->zbuf, out.pos, e) < 0)
			return -1;
	} while (end == ZSTD_e_end ? r != 0 : in.pos < in.size);
	return 0;
}

int output_printf(Output *o, Err *e, const char *fmt, ...)
{
	char small[512], *buf = small;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return errf(e, "cannot format output");
	if ((size_t)n >= sizeof small) {
		buf = xmalloc((size_t)n + 1);
		va_start(ap, fmt);
		vsnprintf(buf, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	int rc = output_write(o, buf, (size_t)n, e);
	if (buf != small)
		free(buf);
	return rc;
}

int output_write(Output *o, const void *buf, size_t n, Err *e)
{
	if (o->cs)
		return n ? compress(o, buf, n, ZSTD_e_continue, e) : 0;
	return put(o, buf, n, e);
}

int output_commit(Output *o, Err *e)
{
	int rc = 0;

	if (o->cs)
		rc = compress(o, NULL, 0, ZSTD_e_end, e);
	errno = 0;
	if (rc == 0 && (fflush(o->f) != 0 || ferror(o->f)))
		rc = wrerr(o, e);
	if ((o->mem || o->direct) && fclose(o->f) != 0 && rc == 0)
		rc = wrerr(o, e);
	if (!o->tmp) {
		release(o);
		return rc;
	}
	errno = 0;
	if (fclose(o->f) != 0 && rc == 0)
		rc = wrerr(o, e);
	if (rc == 0 && rename(o->tmp, o->path) != 0)
		rc = errf(e, "cannot rename '%s' to '%s': %s", o->tmp, o->path,
		    strerror(errno));
	if (rc != 0)
		unlink(o->tmp);
	release(o);
	return rc;
}

void output_abort(Output *o)
{
	if (!o)
		return;
	if (o->tmp) {
		if (o->f)
			fclose(o->f);
		unlink(o->tmp);
	} else if ((o->mem || o->direct) && o->f) {
		fclose(o->f);
	}
	release(o);
}

uint64_t fnv1a(const void *data, size_t n)
{
	const uint8_t *b = data;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}
