/*
 * backend-ops-devices.c — the devices test-backend-ops runs: every device of every registered
 * backend that --backend selects (ref is the oracle, opened by main), the `cpu` backend's other
 * code paths as extra devices (ISA, repacking, decode streams, prefetch, Q1_0 decode: each an
 * environment knob of the cpu backend, set before every call on that device), and each
 * device's cached handle of the current weight.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend-ops.h"
#include "sanitized.h"

/* ---- the devices and their environment ------------------------------------------------------- */

struct hx_t_dut hx_t_ref;
struct hx_t_dut hx_t_duts[HX_T_MAX_DUTS];
int hx_t_n_duts;
int hx_t_passed, hx_t_failed, hx_t_skipped;

/* Set name to value, or clear it when value is NULL. */
static void hx_t_env(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* The environment knobs of a `cpu` variant; every other device runs with them cleared. */
void hx_t_dut_env(const struct hx_t_dut *d)
{
    hx_t_env("HX_CPU_ISA", d->isa);
    hx_t_env("HX_CPU_REPACK", d->norepack ? "0" : NULL);
    hx_t_env("HX_CPU_STREAMS", d->streams);
    hx_t_env("HX_CPU_VBMI", d->novbmi ? "0" : NULL);
    hx_t_env("HX_CPU_PREFETCH", d->prefetch);
    hx_t_env("HX_CPU_Q1_LUT", d->q1_lut);
}

void hx_t_dut_release(struct hx_t_dut *d)
{
    if (d->wh) {
        hx_t_dut_env(d);
        hx__dev_weight_release(d->dev, d->wh);
    }
    d->wh = NULL, d->wid = 0;
}

/* Drop every device's cached handle of weight id (before the weight is freed). */
void hx_t_release_weight(uint64_t id)
{
    if (hx_t_ref.wid == id) hx_t_dut_release(&hx_t_ref);
    for (int i = 0; i < hx_t_n_duts; i++)
        if (hx_t_duts[i].wid == id) hx_t_dut_release(&hx_t_duts[i]);
}

/* ---- opening the devices --------------------------------------------------------------------- */

/* --backend items name a backend ("cpu": its devices and variants), a device ("vulkan:1",
 * "cpu:0": with its variants) or one variant ("cpu:0[avx2]"). */
static bool hx_t_backend_wanted(const char *backend, const char *id, const char *label)
{
    return !hx_t_opt.backend || hx_t_in_list(hx_t_opt.backend, backend) ||
           hx_t_in_list(hx_t_opt.backend, id) || hx_t_in_list(hx_t_opt.backend, label);
}

/* Could any --backend item name something of this backend? */
static bool hx_t_backend_any(const char *backend)
{
    if (!hx_t_opt.backend) return true;
    const size_t n = strlen(backend);
    for (const char *p = hx_t_opt.backend; *p;) {
        if (!strncasecmp(p, backend, n) && strchr(",:[", p[n] ? p[n] : ',')) return true;
        const char *e = strchr(p, ',');
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* A device's description under the current environment ("" if it has none). */
void hx_t_describe(struct hx_device *dev, char desc[HX_T_DESC_BYTES])
{
    desc[0] = '\0';
    if (dev->ops->describe) dev->ops->describe(dev, desc, HX_T_DESC_BYTES);
}

/* The ISA a cpu device actually runs with the current environment ("kernels: NAME ..."). */
static bool hx_t_cpu_runs(struct hx_device *dev, const char *isa)
{
    char desc[HX_T_DESC_BYTES];
    hx_t_describe(dev, desc);
    char want[64];
    snprintf(want, sizeof want, "kernels: %s ", isa);
    return strncmp(desc, want, strlen(want)) == 0;
}

/* The decode stream count a cpu device uses, from its description (0 if it does not say). */
static int hx_t_cpu_streams(struct hx_device *dev)
{
    char desc[HX_T_DESC_BYTES];
    hx_t_describe(dev, desc);
    const char *p = strstr(desc, "decode streams per thread: ");
    return p ? atoi(p + strlen("decode streams per thread: ")) : 0;
}

/* Whether a cpu device's decode kernels prefetch 16 KiB ahead for every type (its description). */
static bool hx_t_cpu_prefetch_16(struct hx_device *dev)
{
    char desc[HX_T_DESC_BYTES];
    hx_t_describe(dev, desc);
    return strstr(desc, "decode software prefetch: 16 KiB ahead") != NULL;
}

/* A Q1_0 lookup decode walk this cpu device does not use (its own has 8 tiles per block), or
 * NULL when it has no lookup decode (its description). */
static const char *hx_t_cpu_other_lut(struct hx_device *dev)
{
    char desc[HX_T_DESC_BYTES];
    hx_t_describe(dev, desc);
    if (!strstr(desc, "Q1_0 lookup decode (tiles:groups ahead): ")) return NULL;
    return "4:4";
}

static struct hx_t_dut *hx_t_add_dut(struct hx_device *dev, const char *label, const char *isa,
                                     bool norepack, const char *streams)
{
    if (hx_t_n_duts >= HX_T_MAX_DUTS) return NULL;
    struct hx_t_dut *d = &hx_t_duts[hx_t_n_duts++];
    memset(d, 0, sizeof *d);
    snprintf(d->label, sizeof d->label, "%s", label);
    d->dev = dev, d->isa = isa, d->norepack = norepack, d->streams = streams;
    d->variant = isa || norepack || streams;
    return d;
}

/* The cpu backend's other code paths, each as its own device instance. */
static void hx_t_cpu_variants(const char *spec, const char *id, const struct hx_device_config *cfg)
{
    static const char *const isas[] = {"avx512", "avx2", "scalar"};
    struct hx_device *dev = NULL;
    if (hx__device_open(spec, cfg, &dev) != HX_OK) return;
    unsetenv("HX_CPU_ISA");
    unsetenv("HX_CPU_STREAMS");
    unsetenv("HX_CPU_PREFETCH");
    unsetenv("HX_CPU_Q1_LUT");
    const char *best = NULL;
    for (size_t i = 0; i < 3 && !best; i++)
        if (hx_t_cpu_runs(dev, isas[i])) best = isas[i];
    /* the decode stream count the plain device does not use (by default it uses 1) */
    const char *other_streams = hx_t_cpu_streams(dev) == 1 ? "2" : "1";
    /* and another software prefetch: none for all, or 16 KiB for all */
    const char *other_prefetch = hx_t_cpu_prefetch_16(dev) ? "0" : "16";
    const char *other_lut = hx_t_cpu_other_lut(dev);
    hx__device_close(dev);
    for (size_t i = 0; i < 7; i++) {
        const char *isa = i < 3 ? isas[i] : "avx512";
        char label[96];
        snprintf(label, sizeof label, "%.40s[%s%s%s%s%s%s%s]", id, isa, i == 3 ? ",norepack" : "",
                 i == 4 ? (other_streams[0] == '1' ? ",1 stream" : ",2 streams") : "",
                 i == 5 ? ",no vbmi" : "",
                 i == 6 ? (other_prefetch[0] == '1' ? ",prefetch 16 KiB" : ",prefetch off") : "",
                 i == 6 && other_lut ? ",lut " : "", i == 6 && other_lut ? other_lut : "");
        if (i < 3 && best && !strcmp(isa, best)) continue; /* that is the plain device */
        if (i >= 3 && !(best && !strcmp(best, "avx512"))) continue;
        if (i == 5 && !__builtin_cpu_supports("avx512vbmi")) continue; /* no lookup path */
        /* the other stream count and prefetch run the plain device's kernels, threaded or
         * prefetched otherwise: the Release run's (16 s of CI's ASan stage) */
        if (HX_T_SANITIZED && (i == 4 || i == 6)) {
            printf("N/A  %-20s under the sanitizers (the Release run has it)\n", label);
            continue;
        }
        if (!hx_t_backend_wanted("cpu", spec, label)) continue;
        if (hx__device_open(spec, cfg, &dev) != HX_OK) continue;
        setenv("HX_CPU_ISA", isa, 1);
        bool ok = hx_t_cpu_runs(dev, isa);
        unsetenv("HX_CPU_ISA");
        if (!ok) {
            printf("SKIP %-20s this CPU has no %s path\n", label, isa);
            hx_t_skipped++;
            hx__device_close(dev);
            continue;
        }
        struct hx_t_dut *d = hx_t_add_dut(dev, label, isa, i == 3, i == 4 ? other_streams : NULL);
        if (d && i == 5)
            d->novbmi = d->variant = true;
        else if (d && i == 6)
            d->prefetch = other_prefetch, d->q1_lut = other_lut, d->variant = true;
        else if (!d)
            hx__device_close(dev);
    }
}

void hx_t_open_devices(const struct hx_device_config *cfg)
{
    for (int b = 0; b < hx__registry_count(); b++) {
        const struct hx_backend_entry *e = hx__registry_get(b);
        const char *name = e->ops->name;
        if (!strcmp(name, "ref") || !hx_t_backend_any(name)) continue;
        if (e->probe_status != HX_OK) {
            printf("SKIP backend %s: %s\n", name, e->why);
            hx_t_skipped++;
            continue;
        }
        const int nd = e->n_devices;
        const char *why = e->why;
        if (nd == 0) {
            printf("SKIP backend %s: no devices%s%s\n", name, why[0] ? ": " : "", why);
            hx_t_skipped++;
            continue;
        }
        for (int i = 0; i < nd; i++) {
            char spec[80];
            snprintf(spec, sizeof spec, "%s:%d", name, i);
            struct hx_device *dev;
            if (hx__device_open(spec, cfg, &dev) != HX_OK) {
                printf("SKIP %s: %s\n", spec, hx_last_error());
                hx_t_skipped++;
                continue;
            }
            char id[64];
            snprintf(id, sizeof id, "%s", dev->id);
            if (hx_t_backend_wanted(name, spec, id))
                hx_t_add_dut(dev, id, NULL, false, NULL);
            else
                hx__device_close(dev);
            if (!strcmp(name, "cpu")) hx_t_cpu_variants(spec, id, cfg);
        }
    }
}
