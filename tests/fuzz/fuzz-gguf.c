/* fuzz-gguf.c — libFuzzer target for the GGUF reader: any input must parse or fail cleanly,
 * and everything a successful parse exposes must be readable within the input. */
#include <stdint.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hx_gguf *g;
    if (hx__gguf_open_memory(data, size, &g) != 0) return 0;
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].nbytes) sink ^= ((const uint8_t *)g->tensors[i].data)[g->tensors[i].nbytes - 1];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const struct hx_gguf_value *v = &g->kv[i].value;
        if (v->type == HX_GGUF_ARRAY && v->v.arr.elem_type == HX_GGUF_STRING && v->v.arr.count)
            sink ^= (uint8_t)hx__gguf_arr_str(g, &v->v.arr, v->v.arr.count - 1).len;
        if (v->type == HX_GGUF_ARRAY && v->v.arr.elem_type == HX_GGUF_ARRAY && v->v.arr.count) {
            struct hx_gguf_arr sub;
            hx__gguf_arr_sub(&v->v.arr, v->v.arr.count - 1, &sub);
        }
    }
    hx__gguf_close(g);
    return (int)(sink & 0);
}
