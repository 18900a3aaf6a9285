/*
 * policy.c — parse dispatch policies (architecture.md "The scheduler and dispatch policies").
 *
 *   single[:DEV]                      everything on DEV (default: --backend)
 *   gemm-offload[:DEV]                weight GEMMs on DEV, the rest on the CPU
 *   op-map:CLASS=DEV,...[,default=DEV] per op class (qkv, o, gate_up, down, lm_head, attn, ...)
 *   layer-split:DEV=R,DEV=R,...       contiguous layer ranges sized by ratio (or equal shares)
 *   layer-split:alternate:DEV,DEV     layer i on device i mod n
 *   phase-split:PREFILL_DEV,DECODE_DEV
 *   tensor-split:DEV=R,DEV=R[,...]    every GEMM's output rows split by ratio (or equal
 *                                     shares), the parts run concurrently and joined on the first
 *   fit[:DEV,DEV...]                  whole layers on the first device as far as its memory
 *                                     goes, the rest on the next (cpu appended when not named;
 *                                     default: --backend or the best GPU, then cpu)
 *   auto[:DEV,DEV...]                 measured cost model over cpu and the devices named (none
 *                                     named and no --backend: every GPU/NPU present)
 *   verify[@REF][:INNER]              run INNER (a policy or preset; a bare device means
 *                                     single:DEV; default single on --backend) and compare every
 *                                     op with REF (default `ref`) fed the same inputs
 *   @FILE                             the policy text read from FILE ('#' starts a comment)
 *
 * Presets: npu_only, gpu_only, cpu_only, layer_by_layer, attention_on_npu, ffn_on_npu,
 * qkv_on_npu, prefill_npu_decode_gpu, auto. "gpu" names the best GPU backend present.
 * layer_by_layer alternates --backend with the CPU, so without --backend it alternates gpu.
 * Everything is checked here, before any model is loaded or device opened.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "scheduler.h"

static const char *const hx__policy_names[] = {"single",      "gemm-offload", "op-map",
                                               "layer-split", "phase-split",  "tensor-split",
                                               "fit",         "auto",         "verify"};
_Static_assert(HX_ARRAY_LEN(hx__policy_names) == HX_POLICY_KIND_COUNT, "policy names");

const char *hx__policy_kind_name(enum hx_policy_kind k)
{
    return (unsigned)k < HX_POLICY_KIND_COUNT ? hx__policy_names[k] : "?";
}

struct hx_preset {
    const char *name;
    const char *expand; /* "%s" = the --backend device */
    const char *dflt;   /* "%s" without --backend (NULL: cpu) */
    bool not_cpu;       /* "%s" must not be cpu (the preset would name cpu twice) */
};

static const struct hx_preset hx__presets[] = {
    {"npu_only", "single:npu", NULL, false},
    {"gpu_only", "single:gpu", NULL, false},
    {"cpu_only", "single:cpu", NULL, false},
    {"layer_by_layer", "layer-split:alternate:%s,cpu", "gpu", true},
    {"attention_on_npu", "op-map:qkv=npu,o=npu,default=%s", NULL, false},
    {"ffn_on_npu", "op-map:gate_up=npu,down=npu,default=%s", NULL, false},
    {"qkv_on_npu", "op-map:qkv=npu,default=%s", NULL, false},
    {"prefill_npu_decode_gpu", "phase-split:npu,gpu", NULL, false},
};

const char *hx__resolve_gpu(void)
{
    static const char *const order[] = {"hip", "vulkan"};
    for (size_t i = 0; i < HX_ARRAY_LEN(order); i++) {
        const struct hx_backend_entry *e = hx__backend_find(order[i]);
        if (e && e->n_devices > 0) return order[i];
    }
    return NULL;
}

