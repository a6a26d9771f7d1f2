#include "base/keytab.h"

#include <stdlib.h>
#include <string.h>

#include "base/diag.h"

static uint64_t key_hash(const int64_t *k, int n)
{
	uint64_t h = 0x9E3779B97F4A7C15u ^ (uint64_t)n;
	for (int i = 0; i < n; i++)
		h = (h ^ (uint64_t)k[i]) * 0x100000001B3u, h ^= h >> 29;
	return h ? h : 1;
}

/* The slot of k: where it is kept, or the free slot where it would go. */
static KeySlot *slot(const KeyTab *t, const int64_t *k, int n, uint64_t h)
{
	int64_t i = (int64_t)(h % (uint64_t)t->cap);
	while (t->s[i].hash && !(t->s[i].hash == h && t->s[i].nkey == n &&
				 !memcmp(t->s[i].key, k, (size_t)n * sizeof *k)))
		i = i + 1 == t->cap ? 0 : i + 1;
	return &t->s[i];
}

int64_t keytab_find(const KeyTab *t, const int64_t *k, int n)
{
	if (!t->cap)
		return -1;
	const KeySlot *s = slot(t, k, n, key_hash(k, n));
	return s->hash ? s->val : -1;
}

void keytab_put(KeyTab *t, const int64_t *k, int n, int64_t val)
{
	if (2 * (t->n + 1) > t->cap) {          /* grow: at most half full */
		KeyTab g = { xcalloc((size_t)(t->cap ? 2 * t->cap : 256), sizeof *g.s), t->cap ? 2 * t->cap : 256,
			     t->n };
		for (int64_t i = 0; i < t->cap; i++)
			if (t->s[i].hash)
				*slot(&g, t->s[i].key, t->s[i].nkey, t->s[i].hash) = t->s[i];
		free(t->s);
		*t = g;
	}
	uint64_t h = key_hash(k, n);
	KeySlot *s = slot(t, k, n, h);
	if (!s->hash) {
		s->hash = h;
		s->key = xmalloc((size_t)(n + 1) * sizeof *s->key);
		memcpy(s->key, k, (size_t)n * sizeof *k);
		s->nkey = n;
		t->n++;
	}
	s->val = val;
}

void keytab_free(KeyTab *t)
{
	for (int64_t i = 0; i < t->cap; i++)
		if (t->s[i].hash)
			free(t->s[i].key);
	free(t->s);
	t->s = NULL, t->cap = t->n = 0;
}
