/* config_doc: print posencd's configuration keys as the Markdown table of docs/configuration.md,
 * from the daemon's own config table (pe_config_key_get) and embedded defaults, so the page cannot
 * drift from the code. tests/tools/docs.py puts the output between the page's generated markers
 * (make docs) and fails make check when the committed page differs. */
#include "daemon/config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "268435456" as "268435456 (256 Mi)" for bytes; another power of two from 2^16 as "… (2^k)". */
static void print_number(const char *type, const char *text)
{
	static const char *const unit[] = {"Ki", "Mi", "Gi", "Ti"};
	char *end;
	long long v = strtoll(text, &end, 10);
	printf("%s", text);
	if (*end || v < 1024)
		return;
	if (!strcmp(type, "bytes")) {
		int u = -1;
		long long m = v;
		while (u < 3 && m % 1024 == 0) {
			m /= 1024;
			u++;
		}
		if (u >= 0)
			printf(" (%lld %s)", m, unit[u]);
	} else if (v >= 65536 && (v & (v - 1)) == 0) {
		printf(" (2^%d)", __builtin_ctzll((unsigned long long)v));
	}
}

/* Markdown table cells: a '|' in a help string would end the cell. */
static void print_cell(const char *s)
{
	for (; *s; s++)
		printf(*s == '|' ? "\\|" : "%c", *s);
}

/* "1..1125899906842624" with each bound as print_number writes it. */
static void print_range(const char *type, const char *range)
{
	const char *dots = strstr(range, "..");
	if (!dots || (strcmp(type, "integer") && strcmp(type, "bytes"))) {
		print_cell(range);
		return;
	}
	char lo[64];
	snprintf(lo, sizeof lo, "%.*s", (int)(dots - range), range);
	print_number(type, lo);
	printf(" … ");
	print_number(type, dots + 2);
}

int main(void)
{
	struct pe_config cfg;
	struct pe_err err = {0};
	if (pe_config_defaults(&cfg, &err)) {
		fprintf(stderr, "config_doc: the embedded defaults do not load: %s\n", err.detail);
		return 1;
	}
	printf("| key | default | accepts | what it sets |\n|---|---|---|---|\n");
	for (size_t i = 0; i < pe_config_key_count(); i++) {
		struct pe_config_key k;
		if (pe_config_key_get(i, &cfg, &k))
			return 1;
		char env[64], opt[64];
		size_t n = 0;
		for (; k.name[n] && n < sizeof env - 1; n++) {
			env[n] = (char)(k.name[n] >= 'a' && k.name[n] <= 'z' ? k.name[n] - 'a' + 'A' : k.name[n]);
			opt[n] = k.name[n] == '_' ? '-' : k.name[n];
		}
		env[n] = opt[n] = 0;
		printf("| `%s`<br>`POSENC_%s`<br>`--%s` | ", k.name, env, opt);
		print_number(k.type, k.value);
		printf(" | %s ", k.type);
		print_range(k.type, k.range);
		printf(" | ");
		print_cell(k.help);
		printf(" |\n");
	}
	return 0;
}