/* A device spec must name a compiled-in backend ("gpu" is resolved later). */
static int hx__check_dev(const char *spec)
{
    if (!*spec) return hx__set_error(HX_E_INVAL, "policy: empty device name");
    if (!strcasecmp(spec, "gpu")) return HX_OK;
    char name[64];
    size_t len = strcspn(spec, ":");
    snprintf(name, sizeof name, "%.*s", (int)HX_MIN(len, 63), spec);
    if (hx__backend_find(name)) return HX_OK;
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    for (int i = 0; i < hx__registry_count(); i++)
        hx__sb_printf(&sb, "%s%s", i ? ", " : "", hx__registry_get(i)->ops->name);
    int st =
        hx__set_error(HX_E_INVAL, "policy: unknown device '%s' (backends in this build: %s, gpu)",
                      spec, sb.data ? sb.data : "");
    hx__sb_free(&sb);
    return st;
}

static int hx__add_dev(struct hx_policy *p, const char *spec, int *idx)
{
    int st = hx__check_dev(spec);
    if (st) return st;
    for (int i = 0; i < p->n_devs; i++)
        if (!strcasecmp(p->devs[i], spec)) {
            *idx = i;
            return HX_OK;
        }
    if (p->n_devs >= HX_MAX_DEVICES)
        return hx__set_error(HX_E_INVAL, "policy: more than %d devices", HX_MAX_DEVICES);
    snprintf(p->devs[p->n_devs], sizeof p->devs[0], "%s", spec);
    *idx = p->n_devs++;
    return HX_OK;
}

/* "a=0.6,b=0.4" or "a,b" (equal shares); devices must be distinct. */
static int hx__parse_ratios(struct hx_policy *p, char *args, const char *what)
{
    if (!args || !*args) return hx__set_error(HX_E_INVAL, "%s: empty device list", what);
    double sum = 0;
    int n = 0, with_ratio = 0;
    char *save = NULL;
    for (char *tok = strtok_r(args, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
        char *eq = strchr(tok, '=');
        double r = 1.0;
        if (eq) {
            *eq = '\0';
            char *end;
            r = strtod(eq + 1, &end);
            if (*end || !(r > 0) || !isfinite(r))
                return hx__set_error(HX_E_INVAL, "%s: bad ratio '%s' for device '%s'", what, eq + 1,
                                     tok);
            with_ratio++;
        }
        int before = p->n_devs, idx = 0, st;
        if ((st = hx__add_dev(p, tok, &idx))) return st;
        if (p->n_devs == before)
            return hx__set_error(HX_E_INVAL, "%s: device '%s' is named twice", what, tok);
        p->ratio[idx] = r;
        sum += r;
    }
    if (n == 0) return hx__set_error(HX_E_INVAL, "%s: empty device list", what);
    if (with_ratio && with_ratio != n)
        return hx__set_error(HX_E_INVAL, "%s: give a ratio for every device or for none", what);
    if (with_ratio && fabs(sum - 1.0) > 1e-3)
        return hx__set_error(HX_E_INVAL, "%s: ratios add up to %g, not 1", what, sum);
    for (int i = 0; i < p->n_devs; i++) p->ratio[i] /= sum;
    return HX_OK;
}

static int hx__parse_op_map(struct hx_policy *p, char *args, const char *primary)
{
    if (!args || !*args) return hx__set_error(HX_E_INVAL, "op-map: empty map");
    int idx = 0, st;
    if ((st = hx__add_dev(p, primary, &idx))) return st;
    char *save = NULL;
    for (char *tok = strtok_r(args, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return hx__set_error(HX_E_INVAL, "op-map: '%s' is not CLASS=DEVICE", tok);
        *eq = '\0';
        if (!strcasecmp(tok, "default")) {
            /* Make this the primary: devs[0]. */
            if ((st = hx__check_dev(eq + 1))) return st;
            snprintf(p->devs[0], sizeof p->devs[0], "%s", eq + 1);
            continue;
        }
        enum hx_op_class c;
        if (hx_op_class_from_name(tok, &c) != HX_OK)
            return hx__set_error(HX_E_INVAL,
                                 "op-map: unknown op class '%s' (classes: embed, norm, qkv, rope, "
                                 "attn, o, gate_up, act, down, add, lm_head)",
                                 tok);
        if (p->class_dev[c] >= 0)
            return hx__set_error(HX_E_INVAL, "op-map: class '%s' is mapped twice", tok);
        if ((st = hx__add_dev(p, eq + 1, &idx))) return st;
        p->class_dev[c] = idx;
    }
    return HX_OK;
}

static int hx__parse_fallback(struct hx_policy *p, const char *fallback)
{
    if (!fallback) return HX_OK;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", fallback);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int st = hx__check_dev(tok);
        if (st) return st;
        for (int i = 0; i < p->n_fallback; i++)
            if (!strcasecmp(p->fallback[i], tok))
                return hx__set_error(HX_E_INVAL, "--fallback: device '%s' is named twice", tok);
        if (p->n_fallback >= HX_MAX_DEVICES)
            return hx__set_error(HX_E_INVAL, "--fallback: more than %d devices", HX_MAX_DEVICES);
        snprintf(p->fallback[p->n_fallback++], sizeof p->fallback[0], "%s", tok);
    }
    if (p->n_fallback == 0) return hx__set_error(HX_E_INVAL, "--fallback: empty device list");
    return HX_OK;
}

/* Read "@file" into buf (comments and whitespace dropped). */
static int hx__read_policy_file(const char *path, char *buf, size_t cap)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return hx__set_error(HX_E_INVAL, "policy file '%s' is %s, not a file", path,
                             S_ISDIR(sb.st_mode) ? "a directory" : "a special file");
    FILE *f = fopen(path, "r");
    if (!f) return hx__set_error(HX_E_IO, "policy file '%s' cannot be read: %s", path, strerror(errno));
    size_t len = 0;
    bool comment = false, too_long = false;
    for (int c; (c = getc(f)) != EOF;) {
        if (c == '\n') comment = false;
        else if (c == '#') comment = true;
        if (comment || isspace(c)) continue;
        if (len + 1 < cap) buf[len++] = (char)c;
        else too_long = true;
    }
    bool bad = ferror(f) != 0;
    int e = errno;
    fclose(f);
    buf[len] = '\0';
    if (bad) return hx__set_error(HX_E_IO, "policy file '%s' cannot be read: %s", path, strerror(e));
    if (too_long)
        return hx__set_error(HX_E_INVAL, "policy file '%s' is too long: over %zu characters "
                                         "without comments and spaces", path, cap - 1);
    if (!len) return hx__set_error(HX_E_INVAL, "policy file '%s' is empty", path);
    return HX_OK;
}

