/* The registry of every table the service and the CLI know, by path without "/v1/". */
#include "core/tables.h"

#include <string.h>

const char *const pe_compat_exact_hf[] = {"exact", "hf", NULL};

static const struct pe_table_def *const all[] = {
	&pe_table_sinusoidal,
	&pe_table_sinusoidal2d,
	&pe_table_rope2d,
	&pe_table_alibi_slopes,
	&pe_table_alibi,
	&pe_table_relative_t5,
	&pe_table_relative_xl,
};

const struct pe_table_def *const *pe_table_all(size_t *n)
{
	*n = sizeof all / sizeof all[0];
	return all;
}

const struct pe_table_def *pe_table_find(const char *name)
{
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (strcmp(all[i]->name, name) == 0)
			return all[i];
	return NULL;
}
