/* program_file.c: the program file (lib/lower/program.h,
 * formats/program.md): its header and sections written, the ROWS and
 * TABLE as zstd frames and the TABLE's addresses as nested affine
 * sequences; and read back, every bound checked before anything is
 * allocated for it, every row decoded, and the rows and table matched
 * against the program the STAGE text would build (program.c). */
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "lower/program_int.h"
#include "stage/stage_io.h"

enum { SEC_STAGE = 1, SEC_ROWS = 2, SEC_TABLE = 3, SEC_HASH = 4, SEC_MODEL = 5, SEC_SCALES = 6, NSEC = 6 };

/* ---- little-endian words ---- */

static void u32(Buf *b, uint64_t v)
{
	program_grow(b, 4);
	for (int i = 0; i < 4; i++)
		b->b[b->n++] = (uint8_t)(v >> (8 * i));
}
static void u64(Buf *b, uint64_t v) { u32(b, v & 0xffffffffu); u32(b, v >> 32); }

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
	uint64_t nseq = program_get(c, 4);
	c += 4;
	for (uint64_t s = 0; s < nseq; s++) {
		if (end - c < 8)
			return -1;
		uint32_t base = (uint32_t)program_get(c, 4);
		uint64_t nl = program_get(c + 4, 4);
		c += 8;
		if (nl > SEQ_LOOPS || (uint64_t)(end - c) < nl * 8)
			return -1;
		uint32_t count[SEQ_LOOPS], step[SEQ_LOOPS], idx[SEQ_LOOPS] = { 0 };
		uint64_t total = 1;
		for (uint64_t l = 0; l < nl; l++, c += 8) {
			count[l] = (uint32_t)program_get(c, 4);
			step[l] = (uint32_t)program_get(c + 4, 4);
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
		program_grow(&rows, (size_t)p->row_len[r]);
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
		program_grow(z[i], cap);
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
			program_grow(&emb[i], elen[i]);
			memcpy(emb[i].b + emb[i].n, etext[i], elen[i]);
			emb[i].n += elen[i];
		}
	int nsec = 4 + (p->model != NULL) + (p->scales != NULL);
	program_grow(&h, 16);
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

/* Entry i of a and of b hold the same row bytes and the same addresses,
 * which is all a row decodes from (program_row): they decode alike. */
static int same_entry(const Program *a, const Program *b, int i)
{
	const Entry *x = &a->ent[i], *y = &b->ent[i];
	int64_t n = 0;
	if (a->row_len[x->row] != b->row_len[y->row] ||
	    memcmp(a->row[x->row], b->row[y->row], (size_t)a->row_len[x->row]))
		return 0;
	for (int k = 0; k < 3; k++) {
		if (x->npatch[k] != y->npatch[k])
			return 0;
		n += x->npatch[k];
	}
	return !memcmp(a->patches + x->patch, b->patches + y->patch, (size_t)n * sizeof *a->patches);
}

/* The rows and table agree with the STAGE text: the program amp-emit would
 * build from the stage decodes, entry by entry and instruction by
 * instruction, to the same tiles, phases, lengths, addresses and peers.
 * (Every row of p decoded already, in read_table: an entry whose row and
 * addresses are the same bytes decodes alike, and is not decoded again.) */
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
		if (same_entry(p, &q, i))
			continue;
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

/* The section table of a program in memory: where each section lies, its
 * size and encoding, and its bytes once decoded (plain: what read_mem
 * frees). */
typedef struct {
	uint64_t off[7], size[7], enc[7];
	const uint8_t *data[4];
	uint8_t *plain[4];
} Sections;

/* The header and the section table: the magic number, the version, every
 * section inside the file, the four required ones present, and the STAGE
 * text matching its HASH. */
static int read_header(const char *name, const uint8_t *d, size_t len, Sections *s, Err *e)
{
	if (len < 8 || memcmp(d, PROGRAM_MAGIC, 8))
		return bad(e, name, "not an amp program (no AMPPROG magic number)");
	if (len < 16)
		return bad(e, name, "truncated program header");
	if (program_get(d + 8, 4) != PROGRAM_VERSION)
		return errf(e, "'%s': unsupported program version %llu (this amp reads %d)", name,
			    (unsigned long long)program_get(d + 8, 4), PROGRAM_VERSION);
	uint64_t nsec = program_get(d + 12, 4);
	if (nsec > 64 || 16 + nsec * 24 > len)
		return bad(e, name, "truncated section table");
	for (uint64_t i = 0; i < nsec; i++) {
		const uint8_t *t = d + 16 + i * 24;
		uint64_t id = program_get(t, 4), o = program_get(t + 8, 8), n = program_get(t + 16, 8);
		if (o > len || n > len - o)
			return bad(e, name, "a section runs past the end of the file");
		if (id >= 1 && id <= 6)
			s->off[id] = o, s->size[id] = n, s->enc[id] = program_get(t + 4, 4);
	}
	for (int id = 1; id <= 4; id++)
		if (!s->off[id])
			return errf(e, "'%s': missing section %s", name, id == SEC_STAGE ? "STAGE" :
				    id == SEC_ROWS ? "ROWS" : id == SEC_TABLE ? "TABLE" : "HASH");
	if (s->enc[SEC_STAGE] != 0 || s->enc[SEC_HASH] != 0 || s->size[SEC_HASH] != 8)
		return bad(e, name, "the STAGE and HASH sections must be raw, HASH 8 bytes");
	if (program_get(d + s->off[SEC_HASH], 8) != fnv1a(d + s->off[SEC_STAGE], s->size[SEC_STAGE]))
		return bad(e, name, "the STAGE section does not match its hash (the stage text was changed "
			   "or corrupted)");
	return 0;
}

/* The optional MODEL and SCALES sections (a hash, then the text), copied
 * into p. */
static int read_texts(const char *name, const uint8_t *d, const Sections *s, Program *p, Err *e)
{
	for (int id = SEC_MODEL; id <= SEC_SCALES; id++) {
		if (!s->off[id])
			continue;
		const char *what = id == SEC_MODEL ? "MODEL" : "SCALES";
		if (s->enc[id] != 0 || s->size[id] < 8 ||
		    program_get(d + s->off[id], 8) != fnv1a(d + s->off[id] + 8, s->size[id] - 8))
			return errf(e, "'%s': the %s section is not raw or does not match its hash", name, what);
		char **text = id == SEC_MODEL ? &p->model : &p->scales;
		size_t *tl = id == SEC_MODEL ? &p->model_len : &p->scales_len;
		*tl = s->size[id] - 8;
		*text = xmalloc(*tl + 1);
		memcpy(*text, d + s->off[id] + 8, *tl);
		(*text)[*tl] = 0;
	}
	return 0;
}

/* The STAGE, ROWS and TABLE sections' bytes in s->data: the sections
 * stored as zstd frames, each decoded to at most what the STAGE's machine
 * could hold (every tile's tables in its SRAM), into s->plain. */
static int decode_sections(const char *name, const uint8_t *d, Sections *s, Err *e)
{
	unsigned long long most = stage_sram_total((const char *)d + s->off[SEC_STAGE], s->size[SEC_STAGE]);
	for (int id = 1; id <= 3; id++)
		s->data[id] = d + s->off[id];
	for (int id = 1; id <= 3; id++) {
		if (s->enc[id] == 0)
			continue;
		unsigned long long n = ZSTD_getFrameContentSize(d + s->off[id], s->size[id]);
		/* a zstd block of 128 KiB takes at least 4 bytes (RLE): a frame
		 * that claims more than that ratio is corrupt */
		if (s->enc[id] != 1 || n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN ||
		    n > (1ull << 34) || n > (unsigned long long)s->size[id] * 32768 + 65536)
			return bad(e, name, "a section's encoding is unknown or its zstd frame is corrupt");
		if (most && n > most)
			return errf(e, "'%s': the %s section decodes to %llu bytes, more than the machine's SRAM "
				    "holds (tiles x sram_bytes of the STAGE's machine: %llu)", name,
				    id == SEC_ROWS ? "ROWS" : "TABLE", n, most);
		s->plain[id] = xmalloc((size_t)n + 1);
		size_t got = ZSTD_decompress(s->plain[id], (size_t)n, d + s->off[id], s->size[id]);
		if (ZSTD_isError(got) || got != n)
			return bad(e, name, "a section's zstd frame is corrupt or truncated");
		s->data[id] = s->plain[id];
		s->size[id] = n;
	}
	return 0;
}

/* The ROWS section (r, n bytes) into p->row and p->row_len. */
static int read_rows(const char *name, const uint8_t *r, uint64_t n, Program *p, Err *e)
{
	const uint8_t *rend = r + n;
	if (rend - r < 4)
		return bad(e, name, "truncated ROWS section");
	if (program_get(r, 4) > (uint64_t)(rend - r - 4) / 12)      /* a row takes 12 bytes or more */
		return bad(e, name, "the ROWS section counts more rows than it holds");
	p->nrow = (int)program_get(r, 4);
	r += 4;
	p->row = xcalloc((size_t)p->nrow + 1, sizeof *p->row);
	p->row_len = xcalloc((size_t)p->nrow + 1, sizeof *p->row_len);
	for (int i = 0; i < p->nrow; i++) {
		if (rend - r < 4 || (uint64_t)(rend - r - 4) < program_get(r, 4) || program_get(r, 4) % 8 ||
		    program_get(r, 4) < 8)
			return bad(e, name, "truncated or malformed ROWS section");
		p->row_len[i] = (int64_t)program_get(r, 4);
		p->row[i] = xmalloc((size_t)p->row_len[i]);
		memcpy(p->row[i], r + 4, (size_t)p->row_len[i]);
		r += 4 + p->row_len[i];
	}
	return 0;
}

/* One TABLE entry at *t (tend its section's end) into p->ent[i], its
 * addresses appended to p->patches. */
static int read_entry(const char *name, const uint8_t **t, const uint8_t *tend, Program *p, int i, Err *e)
{
	if (tend - *t < 12)
		return bad(e, name, "truncated TABLE section");
	Entry en = { (int64_t)program_get(*t, 4), (int)program_get(*t + 4, 4), (int)program_get(*t + 8, 4),
		     { 0, 0, 0 }, p->npatches };
	*t += 12;
	if (en.row < 0 || en.row >= p->nrow)
		return bad(e, name, "a TABLE entry names a missing row");
	for (int k = 0; k < 3; k++) {
		if (tend - *t < 4)
			return bad(e, name, "truncated TABLE section");
		/* an address or peer per instruction (8 bytes of the row or
		 * more), or per iteration of a moving send (4 bytes more) */
		if (program_get(*t, 4) > (uint64_t)p->row_len[en.row] / 4)
			return bad(e, name, "a TABLE entry counts more addresses than its row has instructions");
		en.npatch[k] = (int)program_get(*t, 4);
		*t += 4;
		p->patches = xrealloc(p->patches, (size_t)(p->npatches + en.npatch[k] + 1) * 4);
		if (read_seq(t, tend, p->patches + p->npatches, en.npatch[k]))
			return bad(e, name, "a TABLE entry's address sequences are malformed");
		p->npatches += en.npatch[k];
	}
	p->ent[i] = en;
	return 0;
}

/* The TABLE section (t, n bytes) into p->ent and p->patches; then every
 * entry's row decodes with its addresses. */
static int read_table(const char *name, const uint8_t *t, uint64_t n, Program *p, Err *e)
{
	const uint8_t *tend = t + n;
	if (tend - t < 4)
		return bad(e, name, "truncated TABLE section");
	if (program_get(t, 4) > (uint64_t)(tend - t - 4) / 24)      /* an entry takes 24 bytes or more */
		return bad(e, name, "the TABLE section counts more entries than it holds");
	p->nent = (int)program_get(t, 4);
	t += 4;
	p->ent = xcalloc((size_t)p->nent + 1, sizeof *p->ent);
	for (int i = 0; i < p->nent; i++)
		if (read_entry(name, &t, tend, p, i, e))
			return -1;
	for (int i = 0; i < p->nent; i++) {     /* every entry's row decodes with its addresses */
		Instr *ins;
		int k;
		if (program_row(p, i, &ins, &k, e))
			return -1;
		free(ins);
	}
	return 0;
}

/* The STAGE text (p->stage) read into pl, and the rows and table matched
 * against it; pl is freed when they do not match. */
static int read_stage(const char *name, const Program *p, Plan *pl, Err *e)
{
	char *sname = xasprintf("%s(STAGE)", name);
	Input *in = input_open_mem(sname, p->stage, p->stage_len, e);
	free(sname);
	if (!in || stage_read_input(pl, in, STAGE_GROUP, e))
		return -1;
	for (int i = 0; i < p->nent; i++)
		if (p->ent[i].tile >= pl->machine.tiles || p->ent[i].phase >= pl->nph) {
			plan_free(pl);
			return bad(e, name, "a TABLE entry names a tile or phase the stage does not have");
		}
	if (match_stage(p, pl, e)) {
		plan_free(pl);
		return -1;
	}
	return 0;
}

/* A program in memory (data stays the caller's). */
static int read_mem(const char *name, const char *data, size_t len, Program *p, Plan *pl, Err *e)
{
	const uint8_t *d = (const uint8_t *)data;
	Sections s = { 0 };
	int rc = -1;

	memset(p, 0, sizeof *p);
	p->name = xstrdup(name);
	if (read_header(name, d, len, &s, e) || read_texts(name, d, &s, p, e) ||
	    decode_sections(name, d, &s, e) || read_rows(name, s.data[SEC_ROWS], s.size[SEC_ROWS], p, e) ||
	    read_table(name, s.data[SEC_TABLE], s.size[SEC_TABLE], p, e))
		goto out;
	p->stage = xmalloc(s.size[SEC_STAGE] + 1);
	memcpy(p->stage, s.data[SEC_STAGE], s.size[SEC_STAGE]);
	p->stage[s.size[SEC_STAGE]] = 0;
	p->stage_len = s.size[SEC_STAGE];
	if (pl && read_stage(name, p, pl, e))
		goto out;
	rc = 0;
out:
	for (int id = 0; id < 4; id++)
		free(s.plain[id]);
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
