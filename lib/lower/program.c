#include "lower/program.h"
#include "stage/stage_io.h"

#include <stdlib.h>
#include <string.h>

#include <zstd.h>

enum { SEC_STAGE = 1, SEC_ROWS = 2, SEC_TABLE = 3, SEC_HASH = 4, SEC_MODEL = 5, SEC_SCALES = 6, NSEC = 6 };

enum { OP_ROW = 0x52, OP_SEND = 1, OP_SEND_LONG = 2, OP_RECV = 3, OP_RECV_AT = 4,
       OP_SEND_MOVING = 5, OP_SEND_MOVING_LONG = 6 };

/* ---- a growable byte buffer, little-endian ---- */

typedef struct {
	uint8_t *b;
	size_t n, cap;
} Buf;

static inline void grow(Buf *b, size_t more)
{
	if (b->n + more > b->cap) {
		b->cap = (b->n + more) * 2 + 64;
		b->b = xrealloc(b->b, b->cap);
	}
}

static void u32(Buf *b, uint64_t v)
{
	grow(b, 4);
	for (int i = 0; i < 4; i++)
		b->b[b->n++] = (uint8_t)(v >> (8 * i));
}
static void u64(Buf *b, uint64_t v) { u32(b, v & 0xffffffffu); u32(b, v >> 32); }

static uint64_t get(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ---- encoding ---- */

/* Writers into room already made (grow). */
static inline void p8(Buf *b, unsigned v) { b->b[b->n++] = (uint8_t)v; }
static inline void p32(Buf *b, uint64_t v)
{
	uint8_t *q = b->b + b->n;
	q[0] = (uint8_t)v, q[1] = (uint8_t)(v >> 8), q[2] = (uint8_t)(v >> 16), q[3] = (uint8_t)(v >> 24);
	b->n += 4;
}

/* Encodes a row with addresses masked; appends its addresses to three
 * streams: SEND source addresses, RECV peers, RECV addresses. Room for
 * each instruction is made before it is written: at most 12 bytes and a
 * word per further iteration on the row, a word per iteration on a
 * stream. */
static void encode(const Instr *ins, int n, Buf *row, Buf pat[3])
{
	int64_t prev_end = -1;
	row->n = 0;
	grow(row, 8);
	p8(row, OP_ROW), p8(row, 0), p8(row, 0), p8(row, 0), p32(row, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		const Instr *x = &ins[i];
		if (x->kind == I_SEND) {
			int mv = x->iters > 1;
			unsigned it = mv ? (unsigned)x->iters : 0;
			int64_t words = x->iters > 1 ? x->iters : 1;
			grow(row, (size_t)(12 + 4 * words));
			grow(&pat[0], (size_t)(4 * words));
			if (x->len <= 256) {
				p8(row, mv ? OP_SEND_MOVING : OP_SEND), p8(row, (unsigned)(x->len - 1));
				p8(row, it & 0xff), p8(row, it >> 8), p32(row, 0);
			} else {
				p8(row, mv ? OP_SEND_MOVING_LONG : OP_SEND_LONG), p8(row, 0);
				p8(row, it & 0xff), p8(row, it >> 8), p32(row, 0);
				p32(row, (uint64_t)x->len);
			}
			for (int64_t k = 1; k < x->iters; k++)
				p32(row, 0);            /* the slots of the other iterations' addresses */
			for (int64_t k = 0; k < (mv ? x->iters : 1); k++)
				p32(&pat[0], (uint64_t)(x->addr + k * x->istride));
		} else {
			int at = x->addr != prev_end;
			grow(row, 12), grow(&pat[1], 4), grow(&pat[2], 4);
			p8(row, at ? OP_RECV_AT : OP_RECV), p8(row, 0), p8(row, 0), p8(row, 0);
			p32(row, (uint64_t)x->len);
			p32(&pat[1], (uint64_t)x->peer);
			if (at) {
				p32(row, 0);
				p32(&pat[2], (uint64_t)x->addr);
			}
			prev_end = x->addr + x->len;
		}
	}
	grow(row, 8);
	while (row->n % 8)
		p8(row, 0);
}

typedef struct {
	Program *p;
	int phase;
	Buf row, pat[3], all;
	int *slot;              /* hash table of row ids */
	int nslot;
	Err *e;
	int failed;
} Builder;

/* The row table's hash (it places rows in the table only; a row's id is
 * its first appearance): eight bytes a step, rows being whole words. */
static uint64_t hash(const uint8_t *b, size_t n)
{
	uint64_t h = 1469598103934665603u ^ (uint64_t)n, w;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x9E3779B97F4A7C15u;
		h ^= h >> 29;
	}
	for (; i < n; i++)
		h = (h ^ b[i]) * 1099511628211u;
	return h;
}

