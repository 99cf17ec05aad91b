/* The PostgreSQL store's in-memory index: every table's metadata and generation, sorted by name,
 * so that stat and list (called on the HTTP thread) never wait for the database. Changes come from
 * this process's own writes once committed, from NOTIFY payloads (every replica's writes, in
 * commit order) and from reloads after (re)connecting; whichever comes first, a change is applied
 * only when its generation is newer than what is held (tombstones keep deletes' generations), so
 * a late arrival of an older change is ignored. Values from the database are decoded from libpq's
 * binary format (big-endian integers and doubles, raw text and bytea). */
#include "store/pg.h"

#include <inttypes.h>
#include <stdlib.h>

static size_t find(const struct pgstore *s, const char *name, int *found)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->t[mid].m.name, name);
		if (c == 0)
			return *found = 1, mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

const struct pg_entry *pg_index_find(const struct pgstore *s, const char *name)
{
	int found;
	size_t i = find(s, name, &found);
	return found ? &s->t[i] : NULL;
}

static int64_t tomb_gen(const struct pgstore *s, const char *name)
{
	int64_t g = 0;
	for (size_t i = 0; i < PG_TOMBS; i++)
		if (s->tombs[i].gen > g && !strcmp(s->tombs[i].name, name))
			g = s->tombs[i].gen;
	return g;
}

void pg_index_put(struct pgstore *s, const struct pe_store_meta *m, int64_t gen)
{
	int found;
	size_t i = find(s, m->name, &found);
	if ((found && s->t[i].gen >= gen) || tomb_gen(s, m->name) >= gen)
		return;
	if (found) {
		s->bytes -= s->t[i].m.bytes;
	} else {
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 16;
			struct pg_entry *t = realloc(s->t, cap * sizeof *t);
			if (!t)
				return; /* not indexed: a read still finds it in the database */
			s->t = t;
			s->cap = cap;
		}
		memmove(&s->t[i + 1], &s->t[i], (s->n - i) * sizeof *s->t);
		s->n++;
	}
	s->t[i] = (struct pg_entry){.m = *m, .gen = gen};
	s->bytes += m->bytes;
}

void pg_index_del(struct pgstore *s, const char *name, int64_t gen)
{
	int found;
	size_t i = find(s, name, &found);
	struct pg_tomb *tb = &s->tombs[s->next_tomb++ % PG_TOMBS];
	snprintf(tb->name, sizeof tb->name, "%s", name);
	tb->gen = gen;
	if (!found || s->t[i].gen >= gen)
		return;
	s->bytes -= s->t[i].m.bytes;
	memmove(&s->t[i], &s->t[i + 1], (s->n - i - 1) * sizeof *s->t);
	s->n--;
}

void pg_index_gone(struct pgstore *s, const char *name, int64_t seen)
{
	const struct pg_entry *e = pg_index_find(s, name);
	if (e && e->gen == seen)
		pg_index_del(s, name, seen + 1); /* the delete that removed the row drew a larger generation */
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct pg_entry *)a)->m.name, ((const struct pg_entry *)b)->m.name);
}

void pg_index_replace(struct pgstore *s, struct pg_entry *e, size_t n)
{
	qsort(e, n, sizeof *e, by_name);
	free(s->t);
	s->t = e;
	s->n = s->cap = n;
	s->bytes = 0;
	for (size_t i = 0; i < n; i++)
		s->bytes += e[i].m.bytes;
	memset(s->tombs, 0, sizeof s->tombs);
}

/* ---- binary values ---- */

static uint64_t be64(const char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | (uint8_t)p[i];
	return v;
}

static int get_i64(const PGresult *r, int i, int col, uint64_t *out)
{
	if (PQgetisnull(r, i, col) || PQgetlength(r, i, col) != 8)
		return -1;
	*out = be64(PQgetvalue(r, i, col));
	return 0;
}