/* auto's candidate devices: "a,b" (no ratios: auto measures them). */
static int hx__parse_auto(struct hx_policy *p, char *args, const char *backend)
{
    int idx = 0;
    p->kind = HX_POLICY_AUTO;
    if (!args) return backend ? hx__add_dev(p, backend, &idx) : HX_OK;
    if (!*args) return hx__set_error(HX_E_INVAL, "auto: empty device list");
    if (strchr(args, '='))
        return hx__set_error(HX_E_INVAL,
                             "auto: takes devices without ratios ('%s'); it measures them", args);
    char *save = NULL;
    for (char *tok = strtok_r(args, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int before = p->n_devs, st = hx__add_dev(p, tok, &idx);
        if (st) return st;
        if (p->n_devs == before)
            return hx__set_error(HX_E_INVAL, "auto: device '%s' is named twice", tok);
    }
    if (p->n_devs == 0) return hx__set_error(HX_E_INVAL, "auto: empty device list");
    return HX_OK;
}

/* fit's devices, fastest first: "a,b" (no ratios: memory decides the shares), cpu appended
 * when not named; none named: --backend, else the best GPU present, then cpu. */
static int hx__parse_fit(struct hx_policy *p, char *args, const char *backend)
{
    int idx = 0, st;
    p->kind = HX_POLICY_FIT;
    if (args && !*args) return hx__set_error(HX_E_INVAL, "fit: empty device list");
    if (args && strchr(args, '='))
        return hx__set_error(HX_E_INVAL,
                             "fit: takes devices without shares ('%s'); memory decides them", args);
    if (!args) {
        const char *first = backend ? backend : hx__resolve_gpu();
        if (first && (st = hx__add_dev(p, first, &idx))) return st;
    }
    char *save = NULL;
    for (char *tok = args ? strtok_r(args, ",", &save) : NULL; tok;
         tok = strtok_r(NULL, ",", &save)) {
        int before = p->n_devs;
        if ((st = hx__add_dev(p, tok, &idx))) return st;
        if (p->n_devs == before)
            return hx__set_error(HX_E_INVAL, "fit: device '%s' is named twice", tok);
    }
    return hx__add_dev(p, "cpu", &idx); /* already named: found, not added */
}

static int hx__parse_kind(struct hx_policy *p, char *name, char *args, const char *primary,
                          const char *backend)
{
    int idx = 0, st;
    if (!strcmp(name, "auto")) return hx__parse_auto(p, args, backend);
    if (!strcmp(name, "fit")) return hx__parse_fit(p, args, backend);
    if (!strcmp(name, "single") || !strcmp(name, "gemm-offload")) {
        p->kind = !strcmp(name, "single") ? HX_POLICY_SINGLE : HX_POLICY_GEMM_OFFLOAD;
        if (args && strchr(args, ','))
            return hx__set_error(HX_E_INVAL, "%s takes one device, got '%s'", name, args);
        return hx__add_dev(p, args && *args ? args : primary, &idx);
    }
    if (!strcmp(name, "op-map"))
        return p->kind = HX_POLICY_OP_MAP, hx__parse_op_map(p, args, primary);
    if (!strcmp(name, "layer-split")) {
        p->kind = HX_POLICY_LAYER_SPLIT;
        if (args && !strncmp(args, "alternate:", 10)) p->alternate = true, args += 10;
        return hx__parse_ratios(p, args, "layer-split");
    }
    if (!strcmp(name, "tensor-split")) {
        p->kind = HX_POLICY_TENSOR_SPLIT;
        if ((st = hx__parse_ratios(p, args, "tensor-split"))) return st;
        if (p->n_devs < 2)
            return hx__set_error(HX_E_INVAL,
                                 "tensor-split: needs at least two devices (got '%s'); "
                                 "use single:%s for one",
                                 p->devs[0], p->devs[0]);
        return HX_OK;
    }
    if (!strcmp(name, "phase-split")) {
        p->kind = HX_POLICY_PHASE_SPLIT;
        char *comma = args ? strchr(args, ',') : NULL;
        if (!comma || strchr(comma + 1, ','))
            return hx__set_error(HX_E_INVAL, "phase-split takes PREFILL_DEV,DECODE_DEV");
        *comma = '\0';
        if ((st = hx__add_dev(p, args, &idx))) return st;
        int before = p->n_devs;
        if ((st = hx__add_dev(p, comma + 1, &idx))) return st;
        if (p->n_devs == before)
            return hx__set_error(HX_E_INVAL, "phase-split: device '%s' is named twice", args);
        return HX_OK;
    }
    if (!strcmp(name, "verify"))
        return hx__set_error(HX_E_INVAL, "verify: cannot wrap another verify");
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    for (size_t i = 0; i < HX_ARRAY_LEN(hx__presets); i++)
        hx__sb_printf(&sb, "%s, ", hx__presets[i].name);
    for (int i = 0; i < HX_POLICY_KIND_COUNT; i++)
        hx__sb_printf(&sb, "%s%s", i ? ", " : "", hx__policy_names[i]);
    st = hx__set_error(HX_E_INVAL, "unknown policy '%s' (known: %s)", name, sb.data ? sb.data : "");
    hx__sb_free(&sb);
    return st;
}

/* Replace a preset name in text (cap bytes) by its expansion; backend is --backend or NULL. */
static int hx__expand_preset(char *text, size_t cap, const char *backend)
{
    for (size_t i = 0; i < HX_ARRAY_LEN(hx__presets); i++) {
        const struct hx_preset *p = &hx__presets[i];
        if (strcmp(text, p->name)) continue;
        const char *dev = backend ? backend : p->dflt ? p->dflt : "cpu";
        if (p->not_cpu && !strcasecmp(dev, "cpu"))
            return hx__set_error(HX_E_INVAL,
                                 "%s alternates layers between --backend and cpu; with --backend "
                                 "cpu there is nothing to alternate (use cpu_only)",
                                 p->name);
        char exp[256];
        snprintf(exp, sizeof exp, p->expand, dev);
        snprintf(text, cap, "%s", exp);
        return HX_OK;
    }
    return HX_OK;
}

static bool hx__is_policy_name(const char *text)
{
    size_t len = strcspn(text, ":");
    for (int i = 0; i < HX_POLICY_KIND_COUNT; i++)
        if (strlen(hx__policy_names[i]) == len && !strncmp(text, hx__policy_names[i], len))
            return true;
    for (size_t i = 0; i < HX_ARRAY_LEN(hx__presets); i++)
        if (!strcmp(text, hx__presets[i].name)) return true;
    return false;
}

/* "verify[@REF][:INNER]": set the verify flag and reference, rewrite text to INNER. */
static int hx__parse_verify(struct hx_policy *p, char *text, size_t cap, const char *primary,
                            const char *backend)
{
    char *rest = text + 6, inner[512];
    snprintf(p->verify_ref, sizeof p->verify_ref, "ref");
    p->verify = true;
    if (*rest == '@') {
        size_t len = strcspn(rest + 1, ":");
        if (!len) return hx__set_error(HX_E_INVAL, "verify: empty reference device after '@'");
        snprintf(p->verify_ref, sizeof p->verify_ref, "%.*s", (int)HX_MIN(len, 63), rest + 1);
        int st = hx__check_dev(p->verify_ref);
        if (st) return st;
        rest += 1 + len;
    }
    if (*rest && *rest != ':')
        return hx__set_error(HX_E_INVAL, "verify: expected verify[@REF][:INNER], got '%s'", text);
    if (*rest == ':' && !rest[1]) return hx__set_error(HX_E_INVAL, "verify: empty inner policy");
    if (!*rest)
        snprintf(inner, sizeof inner, "single:%s", primary);
    else if (hx__is_policy_name(rest + 1))
        snprintf(inner, sizeof inner, "%s", rest + 1);
    else
        snprintf(inner, sizeof inner, "single:%s", rest + 1);
    if (!strncmp(inner, "verify", 6))
        return hx__set_error(HX_E_INVAL, "verify: cannot wrap another verify");
    snprintf(text, cap, "%s", inner);
    return hx__expand_preset(text, cap, backend);
}

int hx__policy_parse(const char *spec, const char *backend, const char *fallback,
                     struct hx_policy *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < HX_CLASS_COUNT; i++) out->class_dev[i] = -1;
    const char *primary = backend && *backend ? backend : "cpu";
    char text[512];
    if (!spec || !*spec) spec = "single";
    if (spec[0] == '@') {
        int st = hx__read_policy_file(spec + 1, text, sizeof text);
        if (st) return st;
    } else {
        snprintf(text, sizeof text, "%s", spec);
    }
    if (backend && !*backend) backend = NULL;
    int st = hx__expand_preset(text, sizeof text, backend);
    if (st) return st;
    snprintf(out->text, sizeof out->text, "%s", spec);
    if (!strncmp(text, "verify", 6) && (text[6] == '\0' || text[6] == ':' || text[6] == '@'))
        st = hx__parse_verify(out, text, sizeof text, primary, backend);
    if (st) return st;
    char *colon = strchr(text, ':');
    char *args = NULL;
    if (colon) *colon = '\0', args = colon + 1;
    st = hx__parse_kind(out, text, args, primary, backend);
    if (st) return st;
    return hx__parse_fallback(out, fallback);
}