static int add_row(void *ctx, int64_t t, const Instr *ins, int n)
{
	Builder *b = ctx;
	Program *p = b->p;
	size_t before = b->all.n;

	for (int k = 0; k < 3; k++)
		b->pat[k].n = 0;
	encode(ins, n, &b->row, b->pat);
	if ((int64_t)b->row.n != row_bytes(ins, n))
		return errf(b->e, "tile %lld, phase %d: encoding of %zu bytes disagrees with the "
			    "footprint model (%lld bytes)", (long long)t, b->phase, b->row.n,
			    (long long)row_bytes(ins, n));
	if (p->nrow * 2 >= b->nslot) {         /* rehash */
		int ns = b->nslot ? 2 * b->nslot : 1024;
		int *slot = xmalloc((size_t)ns * sizeof *slot);
		for (int i = 0; i < ns; i++)
			slot[i] = -1;
		for (int r = 0; r < p->nrow; r++) {
			uint64_t h = hash(p->row[r], (size_t)p->row_len[r]) % (uint64_t)ns;
			while (slot[h] >= 0)
				h = (h + 1) % (uint64_t)ns;
			slot[h] = r;
		}
		free(b->slot);
		b->slot = slot;
		b->nslot = ns;
	}
	uint64_t h = hash(b->row.b, b->row.n) % (uint64_t)b->nslot;
	int id = -1;
	for (; b->slot[h] >= 0; h = (h + 1) % (uint64_t)b->nslot) {
		int r = b->slot[h];
		if ((size_t)p->row_len[r] == b->row.n && !memcmp(p->row[r], b->row.b, b->row.n)) {
			id = r;
			break;
		}
	}
	if (id < 0) {
		if ((p->nrow & (p->nrow - 1)) == 0) {  /* room doubles at each power of two */
			size_t cap = (size_t)(p->nrow ? 2 * p->nrow : 1);
			p->row = xrealloc(p->row, cap * sizeof *p->row);
			p->row_len = xrealloc(p->row_len, cap * sizeof *p->row_len);
		}
		id = p->nrow++;
		p->row[id] = xmalloc(b->row.n);
		memcpy(p->row[id], b->row.b, b->row.n);
		p->row_len[id] = (int64_t)b->row.n;
		b->slot[h] = id;
	}
	if ((p->nent & (p->nent - 1)) == 0)
		p->ent = xrealloc(p->ent, (size_t)(p->nent ? 2 * p->nent : 1) * sizeof *p->ent);
	Entry en = { t, b->phase, id, { 0, 0, 0 }, (int64_t)(before / 4) };
	for (int k = 0; k < 3; k++) {
		en.npatch[k] = (int)(b->pat[k].n / 4);
		if (!b->pat[k].n)
			continue;
		grow(&b->all, b->pat[k].n);
		memcpy(b->all.b + b->all.n, b->pat[k].b, b->pat[k].n);
		b->all.n += b->pat[k].n;
	}
	p->ent[p->nent++] = en;
	return 0;
}

int program_build(const Plan *pl, Program *p, Err *e)
{
	Builder b;
	Output *o;
	char *text = NULL;
	size_t len = 0;

	memset(p, 0, sizeof *p);
	memset(&b, 0, sizeof b);
	b.p = p;
	b.e = e;
	for (int ph = 0; ph < pl->nph; ph++) {
		b.phase = ph;
		if (phase_rows(pl, ph, add_row, &b)) {
			free(b.row.b), free(b.all.b), free(b.slot);
			for (int k = 0; k < 3; k++)
				free(b.pat[k].b);
			program_free(p);
			return -1;
		}
	}
	p->patches = (uint32_t *)b.all.b;
	p->npatches = (int64_t)(b.all.n / 4);
	free(b.row.b);
	free(b.slot);
	for (int k = 0; k < 3; k++)
		free(b.pat[k].b);
	/* the patches were written little-endian; decode them in place */
	for (int64_t i = 0; i < p->npatches; i++)
		p->patches[i] = (uint32_t)get((uint8_t *)&p->patches[i], 4);
	if (!(o = output_open_mem(&text, &len, e)))
		return -1;
	if (stage_write(pl, o, e)) {
		output_abort(o);
		free(text);
		return -1;
	}
	if (output_commit(o, e)) {
		free(text);
		return -1;
	}
	p->stage = text;
	p->stage_len = len;
	return 0;
}

void program_free(Program *p)
{
	for (int r = 0; r < p->nrow; r++)
		free(p->row[r]);
	free(p->row);
	free(p->row_len);
	free(p->ent);
	free(p->patches);
	free(p->stage);
	free(p->name);
	free(p->model);
	free(p->scales);
	memset(p, 0, sizeof *p);
}

