/* The Proxy-Wasm ABI v0.2.1 for filters written in C: the host functions
 * gatewayd provides (import module "env") and the callbacks a filter exports.
 * A small subset of what the spec lists; see docs/filters.md. */
#ifndef PROXY_WASM_H
#define PROXY_WASM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define PROXY_IMPORT(name) __attribute__((import_module("env"), import_name(#name)))
#define PROXY_EXPORT(name) __attribute__((export_name(#name)))

enum { PROXY_OK = 0, PROXY_NOT_FOUND = 1 };
enum { PROXY_CONTINUE = 0, PROXY_PAUSE = 1 };
enum { LOG_TRACE, LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_CRITICAL };
enum { MAP_REQUEST_HEADERS = 0, MAP_RESPONSE_HEADERS = 2 };
enum { BUFFER_REQUEST_BODY = 0, BUFFER_RESPONSE_BODY = 1, BUFFER_PLUGIN_CONFIGURATION = 7 };

PROXY_IMPORT(proxy_log) uint32_t proxy_log(uint32_t level, const char *message, size_t size);
PROXY_IMPORT(proxy_get_buffer_bytes)
uint32_t proxy_get_buffer_bytes(uint32_t buffer, size_t start, size_t max, char **data, size_t *size);
PROXY_IMPORT(proxy_set_buffer_bytes)
uint32_t proxy_set_buffer_bytes(uint32_t buffer, size_t start, size_t size, const char *data, size_t data_size);
PROXY_IMPORT(proxy_get_header_map_value)
uint32_t proxy_get_header_map_value(uint32_t map, const char *key, size_t key_size, char **value, size_t *value_size);
PROXY_IMPORT(proxy_add_header_map_value)
uint32_t proxy_add_header_map_value(uint32_t map, const char *key, size_t key_size, const char *value, size_t value_size);
PROXY_IMPORT(proxy_replace_header_map_value)
uint32_t proxy_replace_header_map_value(uint32_t map, const char *key, size_t key_size, const char *value, size_t value_size);
PROXY_IMPORT(proxy_remove_header_map_value)
uint32_t proxy_remove_header_map_value(uint32_t map, const char *key, size_t key_size);
PROXY_IMPORT(proxy_send_local_response)
uint32_t proxy_send_local_response(uint32_t status, const char *details, size_t details_size, const char *body, size_t body_size,
                                   const char *headers, size_t headers_size, int32_t grpc_status);

/* The host hands data over in memory the filter allocates. */
PROXY_EXPORT(proxy_on_memory_allocate) void *proxy_on_memory_allocate(size_t size) { return malloc(size); }
PROXY_EXPORT(proxy_abi_version_0_2_1) void proxy_abi_version_0_2_1(void) {}

#endif
