/*
 * sched.h — dispatch policies and the scheduler (core-private).
 *
 * A policy names devices by spec ("cpu", "vulkan", "vulkan:1", "npu-sim", "gpu") and says
 * which node goes where; the scheduler turns a graph into a plan (a device per node, grouped
 * into splits), keeps every activation slot and KV cache coherent across devices (a slot's
 * valid-on mask; a copy is inserted before a split that reads a slot its device lacks), runs
 * the splits through the hx__dev_* wrappers, and recovers from device failures by re-planning
 * over the fallback chain.
 */
#pragma once

#include "graph.h"
#include "registry.h"

#define HX_MAX_DEVICES 8

enum hx_policy_kind {
    HX_POLICY_SINGLE,
    HX_POLICY_GEMM_OFFLOAD,
    HX_POLICY_OP_MAP,
    HX_POLICY_LAYER_SPLIT,
    HX_POLICY_PHASE_SPLIT,
    HX_POLICY_TENSOR_SPLIT,
    HX_POLICY_AUTO,
    HX_POLICY_VERIFY,
    HX_POLICY_KIND_COUNT
};

struct hx_policy {
    enum hx_policy_kind kind;
    char text[256];                   /* as given, for display */
    char devs[HX_MAX_DEVICES][64];    /* device specs the policy names; devs[0] the primary */
    int n_devs;
    int class_dev[HX_CLASS_COUNT];    /* op-map: index into devs, -1 = primary */
    double ratio[HX_MAX_DEVICES];     /* layer-split / tensor-split shares (sum 1) */
    bool alternate;                   /* layer-split: layer i on device i % n */
    char fallback[HX_MAX_DEVICES][64];/* --fallback chain */
    int n_fallback;
};

/* Parse a policy (preset, "name:args" or "@file"), the --backend device and the --fallback
 * chain. HX_E_INVAL with a message naming the bad part. No device is touched. */
int hx__policy_parse(const char *spec, const char *backend, const char *fallback,
                     struct hx_policy *out);
const char *hx__policy_kind_name(enum hx_policy_kind k);
/* Resolve "gpu" to the best GPU-kind backend present ("hip", "vulkan"); NULL if none. */
const char *hx__resolve_gpu(void);

struct hx_sched;

struct hx_sched_params {
    const struct hx_model *model;
    const struct hx_policy *policy;
    struct hx_device_config devcfg;
    int64_t n_ctx, n_batch, n_logits;
    int32_t n_seq;
};

struct hx_sched_stats {
    int64_t n_splits;          /* splits of the last run */
    int64_t n_transfers;
    size_t bytes_moved;        /* between devices, last run */
    int64_t n_fallback_ops;    /* ops placed off their policy device because unsupported */
    int64_t n_recoveries;      /* device failures recovered from (cumulative) */
};

int hx__sched_new(const struct hx_sched_params *p, struct hx_sched **out);
void hx__sched_free(struct hx_sched *s);

/* Run graph g over the batch rows (tokens/pos/seq host arrays). Logits rows land in
 * logits_out ((g->n_logits, n_vocab) floats). kv_len: current cache length per sequence
 * (read only; the caller advances it on success). */
int hx__sched_run(struct hx_sched *s, const struct hx_graph *g, const int32_t *tokens,
                  const int32_t *pos, const int32_t *seq, const int32_t *kv_len,
                  float *logits_out, const volatile int *cancel);

/* The plan for g as text (per split: device, ops, reasons, transfers, bytes). */
int hx__sched_plan_text(struct hx_sched *s, const struct hx_graph *g, const char *phase,
                        struct hx_strbuf *sb);
const struct hx_sched_stats *hx__sched_stats(const struct hx_sched *s);
/* Comma-separated ids of the devices the last run used. */
const char *hx__sched_devices_used(const struct hx_sched *s);
