/* posenc core: the registry of tables, their parameters, validation and computation. No I/O.
 *
 * Every table in the contract is one struct pe_table_def: its path (without "/v1/"), a parameter
 * spec, a cross-parameter check, a shape function and a compute function. The HTTP layer and the
 * CLI both drive a table through the same calls, so validation and canonical keys are identical:
 *
 *     struct pe_params p;
 *     pe_params_init(&p, pe_table_find("sinusoidal"));
 *     pe_params_set(&p, "len", "512", &err);   ... for every key=value of the request
 *     pe_params_finish(&p, &err);              defaults, required, ranges, cross checks
 *     pe_table_shape(&p, &shape);
 *     pe_table_compute(&p, PE_F32, buf, &err); buf holds count(shape) * dtype size bytes
 *
 * Parameters are values, not pointers: struct pe_params owns nothing on the heap except list
 * values (pe_params_destroy frees them). Compute functions are thread-safe and re-entrant. */
#ifndef POSENC_CORE_H
#define POSENC_CORE_H

#include <stdint.h>
#include "posenc/dtype.h"
#include "posenc/err.h"

#define PE_MAX_PARAMS 32
#define PE_MAX_LIST 4096 /* longest comma list (factor lists: dim/2 numbers) */

enum pe_ptype {
	PE_PT_INT,  /* signed 64-bit, decimal digits only (optional leading '-') */
	PE_PT_REAL, /* finite double */
	PE_PT_ENUM, /* one of choices[] */
	PE_PT_BOOL, /* 0/1/true/false */
	PE_PT_LIST, /* comma-separated finite doubles (integers only with PE_LIST_INTEGERS) */
	PE_PT_TEXT  /* a string of at most max bytes, parsed by the table's check (M-RoPE's segments) */
};

struct pe_param_spec {
	const char *name;
	enum pe_ptype type;
	const char *def;             /* textual default; NULL = required; "" = optional, may stay unset */
	double min, max;             /* inclusive range for INT/REAL (and each LIST element) */
	const char *const *choices;  /* NULL-terminated, for ENUM */
	const char *help;            /* one line for --help and docs */
};

/* As the choices of a LIST: a list of integers, each value decimal digits only (optional leading
 * '-', no exponent, point or '+'), as INT values are; |value| <= 2^53 so doubles hold it exactly. */
extern const char *const pe_list_integers[];
#define PE_LIST_INTEGERS pe_list_integers

struct pe_param_val {
	int set;        /* given by the client or filled from a default */
	int given;      /* given by the client */
	int64_t i;      /* INT, BOOL, ENUM (index into choices) */
	double r;       /* REAL (also INT as double) */
	double *list;   /* LIST values (heap, owned by the params) */
	size_t nlist;
	char *text;     /* TEXT value (heap, owned by the params; a check may rewrite it canonically) */
};

struct pe_params;
struct pe_cost;

