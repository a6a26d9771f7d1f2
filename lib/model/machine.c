#include "model/machine.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/io.h"

#define BIG (INT64_C(1) << 50)

/* The machine names read so far, each kept once until the process ends
 * (Machine.name and the links' sources point here; a tool reads one or
 * two), hashed into
 * NAME_BUCKETS chains; under a lock, for the planner's threads. */
#define NAME_BUCKETS 256
typedef struct Name {
	struct Name *next;
	char s[];
} Name;
static Name *names[NAME_BUCKETS];
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *keep_name(const char *s)
{
	size_t len = strlen(s);
	Name **chain = &names[fnv1a(s, len) % NAME_BUCKETS], *n;

	pthread_mutex_lock(&names_lock);
	for (n = *chain; n && strcmp(n->s, s); n = n->next)
		;
	if (!n) {
		n = xmalloc(sizeof *n + len + 1);
		memcpy(n->s, s, len + 1);
		n->next = *chain;
		*chain = n;
	}
	pthread_mutex_unlock(&names_lock);
	return n->s;
}

/* In the order machine_write writes them. The compute cost keys are
 * bounded so that a tile's cycles (elements up to its SRAM bytes times a
 * per-element cost) stay far from overflow. */
static const struct {
	const char *key;
	size_t off;
	int64_t min, max;
} params[] = {
	{ "tiles", offsetof(Machine, tiles), 1, BIG },
	{ "sram_bytes", offsetof(Machine, sram_bytes), 1, BIG },
	{ "reserved_bytes", offsetof(Machine, reserved_bytes), 0, BIG },
	{ "exchange_bytes_per_cycle", offsetof(Machine, exchange_bytes_per_cycle), 1, BIG },
	{ "sync_cycles", offsetof(Machine, sync_cycles), 0, BIG },
	{ "send_control_cycles", offsetof(Machine, send_control_cycles), 0, BIG },
	{ "receive_control_cycles", offsetof(Machine, receive_control_cycles), 0, BIG },
	{ "max_transfer_bytes", offsetof(Machine, max_transfer_bytes), 1, BIG },
	{ "table_budget_bytes", offsetof(Machine, table_budget_bytes), 0, BIG },
	{ "fragment_limit", offsetof(Machine, fragment_limit), 0, BIG },
	{ "local_copy_bytes_per_cycle", offsetof(Machine, local_copy_bytes_per_cycle), 1, BIG },
	{ "matmul_call_cycles", offsetof(Machine, matmul_call_cycles), 0, INT64_C(1) << 30 },
	{ "elementwise_cycles_per_element", offsetof(Machine, elementwise_cycles_per_element), 0, 1 << 20 },
	{ "reduction_cycles_per_element", offsetof(Machine, reduction_cycles_per_element), 0, 1 << 20 },
};
#define NPARAMS (sizeof params / sizeof params[0])

static int64_t *field(Machine *m, size_t i)
{
	return (int64_t *)((char *)m + params[i].off);
}

/* The key (not its value) of key in the mapping m, or NULL. */
static const Val *key_of(const Val *m, const char *key)
{
	for (int i = 0; m->kind == VAL_MAP && i < m->n; i++)
		if (!strcmp(m->items[2 * i].s, key))
			return &m->items[2 * i];
	return NULL;
}

/* The string at key: 1 to 255 characters, saying where a figure comes
 * from. */
static int get_source(const char *file, const Val *m, const char *key, const char **out, Err *e)
{
	if (get_str(file, m, key, out, e))
		return -1;
	if (!**out || strlen(*out) > 255)
		return val_err(file, map_get(m, key), e, "%s must be 1 to 255 characters (where the figure comes from)",
			       key);
	return 0;
}

/* The chips and links of a version 4 file (formats/machine.md, "Chips
 * and links"): chips (default 1) and, only when there are several, the
 * links mapping. */
