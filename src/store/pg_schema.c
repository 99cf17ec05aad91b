/* The PostgreSQL store's schema, found or created, and what this posencd's role may do with it.
 *
 * posenc_schema_version holds the version the layout is (1). When posenc_schema_version,
 * posenc_learned and posenc_generation all exist (to_regclass, through the search_path) nothing
 * is created: a role with SELECT, INSERT, UPDATE, DELETE on posenc_learned, SELECT on
 * posenc_schema_version and USAGE on posenc_generation serves everything, without CREATE on the
 * schema. Otherwise they are created, in one transaction under an advisory lock so replicas
 * starting together do not race (this needs CREATE on the schema once: `posencd --init-store` does
 * it and exits). A newer version than this build knows keeps the store down (and pe_store_open
 * fails): a later version migrates, an older one must not write into what it does not understand.
 *
 * The rights: a role without SELECT on the tables cannot serve (loading the index fails, the store
 * stays down with the database's reason); one without the rights a put or a delete needs serves
 * reads, and those writes are refused at once (403) with a detail naming what it lacks. The
 * rights are read again every PG_PING_MS by the listener and before a write is refused for them,
 * so a GRANT or a REVOKE takes effect at the next write. */
#include "store/pg.h"

#include <stdlib.h>

#define SCHEMA_LOCK "7300616"
#define SCHEMA_V1                                                                                           \
	"CREATE TABLE posenc_learned (name text PRIMARY KEY, dtype text NOT NULL, nrows bigint NOT NULL, "  \
	"ncols bigint NOT NULL, prefix_tokens bigint NOT NULL, grid_h bigint NOT NULL, grid_w bigint NOT NULL, " \
	"bytes bigint NOT NULL, sha256 bytea NOT NULL, created_ms bigint NOT NULL, max_abs double precision NOT NULL, " \
	"generation bigint NOT NULL, data bytea NOT NULL); "                                               \
	"ALTER TABLE posenc_learned ALTER COLUMN data SET STORAGE EXTERNAL; "                                \
	"CREATE SEQUENCE posenc_generation; "                                                               \
	"INSERT INTO posenc_schema_version (version) VALUES (1)"

/* One query's single row, or NULL (w: the database's reason). */
static PGresult *row(PGconn *c, const char *sql, int64_t deadline, int ab, struct pg_why *w)
{
	PGresult *r = pg_run(c, sql, 0, NULL, NULL, NULL, 0, 0, deadline, ab);
	if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		return r;
	pg_describe(r, c, w);
	PQclear(r);
	return NULL;
}

