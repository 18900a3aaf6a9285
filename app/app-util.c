/* app-util.c — small helpers shared by the subcommands: strict parsing of numbers and
 * comma-separated lists, prompts fed in batches, output files written safely, rows of a tensor
 * converted on the thread pool. (Errors and progress on stderr: progress.c.) */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "hx-internal.h"

int hx_app_prefill(struct hx_context *c, const hx_token *ids, int64_t n, int32_t pos0, int32_t seq,
                   hx_app_fed_fn after, void *user, const float **logits)
{
    if (logits) *logits = NULL;
    int64_t nb = HX_MIN(hx_context_n_batch(c), HX_MAX(n, 1));
    int32_t *pos = hx_malloc((size_t)nb * sizeof *pos), *sq = hx_malloc((size_t)nb * sizeof *sq);
    int8_t *lg = hx_malloc((size_t)nb);
    int st = pos && sq && lg ? HX_OK : HX_E_NOMEM;
    for (int64_t p = 0; st == HX_OK && p < n; p += nb) {
        int64_t k = HX_MIN(n - p, nb);
        for (int64_t i = 0; i < k; i++)
            pos[i] = (int32_t)(pos0 + p + i), sq[i] = seq, lg[i] = p + i == n - 1;
        struct hx_batch b = {.n_rows = k, .token = ids + p, .pos = pos, .seq = sq, .logits = lg};
        st = hx_decode(c, &b);
        if (st == HX_OK && after) after(user, p + k);
    }
    hx_free(pos), hx_free(sq), hx_free(lg);
    if (st == HX_OK && n > 0 && logits && !(*logits = hx_get_logits(c, -1))) st = HX_E_INTERNAL;
    return st;
}

int hx_app_tokenize(const struct hx_model *m, const char *text, size_t len, bool add_special,
                    hx_token **ids, int64_t *n)
{
    *ids = NULL, *n = 0;
    int64_t cap = (int64_t)HX_MIN(len, (size_t)INT32_MAX) + 8;
    for (int pass = 0; pass < 2; pass++) {
        hx_token *buf = hx_malloc((size_t)cap * sizeof *buf);
        if (!buf) return hx__set_error(HX_E_NOMEM, "out of memory for %lld token ids", (long long)cap);
        int64_t got = 0;
        int st = hx_tokenize(m, text, len, add_special, true, buf, cap, &got);
        if (st == HX_OK && got <= cap) {
            *ids = buf, *n = got;
            return HX_OK;
        }
        hx_free(buf);
        if (st != HX_OK) return st;
        cap = got; /* the tokenizer said how many: once more with room for all of them */
    }
    return hx__set_error(HX_E_INTERNAL, "the tokenizer's count changed between two calls");
}

int hx_app_logits_check(const float *logits, int64_t n_vocab)
{
    for (int64_t i = 0; i < n_vocab; i++)
        if (!isfinite(logits[i]))
            return hx__set_error(HX_E_INTERNAL, "the logit of token %lld is %g: the model's weights "
                                 "hold NaN or Inf, or a device computed wrongly (engine diff "
                                 "--backend B or --policy P names the first op off the reference)",
                                 (long long)i, (double)logits[i]);
    return HX_OK;
}

int hx_app_outfile_open(const char *cmd, const char *path, struct hx_app_outfile *o)
{
    memset(o, 0, sizeof *o);
    if (hx__outfile_resolve(path, &o->target, &o->exists, &o->mode) != HX_OK) {
        hx_app_error(cmd, "%s", hx_last_error());
        return 2;
    }
    size_t n = strlen(o->target) + 32;
    o->tmp = hx_malloc(n);
    int fd = -1;
    for (int k = 0; o->tmp && fd < 0 && k < 100; k++) {
        snprintf(o->tmp, n, "%s.tmp.%ld.%d", o->target, (long)getpid(), k);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
        hx_app_error(cmd, "cannot write '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd), unlink(o->tmp);
        hx_free(o->tmp), hx_free(o->target);
        memset(o, 0, sizeof *o);
        return 2;
    }
    return 0;
}

int hx_app_outfile_commit(const char *cmd, struct hx_app_outfile *o)
{
    bool ok = !ferror(o->f) && fflush(o->f) == 0 && (!o->exists || fchmod(fileno(o->f), (mode_t)o->mode) == 0);
    int e = errno;
    ok &= fclose(o->f) == 0;
    o->f = NULL;
    if (ok && rename(o->tmp, o->target) != 0) ok = false, e = errno;
    if (!ok) hx_app_error(cmd, "cannot write '%s': %s", o->target, strerror(e));
    hx_app_outfile_abort(o);
    return ok ? 0 : 1;
}

void hx_app_outfile_abort(struct hx_app_outfile *o)
{
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp); /* after a commit the name is gone: ENOENT, harmless */
    hx_free(o->tmp), hx_free(o->target);
    memset(o, 0, sizeof *o);
}