/* A stream of values as nested affine sequences: each is a base and up to
 * SEQ_LOOPS loops of (count, step), innermost first, found by folding
 * runs with a constant difference, then runs of alike runs, and so on. */
#define SEQ_LOOPS 4

typedef struct {
	uint32_t base;
	int nloop;
	uint32_t count[SEQ_LOOPS], step[SEQ_LOOPS];
} Seq;

static int seq_alike(const Seq *a, const Seq *b)
{
	if (a->nloop != b->nloop)
		return 0;
	for (int l = 0; l < a->nloop; l++)
		if (a->count[l] != b->count[l] || a->step[l] != b->step[l])
			return 0;
	return 1;
}

static int seq_fold(Seq *q, int n)
{
	int out = 0;
	for (int i = 0; i < n;) {
		int j = i + 1;
		if (j < n && q[i].nloop < SEQ_LOOPS && seq_alike(&q[i], &q[j])) {
			uint32_t d = q[j].base - q[i].base;
			while (j + 1 < n && seq_alike(&q[i], &q[j + 1]) && q[j + 1].base - q[j].base == d)
				j++;
			Seq f = q[i];
			f.count[f.nloop] = (uint32_t)(j - i + 1);
			f.step[f.nloop] = d;
			f.nloop++;
			q[out++] = f;
			i = j + 1;
		} else {
			q[out++] = q[i++];
		}
	}
	return out;
}

static void write_seq(Buf *b, const uint32_t *v, int n)
{
	Seq *q = xmalloc((size_t)(n ? n : 1) * sizeof *q);
	for (int i = 0; i < n; i++)
		q[i] = (Seq){ v[i], 0, { 0 }, { 0 } };
	for (int m = n, k; (k = seq_fold(q, m)) < m;)
		m = k, n = k;
	u32(b, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		u32(b, q[i].base);
		u32(b, (uint64_t)q[i].nloop);
		for (int l = 0; l < q[i].nloop; l++)
			u32(b, q[i].count[l]), u32(b, q[i].step[l]);
	}
	free(q);
}

/* Expands one stream of want values; -1 if malformed. */
static int read_seq(const uint8_t **t, const uint8_t *end, uint32_t *out, int want)
{
	const uint8_t *c = *t;
	int got = 0;
	if (end - c < 4)
		return -1;
	uint64_t nseq = get(c, 4);
	c += 4;
	for (uint64_t s = 0; s < nseq; s++) {
		if (end - c < 8)
			return -1;
		uint32_t base = (uint32_t)get(c, 4);
		uint64_t nl = get(c + 4, 4);
		c += 8;
		if (nl > SEQ_LOOPS || (uint64_t)(end - c) < nl * 8)
			return -1;
		uint32_t count[SEQ_LOOPS], step[SEQ_LOOPS], idx[SEQ_LOOPS] = { 0 };
		uint64_t total = 1;
		for (uint64_t l = 0; l < nl; l++, c += 8) {
			count[l] = (uint32_t)get(c, 4);
			step[l] = (uint32_t)get(c + 4, 4);
			total *= count[l] ? count[l] : 0;
		}
		if (total == 0 || got + total > (uint64_t)want)
			return -1;
		for (uint64_t m = 0; m < total; m++) {
			uint32_t v = base;
			for (uint64_t l = 0; l < nl; l++)
				v += idx[l] * step[l];
			out[got++] = v;
			for (uint64_t l = 0; l < nl && ++idx[l] == count[l]; l++)
				idx[l] = 0;
		}
	}
	*t = c;
	return got == want ? 0 : -1;
}

