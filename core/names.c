/* names.c — name tables for op kinds, op classes and device kinds (locked to the enums). */
#include <string.h>
#include <strings.h>

#include "hx-impl.h"

static const char *const hx__op_kind_names[] = {
    "embed", "rms_norm", "matmul", "rope", "attn", "swiglu", "relu2_glu", "add",
};
_Static_assert(HX_ARRAY_LEN(hx__op_kind_names) == HX_OP_KIND_COUNT, "op kind names");

static const char *const hx__op_class_names[] = {
    "embed", "norm", "qkv", "rope", "attn", "o", "gate_up", "act", "down", "add", "lm_head",
};
_Static_assert(HX_ARRAY_LEN(hx__op_class_names) == HX_CLASS_COUNT, "op class names");

static const char *const hx__device_kind_names[] = {"CPU", "GPU", "iGPU", "NPU"};
_Static_assert(HX_ARRAY_LEN(hx__device_kind_names) == HX_DEVICE_KIND_COUNT, "device kinds");

const char *hx_op_kind_name(enum hx_op_kind k)
{
    return (unsigned)k < HX_OP_KIND_COUNT ? hx__op_kind_names[k] : "?";
}

const char *hx_op_class_name(enum hx_op_class c)
{
    return (unsigned)c < HX_CLASS_COUNT ? hx__op_class_names[c] : "?";
}

int hx_op_class_from_name(const char *name, enum hx_op_class *out)
{
    for (int i = 0; i < HX_CLASS_COUNT; i++)
        if (strcasecmp(name, hx__op_class_names[i]) == 0) {
            *out = (enum hx_op_class)i;
            return HX_OK;
        }
    if (strcasecmp(name, "ffn_up") == 0) {
        *out = HX_CLASS_GATE_UP;
        return HX_OK;
    }
    return HX_E_NOTFOUND;
}

const char *hx_device_kind_name(enum hx_device_kind k)
{
    return (unsigned)k < HX_DEVICE_KIND_COUNT ? hx__device_kind_names[k] : "?";
}
