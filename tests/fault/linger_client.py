#!/usr/bin/env python3
"""Send a request with a body the way Python's http.client does (the whole body, no
"Expect: 100-continue") and print the answer's status line, Content-Type and body on one line,
or "EXC <exception>" when the exchange failed (a reset, a broken pipe). Used by
tests/fault/test_linger.c.

usage: linger_client.py PORT METHOD PATH CONTENT-TYPE BODY-BYTES [Header: value ...]"""
import http.client
import sys


class Zeros:
    """A body of n zero bytes, read in blocks, so 80 MiB cost no memory."""

    def __init__(self, n):
        self.n = n

    def read(self, k=65536):
        k = min(k, self.n, 1 << 20)
        self.n -= k
        return b"\0" * k


def main():
    port, method, path, ctype, size = sys.argv[1:6]
    headers = {"Content-Type": ctype, "Content-Length": size}
    for h in sys.argv[6:]:
        name, value = h.split(": ", 1)
        headers[name] = value
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
    try:
        conn.request(method, path, body=Zeros(int(size)), headers=headers)
        resp = conn.getresponse()
        body = resp.read().decode("utf-8", "replace")
        print(resp.status, resp.getheader("Content-Type"), body.replace("\n", " "))
    except Exception as e:  # the point of the test: which exception, if any
        print("EXC", type(e).__name__, e)
    finally:
        conn.close()


if __name__ == "__main__":
    main()
