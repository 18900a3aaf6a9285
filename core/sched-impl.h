/*
 * sched-impl.h — the scheduler's state, shared by sched.c (devices, placement, coherence,
 * execution, auto) and sched-verify.c (verify: the reference beside every node).
 */
#pragma once

#include "numerics.h"
#include "scheduler.h"

enum hx_reason { HX_R_POLICY, HX_R_UNSUPPORTED, HX_R_UNHEALTHY };

#define HX_TS_ALIGN 16   /* tensor-split part boundaries: multiples of 16 output rows */
#define HX_PROF_ROWS 128 /* auto profiles prefill at min(n_batch, this) rows */
#define HX_MAX_RULES 32
#define HX_AUTO_MARGIN 0.05 /* auto: a multi-device plan must be predicted this much faster */

/* Row slices of every weight for one tensor-split ratio. */
struct hx_tsplit {
    int n_parts;
    struct hx_weight *w; /* [weight id * n_parts + part]; n_rows == 0: empty part */
    int64_t *r0;         /* first output row of each slice */
    int8_t *n_used;      /* per weight id: non-empty parts (0: not split) */
};

/* What the policy (or auto's choice) says about each node of one phase. */
struct hx_rule {
    enum hx_policy_kind kind; /* single, gemm-offload, op-map, layer-split, tensor-split */
    int dev[HX_MAX_DEVICES];  /* scheduler device indices */
    int n_dev;
    int class_dev[HX_CLASS_COUNT]; /* op-map: index into dev, -1 = dev[0] */
    double ratio[HX_MAX_DEVICES];
    bool alternate;
    struct hx_tsplit *ts; /* tensor-split slices (owned) */
    char text[192];
};

struct hx_prof_ent {
    int16_t kind, cls, wtype;
    int64_t rows, n_in, n_out;
    double us;
};

/* A device's measured costs (auto). */
struct hx_prof {
    struct hx_prof_ent *e;
    int64_t n, cap, n_measured;
    double launch_us, xfer_lat_us, xfer_us_per_byte;
    bool have_xfer, loaded;
    double measure_ms;
    char path[512];
};

struct hx_whent {
    const struct hx_weight *w;
    void *h;
};

struct hx_worker;

struct hx_sdev {
    struct hx_device *dev;
    struct hx_worker *worker; /* runs this synchronous device's tensor-split parts */
    struct hx_buffer *slot[HX_SLOT_COUNT];
    struct hx_whent *wmap; /* prepared weights, open addressing by address */
    size_t wcap, wn;
    struct hx_buffer **kv_k, **kv_v; /* per layer */
    bool used;
    struct hx_prof prof;
};

/* A weight's rows for the matmul error model (numerics.h): per row j and K-block b. */
struct hx_vweight {
    const struct hx_weight *w;
    double *e;  /* Σ w² */
    double *dw; /* Σ (w − ŵ)² of HX_NUMERICS_INT8_ROW's conversion; NULL until one needs it */
    float *delta; /* the twins: ŵ − w of that conversion, rows × K (only if it fits the cap) */
};

/* engine diff's twins (hx__sched_verify_twins, sched-verify.c): their own whole-model runs on
 * more instances of the reference, 0 with the devices' weights, 1.. also with every op's
 * modelled error drawn at random. */
#define HX_VTWINS (1 + HX_VERIFY_DRAWS)

