/* cmd-plan.c — `engine plan -m M [--backend B] [--policy P] [--fallback L]`: per phase, which
 * op runs on which device and why, the splits, and the bytes moved between devices. */
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "cli.h"

int hx_cmd_plan(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: engine plan -m MODEL [--backend B] [--policy P] [--fallback L] [-c N_CTX]\n");
        return 0;
    }
    struct hx_cli o;
    int rc = hx_cli_parse("plan", argc, argv, &o);
    if (rc) return rc;
    struct hx_model *m;
    struct hx_context *c;
    if ((rc = hx_cli_open("plan", &o, &m, &c))) return rc;
    char *text;
    if (hx_context_plan_text(c, &text) != HX_OK) {
        hx_app_error("plan", "%s", hx_last_error());
        rc = 1;
    } else {
        fputs(text, stdout);
        hx_free(text);
    }
    hx_context_free(c);
    hx_model_free(m);
    return rc;
}