int program_write(const Program *p, Output *out, Err *e)
{
	Buf h = { 0 }, rows = { 0 }, tab = { 0 };
	int rc;

	u32(&rows, (uint64_t)p->nrow);
	for (int r = 0; r < p->nrow; r++) {
		u32(&rows, (uint64_t)p->row_len[r]);
		grow(&rows, (size_t)p->row_len[r]);
		memcpy(rows.b + rows.n, p->row[r], (size_t)p->row_len[r]);
		rows.n += (size_t)p->row_len[r];
	}
	u32(&tab, (uint64_t)p->nent);
	for (int i = 0; i < p->nent; i++) {
		const Entry *en = &p->ent[i];
		const uint32_t *v = p->patches + en->patch;
		u32(&tab, (uint64_t)en->tile), u32(&tab, (uint64_t)en->phase), u32(&tab, (uint64_t)en->row);
		for (int k = 0; k < 3; k++) {
			u32(&tab, (uint64_t)en->npatch[k]);
			write_seq(&tab, v, en->npatch[k]);
			v += en->npatch[k];
		}
	}
	/* ROWS and TABLE are stored as zstd frames: rows repeat with small
	 * differences, which row sharing alone does not remove. */
	Buf zr = { 0 }, zt = { 0 };
	Buf *raw[2] = { &rows, &tab }, *z[2] = { &zr, &zt };
	for (int i = 0; i < 2; i++) {
		size_t cap = ZSTD_compressBound(raw[i]->n), n;
		grow(z[i], cap);
		n = ZSTD_compress(z[i]->b, cap, raw[i]->b, raw[i]->n, 3);
		if (ZSTD_isError(n)) {
			free(rows.b), free(tab.b), free(zr.b), free(zt.b);
			return errf(e, "cannot compress the program: %s", ZSTD_getErrorName(n));
		}
		z[i]->n = n;
	}
	Buf hash = { 0 }, emb[2] = { { 0 }, { 0 } };
	u64(&hash, fnv1a(p->stage, p->stage_len));
	const char *etext[2] = { p->model, p->scales };
	size_t elen[2] = { p->model_len, p->scales_len };
	for (int i = 0; i < 2; i++)             /* MODEL, SCALES: the text's hash, then the text */
		if (etext[i]) {
			u64(&emb[i], fnv1a(etext[i], elen[i]));
			grow(&emb[i], elen[i]);
			memcpy(emb[i].b + emb[i].n, etext[i], elen[i]);
			emb[i].n += elen[i];
		}
	int nsec = 4 + (p->model != NULL) + (p->scales != NULL);
	grow(&h, 16);
	memcpy(h.b, PROGRAM_MAGIC, 8);
	h.n = 8;
	u32(&h, PROGRAM_VERSION);
	u32(&h, (uint64_t)nsec);
	uint64_t off = 16 + (uint64_t)nsec * 24;
	struct { int id, enc; const void *b; size_t n; } sec[NSEC] = {
		{ SEC_STAGE, 0, p->stage, p->stage_len }, { SEC_ROWS, 1, zr.b, zr.n },
		{ SEC_TABLE, 1, zt.b, zt.n }, { SEC_HASH, 0, hash.b, hash.n },
	};
	for (int i = 0, k = 4; i < 2; i++)
		if (etext[i]) {
			sec[k].id = i ? SEC_SCALES : SEC_MODEL, sec[k].enc = 0;
			sec[k].b = emb[i].b, sec[k].n = emb[i].n;
			k++;
		}
	for (int i = 0; i < nsec; i++) {
		u32(&h, (uint64_t)sec[i].id), u32(&h, (uint64_t)sec[i].enc), u64(&h, off), u64(&h, sec[i].n);
		off += sec[i].n;
	}
	rc = output_write(out, h.b, h.n, e);
	for (int i = 0; i < nsec && !rc; i++)
		rc = output_write(out, sec[i].b, sec[i].n, e);
	free(h.b);
	free(hash.b);
	free(emb[0].b);
	free(emb[1].b);
	free(rows.b);
	free(tab.b);
	free(zr.b);
	free(zt.b);
	return rc;
}

/* ---- reading ---- */

static int bad(Err *e, const char *name, const char *what)
{
	return errf(e, "'%s': %s", name, what);
}

static int read_mem(const char *name, const char *data, size_t len, Program *p, Plan *pl, Err *e);

/* The rows and table agree with the STAGE text: the program amp-emit would
 * build from the stage decodes, entry by entry and instruction by
 * instruction, to the same tiles, phases, lengths, addresses and peers. */
static int match_stage(const Program *p, const Plan *pl, Err *e)
{
	Program q;
	int rc = 0;
	if (program_build(pl, &q, e))
		return errf(e, "'%s': the STAGE section does not lower to a program: %s", p->name, e->msg);
	if (q.nent != p->nent)
		rc = errf(e, "'%s': the TABLE has %d (tile, phase) entries, the STAGE's transfers make %d",
			  p->name, p->nent, q.nent);
	for (int i = 0; i < p->nent && !rc; i++) {
		const Entry *a = &p->ent[i], *b = &q.ent[i];
		Instr *x = NULL, *y = NULL;
		int nx = 0, ny = 0;
		if (a->tile != b->tile || a->phase != b->phase) {
			rc = errf(e, "'%s': TABLE entry %d is tile %lld, phase %d; the STAGE's transfers make "
				  "tile %lld, phase %d", p->name, i, (long long)a->tile, a->phase,
				  (long long)b->tile, b->phase);
			break;
		}
		if (program_row(p, i, &x, &nx, e) || program_row(&q, i, &y, &ny, e)) {
			free(x);
			rc = -1;
			break;
		}
		int k = 0;
		while (k < nx && k < ny && x[k].kind == y[k].kind && x[k].len == y[k].len &&
		       x[k].addr == y[k].addr && x[k].peer == y[k].peer && x[k].iters == y[k].iters &&
		       x[k].istride == y[k].istride)
			k++;
		if (k < nx || k < ny)
			rc = errf(e, "'%s': tile %lld, phase %d: instruction %d of its row does not match the "
				  "STAGE's transfers (%s)", p->name, (long long)a->tile, a->phase, k,
				  k >= nx || k >= ny ? "a different count" : x[k].kind != y[k].kind ? "another kind" :
				  x[k].len != y[k].len ? "another length" : x[k].addr != y[k].addr ? "another address" :
				  x[k].peer != y[k].peer ? "another peer" : x[k].iters != y[k].iters ?
				  "another iteration count" : "another address step per iteration");
		free(x);
		free(y);
	}
	program_free(&q);
	return rc;
}

