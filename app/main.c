/*
 * main.c — `engine`: dispatch to a subcommand. Every command is always built except `serve`,
 * whose libraries (libuv, http-parser, jansson) may be missing: app/server/CMakeLists.txt then
 * leaves it out, the build does not define HX_HAVE_SERVE, and the command says "not built".
 * No weak references: a command that is meant to be built and is not linked is a link error,
 * not a silent "[not built]".
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "hx.h"

#ifdef HX_HAVE_SERVE
#define HX_CMD_SERVE hx_cmd_serve
#else
#define HX_CMD_SERVE NULL
#endif

struct hx_app_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct hx_app_cmd hx_app_cmds[] = {
    {"run", hx_cmd_run, "generate text: -m MODEL -p PROMPT [-n N] [--backend B] [--policy P]"},
    {"chat", hx_cmd_chat, "interactive multi-turn chat: -m MODEL"},
    {"serve", HX_CMD_SERVE, "OpenAI-compatible HTTP server: -m MODEL [--port 8080]"},
    {"bench", hx_cmd_bench, "benchmarks: -m MODEL (pp/tg), or --kernels (GEMV/GEMM)"},
    {"diff", hx_cmd_diff, "compare a backend or policy against the reference"},
    {"plan", hx_cmd_plan, "show which op runs on which device: -m MODEL [--policy P]"},
    {"devices", hx_cmd_devices, "list backends and devices, and why any is unavailable"},
    {"inspect", hx_cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"tokenize", hx_cmd_tokenize, "print token ids as JSON: -m MODEL -p TEXT"},
    {"quantize", hx_cmd_quantize, "convert weights: IN OUT TYPE"},
    {"mkmodel", hx_cmd_mkmodel, "write a random-weight model of a real shape"},
};

/* What a command printed must have reached stdout: a full disk, a closed descriptor or a
 * pipe whose reader left (with SIGPIPE ignored) is an error, not a silent truncation and exit 0
 * (`engine inspect M > /dev/full`). A command that failed has said why already. */
static int hx_app_stdout_done(const char *cmd, int rc)
{
    errno = 0;
    bool failed = fflush(stdout) != 0;
    int e = errno;
    if (rc || (!failed && !ferror(stdout))) return rc;
    fprintf(stderr, "engine%s%s: cannot write the output to stdout%s%s\n", cmd ? " " : "",
            cmd ? cmd : "", e ? ": " : "", e ? strerror(e) : "");
    return 1;
}

static void hx_app_usage(FILE *f)
{
    fprintf(f, "usage: engine COMMAND [options]   (hx %s)\n\ncommands:\n", hx_version());
    for (size_t i = 0; i < sizeof hx_app_cmds / sizeof hx_app_cmds[0]; i++)
        fprintf(f, "  %-9s %s%s\n", hx_app_cmds[i].name, hx_app_cmds[i].help,
                hx_app_cmds[i].fn ? "" : "  [not built]");
    fprintf(f, "\n'engine COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        hx_app_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
        hx_app_usage(stdout);
        return hx_app_stdout_done(NULL, 0);
    }
    if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        printf("hx %s\n", hx_version());
        return hx_app_stdout_done(NULL, 0);
    }
    for (size_t i = 0; i < sizeof hx_app_cmds / sizeof hx_app_cmds[0]; i++) {
        if (strcmp(name, hx_app_cmds[i].name)) continue;
        if (!hx_app_cmds[i].fn) {
            hx_app_error(name, "not built into this engine");
            return 2;
        }
        return hx_app_stdout_done(name, hx_app_cmds[i].fn(argc - 1, argv + 1));
    }
    fprintf(stderr, "engine: unknown command '%s'\n\n", name);
    hx_app_usage(stderr);
    return 2;
}
