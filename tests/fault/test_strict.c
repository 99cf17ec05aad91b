/* Strict requests (issue 9 item 1) against the running daemon, over raw sockets so every byte of
 * the request target is sent as written: unknown, repeated and empty parameters, signs,
 * exponents, 64-bit overflow, NaN / Inf, bad percent-encoding, NUL bytes and values a table
 * cannot compute with are each a 400 problem+json naming the parameter; paths are matched exactly (no "//", ".", "..", trailing "/",
 * encoded "/" or NUL turning into another route): 404 problem+json. */
#include "support/pe_fault.h"

struct req_case {
	const char *target;
	int status;
	const char *param; /* the problem's "param", or NULL when none is expected */
};

static const struct req_case cases[] = {
	/* parameters */
	{"/v1/sinusoidal?lenght=4&dim=8", 400, "lenght"},
	{"/v1/sinusoidal?len=4&len=4&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=4&dim=8&dim=9", 400, "dim"},
	{"/v1/sinusoidal?len=&dim=8", 400, "len"},
	{"/v1/sinusoidal?len&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=%2B4&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=+4&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=-4&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=4e0&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=4.0&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=0x4&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=4&dim=8&base=%2B1e4", 400, "base"},
	{"/v1/sinusoidal?len=4&dim=8&base=1e400", 400, "base"},
	{"/v1/sinusoidal?len=18446744073709551617&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=9223372036854775808&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=4&dim=8&offset=-9223372036854775809", 400, "offset"},
	{"/v1/sinusoidal?len=4&dim=8&base=nan", 400, "base"},
	{"/v1/sinusoidal?len=4&dim=8&base=NaN", 400, "base"},
	{"/v1/sinusoidal?len=4&dim=8&base=inf", 400, "base"},
	{"/v1/sinusoidal?len=4&dim=8&base=-Infinity", 400, "base"},
	{"/v1/sinusoidal?len=4&dim=8&base=0x1p4", 400, "base"},
	{"/v1/sinusoidal?len=4%zz&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=4%2&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=%G4&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=4%00&dim=8", 400, "len"},
	{"/v1/sinusoidal?len=4&dim=8%00", 400, "dim"},
	{"/v1/sinusoidal?len%00=4&dim=8", 400, "len%00"},
	{"/v1/sinusoidal?len=4&dim=8&variant=vaswani%00x", 400, "variant"},
	{"/v1/sinusoidal?len=4&dim=8&format=json&format=npy", 400, "format"},
	{"/v1/sinusoidal?len=4&dim=8&dtype=", 400, "dtype"},
	{"/v1/sinusoidal?len=4%26dim=8", 400, "len"},
	{"/v1/rope?len=4&dim=8&scaling=longrope&factor=2&original_max_position_embeddings=2&short_factor=1,nan"
	 "&long_factor=1,2",
	 400, "short_factor"},
	{"/v1/relative/t5?q_len=4&bidirectional=yes", 400, "bidirectional"},
	{"/v1/alibi?heads=4&q_len=4&mask=causal&mask=none", 400, "mask"},
	/* in the parameter's range but not a float32, which compat=hf computes in (found by fuzzing) */
	{"/v1/sinusoidal?len=2&dim=8&variant=t2t&min_timescale=1e39&compat=hf", 400, "min_timescale"},
	{"/v1/sinusoidal?len=2&dim=8&base=1e-300&compat=hf", 400, "base"},
	{"/v1/relative/xl?len=2&dim=8&base=1e-300&compat=hf", 400, "base"},
	{"/v1/rope2d?height=2&width=2&dim=8&base=1e-300&compat=hf", 400, "base"},
	{"/v1/rope?len=4&dim=8&base=1e-300&compat=hf", 400, "base"},
	/* a combination the parameters accept but the computation refuses */
	{"/v1/analysis/similarity?len=4&dim=8&compat=ggml", 400, "compat"},
	/* paths */
	{"/v1//sinusoidal?len=4&dim=8", 404, NULL},
	{"//v1/sinusoidal?len=4&dim=8", 404, NULL},
	{"/v1/sinusoidal/?len=4&dim=8", 404, NULL},
	{"/v1/./sinusoidal?len=4&dim=8", 404, NULL},
	{"/v1/../v1/sinusoidal?len=4&dim=8", 404, NULL},
	{"/v1/sinusoidal/..?len=4&dim=8", 404, NULL},
	{"/v1/rope//inv_freq?dim=8", 404, NULL},
	{"/v1/SINUSOIDAL?len=4&dim=8", 404, NULL},
	{"/healthz/", 404, NULL},
	{"/v1%2Fsinusoidal?len=4&dim=8", 404, NULL},
	{"/v1/rope%2Finv_freq?dim=8", 404, NULL},
	{"/v1/sinusoidal%2F?len=4&dim=8", 404, NULL},
	{"/v1/sinusoidal%00?len=4&dim=8", 404, NULL},
	{"/v1/sinusoidal%00/x?len=4&dim=8", 404, NULL},
	{"/readyz%00", 404, NULL},
	{"/v1/sinusoidal;x?len=4&dim=8", 404, NULL},
	/* and the plain request still works */
	{"/v1/sinusoidal?len=4&dim=8", 200, NULL},
};

/* Transforms: the same rules for their parameters (a small JSON body each). */
static const struct req_case post_cases[] = {
	{"/v1/sinusoidal/apply?lenght=2", 400, "lenght"},
	{"/v1/sinusoidal/apply?xscale=nan", 400, "xscale"},
	/* accepted values whose float32 result overflows (found as 500s from the JSON encoder) */
	{"/v1/sinusoidal/apply?xscale=1e300", 400, "xscale"},
	{"/v1/sinusoidal/apply?variant=t2t&min_timescale=1e39&compat=hf", 400, "min_timescale"},
	{"/v1/alibi/apply?max_bias=65", 400, "max_bias"},
};

static int scenario(void)
{
	fault_init("strict", 60);
	struct pe_spawn d;
	daemon_start(&d, NULL);
	for (size_t i = 0; i < sizeof post_cases / sizeof post_cases[0]; i++) {
		const struct req_case *c = &post_cases[i];
		static const char body[] = "[[[1, 2], [3, 4]]]";
		struct resp r = {0};
		int ok = http_request(d.port, "127.0.0.1", "POST", c->target, "Content-Type: application/json\r\n", body,
				      sizeof body - 1, 5000, &r) == 0 &&
			 is_problem(&r, c->status, c->param);
		check(ok, "POST %s -> %d naming %s (got %d: %.160s)", c->target, c->status, c->param, r.status,
		      r.body ? r.body : "");
		resp_free(&r);
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct req_case *c = &cases[i];
		char req[1024];
		int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", c->target);
		struct resp r = {0};
		int fd = tcp_connect(d.port, "127.0.0.1");
		int ok = fd >= 0 && send_all(fd, req, (size_t)n) == 0 && read_response(fd, &r, 5000, 1 << 24) == 0;
		if (fd >= 0)
			close(fd);
		if (c->status == 200)
			ok = ok && r.status == 200;
		else
			ok = ok && is_problem(&r, c->status, c->param);
		check(ok, "%s -> %d%s%s (got %d: %.160s)", c->target, c->status, c->param ? " naming " : "",
		      c->param ? c->param : "", r.status, r.status == 200 ? "a table" : r.body ? r.body : "");
		resp_free(&r);
	}
	int st = daemon_stop(&d, SIGTERM, 30);
	check(st == 0, "exit status %d after SIGTERM (0 expected)", st);
	return fault_finish();
}

PE_FAULT_MAIN(scenario)
