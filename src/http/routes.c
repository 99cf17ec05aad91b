/* Metric route labels: the fixed routes of http.h, then one per table and transform of the
 * core's registry, named by its path ("sinusoidal", "rope/inv_freq"). */
#include "http/internal.h"

static const char *const route_names[] = {
#define PE_HTTP_ROUTE_NAME_(id, name) name,
	PE_HTTP_ROUTES(PE_HTTP_ROUTE_NAME_)
#undef PE_HTTP_ROUTE_NAME_
};

/* Route labels past PE_ROUTE_TABLE0: the tables of the registry, then its transforms. */
const char *pe_http_route_name(int route)
{
	size_t nt, nx;
	const struct pe_table_def *const *tables = pe_table_all(&nt);
	const struct pe_table_def *const *transforms = pe_transform_all(&nx);
	if (route >= 0 && route < PE_ROUTE_TABLE0)
		return route_names[route];
	size_t i = (size_t)(route - PE_ROUTE_TABLE0);
	if (route >= PE_ROUTE_TABLE0 && i < nt)
		return tables[i]->name;
	if (route >= PE_ROUTE_TABLE0 && i - nt < nx)
		return transforms[i - nt]->name;
	return "other";
}

int pe_http_def_route(const struct pe_table_def *def)
{
	size_t nt, nx;
	const struct pe_table_def *const *tables = pe_table_all(&nt);
	const struct pe_table_def *const *transforms = pe_transform_all(&nx);
	for (size_t i = 0; i < nt + nx && i < PE_ROUTE_MAX - PE_ROUTE_TABLE0; i++)
		if ((i < nt ? tables[i] : transforms[i - nt]) == def)
			return PE_ROUTE_TABLE0 + (int)i;
	return PE_ROUTE_OTHER;
}
