/*
 * scheduler.h — dispatch policies and the scheduler (core-private).
 *
 * A policy names devices by spec ("cpu", "vulkan", "vulkan:1", "npu-sim", "gpu") and says
 * which node goes where; the scheduler turns it into one placement rule per phase (prefill:
 * batches of more than one row; decode: one row), turns a graph into a plan (a device per
 * node, grouped into splits; tensor-split matmuls expanded into parallel parts), keeps every
 * activation slot and KV cache coherent across devices (a slot's valid-on mask; a copy is
 * inserted before a split that reads a slot its device lacks), runs the splits through the
 * hx__dev_* wrappers, recovers from device failures by re-planning over the fallback chain,
 * and under `verify` re-runs every op on a reference device with the same inputs and compares.
 * docs/policies.md explains each policy. The scheduler is core/sched*.c, in layers that share
 * core/sched-impl.h (its opening comment lists them).
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
    HX_POLICY_FIT,
    HX_POLICY_AUTO,
    HX_POLICY_VERIFY, /* a name only: verify is the `verify` flag over an inner kind */
    HX_POLICY_KIND_COUNT
};

enum hx_phase { HX_PHASE_PREFILL, HX_PHASE_DECODE, HX_PHASE_COUNT };

struct hx_policy {
    enum hx_policy_kind kind;
    char text[256];                /* as given, for display */
    char devs[HX_MAX_DEVICES][64]; /* device specs the policy names; devs[0] the primary */
    int n_devs;                    /* auto: 0 = every GPU/NPU present */
    int class_dev[HX_CLASS_COUNT]; /* op-map: index into devs, -1 = primary */
    double ratio[HX_MAX_DEVICES];  /* layer-split / tensor-split shares (sum 1) */
    bool alternate;                /* layer-split: layer i on device i % n */
    bool verify;                   /* compare every op with verify_ref */
    char verify_ref[64];
    char fallback[HX_MAX_DEVICES][64]; /* --fallback chain */
    int n_fallback;
    char mem_dev[HX_MAX_DEVICES][64]; /* --mem caps: device spec ("vulkan", "vulkan:1", "gpu") */
    size_t mem_cap[HX_MAX_DEVICES];   /* ... and its cap in bytes */
    int n_mem;
};

/* Parse a policy (preset, "name:args", "verify[@REF][:INNER]" or "@file"), the --backend
 * device and the --fallback chain. HX_E_INVAL with a message naming the bad part. No device
 * is touched. */
int hx__policy_parse(const char *spec, const char *backend, const char *fallback,
                     struct hx_policy *out);
const char *hx__policy_kind_name(enum hx_policy_kind k);
/* Parse --mem "DEV=SIZE[,DEV=SIZE]" (SIZE: bytes, or a number with K, M, G or T, binary
 * units, e.g. 512M, 1.5G) into p's caps. HX_E_INVAL naming the bad part: a malformed size, an
 * unknown device, a device named twice. NULL or "" sets none. */
int hx__mem_parse(const char *text, struct hx_policy *p);
/* Parse a size as --mem takes it; false if malformed. */
bool hx__parse_size(const char *text, size_t *out);
/* Resolve "gpu" to the best GPU-kind backend present ("hip", "vulkan"); NULL if none. */
const char *hx__resolve_gpu(void);

struct hx_sched;
struct hx_context;

struct hx_sched_params {
    const struct hx_model *model;
    const struct hx_policy *policy;
    struct hx_device_config devcfg;
    int64_t n_ctx, n_batch, n_logits;
    int32_t n_seq;
    /* hx_context_params.load_progress, NULL = none */
    void (*load_progress)(void *user_data, const char *device, uint64_t done, uint64_t total);
    void *load_progress_data;
};

struct hx_sched_stats {
    int64_t n_splits; /* splits of the last run (each tensor-split part counts) */
    int64_t n_transfers;
    size_t bytes_moved;     /* between devices, last run (inputs, joins, KV hand-overs) */
    int64_t n_parallel;     /* tensor-split groups of the last run */
    int64_t n_fallback_ops; /* ops placed off their policy device (unsupported or unhealthy) */
    int64_t n_recoveries;   /* device failures recovered from (cumulative) */
    double predicted_us;    /* auto: predicted time of the last run's plan; 0 = no model */
};

int hx__sched_new(const struct hx_sched_params *p, struct hx_sched **out);
void hx__sched_free(struct hx_sched *s);

/* Run graph g over the batch rows (tokens/pos/seq host arrays). Logits rows land in
 * logits_out ((g->n_logits, n_vocab) floats). kv_len: current cache length per sequence
 * (read only; the caller advances it on success). */
