#include "base/yio.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/num.h"

/* A bump allocator for Vals and their strings; reset per record. */
struct Arena {
	char *buf;
	size_t len, cap;
	struct Arena *next;     /* older, full blocks */
};

static void *arena_alloc(Arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (a->len + n > a->cap) {
		Arena *old = xmalloc(sizeof *old);
		size_t cap = n > 65536 ? n : 65536;
		*old = *a;
		a->next = old;
		a->buf = xmalloc(cap);
		a->len = 0;
		a->cap = cap;
	}
	void *p = a->buf + a->len;
	a->len += n;
	return p;
}

static void arena_free_old(Arena *a)
{
	for (Arena *b = a->next, *nx; b; b = nx) {
		nx = b->next;
		free(b->buf);
		free(b);
	}
	a->next = NULL;
}

static Err io_err;      /* filled by the read handler */
static int io_failed;

static int read_handler(void *data, unsigned char *buf, size_t size, size_t *got)
{
	ssize_t n = input_read(data, buf, size, &io_err);
	if (n < 0) {
		io_failed = 1;
		return 0;
	}
	*got = (size_t)n;
	return 1;
}

static int parse_err(YReader *r, Err *e)
{
	yaml_parser_t *p = &r->parser;

	if (io_failed)
		return errf(e, "%s", io_err.msg);
	if (p->context)
		return err_at(e, r->name, (long)p->problem_mark.line + 1,
			      (long)p->problem_mark.column + 1, "%s %s",
			      p->problem, p->context);
	return err_at(e, r->name, (long)p->problem_mark.line + 1,
		      (long)p->problem_mark.column + 1, "%s",
		      p->problem ? p->problem : "malformed YAML");
}

static int next(YReader *r, Err *e)
{
	if (r->have) {
		r->have = 0;
		return 0;
	}
	yaml_event_delete(&r->ev);
	if (!yaml_parser_parse(&r->parser, &r->ev)) {
		memset(&r->ev, 0, sizeof r->ev);
		return parse_err(r, e);
	}
	return 0;
}

int yr_open(YReader *r, const char *path, Err *e)
{
	return yr_open_input(r, input_open(path, e), e);
}

/* in NULL (its opening failed, e says why): -1 with r closed. */
int yr_open_input(YReader *r, Input *in, Err *e)
{
	memset(r, 0, sizeof *r);
	if (!in)
		return -1;
	r->in = in;
	r->name = input_name(r->in);
	r->arena = xcalloc(1, sizeof *r->arena);
	io_failed = 0;
	yaml_parser_initialize(&r->parser);
	yaml_parser_set_input(&r->parser, read_handler, r->in);
	if (yr_expect(r, YAML_STREAM_START_EVENT, "a YAML stream", e) || next(r, e))
		return -1;
	/* Nothing at all (a pipe whose writer failed gives this): one plain
	 * line instead of a YAML error at 1:1. */
	if (r->ev.type == YAML_STREAM_END_EVENT)
		return strcmp(r->name, "<stdin>") ? errf(e, "%s: empty input: no YAML document", r->name)
						   : errf(e, "%s: empty input: the previous stage failed?", r->name);
	r->have = 1;
	if (yr_expect(r, YAML_DOCUMENT_START_EVENT, "a YAML document", e))
		return -1;
	return 0;
}

void yr_close(YReader *r)
{
	if (!r->arena)
		return;
	yaml_event_delete(&r->ev);
	yaml_parser_delete(&r->parser);
	input_close(r->in);
	arena_free_old(r->arena);
	free(r->arena->buf);
	free(r->arena);
	r->arena = NULL;
}

void yr_reset(YReader *r)
{
	arena_free_old(r->arena);
	r->arena->len = 0;
}

static const char *event_name(yaml_event_type_t t)
{
	switch (t) {
	case YAML_STREAM_END_EVENT: return "end of input";
	case YAML_DOCUMENT_START_EVENT: return "a document";
	case YAML_DOCUMENT_END_EVENT: return "end of document";
	case YAML_SCALAR_EVENT: return "a scalar";
	case YAML_SEQUENCE_START_EVENT: return "a sequence";
	case YAML_SEQUENCE_END_EVENT: return "end of sequence";
	case YAML_MAPPING_START_EVENT: return "a mapping";
	case YAML_MAPPING_END_EVENT: return "end of mapping";
	case YAML_ALIAS_EVENT: return "an alias";
	default: return "nothing";
	}
}

static int here(YReader *r, Err *e, const char *fmt, const char *a, const char *b)
{
	return err_at(e, r->name, (long)r->ev.start_mark.line + 1,
		      (long)r->ev.start_mark.column + 1, fmt, a, b);
}

