/* fuzz-http.c — libFuzzer target for the server's HTTP request parser (app/server/reqparse.c):
 * feed the input as a stream of pipelined requests, resetting after each complete one. */
#include <stddef.h>
#include <stdint.h>

#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hx_srv_reqp rp;
    hx__srv_reqp_init(&rp);
    size_t off = 0;
    while (off < size) {
        size_t used = hx__srv_reqp_feed(&rp, (const char *)data + off, size - off);
        off += used;
        if (rp.error_status || (!rp.complete && used == 0)) break;
        if (!rp.complete) break;
        hx__srv_reqp_reset(&rp);
    }
    hx__srv_reqp_deinit(&rp);
    return 0;
}