int hx__sched_run(struct hx_sched *s, const struct hx_graph *g, const int32_t *tokens,
                  const int32_t *pos, const int32_t *seq, const int32_t *kv_len, float *logits_out,
                  const volatile int *cancel);

/* The plan for g as text (per split: device, ops, reasons, transfers, bytes; auto: predicted
 * time per split and the alternatives it rejected). */
int hx__sched_plan_text(struct hx_sched *s, const struct hx_graph *g, const char *phase,
                        struct hx_strbuf *sb);
const struct hx_sched_stats *hx__sched_stats(const struct hx_sched *s);

/* Memory per device: what the plan accounts (need) and what the device holds now (alloc),
 * by kind: weights, KV caches, activation slots, staging, backend scratch (docs/policies.md
 * "Memory"). */
#define HX_SCHED_MEM_KINDS 5
struct hx_sched_mem {
    char id[64];
    size_t need[HX_SCHED_MEM_KINDS], alloc[HX_SCHED_MEM_KINDS];
    size_t limit; /* 0: unknown */
    char limit_from[80];
};
/* Fill out[0..max) for the scheduler's devices; returns how many. */
int hx__sched_mem(const struct hx_sched *s, struct hx_sched_mem *out, int max);
/* The plan's memory per device as text (engine plan). */
void hx__sched_mem_text(const struct hx_sched *s, struct hx_strbuf *sb);
/* Comma-separated ids of the devices the last run used. */
const char *hx__sched_devices_used(const struct hx_sched *s);
/* Placement rule of a phase as text ("single:cpu", "tensor-split:cpu=0.60,vulkan:0=0.40"). */
const char *hx__sched_rule_text(const struct hx_sched *s, enum hx_phase phase);

/* ---- verify ------------------------------------------------------------------------------ */

/* One op of a verified plan: the worst of every check made of it. */
struct hx_verify_op {
    int64_t node; /* index in the (expanded) graph of its phase */
    enum hx_op_kind kind;
    enum hx_op_class cls;
    int32_t layer;         /* -1: embedding / output */
    int16_t part, n_parts; /* tensor-split part, or 0, 0 */
    char dev[64];          /* device that ran it (last check) */
    double max_abs;        /* the worst of every check */
    double nmse, threshold; /* of the check with the largest nmse / threshold */
    int64_t n_checks, n_failed;
    bool nonfinite; /* a NaN or Inf appeared in its output */
};

struct hx_verify_report {
    char ref[64]; /* reference device id */
    const struct hx_verify_op *ops[HX_PHASE_COUNT];
    int64_t n_ops[HX_PHASE_COUNT];
    int64_t n_checks, n_failed; /* over every op and run */
    bool has_first;             /* an op exceeded its threshold */
    struct hx_verify_op first;  /* the first such op, its values at that check */
    enum hx_phase first_phase;
    int64_t first_run; /* 0-based hx__sched_run call of that check */
    bool ref_failed;   /* the reference itself failed; checks stopped */
};

/* How far a check is from its threshold, nmse / threshold (a bit-exact op's: 0 or infinity).
 * Thresholds are core/numerics.h's for what the device that ran the op computes: a fixed NMSE
 * per f32 op kind, and for a matmul its data's bound over Σ ref² (so it differs per check). */
double hx__verify_ratio(double nmse, double threshold);
/* The report of a `verify` policy (borrowed, valid until the next run); HX_E_INVAL if the
 * policy does not verify. */
int hx__sched_verify_report(const struct hx_sched *s, const struct hx_verify_report **out);

/* engine diff's whole-model bound (docs/policies.md): more instances of the reference run the
 * whole model on their own beside a verified run — twin 0 with each matmul's weights as the
 * device that ran it holds them, twins 1..HX_VERIFY_DRAWS also with every op's modelled error
 * drawn at random (sched-verify.c). Call before the first run; a twin that fails stops them all
 * (logged), and hx__sched_verify_twin_logits then fails. */
#define HX_VERIFY_DRAWS 3 /* twins 1..3: independent draws of the modelled error */
int hx__sched_verify_twins(struct hx_sched *s);
/* Twin t's logits (n_vocab floats into out) of row `row` of the last run's batch, counted as
 * hx_get_logits counts them (-1: the last row). */
int hx__sched_verify_twin_logits(const struct hx_sched *s, int t, int64_t row, float *out);

/* The scheduler behind a context (core/context.c), for engine diff and engine bench. */
struct hx_sched *hx__context_sched(struct hx_context *c);