int yr_expect(YReader *r, yaml_event_type_t t, const char *what, Err *e)
{
	if (next(r, e))
		return -1;
	if (r->ev.type != t)
		return here(r, e, "expected %s, found %s", what, event_name(r->ev.type));
	return 0;
}

int yr_peek_end(YReader *r, yaml_event_type_t t, Err *e)
{
	if (next(r, e))
		return -1;
	if (r->ev.type == t)
		return 1;
	r->have = 1;
	return 0;
}

int yr_key(YReader *r, const char *key, Err *e)
{
	if (next(r, e))
		return -1;
	if (r->ev.type != YAML_SCALAR_EVENT)
		return here(r, e, "expected key '%s', found %s", key, event_name(r->ev.type));
	if (strcmp((char *)r->ev.data.scalar.value, key) != 0)
		return here(r, e, "expected key '%s', found '%s'", key,
			    (char *)r->ev.data.scalar.value);
	return 0;
}

int yr_end(YReader *r, Err *e)
{
	if (yr_expect(r, YAML_MAPPING_END_EVENT, "end of the top-level mapping", e) ||
	    yr_expect(r, YAML_DOCUMENT_END_EVENT, "end of document", e) ||
	    yr_expect(r, YAML_STREAM_END_EVENT, "end of input (one document only)", e))
		return -1;
	return 0;
}

static char *astrdup(Arena *a, const char *s, size_t n)
{
	char *d = arena_alloc(a, n + 1);
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

/* Keys of a mapping in key order, then document order. */
static _Thread_local const Val *key_base;
static int by_key(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b, c = strcmp(key_base[x].s, key_base[y].s);
	return c ? c : (x > y) - (x < y);
}

/* The first key (in document order) that repeats an earlier one, or -1;
 * O(n log n) over the n/2 keys of items. */
static int first_duplicate(const Val *items, int n)
{
	int nk = n / 2, *ix = xmalloc((size_t)(nk ? nk : 1) * sizeof *ix), dup = -1;
	for (int i = 0; i < nk; i++)
		ix[i] = 2 * i;
	key_base = items;
	qsort(ix, (size_t)nk, sizeof *ix, by_key);
	for (int i = 1; i < nk; i++)
		if (strcmp(items[ix[i]].s, items[ix[i - 1]].s) == 0 && (dup < 0 || ix[i] < dup))
			dup = ix[i];
	free(ix);
	return dup;
}

#define MAX_DEPTH 64    /* nesting of sequences and mappings in any input */

/* Builds the node whose first event is r->ev (already read). */
static int build(YReader *r, Val *v, int depth, Err *e)
{
	yaml_event_t *ev = &r->ev;
	Val *items = NULL;
	int n = 0, cap = 0;
	yaml_event_type_t end;

	memset(v, 0, sizeof *v);
	v->line = (long)ev->start_mark.line + 1;
	v->col = (long)ev->start_mark.column + 1;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (ev->data.scalar.anchor || (ev->data.scalar.tag && !ev->data.scalar.plain_implicit &&
					       !ev->data.scalar.quoted_implicit))
			return val_err(r->name, v, e, "anchors and tags are not supported");
		v->kind = VAL_SCALAR;
		v->s = astrdup(r->arena, (char *)ev->data.scalar.value, ev->data.scalar.length);
		return 0;
	case YAML_SEQUENCE_START_EVENT:
		v->kind = VAL_SEQ;
		end = YAML_SEQUENCE_END_EVENT;
		if (ev->data.sequence_start.anchor)
			return val_err(r->name, v, e, "anchors are not supported");
		break;
	case YAML_MAPPING_START_EVENT:
		v->kind = VAL_MAP;
		end = YAML_MAPPING_END_EVENT;
		if (ev->data.mapping_start.anchor)
			return val_err(r->name, v, e, "anchors are not supported");
		break;
	case YAML_ALIAS_EVENT:
		return val_err(r->name, v, e, "aliases are not supported");
	default:
		return val_err(r->name, v, e, "expected a value, found %s", event_name(ev->type));
	}
	if (depth >= MAX_DEPTH)
		return val_err(r->name, v, e, "nesting deeper than %d levels", MAX_DEPTH);
	for (;;) {
		if (next(r, e))
			return -1;
		if (ev->type == end)
			break;
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			Val *ni = arena_alloc(r->arena, (size_t)cap * sizeof *ni);
			if (n)
				memcpy(ni, items, (size_t)n * sizeof *ni);
			items = ni;
		}
		if (build(r, &items[n], depth + 1, e))
			return -1;
		if (v->kind == VAL_MAP && n % 2 == 0 && items[n].kind != VAL_SCALAR)
			return val_err(r->name, &items[n], e, "expected a scalar key");
		n++;
	}
	int d = v->kind == VAL_MAP ? first_duplicate(items, n) : -1;
	if (d >= 0)
		return val_err(r->name, &items[d], e, "duplicate key '%s'", items[d].s);
	v->items = items;
	v->n = v->kind == VAL_MAP ? n / 2 : n;
	return 0;
}