int pg_row_meta(const PGresult *r, int i, struct pe_store_meta *m, int64_t *gen, const char **why)
{
	uint64_t v[7], g, bytes, created, maxabs;
	char dt[8];
	const char *param;
	int nlen = PQgetlength(r, i, 0), dlen = PQgetlength(r, i, 1);
	memset(m, 0, sizeof *m);
	*why = "a column is missing or of another type";
	if (PQnfields(r) < 12 || nlen <= 0 || nlen > PE_STORE_NAME_MAX || dlen <= 0 || dlen >= (int)sizeof dt)
		return -1;
	memcpy(m->name, PQgetvalue(r, i, 0), (size_t)nlen);
	memcpy(dt, PQgetvalue(r, i, 1), (size_t)dlen);
	dt[dlen] = 0;
	for (int k = 0; k < 5; k++)
		if (get_i64(r, i, 2 + k, &v[k]) != 0)
			return -1;
	if (get_i64(r, i, 7, &bytes) || PQgetlength(r, i, 8) != 32 || get_i64(r, i, 9, &created) ||
	    get_i64(r, i, 10, &maxabs) || get_i64(r, i, 11, &g))
		return -1;
	if (pe_store_name_check(m->name, strlen(m->name), NULL) != 0 || pe_dtype_parse(dt, &m->dtype) != 0)
		return *why = "not a valid name or dtype", -1;
	m->rows = v[0];
	m->cols = v[1];
	m->prefix_tokens = v[2];
	m->grid_h = v[3];
	m->grid_w = v[4];
	memcpy(m->sha256, PQgetvalue(r, i, 8), 32);
	m->created_ms = (int64_t)created;
	memcpy(&m->max_abs, &maxabs, sizeof m->max_abs);
	*gen = (int64_t)g;
	if (store_meta_check(m, why, &param) != 0)
		return -1;
	if (m->bytes != bytes)
		return *why = "bytes does not match the shape", -1;
	return 0;
}

/* ---- NOTIFY payloads ---- */

void pg_payload_put(const struct pe_store_meta *m, int64_t gen, char *out, size_t cap)
{
	char sha[65];
	for (int i = 0; i < 32; i++)
		snprintf(sha + 2 * i, 3, "%02x", m->sha256[i]);
	snprintf(out, cap, "P %" PRId64 " %s %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %s %" PRId64
		 " %a", gen, m->name, pe_dtype_name(m->dtype), m->rows, m->cols, m->prefix_tokens, m->grid_h, m->grid_w,
		 sha, m->created_ms, m->max_abs);
}

static int parse_put(const char *p, struct pe_store_meta *m, int64_t *gen)
{
	char name[PE_STORE_NAME_MAX + 1], dt[8], sha[65];
	const char *why, *param;
	int end = 0;
	memset(m, 0, sizeof *m);
	if (sscanf(p, "P %" SCNd64 " %64s %7s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %64s %" SCNd64
		   " %la%n", gen, name, dt, &m->rows, &m->cols, &m->prefix_tokens, &m->grid_h, &m->grid_w, sha,
		   &m->created_ms, &m->max_abs, &end) != 11 || p[end] || strlen(sha) != 64)
		return -1;
	for (int i = 0; i < 32; i++) {
		unsigned b;
		if (sscanf(sha + 2 * i, "%2x", &b) != 1)
			return -1;
		m->sha256[i] = (uint8_t)b;
	}
	snprintf(m->name, sizeof m->name, "%s", name);
	if (pe_store_name_check(name, strlen(name), NULL) != 0 || pe_dtype_parse(dt, &m->dtype) != 0)
		return -1;
	return store_meta_check(m, &why, &param);
}

int pg_payload_name(const char *p, char name[PE_STORE_NAME_MAX + 1])
{
	struct pe_store_meta m;
	int64_t gen;
	int end = 0;
	if (p[0] == 'P' && parse_put(p, &m, &gen) == 0) {
		memcpy(name, m.name, sizeof m.name);
		return 0;
	}
	if (p[0] == 'D' && sscanf(p, "D %" SCNd64 " %64s%n", &gen, name, &end) == 2 && !p[end] &&
	    pe_store_name_check(name, strlen(name), NULL) == 0)
		return 0;
	return -1;
}

int pg_apply_payload(struct pgstore *s, const char *p)
{
	struct pe_store_meta m;
	char name[PE_STORE_NAME_MAX + 1];
	int64_t gen;
	int end = 0;
	if (p[0] == 'P' && parse_put(p, &m, &gen) == 0) {
		pthread_mutex_lock(&s->lock);
		pg_index_put(s, &m, gen);
		s->notifications++;
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (p[0] == 'D' && sscanf(p, "D %" SCNd64 " %64s%n", &gen, name, &end) == 2 && !p[end] &&
	    pe_store_name_check(name, strlen(name), NULL) == 0) {
		pthread_mutex_lock(&s->lock);
		pg_index_del(s, name, gen);
		s->notifications++;
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	return -1;
}