/* The version the database holds (0: none), or -1. */
static int version(PGconn *c, int64_t deadline, int ab, struct pg_why *w)
{
	PGresult *r = row(c, "SELECT max(version) FROM posenc_schema_version", deadline, ab, w);
	int v = !r ? -1 : PQgetisnull(r, 0, 0) ? 0 : atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

/* Create what is missing: 0, or -1 with w (the database's reason: a role without CREATE). The
 * failure is the tables' absence (42P01: the store's configuration, not a retry) unless it was
 * transient. */
static int create(PGconn *c, int64_t deadline, int ab, int init, struct pg_why *w)
{
	struct pg_why e = {"", ""};
	int v = -1;
	if (pg_command(c, "BEGIN; SELECT pg_advisory_xact_lock(" SCHEMA_LOCK "); CREATE TABLE IF NOT EXISTS "
			  "posenc_schema_version (version integer NOT NULL)", deadline, ab, &e) == 0 &&
	    (v = version(c, deadline, ab, &e)) == 0 && pg_command(c, SCHEMA_V1, deadline, ab, &e) != 0)
		v = -1;
	if (v < 0)
		pg_command(c, "ROLLBACK", deadline, ab, NULL);
	else if (pg_command(c, "COMMIT", deadline, ab, &e) != 0)
		v = -1;
	if (v >= 0)
		return 0;
	int denied = !strcmp(e.state, "42501");
	snprintf(w->state, sizeof w->state, "%s", pg_sqlstate_code(e.state, 0) == PE_EUNAVAIL ? e.state : "42P01");
	pg_fit(w->text, sizeof w->text, "the learned tables do not exist and cannot be created (", e.text,
	       !denied ? ")" : init ? "): this role lacks CREATE on the schema; run --init-store as its owner" :
	       "); run posencd --init-store as a role with CREATE on the schema");
	return -1;
}

int pg_rights(struct pgstore *s, PGconn *c, int64_t deadline, int ab, struct pg_why *w)
{
	static const char *const names[] = {"INSERT on posenc_learned", "UPDATE on posenc_learned",
					    "DELETE on posenc_learned", "USAGE on posenc_generation"};
	PGresult *r = pg_run(c, "SELECT has_table_privilege('posenc_learned', 'INSERT'), has_table_privilege("
			     "'posenc_learned', 'UPDATE'), has_table_privilege('posenc_learned', 'DELETE'), "
			     "has_sequence_privilege('posenc_generation', 'USAGE') OR "
			     "has_sequence_privilege('posenc_generation', 'UPDATE')",
			     0, NULL, NULL, NULL, 0, 0, deadline, ab);
	char put[160] = "", del[160] = "";
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		pg_describe(r, c, w);
		PQclear(r);
		return r ? 1 : -1;
	}
	for (int i = 0; i < 4; i++) {
		if (!strcmp(PQgetvalue(r, 0, i), "t"))
			continue;
		if (i != 2)
			snprintf(put + strlen(put), sizeof put - strlen(put), "%s%s", put[0] ? ", " : "", names[i]);
		if (i >= 2)
			snprintf(del + strlen(del), sizeof del - strlen(del), "%s%s", del[0] ? ", " : "", names[i]);
	}
	PQclear(r);
	pthread_mutex_lock(&s->lock);
	s->no_put[0] = s->no_del[0] = 0;
	if (put[0])
		snprintf(s->no_put, sizeof s->no_put, "this posencd's database role may not store tables: it lacks %s "
			 "(GRANT them to write)", put);
	if (del[0])
		snprintf(s->no_del, sizeof s->no_del, "this posencd's database role may not delete tables: it lacks %s "
			 "(GRANT them to delete)", del);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* Do the tables exist through the search_path: 1, 0, or -1 (w: why; a search_path naming no
 * schema that exists is its own reason, 3F000: the tables may well exist elsewhere). */
static int found(PGconn *c, int64_t deadline, int ab, struct pg_why *w)
{
	PGresult *r = row(c, "SELECT to_regclass('posenc_schema_version') IS NOT NULL AND to_regclass("
			     "'posenc_learned') IS NOT NULL AND to_regclass('posenc_generation') IS NOT NULL, "
			     "current_schema() IS NOT NULL, current_setting('search_path')",
			  deadline, ab, w);
	if (!r)
		return -1;
	int exists = !strcmp(PQgetvalue(r, 0, 0), "t"), schema = !strcmp(PQgetvalue(r, 0, 1), "t");
	if (!exists && !schema) {
		snprintf(w->state, sizeof w->state, "3F000");
		pg_fit(w->text, sizeof w->text, "no schema is found through this role's search_path (", PQgetvalue(r, 0, 2),
		       "): set it to the schema that holds the learned tables (SQLSTATE 3F000)");
	}
	PQclear(r);
	return exists ? 1 : schema ? 0 : -1;
}

int pg_schema(struct pgstore *s, PGconn *c, int64_t deadline, int ab, int init, struct pg_why *w)
{
	int exists = found(c, deadline, ab, w), v;
	if (exists < 0 || (!exists && create(c, deadline, ab, init, w) != 0))
		return -1;
	if ((v = version(c, deadline, ab, w)) < 0)
		return -1;
	if (v > PG_SCHEMA_VERSION) {
		snprintf(w->text, sizeof w->text, "the database's schema is version %d; this posencd knows version %d", v,
			 PG_SCHEMA_VERSION);
		return -2;
	}
	if (v < PG_SCHEMA_VERSION) {
		snprintf(w->state, sizeof w->state, "42P01");
		snprintf(w->text, sizeof w->text, "posenc_schema_version holds no version: the tables were not made by "
			 "posencd (posencd --init-store makes them)");
		return -1;
	}
	return pg_rights(s, c, deadline, ab, w) == 0 ? 0 : -1;
}
