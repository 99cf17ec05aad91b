/* Choice lists that several tables' parameter specs share. Their own file, not the registry's:
 * the registry refers to every table, so a table that took these from it would form a cycle. */
#include "core/tables.h"

const char *const pe_compat_exact_hf[] = {"exact", "hf", NULL};
const char *const pe_cos_sin_labels[] = {"cos", "sin", NULL};
