/* program.c: the program's rows (lib/lower/program.h, formats/program.md):
 * each (tile, phase)'s instructions encoded with their addresses masked,
 * alike rows stored once in the row table (program_build), a row decoded
 * with its entry's addresses (program_row), and the listings of a program
 * and of a grouped stage. The file itself is program_file.c. */
#include <stdlib.h>
#include <string.h>

#include "lower/program_int.h"
#include "stage/stage_io.h"

enum { OP_ROW = 0x52, OP_SEND = 1, OP_SEND_LONG = 2, OP_RECV = 3, OP_RECV_AT = 4,
       OP_SEND_MOVING = 5, OP_SEND_MOVING_LONG = 6 };

/* ---- a growable byte buffer, little-endian ---- */

void program_grow(Buf *b, size_t more)
{
	if (b->n + more > b->cap) {
		b->cap = (b->n + more) * 2 + 64;
		b->b = xrealloc(b->b, b->cap);
	}
}

uint64_t program_get(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ---- encoding ---- */

/* Writers into room already made (program_grow). */
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
	program_grow(row, 8);
	p8(row, OP_ROW), p8(row, 0), p8(row, 0), p8(row, 0), p32(row, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		const Instr *x = &ins[i];
		if (x->kind == I_SEND) {
			int mv = x->iters > 1;
			unsigned it = mv ? (unsigned)x->iters : 0;
			int64_t words = x->iters > 1 ? x->iters : 1;
			program_grow(row, (size_t)(12 + 4 * words));
			program_grow(&pat[0], (size_t)(4 * words));
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
			program_grow(row, 12), program_grow(&pat[1], 4), program_grow(&pat[2], 4);
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
	program_grow(row, 8);
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
		program_grow(&b->all, b->pat[k].n);
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
		p->patches[i] = (uint32_t)program_get((uint8_t *)&p->patches[i], 4);
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

int program_row(const Program *p, int i, Instr **out, int *nout, Err *e)
{
	const Entry *en = &p->ent[i];
	const uint8_t *b = p->row[en->row], *end = b + p->row_len[en->row];
	int n = (int)program_get(b + 4, 4), used[3] = { 0, 0, 0 };
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
			x.len = (int64_t)program_get(b + 8, 4);
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
			x.len = b[0] == OP_SEND_MOVING ? b[1] + 1 : (int64_t)program_get(b + 8, 4);
			break;
		case OP_RECV:
		case OP_RECV_AT:
			x.kind = I_RECV, x.len = (int64_t)program_get(b + 4, 4);
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