/* tiles x sram_bytes of the machine line of a stage's text, read without
 * parsing the stage (a bound taken before any section is decoded); 0 when
 * the line or a key is missing, which the stage's own reader then names. */
static unsigned long long stage_sram_total(const char *t, size_t n)
{
	static const char key[] = "\nmachine: {";
	const char *end = t + n, *p = t, *line = NULL;
	for (; p + sizeof key - 1 <= end && p < t + 4096; p++)
		if (!memcmp(p, key, sizeof key - 1)) {
			line = p + 1;
			break;
		}
	if (!line)
		return 0;
	const char *eol = memchr(line, '\n', (size_t)(end - line));
	if (!eol)
		return 0;
	unsigned long long v[2] = { 0, 0 };
	static const char *const keys[2] = { " tiles: ", " sram_bytes: " };
	for (int k = 0; k < 2; k++) {
		size_t kl = strlen(keys[k]);
		for (const char *q = line; q + kl < eol; q++)
			if (!memcmp(q, keys[k], kl)) {
				for (q += kl; q < eol && *q >= '0' && *q <= '9' && v[k] < (1ull << 40); q++)
					v[k] = v[k] * 10 + (unsigned long long)(*q - '0');
				break;
			}
	}
	return v[0] * v[1];
}

int program_read(const char *path, Program *p, Plan *pl, Err *e)
{
	char *data;
	size_t len;
	int rc;

	memset(p, 0, sizeof *p);
	if (input_slurp(path, &data, &len, e))
		return -1;
	rc = read_mem(path && strcmp(path, "-") ? path : "<stdin>", data, len, p, pl, e);
	free(data);
	return rc;
}

