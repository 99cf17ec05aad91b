/* Answers sent while their job computes them (stream.c): the first bytes of a large table go out
 * after its first block of rows, not after its last. Used by produce.c only. */
#ifndef PE_HTTP_STREAM_H
#define PE_HTTP_STREAM_H

#include "http/produce.h"

struct pe_streams; /* a server's streams under way, by cache key */
struct pe_stream;

/* What a streamed answer's headers say, as a cached body's would. */
struct pe_stream_head {
	const struct pe_producer *pr;
	struct pe_out out;
	struct pe_body_info info;
	char etag[40];
	size_t total; /* Content-Length, or PE_PRODUCE_LENGTH_UNKNOWN (chunked) */
};

struct pe_streams *pe_streams_new(void);
void pe_streams_free(struct pe_streams *ss); /* when no job runs any more */
/* Streams begun (their first block sent), and streams whose job was called off because every
 * reader went away. */
void pe_streams_stats(struct pe_streams *ss, uint64_t *begun, uint64_t *cancelled);

/* HTTP thread, at a miss whose job streams (key pending in cache): the stream of key, found by
 * pe_stream_join until the job ends, watching the key for the filled entry (which it holds for
 * its readers); readers' room (PE_STREAM_READER_BYTES each) is held on budget. first, the request
 * that made the job, is completed with the stream (its result; the result_free gives back the
 * reference, place and room) at the first block: a reference of first is taken, a reader's place
 * is kept for it, and its room is charged then. The reference returned is the job's. NULL when
 * out of memory. */
struct pe_stream *pe_stream_new(struct pe_streams *ss, struct pe_cache *cache, struct pe_budget *budget,
				struct waiter *first, const struct pe_producer *pr, const struct pe_out *o,
				const char *etag, const char *key, size_t keylen);
/* A request that found key under way (w, its waiter for the cache fill). Its stream when the
 * stream's bytes have begun: a reference and a reader's place (its room is the caller's to take),
 * the request reads it from the start. Otherwise NULL, and when a stream of key exists the
 * request is counted as waiting for the cache fill, so its job is not called off; before the
 * first block, w is also kept (a reference) to be completed with the stream at that block, as
 * first is, when its reader's room fits the budget then (else the fill answers it).
 * need_length: the request must have the answer's length before its body (HTTP/1.0, where only
 * the close ends a body without one, so a cut would read as the end); it waits for the fill
 * rather than read a stream whose length is not known yet or comes at its end. */
struct pe_stream *pe_stream_join(struct pe_streams *ss, const char *key, size_t keylen, int need_length,
				 struct waiter *w);
/* The most a reader copies per call (libmicrohttpd's block for its response), and the response
 * budget bytes a reader's response holds while it lives: that block and its headers. */
#define PE_STREAM_READ_BLOCK ((size_t)256 << 10)
#define PE_STREAM_READER_BYTES (PE_STREAM_READ_BLOCK + 2048)
/* The response that sends s from its first byte on conn, owning the caller's reference, reader's
 * place and PE_STREAM_READER_BYTES held on the stream's budget (given back when it is freed). As
 * it reads, *sent becomes the bytes handed to the connection (the request's, which outlives every
 * read). NULL when out of memory: the reference, place and bytes given back. Headers are the
 * caller's (pe_stream_head). */
struct MHD_Response *pe_stream_response(struct pe_stream *s, struct MHD_Connection *conn, uint64_t *sent);
const struct pe_stream_head *pe_stream_head(const struct pe_stream *s);
/* Give back a reader's place and its reference (a waiter's result_free). */
void pe_stream_leave(void *s);

/* The job (worker thread). The first ready bytes of data (total in all) are final and data does
 * not move until pe_stream_end: sent to every reader. The first call completes the first request,
 * and those that came before it and fit, with info's headers. 0, or PE_EBUSY with err set once every reader went away while no other
 * request waits for the key: the job should stop. */
int pe_stream_publish(struct pe_stream *s, const char *data, size_t ready, size_t total,
		      const struct pe_body_info *info, struct pe_err *err);
/* Before the job's buffer is handed to the cache or freed: readers wait until pe_stream_end. */
void pe_stream_hold(struct pe_stream *s);
/* After the key was filled (rc 0; data: the filled body's len bytes) or failed: readers go on
 * from the cache's entry, or their connections are closed (a 200 was already sent); the stream
 * leaves the registry and the job's reference goes. */
void pe_stream_end(struct pe_stream *s, int rc, const char *data, size_t len);
/* The job never ran (its submit failed): as pe_stream_end without pe_stream_hold. */
void pe_stream_abort(struct pe_stream *s);

#endif