/* hx__parse_size, saying why not: 0 parsed, 1 malformed, 2 zero (or under a byte), 3 over
 * 2^62 bytes. */
static int hx__size_text(const char *text, size_t *out)
{
    static const char units[] = "KMGT";
    char *end;
    if (!text || !isdigit((unsigned char)text[0])) return 1;
    size_t num = strspn(text, "0123456789.");
    double v = strtod(text, &end), mul = 1;
    if (end != text + num) return 1; /* no exponents, hex or inf: digits and a point */
    const char *u = strchr(units, toupper((unsigned char)*end));
    if (*end && u) {
        for (const char *k = units; k <= u; k++) mul *= 1024;
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'B' || *end == 'b') end++;
    } else if (*end == 'B' || *end == 'b') {
        end++;
    }
    double b = v * mul;
    if (*end || !isfinite(b) || (mul == 1 && b != floor(b))) return 1;
    if (b < 1) return 2;
    if (b > 0x1p62) return 3;
    *out = (size_t)b;
    return 0;
}

bool hx__parse_size(const char *text, size_t *out)
{
    return hx__size_text(text, out) == 0;
}

int hx__mem_parse(const char *text, struct hx_policy *p)
{
    p->n_mem = 0;
    if (!text || !*text) return HX_OK;
    char buf[512];
    if (strlen(text) >= sizeof buf) return hx__set_error(HX_E_INVAL, "--mem: too long");
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return hx__set_error(HX_E_INVAL, "--mem: '%s' is not DEVICE=SIZE (e.g. vulkan=2G)",
                                 tok);
        *eq = '\0';
        /* "host": the RAM of the devices on it together (sched-fit.c, hx__mem_check) */
        int st = strcasecmp(tok, "host") ? hx__check_dev(tok) : HX_OK;
        if (st) {
            char why[512];
            const char *e = hx_last_error();
            snprintf(why, sizeof why, "%s", strncmp(e, "policy: ", 8) ? e : e + 8);
            return hx__set_error(st, "--mem: %s", why);
        }
        size_t cap;
        int why = hx__size_text(eq + 1, &cap);
        if (why == 2 || why == 3)
            return hx__set_error(HX_E_INVAL,
                                 "--mem: size '%s' for %s is %s (leave the device out of --mem "
                                 "for no cap)",
                                 eq + 1, tok,
                                 why == 2 ? "under a byte: a cap must hold something"
                                          : "beyond any machine's memory (over 4 EiB)");
        if (why)
            return hx__set_error(HX_E_INVAL,
                                 "--mem: malformed size '%s' for %s (bytes, or a number with K, "
                                 "M, G or T: 512M, 1.5G)",
                                 eq + 1, tok);
        for (int i = 0; i < p->n_mem; i++)
            if (!strcasecmp(p->mem_dev[i], tok))
                return hx__set_error(HX_E_INVAL, "--mem: device '%s' is named twice", tok);
        if (p->n_mem >= HX_MAX_DEVICES)
            return hx__set_error(HX_E_INVAL, "--mem: more than %d devices", HX_MAX_DEVICES);
        snprintf(p->mem_dev[p->n_mem], sizeof p->mem_dev[0], "%s", tok);
        p->mem_cap[p->n_mem++] = cap;
    }
    if (!p->n_mem) return hx__set_error(HX_E_INVAL, "--mem: empty list");
    return HX_OK;
}

int hx_mem_validate(const char *mem)
{
    struct hx_policy p;
    memset(&p, 0, sizeof p);
    return hx__mem_parse(mem, &p);
}

int hx_policy_validate(const char *policy, const char *backend, const char *fallback)
{
    struct hx_policy p;
    int st = backend ? hx__check_dev(backend) : HX_OK;
    return st ? st : hx__policy_parse(policy, backend, fallback, &p);
}