void hx_app_devices_add(char *set, size_t cap, const char *list)
{
    while (*list) {
        size_t len = strcspn(list, ",");
        bool seen = false;
        for (const char *p = set; *p && !seen; p += strcspn(p, ","), p += *p == ',')
            seen = strcspn(p, ",") == len && !strncmp(p, list, len);
        size_t used = strlen(set);
        if (!seen && used + len + 2 <= cap)
            snprintf(set + used, cap - used, "%s%.*s", used ? "," : "", (int)len, list);
        list += len;
        list += *list == ',';
    }
}

bool hx_app_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool hx_app_parse_f32(const char *s, float lo, float hi, float *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* ---- comma-separated lists ------------------------------------------------------------------ */

int hx_app_list(const char *s, int cap, hx_app_item_fn fn, void *user)
{
    if (!s) return -1;
    int n = 0;
    for (const char *p = s;; p++) {
        if (*p && *p != ',') continue;
        char item[256];
        size_t len = (size_t)(p - s);
        if (n >= cap || len == 0 || len >= sizeof item) return -1;
        memcpy(item, s, len);
        item[len] = '\0';
        if (!fn(user, item, n++)) return -1;
        if (!*p) return n;
        s = p + 1;
    }
}

struct hx_app_list_i64_ctx {
    int64_t lo, hi, *out;
};

static bool hx_app_list_i64_item(void *user, const char *item, int i)
{
    const struct hx_app_list_i64_ctx *c = user;
    return hx_app_parse_i64(item, c->lo, c->hi, &c->out[i]);
}

int hx_app_list_i64(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap)
{
    struct hx_app_list_i64_ctx c = {lo, hi, out};
    return hx_app_list(s, cap, hx_app_list_i64_item, &c);
}

struct hx_app_list_str_ctx {
    char *out;
    size_t width;
};

static bool hx_app_list_str_item(void *user, const char *item, int i)
{
    const struct hx_app_list_str_ctx *c = user;
    if (strlen(item) >= c->width) return false;
    snprintf(c->out + (size_t)i * c->width, c->width, "%s", item);
    return true;
}

int hx_app_list_str(const char *s, char *out, size_t width, int cap)
{
    struct hx_app_list_str_ctx c = {out, width};
    return hx_app_list(s, cap, hx_app_list_str_item, &c);
}

/* ---- tensor rows on the pool ---------------------------------------------------------------- */

/* Below this many elements one thread converts the tensor: waking threads can cost a
 * scheduler time slice on a busy machine, more than the work. */
#define HX_APP_ROWS_PARALLEL_MIN (1 << 20)

struct hx_app_rows_job {
    hx_app_row_fn fn;
    void *ctx;
    int64_t n_rows, width;
    _Atomic int status;
};

static void hx_app_rows_task(void *arg, int tid, int nth)
{
    struct hx_app_rows_job *j = arg;
    int64_t r0, r1;
    hx__pool_range(j->n_rows, tid, nth, &r0, &r1);
    float *row = hx_malloc((size_t)(j->width > 0 ? j->width : 1) * sizeof *row);
    int my = row ? HX_OK : HX_E_NOMEM;
    for (int64_t r = r0; r < r1 && !my && !atomic_load_explicit(&j->status, memory_order_relaxed); r++)
        my = j->fn(j->ctx, r, row);
    hx_free(row);
    int ok = HX_OK;
    if (my) atomic_compare_exchange_strong(&j->status, &ok, my);
}

int hx_app_rows(int64_t n_rows, int64_t width, int n_threads, hx_app_row_fn fn, void *ctx)
{
    if (n_rows <= 0) return HX_OK;
    struct hx_app_rows_job j = {.fn = fn, .ctx = ctx, .n_rows = n_rows, .width = width};
    atomic_init(&j.status, HX_OK);
    if (width * n_rows < HX_APP_ROWS_PARALLEL_MIN || n_threads < 1) n_threads = 1;
    if (n_threads > n_rows) n_threads = (int)n_rows;
    hx__pool_run(n_threads, hx_app_rows_task, &j);
    return atomic_load(&j.status);
}

char *hx_app_read_file(const char *path, size_t *n)
{
    bool std_in = !strcmp(path, "-");
    FILE *f = std_in ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) { /* fopen opens a directory */
        if (!std_in) fclose(f);
        errno = EISDIR;
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
        if (len == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    bool err = ferror(f);
    int e = errno;
    if (!std_in) fclose(f);
    if (err) {
        free(b);
        errno = e;
        return NULL;
    }
    if (b) b[len] = '\0'; /* the loop leaves room: it ends on a short read */
    *n = len;
    return b;
}
