/* keytab: a table from keys (arrays of int64) to int64 values, by open
 * addressing (lib/'s one hash table for results kept by their key).
 *
 * The table owns a copy of each key. Lookups never depend on the order of
 * insertion, and nothing walks the table in hash order, so what it keeps
 * changes no output. Not thread-safe: a table shared by threads is used
 * under its owner's lock.
 */
#ifndef AMP_KEYTAB_H
#define AMP_KEYTAB_H

#include <stdint.h>

typedef struct {
	uint64_t hash;          /* 0: free */
	int64_t *key;
	int nkey;
	int64_t val;
} KeySlot;

typedef struct {
	KeySlot *s;
	int64_t cap, n;         /* at most half full */
} KeyTab;

/* The value kept for key k[0..n), or -1 when there is none. */
int64_t keytab_find(const KeyTab *t, const int64_t *k, int n);
/* Keeps val for k[0..n) (replacing any value kept for it). */
void keytab_put(KeyTab *t, const int64_t *k, int n, int64_t val);
/* Frees every key; the table is empty again. */
void keytab_free(KeyTab *t);

#endif