int yr_node(YReader *r, Val **out, Err *e)
{
	Val *v = arena_alloc(r->arena, sizeof *v);

	if (next(r, e) || build(r, v, 0, e))
		return -1;
	*out = v;
	return 0;
}

/* ---- access ---- */

int val_err(const char *file, const Val *v, Err *e, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return err_at(e, file, v->line, v->col, "%s", msg);
}

const Val *map_get(const Val *m, const char *key)
{
	if (!m || m->kind != VAL_MAP)
		return NULL;
	for (int i = 0; i < m->n; i++)
		if (strcmp(m->items[2 * i].s, key) == 0)
			return &m->items[2 * i + 1];
	return NULL;
}

int map_keys(const char *file, const Val *m, const char *const *allowed, Err *e)
{
	if (m->kind != VAL_MAP)
		return val_err(file, m, e, "expected a mapping");
	for (int i = 0; i < m->n; i++) {
		const Val *k = &m->items[2 * i];
		int ok = 0;
		for (const char *const *a = allowed; *a; a++)
			if (strcmp(*a, k->s) == 0)
				ok = 1;
		if (!ok)
			return val_err(file, k, e, "unknown key '%s'", k->s);
	}
	return 0;
}

int map_need(const char *file, const Val *m, const char *key, const Val **v, Err *e)
{
	*v = map_get(m, key);
	if (!*v)
		return val_err(file, m, e, "missing key '%s'", key);
	return 0;
}

int val_str(const char *file, const Val *v, const char **s, Err *e)
{
	if (v->kind != VAL_SCALAR)
		return val_err(file, v, e, "expected a name or string");
	*s = v->s;
	return 0;
}

int val_bool(const char *file, const Val *v, int *out, Err *e)
{
	if (v->kind == VAL_SCALAR && (!strcmp(v->s, "true") || !strcmp(v->s, "false"))) {
		*out = !strcmp(v->s, "true");
		return 0;
	}
	return val_err(file, v, e, "expected true or false");
}

int val_int(const char *file, const Val *v, int64_t lo, int64_t hi, int64_t *out, Err *e)
{
	if (v->kind != VAL_SCALAR || parse_i64(v->s, out))
		return val_err(file, v, e, "expected an integer, found '%s'",
			       v->kind == VAL_SCALAR ? v->s : v->kind == VAL_SEQ ? "[...]" : "{...}");
	if (*out < lo && lo == 0)
		return val_err(file, v, e, "expected a non-negative integer, found %" PRId64, *out);
	if (*out < lo)
		return val_err(file, v, e, "expected an integer of at least %" PRId64
			       ", found %" PRId64, lo, *out);
	if (*out > hi)
		return val_err(file, v, e, "integer %" PRId64 " is larger than %" PRId64, *out, hi);
	return 0;
}

int val_f64(const char *file, const Val *v, double *out, Err *e)
{
	if (v->kind != VAL_SCALAR || parse_f64(v->s, out))
		return val_err(file, v, e, "expected a number, found '%s'",
			       v->kind == VAL_SCALAR ? v->s : "a collection");
	return 0;
}

int val_ints(const char *file, const Val *v, int max, int64_t lo, int64_t hi,
	     int64_t *out, int *n, Err *e)
{
	if (v->kind != VAL_SEQ)
		return val_err(file, v, e, "expected a list of integers");
	if (v->n > max)
		return val_err(file, v, e, "expected at most %d integers, found %d", max, v->n);
	for (int i = 0; i < v->n; i++)
		if (val_int(file, &v->items[i], lo, hi, &out[i], e))
			return -1;
	*n = v->n;
	return 0;
}

int get_int(const char *file, const Val *m, const char *key, int64_t lo, int64_t hi,
	    int64_t *out, Err *e)
{
	const Val *v;
	return map_need(file, m, key, &v, e) || val_int(file, v, lo, hi, out, e) ? -1 : 0;
}

int get_str(const char *file, const Val *m, const char *key, const char **s, Err *e)
{
	const Val *v;
	return map_need(file, m, key, &v, e) || val_str(file, v, s, e) ? -1 : 0;
}

