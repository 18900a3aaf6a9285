/*
 * fault.c — the fault-injection seam. HX_FAULT (read once) is a ';'-separated list of rules:
 *
 *   dev=ID[,entry=NAME][,after=N][,prob=P][,seed=S][,mode=error|hang][,count=C]
 *
 * dev: device id ("vulkan:0", "cpu", "npu-sim", or "*"); entry: vtable entry ("run" by
 * default; "*" any); after: let N matching calls succeed first; prob: fail each later call with
 * probability P (default 1); count: fail at most C times (default unlimited); mode: error
 * (HX_E_DEVICE) or hang (reported as HX_E_TIMEOUT, as a watchdog would). Tests may also call
 * hx__fault_set() with the same syntax.
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
    long long count;       /* -1 unlimited */
    bool hang;
    uint64_t rng;
    long long seen, fired;
};

#define HX__MAX_RULES 8
static struct hx_fault_rule hx__rules[HX__MAX_RULES];
static int hx__n_rules = -1;
static pthread_mutex_t hx__fault_mu = PTHREAD_MUTEX_INITIALIZER;

static void hx__parse_field(struct hx_fault_rule *r, const char *k, const char *v)
{
    if (!strcmp(k, "dev")) snprintf(r->dev, sizeof r->dev, "%s", v);
    else if (!strcmp(k, "entry")) snprintf(r->entry, sizeof r->entry, "%s", v);
    else if (!strcmp(k, "after")) r->after = strtoll(v, NULL, 10);
    else if (!strcmp(k, "prob")) r->prob = strtod(v, NULL);
    else if (!strcmp(k, "seed")) r->rng = strtoull(v, NULL, 10) * 2654435761u + 1;
    else if (!strcmp(k, "count")) r->count = strtoll(v, NULL, 10);
    else if (!strcmp(k, "mode")) r->hang = !strcmp(v, "hang");
    else HX_LOG_WARN("fault: unknown field '%s'", k);
}

/* Parse "a=b,c=d;..." into the rule table (replacing it). Returns number of rules. */
int hx__fault_set(const char *spec);
int hx__fault_set(const char *spec)
{
    pthread_mutex_lock(&hx__fault_mu);
    hx__n_rules = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    char *save1 = NULL;
    for (char *rule = strtok_r(buf, ";", &save1); rule && hx__n_rules < HX__MAX_RULES;
         rule = strtok_r(NULL, ";", &save1)) {
        struct hx_fault_rule *r = &hx__rules[hx__n_rules++];
        memset(r, 0, sizeof *r);
        snprintf(r->entry, sizeof r->entry, "run");
        r->prob = 1.0, r->count = -1, r->rng = 0x9E3779B97F4A7C15ull;
        char *save2 = NULL;
        for (char *kv = strtok_r(rule, ",", &save2); kv; kv = strtok_r(NULL, ",", &save2)) {
            char *eq = strchr(kv, '=');
            if (!eq) continue;
            *eq = '\0';
            hx__parse_field(r, kv, eq + 1);
        }
    }
    int n = hx__n_rules;
    pthread_mutex_unlock(&hx__fault_mu);
    return n;
}

static double hx__rng_next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0;
}

int hx__fault_check(struct hx_device *dev, const char *entry, bool *hang)
{
    if (hx__n_rules < 0) {
        const char *env = getenv("HX_FAULT");
        hx__fault_set(env);
    }
    if (hx__n_rules == 0) return 0;
    int fire = 0;
    pthread_mutex_lock(&hx__fault_mu);
    for (int i = 0; i < hx__n_rules && !fire; i++) {
        struct hx_fault_rule *r = &hx__rules[i];
        if (strcmp(r->dev, "*") && strcmp(r->dev, dev->id) && strcmp(r->dev, dev->ops->name)) continue;
        if (strcmp(r->entry, "*") && strcmp(r->entry, entry)) continue;
        if (r->seen++ < r->after) continue;
        if (r->count >= 0 && r->fired >= r->count) continue;
        if (r->prob < 1.0 && hx__rng_next(&r->rng) >= r->prob) continue;
        r->fired++;
        *hang = r->hang;
        fire = 1;
    }
    pthread_mutex_unlock(&hx__fault_mu);
    return fire;
}