/* A program in memory (data stays the caller's). */
static int read_mem(const char *name, const char *data, size_t len, Program *p, Plan *pl, Err *e)
{
	const uint8_t *d = (const uint8_t *)data;
	uint8_t *plain[4] = { NULL, NULL, NULL, NULL };
	int rc = -1;

	memset(p, 0, sizeof *p);
	p->name = xstrdup(name);
	if (len < 8 || memcmp(d, PROGRAM_MAGIC, 8)) {
		bad(e, name, "not an amp program (no AMPPROG magic number)");
		goto out;
	}
	if (len < 16) {
		bad(e, name, "truncated program header");
		goto out;
	}
	if (get(d + 8, 4) != PROGRAM_VERSION) {
		errf(e, "'%s': unsupported program version %llu (this amp reads %d)", name,
		     (unsigned long long)get(d + 8, 4), PROGRAM_VERSION);
		goto out;
	}
	uint64_t nsec = get(d + 12, 4), off[7] = { 0 }, size[7] = { 0 }, enc[7] = { 0 };
	if (nsec > 64 || 16 + nsec * 24 > len) {
		bad(e, name, "truncated section table");
		goto out;
	}
	for (uint64_t i = 0; i < nsec; i++) {
		const uint8_t *s = d + 16 + i * 24;
		uint64_t id = get(s, 4), o = get(s + 8, 8), n = get(s + 16, 8);
		if (o > len || n > len - o) {
			bad(e, name, "a section runs past the end of the file");
			goto out;
		}
		if (id >= 1 && id <= 6)
			off[id] = o, size[id] = n, enc[id] = get(s + 4, 4);
	}
	for (int id = 1; id <= 4; id++)
		if (!off[id]) {
			errf(e, "'%s': missing section %s", name, id == SEC_STAGE ? "STAGE" :
			     id == SEC_ROWS ? "ROWS" : id == SEC_TABLE ? "TABLE" : "HASH");
			goto out;
		}
	if (enc[SEC_STAGE] != 0 || enc[SEC_HASH] != 0 || size[SEC_HASH] != 8) {
		bad(e, name, "the STAGE and HASH sections must be raw, HASH 8 bytes");
		goto out;
	}
	if (get(d + off[SEC_HASH], 8) != fnv1a(d + off[SEC_STAGE], size[SEC_STAGE])) {
		bad(e, name, "the STAGE section does not match its hash (the stage text was changed "
		    "or corrupted)");
		goto out;
	}
	for (int id = SEC_MODEL; id <= SEC_SCALES; id++) {      /* optional: a hash, then the text */
		if (!off[id])
			continue;
		const char *what = id == SEC_MODEL ? "MODEL" : "SCALES";
		if (enc[id] != 0 || size[id] < 8 ||
		    get(d + off[id], 8) != fnv1a(d + off[id] + 8, size[id] - 8)) {
			errf(e, "'%s': the %s section is not raw or does not match its hash", name, what);
			goto out;
		}
		char **text = id == SEC_MODEL ? &p->model : &p->scales;
		size_t *tl = id == SEC_MODEL ? &p->model_len : &p->scales_len;
		*tl = size[id] - 8;
		*text = xmalloc(*tl + 1);
		memcpy(*text, d + off[id] + 8, *tl);
		(*text)[*tl] = 0;
	}
	/* sections stored as zstd frames, each decoded to at most what the
	 * STAGE's machine could hold: every tile's tables in its SRAM */
	unsigned long long most = stage_sram_total((const char *)d + off[SEC_STAGE], size[SEC_STAGE]);
	const uint8_t *sec_data[4] = { NULL, d + off[1], d + off[2], d + off[3] };
	for (int id = 1; id <= 3; id++) {
		if (enc[id] == 0)
			continue;
		unsigned long long n = ZSTD_getFrameContentSize(d + off[id], size[id]);
		/* a zstd block of 128 KiB takes at least 4 bytes (RLE): a frame
		 * that claims more than that ratio is corrupt */
		if (enc[id] != 1 || n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN ||
		    n > (1ull << 34) || n > (unsigned long long)size[id] * 32768 + 65536) {
			bad(e, name, "a section's encoding is unknown or its zstd frame is corrupt");
			goto out;
		}
		if (most && n > most) {
			errf(e, "'%s': the %s section decodes to %llu bytes, more than the machine's SRAM holds "
			     "(tiles x sram_bytes of the STAGE's machine: %llu)", name, id == SEC_ROWS ? "ROWS" : "TABLE",
			     n, most);
			goto out;
		}
		plain[id] = xmalloc((size_t)n + 1);
		size_t got = ZSTD_decompress(plain[id], (size_t)n, d + off[id], size[id]);
		if (ZSTD_isError(got) || got != n) {
			bad(e, name, "a section's zstd frame is corrupt or truncated");
			goto out;
		}
		sec_data[id] = plain[id];
		size[id] = n;
	}
	/* rows */
	const uint8_t *r = sec_data[SEC_ROWS], *rend = r + size[SEC_ROWS];
	if (rend - r < 4) {
		bad(e, name, "truncated ROWS section");
		goto out;
	}
	if (get(r, 4) > (uint64_t)(rend - r - 4) / 12) {      /* a row takes 12 bytes or more */
		bad(e, name, "the ROWS section counts more rows than it holds");
		goto out;
	}
	p->nrow = (int)get(r, 4);
	r += 4;
	p->row = xcalloc((size_t)p->nrow + 1, sizeof *p->row);
	p->row_len = xcalloc((size_t)p->nrow + 1, sizeof *p->row_len);
	for (int i = 0; i < p->nrow; i++) {
		if (rend - r < 4 || (uint64_t)(rend - r - 4) < get(r, 4) || get(r, 4) % 8 || get(r, 4) < 8) {
			bad(e, name, "truncated or malformed ROWS section");
			goto out;
		}
		p->row_len[i] = (int64_t)get(r, 4);
		p->row[i] = xmalloc((size_t)p->row_len[i]);
		memcpy(p->row[i], r + 4, (size_t)p->row_len[i]);
		r += 4 + p->row_len[i];
	}
	/* table */
	const uint8_t *t = sec_data[SEC_TABLE], *tend = t + size[SEC_TABLE];
	if (tend - t < 4) {
		bad(e, name, "truncated TABLE section");
		goto out;
	}
	if (get(t, 4) > (uint64_t)(tend - t - 4) / 24) {      /* an entry takes 24 bytes or more */
		bad(e, name, "the TABLE section counts more entries than it holds");
		goto out;
	}
	p->nent = (int)get(t, 4);
	t += 4;
	p->ent = xcalloc((size_t)p->nent + 1, sizeof *p->ent);
	for (int i = 0; i < p->nent; i++) {
		if (tend - t < 12) {
			bad(e, name, "truncated TABLE section");
			goto out;
		}
		Entry en = { (int64_t)get(t, 4), (int)get(t + 4, 4), (int)get(t + 8, 4), { 0, 0, 0 },
			     p->npatches };
		t += 12;
		if (en.row < 0 || en.row >= p->nrow) {
			bad(e, name, "a TABLE entry names a missing row");
			goto out;
		}
		for (int k = 0; k < 3; k++) {
			if (tend - t < 4) {
				bad(e, name, "truncated TABLE section");
				goto out;
			}
			/* an address or peer per instruction (8 bytes of the row or
			 * more), or per iteration of a moving send (4 bytes more) */
			if (get(t, 4) > (uint64_t)p->row_len[en.row] / 4) {
				bad(e, name, "a TABLE entry counts more addresses than its row has instructions");
				goto out;
			}
			en.npatch[k] = (int)get(t, 4);
			t += 4;
			p->patches = xrealloc(p->patches, (size_t)(p->npatches + en.npatch[k] + 1) * 4);
			if (read_seq(&t, tend, p->patches + p->npatches, en.npatch[k])) {
				bad(e, name, "a TABLE entry's address sequences are malformed");
				goto out;
			}
			p->npatches += en.npatch[k];
		}
		p->ent[i] = en;
	}
	for (int i = 0; i < p->nent; i++) {     /* every entry's row decodes with its addresses */
		Instr *ins;
		int n;
		if (program_row(p, i, &ins, &n, e))
			goto out;
		free(ins);
	}
	p->stage = xmalloc(size[SEC_STAGE] + 1);
	memcpy(p->stage, sec_data[SEC_STAGE], size[SEC_STAGE]);
	p->stage[size[SEC_STAGE]] = 0;
	p->stage_len = size[SEC_STAGE];
	if (pl) {
		char sname[1100];
		snprintf(sname, sizeof sname, "%s(STAGE)", name);
		Input *in = input_open_mem(sname, p->stage, p->stage_len, e);
		if (!in || stage_read_input(pl, in, STAGE_GROUP, e))
			goto out;
		for (int i = 0; i < p->nent; i++)
			if (p->ent[i].tile >= pl->machine.tiles || p->ent[i].phase >= pl->nph) {
				plan_free(pl);
				bad(e, name, "a TABLE entry names a tile or phase the stage does not have");
				goto out;
			}
		if (match_stage(p, pl, e)) {
			plan_free(pl);
			goto out;
		}
	}
	rc = 0;
out:
	for (int id = 0; id < 4; id++)
		free(plain[id]);
	if (rc)
		program_free(p);
	return rc;
}