static int read_chips(Machine *m, const char *file, const Val *v, Err *e)
{
	static const char *ring[] = { "topology", "topology_source", "bandwidth_bytes_per_cycle", "bandwidth_source",
				      "latency_cycles", "latency_source", "sync_cycles", "sync_source", NULL };
	static const char *torus[] = { "topology", "rows", "columns", "topology_source", "bandwidth_bytes_per_cycle",
				       "bandwidth_source", "latency_cycles", "latency_source", "sync_cycles",
				       "sync_source", NULL };
	const Val *chips = map_get(v, "chips"), *links = map_get(v, "links");
	Links *l = &m->links;
	const char *topo;

	m->chips = 1;
	if (chips && val_int(file, chips, 1, MACHINE_MAX_CHIPS, &m->chips, e))
		return -1;
	if (m->chips == 1) {
		if (links)
			return val_err(file, key_of(v, "links"), e, "links join chips, and this machine has one "
				       "(chips: %d or more describes several)", 2);
		return 0;
	}
	if (!links)
		return val_err(file, chips, e, "a machine of %lld chips needs links: a mapping of topology, "
			       "bandwidth_bytes_per_cycle, latency_cycles and sync_cycles, each with its source",
			       (long long)m->chips);
	if (links->kind != VAL_MAP)
		return val_err(file, links, e, "expected a links mapping");
	if (get_str(file, links, "topology", &topo, e))
		return -1;
	if (strcmp(topo, "ring") && strcmp(topo, "torus"))
		return val_err(file, map_get(links, "topology"), e, "unknown topology '%s' (expected ring or torus)",
			       topo);
	l->topology = strcmp(topo, "ring") ? TOPOLOGY_TORUS : TOPOLOGY_RING;
	if (l->topology == TOPOLOGY_RING)
		for (const char *const *k = (const char *const[]){ "rows", "columns", NULL }; *k; k++)
			if (key_of(links, *k))
				return val_err(file, key_of(links, *k), e, "%s is a torus's; a ring has none", *k);
	if (map_keys(file, links, l->topology == TOPOLOGY_RING ? ring : torus, e))
		return -1;
	l->rows = 1;
	l->columns = m->chips;
	if (l->topology == TOPOLOGY_TORUS) {
		if (get_int(file, links, "rows", 2, MACHINE_MAX_CHIPS, &l->rows, e) ||
		    get_int(file, links, "columns", 2, MACHINE_MAX_CHIPS, &l->columns, e))
			return -1;
		if (l->rows * l->columns != m->chips)
			return val_err(file, map_get(links, "rows"), e, "a torus of %lld rows x %lld columns is %lld "
				       "chips, not the machine's %lld", (long long)l->rows, (long long)l->columns,
				       (long long)(l->rows * l->columns), (long long)m->chips);
	}
	if (get_source(file, links, "topology_source", &l->topology_source, e) ||
	    get_int(file, links, "bandwidth_bytes_per_cycle", 1, BIG, &l->bandwidth_bytes_per_cycle, e) ||
	    get_source(file, links, "bandwidth_source", &l->bandwidth_source, e) ||
	    get_int(file, links, "latency_cycles", 0, INT64_C(1) << 30, &l->latency_cycles, e) ||
	    get_source(file, links, "latency_source", &l->latency_source, e) ||
	    get_int(file, links, "sync_cycles", 0, INT64_C(1) << 30, &l->sync_cycles, e) ||
	    get_source(file, links, "sync_source", &l->sync_source, e))
		return -1;
	l->topology_source = keep_name(l->topology_source);
	l->bandwidth_source = keep_name(l->bandwidth_source);
	l->latency_source = keep_name(l->latency_source);
	l->sync_source = keep_name(l->sync_source);
	return 0;
}

/* The machine mapping of a file of this version (2, 3 or 4), or of a
 * stage header (version 0: no version key, no clock, one chip). */
static int from_map(Machine *m, const char *file, const Val *v, int version, Err *e)
{
	/* the file's keys, by version: 2 stops before the clock, 3 before
	 * the chips, and a stage header (version 0) also lacks the version
	 * key */
	static const char *v4[NPARAMS + 8], *v3[NPARAMS + 6], *v2[NPARAMS + 4];
	static const char *const later[] = { "chips", "links", NULL };
	const char *name;
	const Val *macs;
	size_t k = 0;

	if (!v4[0]) {
		v4[k++] = "amp-machine";
		v4[k++] = "name";
		for (size_t i = 0; i < NPARAMS; i++)
			v4[k++] = params[i].key;
		v4[k++] = "amp_macs_per_cycle";
		memcpy(v2, v4, k * sizeof *v4);
		v4[k++] = "clock_hz";
		v4[k++] = "clock_source";
		memcpy(v3, v4, k * sizeof *v4);
		v4[k++] = "chips";
		v4[k++] = "links";
		v4[k] = NULL;
	}
	memset(m, 0, sizeof *m);
	m->chips = 1;
	m->clock_source = "";
	if (v->kind != VAL_MAP)
		return val_err(file, v, e, "expected a machine mapping");
	/* a version 4 key in an older file is named with both versions */
	for (int i = 0; version && version < 4 && later[i]; i++)
		if (key_of(v, later[i]))
			return val_err(file, key_of(v, later[i]), e, "key '%s' is machine file version 4's (this file "
				       "is amp-machine: %d)", later[i], version);
	if (map_keys(file, v, version >= 4 ? v4 : version == 3 ? v3 : version ? v2 : v2 + 1, e))
		return -1;
	if (get_str(file, v, "name", &name, e))
		return -1;
	if (!*name)
		return val_err(file, map_get(v, "name"), e, "machine name must not be empty");
	m->name = keep_name(name);
	for (size_t i = 0; i < NPARAMS; i++)
		if (get_int(file, v, params[i].key, params[i].min, params[i].max, field(m, i), e))
			return -1;
	static const char *mkeys[] = { "fp16", "fp8", NULL };
	if (map_need(file, v, "amp_macs_per_cycle", &macs, e) ||
	    map_keys(file, macs, mkeys, e) ||
	    get_int(file, macs, "fp16", 1, INT64_C(1) << 30, &m->macs_fp16, e) ||
	    get_int(file, macs, "fp8", 1, INT64_C(1) << 30, &m->macs_fp8, e))
		return -1;
	if (version >= 3) {
		const char *src;
		if (get_int(file, v, "clock_hz", 1, INT64_C(1) << 40, &m->clock_hz, e) ||
		    get_source(file, v, "clock_source", &src, e))
			return -1;
		m->clock_source = keep_name(src);
	}
	if (version >= 4 && read_chips(m, file, v, e))
		return -1;
	if (m->reserved_bytes >= m->sram_bytes)
		return val_err(file, map_get(v, "reserved_bytes"), e,
			       "reserved_bytes (%lld) leaves no SRAM for planned data (sram_bytes %lld)",
			       (long long)m->reserved_bytes, (long long)m->sram_bytes);
	if (m->tiles > 1 << 20)
		return val_err(file, map_get(v, "tiles"), e, "at most %d tiles are supported", 1 << 20);
	return 0;
}