struct pe_table_def {
	const char *name;    /* "sinusoidal", "rope/inv_freq" */
	const char *summary;
	const struct pe_param_spec *params;
	int nparams;
	enum pe_dtype fixed_dtype; /* PE_I32 for integer tables; PE_DTYPE_COUNT_ when the client picks */
	/* Cross-parameter validation after defaults are filled; may fill derived values. */
	int (*check)(struct pe_params *p, struct pe_err *err);
	int (*shape)(const struct pe_params *p, struct pe_shape *s);
	/* Write the whole table into out (count(shape) elements of dt). */
	int (*compute)(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err);
	/* Optional: the largest |value| of the table (masked entries aside), from the parameters, as the
	 * compute function would produce it in double (at most a few ulps above): whether a dtype can
	 * hold the table is then known before it is computed (pe_table_check_dtype). NULL: every value
	 * is known to fit f16 (|v| <= 65504), or the table decides nothing in advance. */
	double (*max_abs)(const struct pe_params *p);
	/* Optional: the cost beyond the output (see struct pe_cost); NULL when there is none. */
	int (*cost)(const struct pe_params *p, struct pe_cost *c);
	/* Optional (NULL: whole tables only): rows [row0, row0 + nrows) of the table, the bytes compute
	 * writes there. Rows are the second-to-last axis (rank 1: the elements); out[k] receives plane
	 * k's rows (nrows * row elements), or nothing when NULL; a plane is an index of a rank-3
	 * table's leading axis (ranks 1 and 2: one plane). See pe_table_compute_rows. */
	int (*compute_rows)(const struct pe_params *p, enum pe_dtype dt, size_t row0, size_t nrows,
			    void *const *out, struct pe_err *err);
	/* Optional scalar reported beside the table (RoPE attention_scaling); NULL if none. */
	const char *extra_name;
	double (*extra)(const struct pe_params *p);
	/* Optional: the response header of the extra value (NULL: "X-PE-" and extra_name in header case). */
	const char *extra_header;
	/* Rank-3 tables: names of the leading axis' entries for pictures ({"cos", "sin", NULL}), or NULL. */
	const char *const *panel_labels;
	/* Transforms (POST /v1/<name>, e.g. "rope/apply") leave shape and compute NULL and set these.
	 * out_shape: the result's shape for an input shape, or PE_EINVAL naming what does not fit
	 * (odd rotary dim, axis out of range, heads mismatch...). apply: out from x, both of the
	 * working dtype x->dtype (PE_F32 or PE_F64: float32 arithmetic, float64 for f64 input);
	 * out->data may be x->data when the shapes are equal, so kernels must allow in-place.
	 * final_dt is the dtype the result will be rounded to (masks use its lowest finite value). */
	int (*out_shape)(const struct pe_params *p, const struct pe_shape *in, struct pe_shape *out,
			 struct pe_err *err);
	int (*apply)(const struct pe_params *p, const struct pe_tensor_mut *x, struct pe_tensor_mut *out,
		     enum pe_dtype final_dt, struct pe_err *err);
	/* Transforms whose result can outgrow the input: the parameter that grows it (a result over
	 * the element limit from an input within it is that parameter's fault), else NULL. */
	const char *grows;
};

struct pe_params {
	const struct pe_table_def *def;
	struct pe_param_val v[PE_MAX_PARAMS];
};

extern const char *const pe_cos_sin_labels[]; /* {"cos", "sin", NULL} */

/* Registry: tables (GET) and transforms (POST), by path without "/v1/". */
const struct pe_table_def *pe_table_find(const char *name);
const struct pe_table_def *const *pe_table_all(size_t *n);
const struct pe_table_def *pe_transform_find(const char *name);
const struct pe_table_def *const *pe_transform_all(size_t *n);

void pe_params_init(struct pe_params *p, const struct pe_table_def *def);
void pe_params_destroy(struct pe_params *p);
/* Parse one parameter. Unknown names, repeats, empty values, bad numbers, out-of-range values:
 * PE_EINVAL with err->param = key. */
int pe_params_set(struct pe_params *p, const char *key, const char *value, struct pe_err *err);
int pe_params_finish(struct pe_params *p, struct pe_err *err);
/* Set in `to` (initialised for its own table) every parameter the client gave in `from` that
 * `to`'s table also has, with the same value: how a transform builds the table it applies. */
int pe_params_derive(const struct pe_params *from, struct pe_params *to, struct pe_err *err);
/* Index of a parameter in the table's spec, or -1. */
int pe_param_index(const struct pe_table_def *def, const char *name);

/* Accessors by name for table implementations (the name must exist in the spec; abort if not). */
int64_t pe_param_int(const struct pe_params *p, const char *name);
double pe_param_real(const struct pe_params *p, const char *name);
int pe_param_enum(const struct pe_params *p, const char *name);
int pe_param_isset(const struct pe_params *p, const char *name);
const double *pe_param_list(const struct pe_params *p, const char *name, size_t *n);

