/* fuzz-http.c — libFuzzer target for the HTTP request parser (app/server/reqparse.c): byte 0
 * sets the feed step, the rest is pipelined requests; a complete one must be whole, in limits. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    size_t step = (size_t)data[0] + 1, off = 1;
    struct hx_srv_reqp rp;
    hx__srv_reqp_init(&rp);
    while (off < size && !rp.error_status) {
        size_t k = size - off < step ? size - off : step;
        size_t used = hx__srv_reqp_feed(&rp, (const char *)data + off, k);
        off += used;
        if (rp.complete) {
            const struct hx_srv_req *r = &rp.req;
            if (!r->path || !r->body || r->body_len > HX_SRV_MAX_BODY_BYTES ||
                strlen(r->body) > r->body_len)
                __builtin_trap();
            hx__srv_reqp_reset(&rp);
        } else if (used < k && !rp.error_status) __builtin_trap(); /* unread, no reason */
    }
    hx__srv_reqp_deinit(&rp);
    return 0;
}
