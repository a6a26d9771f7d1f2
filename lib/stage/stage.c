#include "stage/stage.h"

#include <string.h>

void stage_write_header(YWriter *w, const char *format, int version, const Machine *m,
			const char *model)
{
	yw_map(w, 0);
	yw_kstr(w, "format", format);
	yw_kint(w, "version", version);
	yw_str(w, "machine");
	machine_write(w, m);
	yw_kstr(w, "model", model);
}

int stage_read_header(YReader *r, const char *format, int oldest, int newest, int *version, Machine *m,
		      char **model, Err *e)
{
	Val *v;
	int64_t n;
	const char *s;

	*model = NULL;
	if (yr_expect(r, YAML_MAPPING_START_EVENT, "a stage file (a mapping starting 'format:')", e) ||
	    yr_key(r, "format", e) || yr_node(r, &v, e) || val_str(r->name, v, &s, e))
		return -1;
	if (strcmp(s, format))
		return val_err(r->name, v, e, "expected format '%s', found '%s'", format, s);
	if (yr_key(r, "version", e) || yr_node(r, &v, e) ||
	    val_int(r->name, v, 0, INT64_MAX, &n, e))
		return -1;
	if (n < oldest || n > newest)
		return val_err(r->name, v, e, "unsupported %s version %lld (this amp reads %d to %d)",
			       format, (long long)n, oldest, newest);
	*version = (int)n;
	if (yr_key(r, "machine", e) || yr_node(r, &v, e) || machine_from_val(m, r->name, v, e))
		return -1;
	if (yr_key(r, "model", e) || yr_node(r, &v, e) || val_str(r->name, v, &s, e))
		return -1;
	*model = xstrdup(s);
	yr_reset(r);
	return 0;
}

int stage_section(YReader *r, const char *key, Err *e)
{
	if (yr_key(r, key, e) ||
	    yr_expect(r, YAML_SEQUENCE_START_EVENT, "a sequence of records", e))
		return -1;
	return 0;
}

int stage_record(YReader *r, Val **rec, Err *e)
{
	int end = yr_peek_end(r, YAML_SEQUENCE_END_EVENT, e);
	if (end)
		return end < 0 ? -1 : 0;
	if (yr_node(r, rec, e))
		return -1;
	if ((*rec)->kind != VAL_MAP)
		return val_err(r->name, *rec, e, "expected a record (a mapping)");
	return 1;
}
