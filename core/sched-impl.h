/*
 * sched-impl.h — the scheduler's one private header: its state, and the hx__ functions its
 * files share. The files are layers, top down (each uses only those above it in the list;
 * sched.c, the last, ties them together):
 *
 *   sched-place.c   rules and placement: the rule per phase, the tensor-split expansion, the
 *                   device of every node (s->rule, s->xg, s->assign, s->reason)
 *   sched-cost.c    the cost model: predictions from s->dev[].prof and s->handoff_us
 *   sched-mem.c     the devices (s->dev[]) and their memory (slots, KV caches, prepared
 *                   weights; sized by s->mem), and coherence (s->coh)
 *   sched-verify.c  verify's reference (s->v, opaque; it sees only the memory layer)
 *   sched-exec.c    running a placed plan (s->ops, s->dev[].worker, s->stats of the run)
 *   sched-plan.c    the dry walk over a placed plan, and its passes: cost, plan text
 *   sched-fit.c     memory: each device's limit, the bytes a plan puts on it, the refusal of a
 *                   plan that does not fit, and `fit`'s search for the split that does
 *   sched-auto.c    measured auto: profiles, their cache, the choice (s->why, s->prof_text)
 *   sched.c         devices, the run loop with recovery, load-time preparation, lifecycle
 */
#pragma once

#include <string.h>

#include "scheduler.h"

enum hx_reason { HX_R_POLICY, HX_R_UNSUPPORTED, HX_R_UNHEALTHY };

#define HX_TS_ALIGN 16   /* tensor-split part boundaries: multiples of 16 output rows */
#define HX_PROF_ROWS 128 /* auto profiles prefill at min(n_batch, this) rows */
#define HX_MAX_RULES 32
#define HX_AUTO_MARGIN 0.05 /* auto: a multi-device plan must be predicted this much faster */

/* Row slices of every weight for one tensor-split ratio. */
struct hx_tsplit {
    int n_parts;
    int64_t n_w;         /* weight ids */
    struct hx_weight *w; /* [weight id * n_parts + part]; n_rows == 0: empty part; a slice of
                          * a weight of parts owns the host copy hx_weight_host may make */
    int64_t *r0;         /* first output row of each slice */
    int8_t *n_used;      /* per weight id: non-empty parts (0: not sliced, too small) */
};

/* What the policy (or auto's choice) says about each node of one phase. */
struct hx_rule {
    enum hx_policy_kind kind; /* single, gemm-offload, op-map, layer-split, tensor-split, fit */
    int dev[HX_MAX_DEVICES];  /* scheduler device indices */
    int n_dev;
    int class_dev[HX_CLASS_COUNT]; /* op-map: index into dev, -1 = dev[0] */
    double ratio[HX_MAX_DEVICES];
    bool alternate;
    struct hx_tsplit *ts; /* tensor-split slices (owned) */
    /* fit: layers [layer_end[i-1], layer_end[i]) on dev[i]; the embedding on embed_dev, the
     * output norm and LM head on head_dev; scheduler indices */
    int32_t layer_end[HX_MAX_DEVICES];
    int embed_dev, head_dev;
    char text[192];
};

/* What a device's memory holds for a plan (sched-fit.c), and what it has allocated
 * (sched-mem.c counts every buffer and prepared weight it gets through the vtable). */
enum hx_mem_kind {
    HX_MEM_WEIGHTS,
    HX_MEM_KV,
    HX_MEM_ACT,
    HX_MEM_STAGING,
    HX_MEM_SCRATCH,
    HX_MEM_KINDS
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
    size_t nb; /* its memory on the device (hx__dev_weight_bytes of the handle) */
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
    size_t alloc[HX_MEM_KINDS]; /* bytes held now, by kind (sched-mem.c) */
    /* what auto's measuring runs grew the backend's own buffers to, each buffer's largest
     * (asked of scratch_bytes for every op measured; sched-fit.c adds it to the plan) */
    size_t prof_scratch[HX_SCRATCH_BUFS];
};

/* What sizes a device's memory (sched-mem.c): a buffer of slot_cap[slot] rows per activation
 * slot, and per layer a K and a V cache of n_seq × n_ctx rows. */