/* Canonical form "name=value&..." in spec order, every set parameter included, numbers printed
 * canonically (so "1e4" and "10000" give the same key). Returns length, or -1 if cap is too small. */
int pe_params_canonical(const struct pe_params *p, char *buf, size_t cap);

int pe_table_shape(const struct pe_params *p, struct pe_shape *s);
/* Transforms: see out_shape / apply above. */
int pe_transform_shape(const struct pe_params *p, const struct pe_shape *in, struct pe_shape *out,
		       struct pe_err *err);
int pe_transform_apply(const struct pe_params *p, const struct pe_tensor_mut *x, struct pe_tensor_mut *out,
		       enum pe_dtype final_dt, struct pe_err *err);
/* rope/apply with per-token positions (POST /v1/rope/apply as multipart/form-data): positions as
 * the client sent them, int32 or int64 (wide) in host order, C order, aligned for their size;
 * shape [seq] (shared by every vector of x; vLLM's [num_tokens] with x [num_tokens, heads, head_dim]
 * and seq_axis=-3), [batch, seq] (batch 1, or the length of x's first axis, before seq_axis); with
 * mrope_section, [3, seq] or [3, batch, seq]. x (working dtype, as pe_transform_apply) is rotated in
 * place. 0, or PE_EINVAL naming "positions" (shape, range), "mrope_section" or "offset".
 * With axes_dim (axial RoPE, diffusers' apply_rotary_emb): positions are ids [seq, n_axes] of
 * dtype `dtype` (any float, or PE_I32 with wide as above; fractional and negative allowed), one
 * band of axes_dim channels per axis; PE_EBODY naming "positions" for a non-finite id. */
struct pe_positions {
	struct pe_shape shape;
	int wide;
	const void *data;
	enum pe_dtype dtype; /* axes_dim only: the ids' dtype (PE_I32 for int32 and int64) */
};
int pe_rope_apply_positions(const struct pe_params *p, const struct pe_positions *pos, struct pe_tensor_mut *x,
			    struct pe_err *err);
/* Working dtype of a transform for an input dtype: PE_F64 for f64, else PE_F32. */
enum pe_dtype pe_transform_work_dtype(enum pe_dtype in);
int pe_table_compute(const struct pe_params *p, enum pe_dtype dt, void *out, struct pe_err *err);
/* A block of a table, for writers that stream a large table through a small buffer: rows
 * [row0, row0 + nrows) of plane `plane` (see compute_rows), or of every plane one after the other
 * with PE_TABLE_ALL_PLANES (out is then [planes, nrows, ...]), byte for byte what
 * pe_table_compute writes there, for any row0 (blocks starting at multiples of
 * PE_TABLE_ROW_ALIGN cost no more than their rows). pe_table_compute_planes: out[k] for plane k,
 * NULL for a plane not wanted. A table without compute_rows, a plane or row out of range:
 * PE_EINTERNAL (ask pe_table_rows_supported first). Thread-safe as pe_table_compute. */
#define PE_TABLE_ROW_ALIGN 1024
#define PE_TABLE_ALL_PLANES ((size_t)-1)
int pe_table_rows_supported(const struct pe_params *p);
int pe_table_compute_rows(const struct pe_params *p, enum pe_dtype dt, size_t plane, size_t row0, size_t nrows,
			  void *out, struct pe_err *err);
int pe_table_compute_planes(const struct pe_params *p, enum pe_dtype dt, size_t row0, size_t nrows,
			    void *const *out, struct pe_err *err);

/* g[i*n + j] = dot(rows[i], rows[j]) for n rows of d doubles, summed in double: the position
 * similarity of /v1/analysis/similarity, for tables the core does not make (learned ones).
 * Blocked, vectorised, each pair computed once (see pe_gram); never cancelled. */
void pe_gram_f64(const double *rows, size_t n, size_t d, double *g);
/* The same into out (n*n elements of dt), stopping between blocks when pe_cancelled() says so:
 * 0, or that code with err set (out is then partly written). Each product is the dot product
 * summed in double in blocks and vector lanes: |error| <= (d/2 + 8) * 2^-53 * sum_k |x_k y_k|. */
