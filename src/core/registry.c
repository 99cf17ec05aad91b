/* The registry of every table and transform the service and the CLI know, by path without "/v1/". */
#include "core/axial.h"
#include "core/tables.h"

#include <string.h>

static const struct pe_table_def *const all[] = {
	&pe_table_sinusoidal,
	&pe_table_sinusoidal2d,
	&pe_table_rope2d,
	&pe_table_alibi_slopes,
	&pe_table_alibi,
	&pe_table_relative_t5,
	&pe_table_relative_xl,
	&pe_table_rope,
	&pe_table_rope_inv_freq,
	&pe_table_rope_mrope,
	&pe_table_rope_mrope_positions,
	&pe_table_rope_axial, &pe_table_rope_axial_positions, /* axial.h */
	&pe_table_analysis_similarity,
	&pe_table_analysis_rope_decay,
	&pe_table_analysis_order,
};

static const struct pe_table_def *const transforms[] = {
	&pe_transform_sinusoidal_apply,
	&pe_transform_alibi_apply,
	&pe_transform_rope_apply,
};

static const struct pe_table_def *find_in(const struct pe_table_def *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i]->name, name) == 0)
			return list[i];
	return NULL;
}

const struct pe_table_def *const *pe_transform_all(size_t *n)
{
	*n = sizeof transforms / sizeof transforms[0];
	return transforms;
}

const struct pe_table_def *pe_transform_find(const char *name)
{
	return find_in(transforms, sizeof transforms / sizeof transforms[0], name);
}

const struct pe_table_def *const *pe_table_all(size_t *n)
{
	*n = sizeof all / sizeof all[0];
	return all;
}

const struct pe_table_def *pe_table_find(const char *name) { return find_in(all, sizeof all / sizeof all[0], name); }