int program_or_stage(Plan *pl, Program *prog, int *is_prog, const char *path, Err *e)
{
	char *data;
	size_t len;
	const char *name = path && strcmp(path, "-") ? path : "<stdin>";
	int rc;

	if (input_slurp(path, &data, &len, e))
		return -1;
	if (len >= 8 && !memcmp(data, PROGRAM_MAGIC, 8)) {
		Program own;
		Program *p = prog ? prog : &own;
		rc = read_mem(name, data, len, p, pl, e);
		if (!rc && !prog)
			program_free(&own);
		if (is_prog)
			*is_prog = 1;
	} else {
		Input *in = input_open_mem(name, data, len, e);
		rc = in ? stage_read_input(pl, in, STAGE_GROUP, e) : -1;
		if (is_prog)
			*is_prog = 0;
	}
	free(data);
	return rc;
}

int program_row(const Program *p, int i, Instr **out, int *nout, Err *e)
{
	const Entry *en = &p->ent[i];
	const uint8_t *b = p->row[en->row], *end = b + p->row_len[en->row];
	int n = (int)get(b + 4, 4), used[3] = { 0, 0, 0 };
	const uint32_t *stream[3] = { p->patches + en->patch, p->patches + en->patch + en->npatch[0],
				      p->patches + en->patch + en->npatch[0] + en->npatch[1] };
	int64_t prev_end = -1;
	Instr *ins = NULL;

	if (b[0] != OP_ROW || n < 0 || (int64_t)n > (p->row_len[en->row] - 8) / 8)
		goto bad;
	ins = xcalloc((size_t)n + 1, sizeof *ins);
	b += 8;
	for (int k = 0; k < n; k++) {
		Instr x = { .peer = -1, .xfer = -1 };
		int size = 8, addr = 0;
		if (end - b < 8)
			goto bad;
		switch (b[0]) {
		case OP_SEND:
			x.kind = I_SEND, x.len = b[1] + 1, addr = 1;
			break;
		case OP_SEND_LONG:
			x.kind = I_SEND, size = 12, addr = 1;
			if (end - b < 12)
				goto bad;
			x.len = (int64_t)get(b + 8, 4);
			break;
		case OP_SEND_MOVING:
		case OP_SEND_MOVING_LONG:
			x.kind = I_SEND, addr = 1;
			x.iters = (int64_t)(b[2] | b[3] << 8);
			if (x.iters < 2)
				goto bad;
			size = (b[0] == OP_SEND_MOVING ? 8 : 12) + (int)MOVING_BYTES(x.iters);
			if (end - b < size)
				goto bad;
			x.len = b[0] == OP_SEND_MOVING ? b[1] + 1 : (int64_t)get(b + 8, 4);
			break;
		case OP_RECV:
		case OP_RECV_AT:
			x.kind = I_RECV, x.len = (int64_t)get(b + 4, 4);
			x.addr = prev_end;
			if (used[1] == en->npatch[1])
				goto bad;
			x.peer = stream[1][used[1]++];
			if (b[0] == OP_RECV_AT) {
				size = 12, addr = 1;
				if (end - b < 12)
					goto bad;
			}
			break;
		default:
			goto bad;
		}
		if (addr) {             /* the stream's next address patches this field */
			int k = x.kind == I_SEND ? 0 : 2;
			if (used[k] == en->npatch[k])
				goto bad;
			x.addr = stream[k][used[k]++];
			if (x.iters > 1) {      /* one address per iteration, a constant stride apart */
				if (en->npatch[0] - used[0] < x.iters - 1)
					goto bad;
				x.istride = (int64_t)stream[0][used[0]] - x.addr;
				for (int64_t j = 1; j < x.iters; j++)
					if ((int64_t)stream[0][used[0]++] != x.addr + j * x.istride)
						goto bad;
			}
		}
		if (x.kind == I_RECV) {
			if (x.addr < 0)
				goto bad;
			prev_end = x.addr + x.len;
		}
		ins[k] = x;
		b += size;
	}
	for (int k = 0; k < 3; k++)
		if (used[k] != en->npatch[k])
			goto bad;
	*out = ins;
	*nout = n;
	return 0;
bad:
	free(ins);
	return errf(e, "'%s': program row %d (tile %lld, phase %d) is malformed",
		    p->name ? p->name : "<program>", en->row, (long long)en->tile, en->phase);
}