int pe_gram(const double *rows, size_t n, size_t d, enum pe_dtype dt, void *out, struct pe_err *err);
/* The work of pe_gram for n rows of d elements, n·(n+1)/2·d multiply-adds (each pair once), as
 * pe_table_cost counts it for /v1/analysis/similarity; UINT64_MAX when that does not fit. */
uint64_t pe_gram_cost(uint64_t n, uint64_t d);

/* ---- bounded work ----
 * What a request costs beyond its output, decided from the parameters before anything is
 * allocated: the largest intermediate table it builds (elements; a server holds it to the same
 * max_elements as the output) and the work of an analysis (multiply-adds, or their equivalent),
 * each with the parameter to name when it is too much. Tables without a cost callback report 0. */
struct pe_cost {
	uint64_t intermediate;
	const char *intermediate_param;
	uint64_t work;
	const char *work_param;
	/* The most bytes compute allocates besides its output (intermediate tables, per-job arrays):
	 * a server reserves them on its memory budget before the job computes. Named by
	 * intermediate_param when set, else work_param. */
	uint64_t scratch_bytes;
};
int pe_table_cost(const struct pe_params *p, struct pe_cost *c);

/* Can dt hold every value of the table (from the def's max_abs)? 0, or PE_EINVAL naming "dtype"
 * when the largest value would round to infinity in dt. */
int pe_table_check_dtype(const struct pe_params *p, enum pe_dtype dt, struct pe_err *err);
/* The same check on values already computed (learned tables, resampled): 0, or PE_EINVAL naming
 * "dtype" when some finite v[i] would round to infinity in dt. */
int pe_check_dtype_range(const double *v, size_t n, enum pe_dtype dt, struct pe_err *err);

/* ---- cancellation ----
 * A computation stops early (returning PE_ETIMEOUT or PE_EDRAINING with err set) when the calling
 * thread's deadline has passed or pe_cancel_all() was called; long kernels check between blocks
 * of work, and pe_table_compute / pe_transform_apply on entry. A worker sets the deadline of the
 * job it runs (CLOCK_MONOTONIC seconds as pe_monotonic() gives, 0 for none) and clears it after.
 * pe_cancel_all() is for shutdown and cannot be undone. All thread-safe. */
double pe_monotonic(void);
void pe_cancel_set_deadline(double deadline);
double pe_cancel_deadline(void); /* this thread's, as set; 0: none */
void pe_cancel_all(void);
int pe_cancelled(void); /* 0, PE_ETIMEOUT or PE_EDRAINING */
int pe_cancel_err(int code, struct pe_err *err); /* set err for a pe_cancelled() code; returns code */

/* SIMD dispatch: chosen once at first use, the best tier the CPU has (AVX-512 F+DQ, AVX2+FMA+F16C,
 * scalar; the enum is in that order), unless the environment variable POSENC_ISA names one:
 * "scalar", "avx2" or "avx512" (any other value, or a tier the CPU lacks, falls back to the best
 * it has). pe_isa_name() says which one is active, by the same names. */
enum pe_isa { PE_ISA_SCALAR, PE_ISA_AVX2, PE_ISA_AVX512 };
enum pe_isa pe_isa_active(void);
const char *pe_isa_name(void);
/* Is POSENC_ISA unset or a tier this CPU has? 0, else PE_EINVAL with err naming "POSENC_ISA" and a
 * one-line detail: the value (non-printable bytes as '?', cut at 32), the accepted values and the
 * tiers this CPU supports. For programs that refuse to run on a value the dispatch would ignore. */
int pe_isa_check_env(struct pe_err *err);
/* Tests only: force a path (returns PE_EINVAL if the CPU lacks it or isa is no tier). */
int pe_isa_force(enum pe_isa isa);

#endif