struct hx_mem_geom {
    const struct hx_model *model;
    int64_t n_ctx;
    int32_t n_seq;
    int64_t slot_cap[HX_SLOT_COUNT];
};

/* Coherence: for every activation slot and every layer's KV cache, the devices (bit d: device
 * index d) holding its current contents. Reading makes a device a holder (after a copy from
 * another holder); writing makes the writer the only one. */
struct hx_coh {
    uint32_t slot[HX_SLOT_COUNT];
    uint32_t *kv; /* per layer */
};

struct hx_sched {
    const struct hx_model *model;
    struct hx_policy policy;
    /* hx_context_params.load_progress: told by hx__prepare_plans (sched.c) */
    void (*load_progress)(void *user_data, const char *device, uint64_t done, uint64_t total);
    void *load_progress_data;
    struct hx_mem_geom mem; /* its model is this model */
    int64_t n_batch, n_logits, n_prof_rows;
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
    struct hx_coh coh;
    int32_t *assign; /* per node: dev index */
    uint8_t *reason;
    int64_t assign_cap;
    struct hx_op *ops;
    int64_t ops_cap;
    struct hx_graph xg; /* tensor-split expansion of the graph being run */
    struct hx_sched_stats stats;
    double split_timeout_us; /* 0: no deadline */
    char used[256];
    const int32_t *kv_len; /* during a run */
    struct hx_verify *v;   /* NULL: the policy does not verify */
    size_t need[HX_MAX_DEVICES][HX_MEM_KINDS]; /* the rules' memory per device (sched-fit.c) */
};

/* The rows of one batch, as every split of its run gets them. */
struct hx_batch_rows {
    const int32_t *tokens, *pos, *seq;
    enum hx_phase phase;
};

/* One run of a plan (sched-exec.c). */
struct hx_exec {
    struct hx_batch_rows b;
    const volatile int *cancel;
    int failed; /* device index of a failure, -1 */
};

static inline enum hx_phase hx__phase_of(const struct hx_graph *g)
{
    return g->n_rows > 1 ? HX_PHASE_PREFILL : HX_PHASE_DECODE;
}

static inline int hx__first_bit(uint32_t m)
{
    return m ? __builtin_ctz(m) : -1;
}

static inline const char *hx__id(const struct hx_sched *s, int d)
{
    return s->dev[d].dev->id;
}

/* The split of n_ops ops over a batch's rows (b NULL: rows without tokens, positions or
 * sequences, as a matmul needs). */
/* A node's operand as a tensor reference, all but its buffer (NULL): where it lies in its slot. */
static inline void hx__ref_geom(const struct hx_graph *g, const struct hx_node_ref *r,
                                struct hx_tensor_ref *out)
{
    memset(out, 0, sizeof *out);
    if (r->slot < 0) return;
    size_t w = (size_t)g->slot_width[r->slot];
    out->offset_bytes = ((size_t)r->row * w + (size_t)r->col) * sizeof(float);
    out->n_rows = r->n_rows;
    out->n_cols = r->n_cols;
    out->row_stride_bytes = w * sizeof(float);
}

static inline struct hx_split hx__split_of(const struct hx_op *ops, int64_t n_ops, int64_t n_rows,
                                           const struct hx_batch_rows *b)
{
    struct hx_split sp = {.struct_size = sizeof sp, .ops = ops, .n_ops = n_ops, .n_rows = n_rows};
    if (b) sp.tokens = b->tokens, sp.pos = b->pos, sp.seq = b->seq;
    return sp;
}

/* Run one split on dev and wait for it. */
static inline int hx__run_sync(struct hx_device *dev, const struct hx_split *sp)
{
    int st = hx__dev_run(dev, sp);
    int st2 = hx__dev_synchronize(dev);
    return st ? st : st2;
}

/* ---- sched-place.c: rules and placement ------------------------------------------------------ */

