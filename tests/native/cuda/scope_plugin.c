/* A plugin linked against one runtime (-DRT_MAJOR=13 with libcudart.so.13, or 11 with
 * libcudart.so.11.0), loaded by scope_host with dlopen(RTLD_LOCAL) or dlmopen, as Python
 * loads an extension module. plugin_query: scope_query.h, from inside the plugin. */
#include "scope_query.h"

__attribute__((visibility("default"))) void plugin_query(char *out, size_t size);
void plugin_query(char *out, size_t size) { scope_query(out, size); }
