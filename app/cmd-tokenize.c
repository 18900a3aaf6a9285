/*
 * cmd-tokenize.c — `engine tokenize -m MODEL [-p TEXT | -f FILE] [--no-parse-special]
 * [--add-special] [--pieces]`: load only the tokenizer of a GGUF (full model or vocab-only
 * file) and print the token ids as a JSON array on one line, or [[id, "piece"], ...] with
 * --pieces (pieces are the raw token bytes, special tokens rendered, JSON-escaped).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "hx-internal.h"
#include "hx.h"

static void hx_tok_usage(FILE *f)
{
    fprintf(f, "usage: engine tokenize -m MODEL [-p TEXT | -f FILE] [--no-parse-special] "
               "[--add-special] [--pieces]\n"
               "  prints the token ids as a JSON array (no BOS/EOS unless --add-special;\n"
               "  control-token text is matched unless --no-parse-special)\n");
}

static void hx_json_str(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\r') printf("\\r");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20 || c == 0x7F) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

int hx_cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool parse_special = true, add_special = false, pieces = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            hx_tok_usage(stdout);
            return 0;
        }
        bool has_val = i + 1 < argc;
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_val) model = argv[++i];
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && has_val) prompt = argv[++i];
        else if ((!strcmp(a, "-f") || !strcmp(a, "--file")) && has_val) file = argv[++i];
        else if (!strcmp(a, "--no-parse-special")) parse_special = false;
        else if (!strcmp(a, "--add-special")) add_special = true;
        else if (!strcmp(a, "--pieces")) pieces = true;
        else {
            hx_app_error("tokenize", "unknown or incomplete option '%s'", a);
            hx_tok_usage(stderr);
            return 2;
        }
    }
    if (!model) {
        hx_app_error("tokenize", "missing -m MODEL");
        hx_tok_usage(stderr);
        return 2;
    }
    if (prompt && file) {
        hx_app_error("tokenize", "give either -p TEXT or -f FILE, not both");
        return 2;
    }
    if (!prompt && !file) {
        hx_app_error("tokenize", "no text given (-p TEXT or -f FILE)");
        hx_tok_usage(stderr);
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (file) {
        text = hx_app_read_file(file, &len);
        if (!text) {
            hx_app_error("tokenize", "cannot read '%s'", file);
            return 1;
        }
    } else if (prompt) {
        len = strlen(prompt);
    }
    struct hx_gguf *g = NULL;
    struct hx_vocab *v = NULL;
    int st = hx__gguf_open(model, false, &g);
    if (st == HX_OK) st = hx__vocab_load(g, &v);
    if (st != HX_OK) {
        hx_app_error("tokenize", "%s: %s", model, hx_last_error()[0] ? hx_last_error() : hx_strerror(st));
        hx__gguf_close(g);
        free(text);
        return 1;
    }
    const char *src = text ? text : (prompt ? prompt : "");
    int64_t n = 0, cap = (int64_t)len + 8;
    hx_token *ids = malloc((size_t)cap * sizeof *ids);
    st = ids ? hx__vocab_tokenize(v, src, len, add_special, parse_special, ids, cap, &n) : HX_E_NOMEM;
    if (st == HX_OK && n > cap) {
        free(ids);
        cap = n;
        ids = malloc((size_t)cap * sizeof *ids);
        st = ids ? hx__vocab_tokenize(v, src, len, add_special, parse_special, ids, cap, &n) : HX_E_NOMEM;
    }
    int rc = 0;
    if (st != HX_OK) {
        hx_app_error("tokenize", "%s", hx_last_error()[0] ? hx_last_error() : hx_strerror(st));
        rc = 1;
    } else {
        putchar('[');
        for (int64_t i = 0; i < n; i++) {
            if (i) printf(", ");
            if (!pieces) {
                printf("%d", ids[i]);
                continue;
            }
            char buf[512];
            size_t pl = 0;
            hx__vocab_piece(v, ids[i], true, buf, sizeof buf, &pl);
            printf("[%d, ", ids[i]);
            hx_json_str(buf, HX_MIN(pl, sizeof buf));
            putchar(']');
        }
        printf("]\n");
    }
    free(ids);
    free(text);
    hx__vocab_free(v);
    hx__gguf_close(g);
    return rc;
}