int machine_from_val(Machine *m, const char *file, const Val *v, Err *e)
{
	return from_map(m, file, v, 0, e);     /* a stage header: no clock */
}

int machine_load(Machine *m, const char *path, Err *e)
{
	return machine_load_input(m, input_open(path, e), e);
}

int machine_load_input(Machine *m, Input *in, Err *e)
{
	YReader r;
	Val *root;
	int64_t version;
	int rc = -1;

	if (yr_open_input(&r, in, e))
		goto out;
	if (yr_node(&r, &root, e))
		goto out;
	if (root->kind != VAL_MAP) {
		val_err(r.name, root, e, "expected a machine mapping");
		goto out;
	}
	if (get_int(r.name, root, "amp-machine", 0, INT64_MAX, &version, e))
		goto out;
	if (version < 2 || version > MACHINE_VERSION) {
		val_err(r.name, map_get(root, "amp-machine"), e,
			"unsupported machine file version %lld (this amp reads 2 to %d%s)",
			(long long)version, MACHINE_VERSION,
			version == 1 ? "; version 2 adds the compute cost keys of formats/machine.md" : "");
		goto out;
	}
	if (from_map(m, r.name, root, (int)version, e))
		goto out;
	if (yr_expect(&r, YAML_DOCUMENT_END_EVENT, "end of document", e) ||
	    yr_expect(&r, YAML_STREAM_END_EVENT, "end of input (one document only)", e))
		goto out;
	rc = 0;
out:
	yr_close(&r);
	return rc;
}

void machine_write(YWriter *w, const Machine *m)
{
	yw_map(w, 1);
	yw_kstr(w, "name", m->name);
	for (size_t i = 0; i < NPARAMS; i++)
		yw_kint(w, params[i].key, *field((Machine *)m, i));
	yw_str(w, "amp_macs_per_cycle");
	yw_map(w, 1);
	yw_kint(w, "fp16", m->macs_fp16);
	yw_kint(w, "fp8", m->macs_fp8);
	yw_end_map(w);
	yw_end_map(w);
}

int machine_check_one_chip(const Machine *m, const char *path, Err *e)
{
	if (m->chips == 1)
		return 0;
	return errf(e, "machine '%s' (%s) has %lld chips joined by links, and plans across chips are not built yet "
		    "(issue 48: a pipeline across chips); amp plans for one chip, such as amp1472", m->name, path,
		    (long long)m->chips);
}

int machine_check_header(const Machine *hdr, const Machine *file, const char *file_name, Err *e)
{
	static const char why[] = "limits and rates come from the machine file, not from the stage";
	if (strcmp(hdr->name, file->name))
		return errf(e, "the stage's machine is '%s'; machine file '%s' is '%s' (%s)", hdr->name, file_name,
			    file->name, why);
	/* a stage is planned for one chip, and its header says so by
	 * carrying no chips */
	if (file->chips != hdr->chips)
		return errf(e, "machine file '%s' has %lld chips; the stage was planned for %lld (%s)", file_name,
			    (long long)file->chips, (long long)hdr->chips, why);
	for (size_t i = 0; i < NPARAMS; i++) {
		int64_t h = *field((Machine *)hdr, i), f = *field((Machine *)file, i);
		if (h != f)
			return errf(e, "the stage's machine header has %s %lld; machine file '%s' has %lld (%s)",
				    params[i].key, (long long)h, file_name, (long long)f, why);
	}
	if (hdr->macs_fp16 != file->macs_fp16 || hdr->macs_fp8 != file->macs_fp8)
		return errf(e, "the stage's machine header has amp_macs_per_cycle {fp16: %lld, fp8: %lld}; machine "
			    "file '%s' has {fp16: %lld, fp8: %lld} (%s)", (long long)hdr->macs_fp16,
			    (long long)hdr->macs_fp8, file_name, (long long)file->macs_fp16, (long long)file->macs_fp8,
			    why);
	return 0;
}