/* ---- writing ---- */

static int write_handler(void *data, unsigned char *buf, size_t size)
{
	YWriter *w = data;
	if (output_write(w->out, buf, size, &w->err)) {
		w->failed = 1;
		return 0;
	}
	return 1;
}

static void emit(YWriter *w, yaml_event_t *ev)
{
	if (w->failed) {
		yaml_event_delete(ev);
		return;
	}
	/* yaml_emitter_emit takes ownership of ev, even on failure. */
	if (!yaml_emitter_emit(&w->em, ev) && !w->failed) {
		w->failed = 1;
		errf(&w->err, "cannot emit YAML: %s",
		     w->em.problem ? w->em.problem : "unknown error");
	}
}

int yw_open(YWriter *w, Output *out, Err *e)
{
	yaml_event_t ev;

	memset(w, 0, sizeof *w);
	w->out = out;
	if (!yaml_emitter_initialize(&w->em))
		return errf(e, "cannot initialise the YAML emitter");
	yaml_emitter_set_output(&w->em, write_handler, w);
	yaml_emitter_set_width(&w->em, -1);
	yaml_emitter_set_unicode(&w->em, 1);
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	emit(w, &ev);
	yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
	emit(w, &ev);
	return 0;
}

int yw_close(YWriter *w, Err *e)
{
	yaml_event_t ev;

	yaml_document_end_event_initialize(&ev, 1);
	emit(w, &ev);
	yaml_stream_end_event_initialize(&ev);
	emit(w, &ev);
	if (!w->failed && !yaml_emitter_flush(&w->em) && !w->failed) {
		w->failed = 1;
		errf(&w->err, "cannot flush YAML output");
	}
	yaml_emitter_delete(&w->em);
	if (w->failed) {
		*e = w->err;
		return -1;
	}
	return 0;
}

void yw_map(YWriter *w, int flow)
{
	yaml_event_t ev;
	yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
		flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
	emit(w, &ev);
}

void yw_seq(YWriter *w, int flow)
{
	yaml_event_t ev;
	yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
		flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
	emit(w, &ev);
}

void yw_end_map(YWriter *w)
{
	yaml_event_t ev;
	yaml_mapping_end_event_initialize(&ev);
	emit(w, &ev);
}

void yw_end_seq(YWriter *w)
{
	yaml_event_t ev;
	yaml_sequence_end_event_initialize(&ev);
	emit(w, &ev);
}

static void scalar(YWriter *w, const char *s, yaml_scalar_style_t style)
{
	yaml_event_t ev;
	yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s),
				     1, 1, style);
	emit(w, &ev);
}

void yw_str(YWriter *w, const char *s)
{
	/* A name that reads as a number, boolean or null is quoted. */
	int64_t i;
	double d;
	int plain = parse_i64(s, &i) && parse_f64(s, &d) && *s &&
		strcmp(s, "null") && strcmp(s, "true") && strcmp(s, "false") && strcmp(s, "~");
	scalar(w, s, plain ? YAML_ANY_SCALAR_STYLE : YAML_SINGLE_QUOTED_SCALAR_STYLE);
}

void yw_int(YWriter *w, int64_t v)
{
	char b[32];
	snprintf(b, sizeof b, "%" PRId64, v);
	scalar(w, b, YAML_PLAIN_SCALAR_STYLE);
}

void yw_f64(YWriter *w, double v)
{
	char b[40];
	for (int p = 1; p <= 17; p++) {
		snprintf(b, sizeof b, "%.*g", p, v);
		if (strtod(b, NULL) == v)
			break;
	}
	scalar(w, b, YAML_PLAIN_SCALAR_STYLE);
}

void yw_kstr(YWriter *w, const char *k, const char *s)
{
	scalar(w, k, YAML_PLAIN_SCALAR_STYLE);
	yw_str(w, s);
}

void yw_kint(YWriter *w, const char *k, int64_t v)
{
	scalar(w, k, YAML_PLAIN_SCALAR_STYLE);
	yw_int(w, v);
}

void yw_kbool(YWriter *w, const char *k, int v)
{
	scalar(w, k, YAML_PLAIN_SCALAR_STYLE);
	scalar(w, v ? "true" : "false", YAML_PLAIN_SCALAR_STYLE);
}

void yw_kints(YWriter *w, const char *k, int n, const int64_t *v)
{
	scalar(w, k, YAML_PLAIN_SCALAR_STYLE);
	yw_seq(w, 1);
	for (int i = 0; i < n; i++)
		yw_int(w, v[i]);
	yw_end_seq(w);
}
