/* Model plans: a Hugging Face config.json in, every positional encoding the model uses out, each
 * with the canonical GET of its table (POST /v1/plan, `posenc plan`, `posenc rope --config`).
 *
 * The plan layer (src/plan/), above core and tensor and below http and the CLI, which make the
 * same plan from the same bytes. The config is read with jansson; one family is one row of the
 * table in src/plan/plan.c; the table URLs and the JSON answer are src/plan/out.c's. Whether a
 * url's answer fits a server's limits is asked of the writers' own bounds (pe_out_table_need).
 *
 * Ownership: pe_plan_build fills a caller's struct pe_plan whose strings are on the heap;
 * pe_plan_destroy frees them. pe_plan_json returns a new string (caller frees). Thread-safe. */
#ifndef POSENC_PLAN_H
#define POSENC_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "posenc/err.h"

#define PE_PLAN_MAX_BODY ((size_t)1 << 20) /* the largest config.json accepted (1 MiB) */
#define PE_PLAN_MAX_ENC 8
#define PE_PLAN_MAX_PARAMS 24
#define PE_PLAN_MAX_NOTES 8
#define PE_PLAN_MAX_WARNINGS 16
#define PE_PLAN_MAX_LAYERS 1024
#define PE_PLAN_MAX_DEPTH 64      /* the deepest nesting of a config accepted */
#define PE_PLAN_MAX_NODES 100000  /* the most JSON values in a config accepted */
#define PE_PLAN_MAX_LEN ((int64_t)1 << 30) /* the longest len a plan takes (?len= of POST /v1/plan) */
/* What a request's headers and libmicrohttpd's own bookkeeping take from posencd's
 * max_header_bytes: a url longer than max_header_bytes - PE_PLAN_URL_ROOM may get a 414. */
#define PE_PLAN_URL_ROOM 4096
#define PE_PLAN_MAX_URL ((size_t)32768 - PE_PLAN_URL_ROOM) /* for posencd's default max_header_bytes */

struct pe_plan_param {
	const char *key; /* the table's parameter name (static) */
	char *value;     /* its value as a query would give it (heap) */
	char *source;    /* the config key it was read from (heap), or NULL when the plan chose it */
};

struct pe_plan_enc {
	const char *kind;   /* rope, mrope, rope2d, alibi, relative/t5, relative/deberta, sinusoidal, sinusoidal2d, learned, none */
	const char *tower;  /* the model part it belongs to: "text", "vision", "audio" */
	const char *table;  /* the table's path without /v1/ ("rope", "rope/mrope"); NULL for none */
	const char *len_key; /* the table's length parameter ("len", "q_len", "segments"), or NULL */
	const char *len_prefix; /* written before the length ("text:" for M-RoPE's segments), or NULL */
	/* Which layers: a name ("all", "sliding_attention", "full_attention", "encoder", "decoder")
	 * or, when layers is NULL, the layer indices layer_list[0 .. nlayers). */
	const char *layers;
	int layer_list[PE_PLAN_MAX_LAYERS];
	size_t nlayers;
	struct pe_plan_param params[PE_PLAN_MAX_PARAMS]; /* posenc's parameters, without the length */
	size_t nparams;
	char *url;          /* "/v1/<table>?<canonical query>" (heap), or NULL without a table */
	const char *format; /* "npy" when the url asks for it (its JSON would pass the limits), else NULL */
	int64_t len;        /* the length the url has (0: none) */
	int head_dim, rotary_dim; /* 0: does not apply */
	const char *layout; /* "half" / "interleaved", or NULL */
	double attention_scaling; /* what the cos/sin tables are multiplied by (1 when none applies) */
	double softmax_scale;     /* the scale of q·k the attention uses */
	double bias_scale;        /* ALiBi: what the model multiplies the served table by before the softmax (0: n/a) */
	char *notes[PE_PLAN_MAX_NOTES];
	size_t nnotes;
};

struct pe_plan {
	char model_type[64];
	struct pe_plan_enc enc[PE_PLAN_MAX_ENC];
	size_t nenc;
	char *warnings[PE_PLAN_MAX_WARNINGS];
	size_t nwarnings;
};

struct pe_plan_opts {
	int64_t len;           /* positions wanted; 0: the config's max_position_embeddings */
	uint64_t max_elements; /* the largest table a url may name: len is capped to fit (0: no cap) */
	/* The response limits of the server the urls are for, in bytes: nonzero max_response_bytes
	 * says the server has them (0: none, every url is JSON); budget_bytes is its
	 * response_budget_bytes (0: no budget). A table whose answer as JSON (any Accept-Encoding)
	 * would not pass them, as that server decides before computing (pe_out_table_need), gets
	 * format=npy (a note says so), and if even npy would not, its len is capped to the most
	 * positions that fit as npy (a warning names the cap). */
	uint64_t max_response_bytes;
	uint64_t budget_bytes;
	/* The longest url the server answers (its request line's bound: max_header_bytes -
	 * PE_PLAN_URL_ROOM); 0: PE_PLAN_MAX_URL. A longer url is a 422 naming the config key whose
	 * value makes it long (a factor list). */
	size_t max_url;
};

/* The plan of the config in json[0 .. n). Errors: PE_EBODY (400) for JSON that does not parse
 * (err->param "body"); PE_EUNPROCESSABLE (422) naming the key for a model_type or rope_type posenc
 * does not know, or a key the family needs that is missing or wrong (err->param
 * "rope_scaling.rope_type", "model_type", "num_attention_heads"...), for a key of the wrong JSON
 * type (booleans are not numbers; rope_scaling, rope_parameters, text_config must be objects), and
 * for a value the table of its url refuses (the table's own pe_params_set / pe_params_finish
 * decide, as for a GET of that url: "rope_scaling.factor", "rope_theta"...); PE_ETOOBIG for a body past
 * PE_PLAN_MAX_BODY, PE_PLAN_MAX_DEPTH or PE_PLAN_MAX_NODES; PE_EINVAL naming "len" for a len outside
 * [1, PE_PLAN_MAX_LEN]. A table that cannot fit max_elements (or the response limits even as
 * npy) at its smallest (len 1, or the size the config fixes) is a 422 naming the
 * config key that sizes it (head_dim, image_size...), and so is a url longer than max_url. Keys
 * read from text_config are named with its prefix ("text_config.rope_theta"). On failure the
 * plan holds nothing to free. */
int pe_plan_build(const char *json, size_t n, const struct pe_plan_opts *o, struct pe_plan *plan,
		  struct pe_err *err);
void pe_plan_destroy(struct pe_plan *plan);

/* The plan as the JSON of POST /v1/plan (a new NUL-terminated string, *len its length), or NULL
 * when out of memory. */
char *pe_plan_json(const struct pe_plan *plan, size_t *len);

/* The encoding a command line picks: the only one with a table of kind `kind`'s family (rope
 * and mrope for "rope"), or the one whose layers name is `layers` (or whose list holds the layer
 * number `layers`). PE_EINVAL naming "layers" when none or several match (the message lists
 * them), PE_ENOTFOUND when the plan has no such encoding. */
const struct pe_plan_enc *pe_plan_pick(const struct pe_plan *plan, const char *kind, const char *layers,
				       struct pe_err *err);

#endif
