/* yio: YAML in and out through libyaml's event API.
 *
 * Reading builds small trees (Val) from events, one node at a time: a whole
 * document for model and machine files, one record for stage files, so a
 * stage file of any length is read in constant memory. Every Val carries
 * its mark (line and column, counting from 1) for error messages.
 * Anchors, aliases and tags are rejected. Duplicate map keys are rejected.
 *
 * Writing wraps a libyaml emitter whose bytes go to an Output (lib/base/io.h).
 * The emitter is set to unlimited width so a flow mapping (one record)
 * is always one line. Errors latch: check yw_close's result.
 */
#ifndef AMP_YIO_H
#define AMP_YIO_H

#include <stdint.h>
#include <yaml.h>

#include "base/diag.h"
#include "base/io.h"

typedef enum { VAL_SCALAR, VAL_SEQ, VAL_MAP } ValKind;

typedef struct Val Val;
struct Val {
	ValKind kind;
	long line, col;
	char *s;        /* scalar text */
	int n;          /* seq: items; map: pairs */
	Val *items;     /* seq: n items; map: 2n (key, value) alternating */
};

typedef struct Arena Arena;

typedef struct {
	yaml_parser_t parser;
	Input *in;
	const char *name;
	Arena *arena;
	yaml_event_t ev;
	int have;       /* ev holds a peeked event */
} YReader;

int yr_open(YReader *r, const char *path, Err *e);  /* through DOCUMENT_START */
int yr_open_input(YReader *r, Input *in, Err *e);   /* takes over in; NULL in: -1 */
void yr_close(YReader *r);
void yr_reset(YReader *r);            /* free Vals read so far */
/* The next node, whole. */
int yr_node(YReader *r, Val **out, Err *e);
/* Structural helpers for stage files. */
int yr_expect(YReader *r, yaml_event_type_t t, const char *what, Err *e);
int yr_peek_end(YReader *r, yaml_event_type_t t, Err *e); /* 1 if next is t (consumed) */
int yr_key(YReader *r, const char *key, Err *e);   /* the next map key is key */
int yr_end(YReader *r, Err *e);       /* MAPPING_END, DOCUMENT_END, STREAM_END */

/* Access with marks. All return 0 ok, -1 with a "file:line:col: " error. */
const Val *map_get(const Val *m, const char *key);
int map_keys(const char *file, const Val *m, const char *const *allowed, Err *e);
int map_need(const char *file, const Val *m, const char *key, const Val **v, Err *e);
int val_err(const char *file, const Val *v, Err *e, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int val_str(const char *file, const Val *v, const char **s, Err *e);
int val_int(const char *file, const Val *v, int64_t lo, int64_t hi, int64_t *out, Err *e);
int val_f64(const char *file, const Val *v, double *out, Err *e);
int val_bool(const char *file, const Val *v, int *out, Err *e);  /* true or false */
/* A flow sequence of integers, at most max items. */
int val_ints(const char *file, const Val *v, int max, int64_t lo, int64_t hi,
	     int64_t *out, int *n, Err *e);
/* map_need + val_int / val_str in one call. */
int get_int(const char *file, const Val *m, const char *key, int64_t lo, int64_t hi,
	    int64_t *out, Err *e);
int get_str(const char *file, const Val *m, const char *key, const char **s, Err *e);

typedef struct {
	yaml_emitter_t em;
	Output *out;
	int failed;
	Err err;
} YWriter;

int yw_open(YWriter *w, Output *out, Err *e);
int yw_close(YWriter *w, Err *e);     /* ends the document; -1 if anything failed */
void yw_map(YWriter *w, int flow);
void yw_seq(YWriter *w, int flow);
void yw_end_map(YWriter *w);
void yw_end_seq(YWriter *w);
void yw_str(YWriter *w, const char *s);
void yw_int(YWriter *w, int64_t v);
void yw_f64(YWriter *w, double v);    /* shortest text that reads back exactly */
void yw_kstr(YWriter *w, const char *k, const char *s);
void yw_kint(YWriter *w, const char *k, int64_t v);
void yw_kbool(YWriter *w, const char *k, int v);
void yw_kints(YWriter *w, const char *k, int n, const int64_t *v);

#endif
