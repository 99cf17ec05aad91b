/* The fault tests' response reader (pe_fault.c read_response) on the framings posencd sends:
 * a chunked body is read to its last chunk with its coding undone, and a response pipelined
 * behind it stays in the socket for the next read; a chunked body cut short or with a malformed
 * size line is not a whole response. No daemon: the bytes are written into a socket pair. */
#include "support/pe_fault.h"

/* The responses read from a socket whose peer wrote text and then closed. */
static int read_from(const char *text, struct resp *r, struct resp *next)
{
	int sv[2];
	check(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
	check(send_all(sv[1], text, strlen(text)) == 0, "write the responses");
	close(sv[1]);
	int rc = read_response(sv[0], r, 2000, 1 << 20);
	if (next && rc == 0)
		rc = read_response(sv[0], next, 2000, 1 << 20);
	close(sv[0]);
	return rc;
}

static int scenario(void)
{
	fault_init("read_response", 60);
	struct resp a, b;
	int rc = read_from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			   "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
			   "HTTP/1.1 204 No Content\r\n\r\n", &a, &b);
	check(rc == 0, "a chunked answer and one pipelined behind it are read");
	check(a.status == 200 && a.chunked && a.content_length == -1, "the first is chunked (status %d)", a.status);
	check(a.body_len == 11 && memcmp(a.body, "hello world", 11) == 0, "its data: \"%s\" (%zu bytes)", a.body,
	      a.body_len);
	check(b.status == 204 && b.body_len == 0, "the pipelined one is left for the next read (status %d)", b.status);
	resp_free(&a);
	resp_free(&b);
	rc = read_from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", &a, NULL);
	check(rc != 0, "a chunked body cut short is not whole");
	resp_free(&a);
	rc = read_from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n", &a, NULL);
	check(rc != 0, "a body without the last chunk's CRLF is not whole");
	resp_free(&a);
	rc = read_from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", &a, NULL);
	check(rc != 0, "a malformed chunk size is not whole");
	resp_free(&a);
	rc = read_from("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 204 No Content\r\n\r\n", &a, &b);
	check(rc == 0 && !a.chunked && a.body_len == 3 && b.status == 204, "Content-Length framing as before");
	resp_free(&a);
	resp_free(&b);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
