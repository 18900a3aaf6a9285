/*
 * gguf-split.c — models split over several GGUF files, as llama.cpp's gguf-split writes them:
 * `PREFIX-00001-of-00003.gguf`, `PREFIX-00002-of-00003.gguf`, ... Every part carries
 * split.no (0-based), split.count and split.tensors.count (the model's tensors, all parts
 * together); the first part holds the model's metadata and some tensors, the others only
 * tensors. docs/weights.md ("Split models").
 *
 * hx__gguf_open opens the first part and then each other part by name, checks that each is
 * the part its name says of the same model, and appends its tensors to the first part's table
 * (their data pointers stay in the part's own mapping, which lives until the model closes).
 * Anything inconsistent — a part missing, numbered wrongly, from a model of another size, a
 * tensor in two parts, a total that differs from split.tensors.count — is HX_E_FORMAT (a
 * missing file HX_E_IO) naming the file and the rule, before any tensor is used.
 */
#include <stdio.h>
#include <string.h>

#include "gguf.h"
#include "hx-impl.h"

#define HX_SPLIT_MAX 9999 /* llama.cpp's names have 5 digits; more parts than this is damage */

/* The last error, prefixed with the file it is about. */
static int hx__split_where(int st, const char *path)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", hx_last_error());
    return hx__set_error(st, "%s: %s", path, msg);
}

/* split.no and split.count of g: (0, 1) when the file is not a part of a split model, which
 * is, as for llama.cpp, a file without split.count or with a count of 0 or 1. */
static int hx__split_keys(const struct hx_gguf *g, const char *path, uint64_t *no, uint64_t *count)
{
    *no = 0, *count = 1;
    int st = hx__gguf_get_u64(g, "split.count", count);
    if (st == HX_E_NOTFOUND || (st == HX_OK && *count <= 1)) {
        *count = 1;
        return HX_OK;
    }
    if (st) return hx__split_where(st, path); /* wrong type: the getter said which */
    st = hx__gguf_get_u64(g, "split.no", no);
    if (st == HX_E_NOTFOUND)
        return hx__set_error(HX_E_FORMAT, "%s: split model: split.count %llu without split.no (which "
                             "part the file is)", path, (unsigned long long)*count);
    if (st) return hx__split_where(st, path);
    if (*count > HX_SPLIT_MAX || *no >= *count)
        return hx__set_error(HX_E_FORMAT, "%s: split model: split.no %llu of split.count %llu (parts "
                             "are numbered 0..count-1, at most %d)", path, (unsigned long long)*no,
                             (unsigned long long)*count, HX_SPLIT_MAX);
    return HX_OK;
}

/* The name of part k (0-based) of n, from the first part's path; false if path does not end
 * in -00001-of-NNNNN.gguf, the only way the other parts can be found. */
static bool hx__split_path(const char *path, uint64_t k, uint64_t n, char *out, size_t len)
{
    char tail[64];
    snprintf(tail, sizeof tail, "-%05llu-of-%05llu.gguf", 1ull, (unsigned long long)n);
    size_t pl = strlen(path), tl = strlen(tail);
    if (pl <= tl || strcmp(path + pl - tl, tail) != 0) return false;
    int w = snprintf(out, len, "%.*s-%05llu-of-%05llu.gguf", (int)(pl - tl), path,
                     (unsigned long long)k + 1, (unsigned long long)n);
    return w > 0 && (size_t)w < len;
}

static int hx__split_join(struct hx_gguf *g, const char *path, bool no_mmap, uint64_t n)
{
    g->parts = hx__calloc((size_t)n - 1, sizeof *g->parts);
    if (!g->parts) return HX_E_NOMEM;
    g->n_parts = (uint32_t)n;
    char pp[4096];
    for (uint64_t k = 1; k < n; k++) {
        if (!hx__split_path(path, k, n, pp, sizeof pp))
            return hx__set_error(HX_E_FORMAT, "%s: part 1 of a model split in %llu files, but the name "
                                 "does not end in -00001-of-%05llu.gguf, so the other parts cannot be "
                                 "found (keep gguf-split's names)", path, (unsigned long long)n,
                                 (unsigned long long)n);
        struct hx_gguf *p;
        int st = hx__gguf_open_file(pp, no_mmap, &p);
        if (st) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", hx_last_error());
            return hx__set_error(st, "%s: part %llu of %llu of the split model: %s", path,
                                 (unsigned long long)k + 1, (unsigned long long)n, msg);
        }
        g->parts[k - 1] = p;
        uint64_t no, count;
        if ((st = hx__split_keys(p, pp, &no, &count))) return st;
        if (count != n || no != k)
            return hx__set_error(HX_E_FORMAT, "%s: holds split.no %llu of split.count %llu, but its name "
                                 "makes it part %llu of %llu (0-based: split.no %llu)", pp,
                                 (unsigned long long)no, (unsigned long long)count,
                                 (unsigned long long)k + 1, (unsigned long long)n, (unsigned long long)k);
    }
    uint64_t total = g->n_tensors;
    for (uint64_t k = 1; k < n; k++) {
        if (g->parts[k - 1]->n_tensors > UINT64_MAX - total) return HX_E_OVERFLOW;
        total += g->parts[k - 1]->n_tensors;
    }
    uint64_t want;
    int st = hx__gguf_get_u64(g, "split.tensors.count", &want);
    if (st == HX_OK && want != total)
        return hx__set_error(HX_E_FORMAT, "%s: split.tensors.count says %llu tensors, the %llu parts "
                             "hold %llu", path, (unsigned long long)want, (unsigned long long)n,
                             (unsigned long long)total);
    if (st != HX_OK && st != HX_E_NOTFOUND) return st;
    struct hx_gguf_tensor *t = hx__realloc(g->tensors, (size_t)total * sizeof *t);
    if (!t) return HX_E_NOMEM;
    g->tensors = t;
    for (uint64_t k = 1; k < n; k++) {
        const struct hx_gguf *p = g->parts[k - 1];
        for (uint64_t i = 0; i < p->n_tensors; i++) {
            if (hx__gguf_find_tensor(g, p->tensors[i].name))
                return hx__set_error(HX_E_FORMAT, "split model %s: tensor '%s' is in part %llu and in an "
                                     "earlier part", path, p->tensors[i].name, (unsigned long long)k + 1);
            t[g->n_tensors] = p->tensors[i];
            t[g->n_tensors++].file = (uint32_t)k;
        }
    }
    return HX_OK;
}

int hx__gguf_open(const char *path, bool no_mmap, struct hx_gguf **out)
{
    *out = NULL;
    struct hx_gguf *g;
    int st = hx__gguf_open_file(path, no_mmap, &g);
    if (st) return st;
    uint64_t no, n;
    if ((st = hx__split_keys(g, path, &no, &n)) == HX_OK && no != 0) {
        char first[4096] = "";
        const char *of = NULL; /* the last "-of-", after "-NNNNN" */
        for (const char *q = strstr(path, "-of-"); q; q = strstr(q + 1, "-of-")) of = q;
        if (of && of - path >= 6 && of[-6] == '-')
            snprintf(first, sizeof first, " (%.*s-00001%s)", (int)(of - 6 - path), path, of);
        st = hx__set_error(HX_E_FORMAT, "%s: part %llu of a model split in %llu files: open the first "
                           "part%s", path, (unsigned long long)no + 1, (unsigned long long)n, first);
    } else if (st == HX_OK && n > 1) {
        st = hx__split_join(g, path, no_mmap, n);
    }
    if (st) {
        hx__gguf_close(g);
        return st;
    }
    *out = g;
    return HX_OK;
}