/* ---- listings ---- */

static void list_header(const Plan *pl, FILE *f)
{
	fprintf(f, "amp-program %d model %s machine %s tiles %lld phases %d\n", PROGRAM_VERSION,
		pl->model, pl->machine.name, (long long)pl->machine.tiles, pl->nph);
	for (int p = 0; p < pl->nph; p++)
		fprintf(f, "phase %d steps %d..%d %s\n", p, pl->ph[p].first, pl->ph[p].last, pl->ph[p].label);
}

static void list_row(FILE *f, int64_t t, int phase, const Instr *ins, int n)
{
	fprintf(f, "tile %lld phase %d bytes %lld instructions %d\n", (long long)t, phase,
		(long long)row_bytes(ins, n), n);
	for (int i = 0; i < n; i++)
		if (ins[i].kind == I_SEND)
			if (ins[i].iters > 1)       /* one address per iteration */
				fprintf(f, "  send %lld from %lld + %lld per iteration x %lld\n", (long long)ins[i].len,
					(long long)ins[i].addr, (long long)ins[i].istride, (long long)ins[i].iters);
			else
				fprintf(f, "  send %lld from %lld\n", (long long)ins[i].len, (long long)ins[i].addr);
		else
			fprintf(f, "  recv %lld from tile %lld to %lld\n", (long long)ins[i].len,
				(long long)ins[i].peer, (long long)ins[i].addr);
}

int program_list(const Program *p, const Plan *pl, FILE *f, Err *e)
{
	list_header(pl, f);
	for (int i = 0; i < p->nent; i++) {
		Instr *ins;
		int n;
		if (program_row(p, i, &ins, &n, e))
			return -1;
		list_row(f, p->ent[i].tile, p->ent[i].phase, ins, n);
		free(ins);
	}
	return 0;
}

typedef struct {
	FILE *f;
	int phase;
} Lister;

static int list_one(void *ctx, int64_t t, const Instr *ins, int n)
{
	Lister *l = ctx;
	list_row(l->f, t, l->phase, ins, n);
	return 0;
}

int stage_list(const Plan *pl, FILE *f, Err *e)
{
	(void)e;
	list_header(pl, f);
	for (int p = 0; p < pl->nph; p++) {
		Lister l = { f, p };
		phase_rows(pl, p, list_one, &l);
	}
	return 0;
}
