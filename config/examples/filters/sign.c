/* Signs each request: X-Signature is FNV-1a (64-bit, hex) of the plugin
 * configuration (the key), the method, a space and the path, so a legacy
 * service can check that a call came through the gateway. */
#include <string.h>
#include "proxy_wasm.h"

static char key[256];
static size_t key_size;

PROXY_EXPORT(proxy_on_context_create) void proxy_on_context_create(uint32_t context, uint32_t parent) {}
PROXY_EXPORT(proxy_on_vm_start) uint32_t proxy_on_vm_start(uint32_t root, size_t size) { return 1; }

PROXY_EXPORT(proxy_on_configure) uint32_t proxy_on_configure(uint32_t root, size_t size) {
    char *data = NULL;
    size_t got = 0;
    if (size == 0 || size > sizeof key) return 0; /* a key is required */
    if (proxy_get_buffer_bytes(BUFFER_PLUGIN_CONFIGURATION, 0, size, &data, &got) != PROXY_OK) return 0;
    memcpy(key, data, got);
    key_size = got;
    free(data);
    return 1;
}

static uint64_t fnv1a(uint64_t hash, const char *bytes, size_t size) {
    for (size_t i = 0; i < size; i++) hash = (hash ^ (unsigned char)bytes[i]) * 0x100000001b3ULL;
    return hash;
}

static uint64_t header(const char *name, uint64_t hash) {
    char *value = NULL;
    size_t size = 0;
    if (proxy_get_header_map_value(MAP_REQUEST_HEADERS, name, strlen(name), &value, &size) != PROXY_OK) return hash;
    hash = fnv1a(hash, value, size);
    free(value);
    return hash;
}

PROXY_EXPORT(proxy_on_request_headers) uint32_t proxy_on_request_headers(uint32_t context, size_t headers, uint32_t end_of_stream) {
    uint64_t hash = fnv1a(0xcbf29ce484222325ULL, key, key_size);
    hash = header(":method", hash);
    hash = fnv1a(hash, " ", 1);
    hash = header(":path", hash);
    char hex[17];
    for (int i = 15; i >= 0; i--, hash >>= 4) hex[i] = "0123456789abcdef"[hash & 15];
    proxy_add_header_map_value(MAP_REQUEST_HEADERS, "x-signature", 11, hex, 16);
    return PROXY_CONTINUE;
}