void hx__rule_init(struct hx_rule *r, enum hx_policy_kind kind);
/* r->text from r's kind, devices and shares. */
void hx__rule_text(const struct hx_sched *s, struct hx_rule *r);
/* Slice every weight of the model by r's ratios (r->ts, owned by r; free with hx__ts_free). */
int hx__ts_build(struct hx_sched *s, struct hx_rule *r);
void hx__ts_free(struct hx_tsplit *ts);
/* The rule of phase ph from the policy (tensor-split: with its slices). */
int hx__rule_from_policy(struct hx_sched *s, enum hx_phase ph, struct hx_rule *r);
/* The plan of g under rule: *plan is g, or its tensor-split expansion (s->xg), and every node
 * of it gets a device (s->assign) and a reason (s->reason); *n_off counts the nodes placed off
 * their preferred device. HX_E_DEVICE when no healthy device can run a node. */
int hx__place(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *rule,
              const struct hx_graph **plan, int64_t *n_off);
/* The end of the step of a placed plan that starts at node i: the end of its tensor-split
 * group, else of the run of nodes on node i's device (one_by_one: i + 1, as verify runs). */
int64_t hx__step_end(const struct hx_sched *s, const struct hx_graph *g, int64_t i,
                     bool one_by_one);
/* The distinct devices of the group at i, in part order (devs[0]: the join device's). */
int hx__group_devices(const struct hx_sched *s, const struct hx_graph *g, int64_t i, int *devs);

/* ---- sched-cost.c: the cost model ------------------------------------------------------------ */

/* The entry of pf for op d: same kind, class, weight type and n_in, and (same_rows,
 * same_cols) the same rows and output columns; else the nearest in rows. NULL if none. */
const struct hx_prof_ent *hx__prof_find(const struct hx_prof *pf, const struct hx_op_desc *d,
                                        bool same_rows, bool same_cols);
/* Predicted µs of node nd on d, launch included; -1 unknown. */
double hx__node_us(const struct hx_sched *s, int d, const struct hx_node *nd);
/* Predicted µs of nodes [i, j) of a placed plan as one split on d. */
double hx__split_us(const struct hx_sched *s, const struct hx_graph *g, int64_t i, int64_t j,
                    int d);
/* Predicted µs of the tensor-split group at i over its devices devs[0..n_dev). */
double hx__group_us(const struct hx_sched *s, const struct hx_graph *g, int64_t i, const int *devs,
                    int n_dev);
/* Predicted µs of moving nb bytes from device a to b. */
double hx__xfer_us(const struct hx_sched *s, int a, int b, size_t nb);

/* ---- sched-mem.c: devices, their memory, coherence ------------------------------------------- */

/* Open the device of a spec ("cpu", "vulkan:1", "gpu") into s->dev[], or find it open there;
 * *idx its index. */
int hx__open_sdev(struct hx_sched *s, const char *spec, const struct hx_device_config *cfg,
                  int *idx);
/* The prepared handle of weight w on sd (prepared on first use; NULL for no weight). */
int hx__weight_handle(struct hx_sdev *sd, const struct hx_weight *w, void **out);
void hx__wmap_release(struct hx_sdev *sd);
/* Slot's buffer on sd, allocated on first use. */
int hx__slot_buf(const struct hx_mem_geom *m, struct hx_sdev *sd, int slot, struct hx_buffer **out);
/* Layer's K and V caches on sd, allocated on first use. */
int hx__kv_bufs(const struct hx_mem_geom *m, struct hx_sdev *sd, int64_t layer);
/* Free sd's slots and KV caches (its prepared weights stay). */
void hx__sdev_free_mem(const struct hx_mem_geom *m, struct hx_sdev *sd);
/* Wait for sd's device, give back everything sd holds on it, and close it (no device: no-op). */
void hx__sdev_close(const struct hx_mem_geom *m, struct hx_sdev *sd);
/* Node nd as an op on sd: its slot regions, weight handles and KV cache, there. */
int hx__build_op(const struct hx_mem_geom *m, const struct hx_graph *g, struct hx_sdev *sd,
                 const struct hx_node *nd, struct hx_op *op);

/* d is about to read slot (or layer's KV cache): d becomes a holder. Returns the holder to copy
 * from, or -1 (d holds it already, or nobody wrote it yet: nothing to move). */
