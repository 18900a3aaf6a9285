/*
 * fault.c — the fault-injection seam. HX_FAULT (read once) is a ';'-separated list of rules:
 *
 *   dev=ID[,entry=NAME][,after=N][,prob=P][,seed=S][,mode=MODE][,ms=T][,count=C]
 *
 * dev: device id ("vulkan:0", "cpu", "npu-sim") or backend name, or "*"; entry: vtable entry
 * ("run" by default; "copy": a transfer into the device, also between host memories; "*"
 * any); after: let N matching calls succeed first; prob: fail each later
 * call with probability P in [0, 1] (default 1, drawn from a per-rule generator seeded by S);
 * count: fire at most C times (default unlimited). mode:
 *
 *   error    the call returns HX_E_DEVICE (the default)
 *   hang     the call blocks T ms (default 20), then reports HX_E_TIMEOUT, as a watchdog would
 *   slow     the call blocks T ms (default 100), then runs normally (a late device: the
 *            scheduler's split deadline, HX_SPLIT_TIMEOUT_MS, is what catches it)
 *   corrupt  the call succeeds but the first output row of the split's last op is perturbed
 *            (only for entry=run): what `verify` must catch
 *
 * Tests may also call hx__fault_set() with the same syntax ("" clears every rule). A malformed
 * rule is logged and ignored, never half-applied.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

struct hx_fault_rule {
    char dev[64];
    char entry[32];
    long long after;
    double prob;
    long long count; /* -1 unlimited */
    enum hx_fault_kind kind;
    int ms;
    uint64_t rng;
    long long seen, fired;
};

#define HX__MAX_RULES 8
static struct hx_fault_rule hx__rules[HX__MAX_RULES];
static int hx__n_rules = -1;
static pthread_mutex_t hx__fault_mu = PTHREAD_MUTEX_INITIALIZER;

static bool hx__fault_num(const char *v, double lo, double hi, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo && x <= hi)) return false;
    *out = x;
    return true;
}

static bool hx__fault_mode(struct hx_fault_rule *r, const char *v)
{
    static const char *const names[] = {"none", "error", "hang", "slow", "corrupt"};
    for (int k = HX_FAULT_ERROR; k <= HX_FAULT_CORRUPT; k++)
        if (!strcmp(v, names[k])) {
            r->kind = (enum hx_fault_kind)k;
            if (r->ms < 0) r->ms = k == HX_FAULT_HANG ? 20 : k == HX_FAULT_SLOW ? 100 : 0;
            return true;
        }
    return false;
}

/* One "key=value"; false (and a warning naming it) when it is not understood. */
static bool hx__parse_field(struct hx_fault_rule *r, const char *k, const char *v)
{
    double x = 0;
    bool ok = true;
    if (!strcmp(k, "dev"))
        snprintf(r->dev, sizeof r->dev, "%s", v);
    else if (!strcmp(k, "entry"))
        snprintf(r->entry, sizeof r->entry, "%s", v);
    else if (!strcmp(k, "after"))
        ok = hx__fault_num(v, 0, 1e15, &x), r->after = (long long)x;
    else if (!strcmp(k, "prob"))
        ok = hx__fault_num(v, 0, 1, &r->prob);
    else if (!strcmp(k, "seed"))
        ok = hx__fault_num(v, 0, 1e15, &x), r->rng = (uint64_t)x * 2654435761u + 1;
    else if (!strcmp(k, "count"))
        ok = hx__fault_num(v, 0, 1e15, &x), r->count = (long long)x;
    else if (!strcmp(k, "ms"))
        ok = hx__fault_num(v, 0, 600000, &x), r->ms = (int)x;
    else if (!strcmp(k, "mode"))
        ok = hx__fault_mode(r, v);
    else
        ok = false;
    if (!ok) HX_LOG_WARN("fault: cannot use '%s=%s'; the rule is ignored", k, v);
    return ok;
}

static bool hx__parse_rule(struct hx_fault_rule *r, char *text)
{
    memset(r, 0, sizeof *r);
    snprintf(r->entry, sizeof r->entry, "run");
    r->prob = 1.0, r->count = -1, r->rng = 0x9E3779B97F4A7C15ull, r->kind = HX_FAULT_ERROR,
    r->ms = -1;
    char *save = NULL;
    for (char *kv = strtok_r(text, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            HX_LOG_WARN("fault: '%s' is not KEY=VALUE; the rule is ignored", kv);
            return false;
        }
        *eq = '\0';
        if (!hx__parse_field(r, kv, eq + 1)) return false;
    }
    if (!r->dev[0]) {
        HX_LOG_WARN("fault: a rule names no device (dev=ID or dev=*); it is ignored");
        return false;
    }
    if (r->ms < 0) r->ms = 0;
    return true;
}

/* Parse "a=b,c=d;..." into the rule table (replacing it). Returns the number of rules kept. */
int hx__fault_set(const char *spec)
{
    pthread_mutex_lock(&hx__fault_mu);
    hx__n_rules = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    char *save = NULL;
    for (char *rule = strtok_r(buf, ";", &save); rule && hx__n_rules < HX__MAX_RULES;
         rule = strtok_r(NULL, ";", &save))
        if (hx__parse_rule(&hx__rules[hx__n_rules], rule)) hx__n_rules++;
    int n = hx__n_rules;
    pthread_mutex_unlock(&hx__fault_mu);
    return n;
}

static double hx__rng_next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0;
}

int hx__fault_check(struct hx_device *dev, const char *entry, int *delay_ms)
{
    *delay_ms = 0;
    pthread_mutex_lock(&hx__fault_mu);
    if (hx__n_rules < 0) {
        pthread_mutex_unlock(&hx__fault_mu);
        hx__fault_set(getenv("HX_FAULT"));
        pthread_mutex_lock(&hx__fault_mu);
    }
    enum hx_fault_kind fire = HX_FAULT_NONE;
    for (int i = 0; i < hx__n_rules && !fire; i++) {
        struct hx_fault_rule *r = &hx__rules[i];
        if (strcmp(r->dev, "*") && strcmp(r->dev, dev->id) && strcmp(r->dev, dev->ops->name))
            continue;
        if (strcmp(r->entry, "*") && strcmp(r->entry, entry)) continue;
        if (r->kind == HX_FAULT_CORRUPT && strcmp(entry, "run")) continue;
        if (r->seen++ < r->after) continue;
        if (r->count >= 0 && r->fired >= r->count) continue;
        if (r->prob < 1.0 && hx__rng_next(&r->rng) >= r->prob) continue;
        r->fired++;
        fire = r->kind;
        *delay_ms = r->ms;
    }
    pthread_mutex_unlock(&hx__fault_mu);
    return fire;
}