struct hx_vstate {
    bool on;
    struct hx_sdev sd; /* the reference: its own device instance */
    struct hx_verify_op *ops[HX_PHASE_COUNT];
    int64_t cap[HX_PHASE_COUNT];
    struct hx_verify_report rep;
    float *a, *b;
    size_t ab_cap;
    int64_t run_index;
    struct hx_vweight *vw; /* matmul weights seen, linear search (a few per layer) */
    int64_t n_vw, cap_vw;
    float *x;      /* a matmul's input rows */
    double *model; /* their activation model: s and xm per row × block */
    size_t x_cap, model_cap;
    /* the twins */
    bool tw_on;
    struct hx_sdev tw[HX_VTWINS];
    char tw_spec[64], tw_kdir[512]; /* how to open them: the reference's spec and config */
    struct hx_device_config tw_cfg;
    uint64_t tw_rng;
    float *tx, *ty, *tsave; /* input rows (dithered), output rows, the input as it was */
    size_t tx_cap, ty_cap, tsave_cap;
    float *trow;            /* one weight row and its conversion error */
    size_t trow_cap;
    double *rowerr;         /* per output row, Σ (target − reference)² of the op just compared */
    double *tscale;         /* per row, the share of its modelled error a random twin draws */
    size_t rowerr_cap, tscale_cap;
    int64_t tw_delta_bytes; /* bytes of cached conversion errors */
};

struct hx_sched {
    const struct hx_model *model;
    struct hx_policy policy;
    int64_t n_ctx, n_batch, n_logits, n_prof_rows;
    int32_t n_seq;
    int n_threads;
    struct hx_sdev dev[HX_MAX_DEVICES];
    int n_dev;
    int host;                /* the cpu device */
    int pol[HX_MAX_DEVICES]; /* policy device i -> dev index */
    int fb[HX_MAX_DEVICES];  /* fallback chain -> dev index */
    int n_fb;
    struct hx_rule rule[HX_PHASE_COUNT];
    bool have_costs;   /* auto: node costs known */
    double handoff_us; /* auto: cost of starting a part on a worker thread */
    double pred_us[HX_PHASE_COUNT];
    struct hx_strbuf why[HX_PHASE_COUNT]; /* auto: candidates and their predicted times */
    struct hx_strbuf prof_text;
    uint32_t slot_valid[HX_SLOT_COUNT];
    uint32_t *kv_valid;              /* per layer */
    int64_t slot_cap[HX_SLOT_COUNT]; /* rows */
    int32_t *assign;                 /* per node: dev index */
    uint8_t *reason;
    int64_t assign_cap;
    struct hx_op *ops;
    int64_t ops_cap;
    struct hx_graph xg; /* tensor-split expansion of the graph being run */
    struct hx_sched_stats stats;
    double split_timeout_us; /* 0: no deadline */
    bool costing;            /* dry runs add up predicted time in cost_us */
    double cost_us;
    char used[256];
    const int32_t *kv_len; /* during a run */
    struct hx_vstate v;
};

/* One walk over a plan: a real run, or a dry one for `engine plan` and auto. */
struct hx_exec {
    const int32_t *tokens, *pos, *seq;
    bool dry;
    struct hx_strbuf *sb; /* plan text, or NULL */
    const volatile int *cancel;
    enum hx_phase phase;
    int failed; /* device index of a failure, -1 */
};

static inline const char *hx__id(const struct hx_sched *s, int d) { return s->dev[d].dev->id; }

/* sched.c */
int64_t hx__slot_rows(const struct hx_graph *g, int slot);
int hx__slot_buf(struct hx_sched *s, struct hx_sdev *sd, int slot, struct hx_buffer **out);
int hx__node_reads(const struct hx_node *nd, int *slots);
int hx__build_op(struct hx_sched *s, const struct hx_graph *g, struct hx_sdev *sd,
                 const struct hx_node *nd, struct hx_op *op);
int hx__run_sync(struct hx_device *dev, const struct hx_split *sp);

/* sched-verify.c: before node nd runs on device d, copy what it reads to the reference;
 * after it ran, run it there and compare (a divergence is recorded, not an error). */
void hx__verify_stop(struct hx_sched *s, int st);
void hx__verify_pre(struct hx_sched *s, const struct hx_graph *g, const struct hx_node *nd, int d);
int hx__verify_post(struct hx_sched *s, const struct hx_graph *g, int64_t k, int d,
                    struct hx_exec *ex);
void hx__verify_free(struct hx_sched *s);
void hx__sdev_fini(struct hx_sched *s, struct hx_sdev *sd);