int hx__coh_take_slot(struct hx_coh *c, int slot, int d);
int hx__coh_take_kv(struct hx_coh *c, int64_t layer, int d);
/* Node nd ran on d: d is the only holder of what it wrote. */
void hx__coh_wrote(struct hx_coh *c, const struct hx_node *nd, int d);
/* Slots a node reads (at most 4): its sources, and its destination when it updates in place. */
int hx__node_reads(const struct hx_node *nd, int *slots);
/* Before nd runs on d: copy every slot it reads that d lacks, and (attention) its layer's KV
 * cache, counting the moves in s->stats. */
int hx__fetch_inputs(struct hx_sched *s, const struct hx_graph *g, int d, const struct hx_node *nd);
/* After attention of layer ran on d: write the batch's K/V rows through to the host (only with
 * a fallback chain, which may need them). */
int hx__mirror_kv(struct hx_sched *s, const struct hx_graph *g, int d, int64_t layer,
                  const int32_t *pos, const int32_t *seq);
/* Bytes a move copies: a slot's rows of g; a tensor-split part's columns; sequence q's cached
 * K (or V) rows of one layer (0 outside a run). */
size_t hx__slot_bytes(const struct hx_graph *g, int slot);
size_t hx__part_bytes(const struct hx_node *nd);
size_t hx__kv_seq_bytes(const struct hx_sched *s, int32_t q);

static inline void hx__count_move(struct hx_sched_stats *st, size_t nb)
{
    st->n_transfers++;
    st->bytes_moved += nb;
}

/* ---- sched-verify.c: the reference beside every node ----------------------------------------- */

struct hx_verify;

/* Open the reference (a device spec, or "gpu") as an instance of its own; its memory is sized
 * by mem (borrowed: it must outlive v). */
int hx__verify_new(const char *spec, const struct hx_device_config *cfg,
                   const struct hx_mem_geom *mem, struct hx_verify **out);
void hx__verify_free(struct hx_verify *v);
/* Still checking: v exists and its reference has not failed. */
bool hx__verify_on(const struct hx_verify *v);
/* The reference device's id ("" without v). */
const char *hx__verify_ref(const struct hx_verify *v);
/* Before node nd runs on target: copy what it reads to the reference. */
void hx__verify_before(struct hx_verify *v, const struct hx_graph *g, const struct hx_node *nd,
                       struct hx_sdev *target);
/* After node k ran on target: run it on the reference and compare (a divergence is recorded,
 * a failure of the reference stops verifying; only a failure reading the target is returned). */
int hx__verify_after(struct hx_verify *v, const struct hx_graph *g, int64_t k,
                     const struct hx_sdev *target, const struct hx_batch_rows *b);
/* A run (hx__sched_run) ended: later checks count as the next run's. */
void hx__verify_run_done(struct hx_verify *v);
/* The report so far (points into v, valid until its next check). */
const struct hx_verify_report *hx__verify_report(struct hx_verify *v);
/* engine diff's twins (scheduler.h): open HX_VERIFY_DRAWS + 1 more instances of the reference
 * (its spec and config, kept by hx__verify_new) that run every checked node after it, each on
 * its own inputs. Before the first run only. */
int hx__verify_twins_start(struct hx_verify *v);
/* Twin t's logits of row `row` of the last run's batch (-1: the last row) into out (n_vocab
 * floats); HX_E_DEVICE once the twins stopped. */
int hx__verify_twin_logits(const struct hx_verify *v, int t, int64_t row, float *out);

/* ---- sched-exec.c: running a plan ------------------------------------------------------------ */

/* Run the placed plan g (hx__place) on the batch of ex. On a device failure ex->failed is that
 * device (-1 otherwise); HX_E_CANCELED when *ex->cancel became set between steps. */
int hx__execute(struct hx_sched *s, const struct hx_graph *g, struct hx_exec *ex);
/* What handing an empty part to d's worker thread and waiting for it costs, µs (auto). */
double hx__handoff_us(struct hx_sched *s, int d);
void hx__worker_free(struct hx_worker *w);

/* ---- sched-plan.c: the dry walk (passes that run nothing: plan text, costing) ---------------- */

