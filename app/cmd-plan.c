/* cmd-plan.c — `engine plan -m M [--backend B] [--policy P] [--fallback L] [--mem CAPS]
 * [--summary] [--phase prefill|decode]`: the memory the plan puts on each device by kind,
 * against its limit; per phase, the placement rule, which op runs on which device and why,
 * the splits (tensor-split: the parallel parts and their joins), the bytes moved between
 * devices, and for `auto` the predicted time per split and the rejected alternatives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "cli.h"

static void hx_plan_usage(void)
{
    printf(
        "usage: engine plan -m MODEL [--backend B] [--policy P] [--fallback L] [-c N_CTX] [-t THREADS]\n"
        "       [--mem DEV=SIZE[,DEV=SIZE]] [--summary] [--phase prefill|decode] [--progress]\n"
        "policies: single[:DEV], gemm-offload[:DEV], op-map:CLASS=DEV,...[,default=DEV],\n"
        "          layer-split:DEV=R,... | layer-split:alternate:DEV,DEV, phase-split:PREFILL_DEV,DECODE_DEV,\n"
        "          tensor-split:DEV=R,DEV=R[,...], fit[:DEV,...], auto[:DEV,...], verify[@REF][:INNER], @FILE,\n"
        "          or a preset: cpu_only gpu_only npu_only layer_by_layer attention_on_npu ffn_on_npu\n"
        "          qkv_on_npu prefill_npu_decode_gpu auto   (docs/policies.md)\n"
        "--mem: cap each device's memory (512M, 1.5G, bytes); the plan prints what it puts on\n"
        "       each device and is refused (exit 1) if that exceeds a device's limit\n"
        "--summary: splits and transfers only, no per-op lines\n");
}

/* Print the plan text, keeping only the phase asked for and (summary) no op lines. */
static void hx_plan_print(const char *text, bool summary, const char *phase)
{
    bool keep = true;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
        if (!strncmp(p, "phase ", 6)) keep = !phase || !strncmp(p + 6, phase, strlen(phase));
        bool op_line = !strncmp(p, "    [", 5);
        if (keep && !(summary && op_line)) fwrite(p, 1, len, stdout);
        p += len;
    }
}

int hx_cmd_plan(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
        return hx_plan_usage(), 0;
    bool summary = false;
    const char *phase = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int n_rest = 0, rc = rest ? 0 : 1;
    for (int i = 0; rest && i < argc; i++) {
        if (i > 0 && !strcmp(argv[i], "--summary"))
            summary = true;
        else if (i > 0 && !strcmp(argv[i], "--phase")) {
            phase = i + 1 < argc ? argv[++i] : "";
            if (strcmp(phase, "prefill") && strcmp(phase, "decode")) {
                hx_app_error("plan", "--phase takes prefill or decode, not '%s'", phase);
                rc = 2;
            }
        } else
            rest[n_rest++] = argv[i];
    }
    struct hx_cli o;
    if (rc == 0) rc = hx_cli_parse("plan", n_rest, rest, &o);
    free(rest);
    if (rc) return rc;
    struct hx_model *m;
    struct hx_context *c;
    if ((rc = hx_cli_open("plan", &o, &m, &c))) return rc;
    char *text;
    if (hx_context_plan_text(c, &text) != HX_OK) {
        hx_app_error("plan", "%s", hx_last_error());
        rc = 1;
    } else {
        hx_plan_print(text, summary, phase);
        hx_free(text);
    }
    hx_context_free(c);
    hx_model_free(m);
    return rc;
}