/* What a dry walk over a placed plan meets, in the order a run of it (sched-exec.c) does. */
enum hx_walk_ev {
    HX_WALK_SPLIT,   /* a split starts: nodes [i, j) on d; index: its number in the plan */
    HX_WALK_GROUP,   /* a tensor-split group starts: parts [i, j) on devs; index: its number */
    HX_WALK_SLOT,    /* before node i: its input slot is copied src -> d (nb bytes) */
    HX_WALK_KV,      /* before node i: the KV cache of layer is handed src -> d ... */
    HX_WALK_KV_ROWS, /* ... nb bytes of one sequence's cached K or V rows at a time */
    HX_WALK_NODE,    /* node i on d, its inputs in place */
    HX_WALK_RUN,     /* the split or group [i, j) runs */
    HX_WALK_JOIN,    /* after a group: part i's columns are copied src -> d (nb bytes) */
};

struct hx_walk_step {
    enum hx_walk_ev ev;
    int64_t index;
    int64_t i, j;
    int d, src;
    int slot;
    int64_t layer;
    size_t nb;
    const int *devs; /* a group's devices (GROUP, and RUN of a group); NULL for a split */
    int n_dev;
};

typedef void hx_walk_cb(const struct hx_sched *s, const struct hx_graph *g,
                        const struct hx_walk_step *e, void *user_data);

/* Walk the placed plan g (hx__place) from the scheduler's current coherence state, calling cb
 * for every step; nothing runs and no state of s changes. *stats (NULL: not wanted) gets the
 * plan's splits, parallel groups and moves. */
int hx__walk(const struct hx_sched *s, const struct hx_graph *g, hx_walk_cb *cb, void *user_data,
             struct hx_sched_stats *stats);
/* The cost pass: predicted µs of the placed plan (splits, groups and moves). */
int hx__cost_walk(const struct hx_sched *s, const struct hx_graph *plan, double *us);
/* The same for g placed under rule r (auto's comparison of its candidates). */
int hx__plan_cost(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *r,
                  double *us);

/* ---- sched-fit.c: memory --------------------------------------------------------------------- */

/* The graphs the plans are made for: [prefill] n_batch rows, [decode] one row (free both). */
int hx__phase_graphs(const struct hx_sched *s, struct hx_graph g[HX_PHASE_COUNT]);
/* Bytes device d may use: the --mem cap naming it, else what it reports as free, else its
 * total (a unified-memory device that reports nothing: the host's); 0 = unknown (no limit).
 * *from says which ("--mem vulkan", "free", ...). */
size_t hx__mem_limit(const struct hx_sched *s, int d, const char **from);
/* The memory of the plans of rules r[ph] for the graphs g[ph], per device and kind: the
 * weights as prepared for that device, the KV caches of the layers whose attention runs
 * there (and the host's mirror under a fallback chain), the activation slots its nodes touch,
 * and a discrete device's staging. Exactly what a load and runs of both phases allocate. */
int hx__mem_need(struct hx_sched *s, const struct hx_graph *g, const struct hx_rule *const *r,
                 size_t need[HX_MAX_DEVICES][HX_MEM_KINDS]);
/* HX_E_NOMEM naming the first device whose need exceeds its limit ("what" names the plan). */
int hx__mem_check(const struct hx_sched *s, size_t need[HX_MAX_DEVICES][HX_MEM_KINDS],
                  const char *what);
/* fit over devs[0..n) (fastest first): the rule giving devs[0] as many whole layers from the
 * first as its limit allows (the LM head too where that puts more weight bytes there), then
 * devs[1], ...; the last takes the rest. HX_E_NOMEM with the numbers if the last cannot. */
int hx__fit_rule(struct hx_sched *s, const struct hx_graph *g, const int *devs, int n_dev,
                 struct hx_rule *r);
/* The memory section of `engine plan` (s->need against each device's limit). */
void hx__mem_text(const struct hx_sched *s, struct hx_strbuf *sb);

/* ---- sched-auto.c: measured auto ------------------------------------------------------------- */

/* Measure the candidates (profile cache included) and set s->rule[] to the chosen rule per
 * phase, with s->pred_us, s->why and s->prof_text for `engine plan`. */
int hx__auto_choose(struct hx_sched *s, const struct hx_device_config *cfg,
                    const struct hx_graph *g);
