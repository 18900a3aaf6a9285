/*
 * vocab.c — load a tokenizer from a GGUF's tokenizer.* keys (formats.md §5.1–5.3), the string
 * and merge hash tables, the special-token partition and the tokenize entry point.
 *
 * Invariants: every token text is copied into the vocab (NUL-terminated, length kept, may hold
 * NULs); the string map resolves each text to its LAST id (as llama.cpp's token_to_id);
 * BPE merges are keyed by (left id, right id) where sides and results that are not vocab
 * tokens get "extra" ids >= n_tokens so merge semantics match string-keyed merging exactly.
 * special[] lists CONTROL / USER_DEFINED / UNKNOWN tokens, longest text first (ties by id).
 */
#include <stdlib.h>
#include <string.h>

#include "unicode.h"
#include "vocab.h"

/* ---- hashing and maps ----------------------------------------------------------------------- */

uint64_t hx__vocab_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hx_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

const char *hx__vocab_id_text(const struct hx_vocab *v, int32_t id, uint32_t *len)
{
    if (id < v->n_tokens) {
        *len = v->tok[id].len;
        return v->tok[id].text;
    }
    *len = v->extra_len[id - v->n_tokens];
    return v->extra_text[id - v->n_tokens];
}

int32_t hx__vocab_lookup(const struct hx_vocab *v, const char *s, size_t n)
{
    uint64_t i = hx__vocab_hash(s, n) & v->map.mask;
    for (;; i = (i + 1) & v->map.mask) {
        int32_t id = v->map.slots[i];
        if (id < 0) return -1;
        uint32_t len;
        const char *t = hx__vocab_id_text(v, id, &len);
        if (len == n && !memcmp(t, s, n)) return id;
    }
}

static int hx_map_grow(struct hx_vocab *v, uint64_t cap)
{
    int32_t *slots = hx__malloc(cap * sizeof *slots);
    if (!slots) return HX_E_NOMEM;
    memset(slots, 0xff, cap * sizeof *slots);
    struct hx_str_map old = v->map;
    v->map.slots = slots;
    v->map.mask = cap - 1;
    if (old.slots) {
        for (uint64_t i = 0; i <= old.mask; i++) {
            int32_t id = old.slots[i];
            if (id < 0) continue;
            uint32_t len;
            const char *t = hx__vocab_id_text(v, id, &len);
            uint64_t j = hx__vocab_hash(t, len) & v->map.mask;
            while (v->map.slots[j] >= 0) j = (j + 1) & v->map.mask;
            v->map.slots[j] = id;
        }
        hx__free(old.slots);
    }
    return HX_OK;
}

/* Insert id (its text already stored); an existing equal text is replaced (last id wins). */
static void hx_map_put(struct hx_vocab *v, int32_t id)
{
    uint32_t len;
    const char *t = hx__vocab_id_text(v, id, &len);
    uint64_t i = hx__vocab_hash(t, len) & v->map.mask;
    for (;; i = (i + 1) & v->map.mask) {
        int32_t cur = v->map.slots[i];
        if (cur < 0) break;
        uint32_t l2;
        const char *t2 = hx__vocab_id_text(v, cur, &l2);
        if (l2 == len && !memcmp(t2, t, len)) break;
    }
    v->map.slots[i] = id;
}

/* Id of text, creating a merge-only extra string if it is not a token. */
static int hx_intern(struct hx_vocab *v, const char *s, size_t n, int32_t *out)
{
    int32_t id = hx__vocab_lookup(v, s, n);
    if (id >= 0) {
        *out = id;
        return HX_OK;
    }
    if (v->n_tokens + v->n_extra >= INT32_MAX) return hx__set_error(HX_E_FORMAT, "vocab: too many strings");
    if (v->n_extra == v->cap_extra) {
        int64_t cap = v->cap_extra ? v->cap_extra * 2 : 64;
        const char **t = hx__realloc(v->extra_text, (size_t)cap * sizeof *t);
        if (!t) return HX_E_NOMEM;
        v->extra_text = t;
        uint32_t *l = hx__realloc(v->extra_len, (size_t)cap * sizeof *l);
        if (!l) return HX_E_NOMEM;
        v->extra_len = l;
        v->cap_extra = cap;
    }
    char *copy = hx__malloc(n + 1);
    if (!copy) return HX_E_NOMEM;
    memcpy(copy, s, n);
    copy[n] = 0;
    v->extra_text[v->n_extra] = copy;
    v->extra_len[v->n_extra] = (uint32_t)n;
    id = (int32_t)(v->n_tokens + v->n_extra++);
    uint64_t used = (uint64_t)(v->n_tokens + v->n_extra);
    if (used * 2 > v->map.mask + 1) {
        int st = hx_map_grow(v, (v->map.mask + 1) * 2);
        if (st) return st;
    }
    hx_map_put(v, id);
    *out = id;
    return HX_OK;
}

int32_t hx__vocab_merge_rank(const struct hx_vocab *v, int32_t a, int32_t b, int32_t *result)
{
    if (!v->merges.keys || a < 0 || b < 0) return -1;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    for (uint64_t i = hx_mix64(key) & v->merges.mask;; i = (i + 1) & v->merges.mask) {
        if (v->merges.keys[i] == 0) return -1;
        if (v->merges.keys[i] == key) {
            *result = v->merges.result[i];
            return v->merges.rank[i];
        }
    }
}

/* First occurrence of a pair keeps its rank (llama.cpp emplace). */
static void hx_merge_put(struct hx_vocab *v, int32_t a, int32_t b, int32_t rank, int32_t result)
{
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint64_t i = hx_mix64(key) & v->merges.mask;
    while (v->merges.keys[i] != 0) {
        if (v->merges.keys[i] == key) return;
        i = (i + 1) & v->merges.mask;
    }
    v->merges.keys[i] = key;
    v->merges.rank[i] = rank;
    v->merges.result[i] = result;
}

bool hx__tokbuf_push(struct hx_tokbuf *b, hx_token t)
{
    if (b->failed) return false;
    if (b->n == b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 64;
        hx_token *ids = hx__realloc(b->ids, (size_t)cap * sizeof *ids);
        if (!ids) {
            b->failed = true;
            return false;
        }
        b->ids = ids;
        b->cap = cap;
    }
    b->ids[b->n++] = t;
    return true;
}

/* ---- loading --------------------------------------------------------------------------------- */

struct hx_pre_name {
    const char *name;
    enum hx_pre_type type;
    bool ignore_merges, add_bos, no_clean;
};

static const struct hx_pre_name hx_pre_names[] = {
    {"default", HX_PRE_DEFAULT, false, false, false},
    {"llama3", HX_PRE_LLAMA3, true, true, false},
    {"llama-v3", HX_PRE_LLAMA3, true, true, false},
    {"llama-bpe", HX_PRE_LLAMA3, true, true, false},
    {"falcon3", HX_PRE_LLAMA3, true, true, false},
    {"falcon-h1", HX_PRE_LLAMA3, true, true, false},
    {"pixtral", HX_PRE_LLAMA3, true, true, false},
    {"dbrx", HX_PRE_LLAMA3, false, false, false},
    {"smaug-bpe", HX_PRE_LLAMA3, false, false, false},
    {"qwen2", HX_PRE_QWEN2, false, false, true},
    {"deepseek-r1-qwen", HX_PRE_QWEN2, false, false, true},
    {"megrez", HX_PRE_QWEN2, false, false, true},
    {"stablelm2", HX_PRE_QWEN2, false, false, false},
    {"gpt-2", HX_PRE_GPT2, false, false, false},
    {"phi-2", HX_PRE_GPT2, false, false, false},
    {"roberta-bpe", HX_PRE_GPT2, false, false, false},
    {"mpt", HX_PRE_GPT2, false, false, false},
    {"olmo", HX_PRE_GPT2, false, false, false},
    {"jais", HX_PRE_GPT2, false, false, false},
    {"deepseek-llm", HX_PRE_DEEPSEEK_LLM, false, false, true},
    {"deepseek-coder", HX_PRE_DEEPSEEK_CODER, false, false, true},
    {"falcon", HX_PRE_FALCON, false, false, false},
    {"starcoder", HX_PRE_STARCODER, false, false, false},
    {"refact", HX_PRE_STARCODER, false, false, false},
    {"command-r", HX_PRE_STARCODER, false, false, true},
    {"smollm", HX_PRE_STARCODER, false, false, false},
    {"codeshell", HX_PRE_STARCODER, false, false, false},
    {"exaone", HX_PRE_STARCODER, false, false, false},
};

static const char *const hx_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>",
};

static int hx_get_str_key(struct hx_gguf *g, const char *key, char *buf, size_t cap, bool *found)
{
    struct hx_gguf_str s;
    int st = hx__gguf_get_str(g, key, &s);
    *found = st == HX_OK;
    if (st == HX_E_NOTFOUND) return HX_OK;
    if (st) return st;
    if (s.len >= cap) return hx__set_error(HX_E_FORMAT, "vocab: %s is too long (%llu bytes)", key,
                                          (unsigned long long)s.len);
    memcpy(buf, s.ptr, s.len);
    buf[s.len] = 0;
    return HX_OK;
}

static void hx_get_id(struct hx_gguf *g, const struct hx_vocab *v, const char *key, hx_token *id)
{
    uint64_t u;
    if (hx__gguf_get_u64(g, key, &u) != HX_OK) {
        hx__clear_error();
        return;
    }
    if (u == UINT32_MAX || u == UINT64_MAX) { /* converters write -1 for "none" */
        *id = HX_TOKEN_NULL;
        return;
    }
    if (u >= (uint64_t)v->n_tokens) {
        HX_LOG_WARN("vocab: %s = %llu is out of range (%lld tokens); ignored", key,
                    (unsigned long long)u, (long long)v->n_tokens);
        *id = HX_TOKEN_NULL;
        return;
    }
    *id = (hx_token)u;
}

static void hx_get_bool(struct hx_gguf *g, const char *key, bool *b)
{
    bool x;
    if (hx__gguf_get_bool(g, key, &x) == HX_OK) *b = x;
    else hx__clear_error();
}

static int hx_load_model_kind(struct hx_gguf *g, struct hx_vocab *v)
{
    bool found;
    int st = hx_get_str_key(g, "tokenizer.ggml.model", v->model_name, sizeof v->model_name, &found);
    if (st) return st;
    if (!found) return hx__set_error(HX_E_FORMAT, "vocab: missing key tokenizer.ggml.model");
    if (!strcmp(v->model_name, "llama")) v->kind = HX_VOCAB_SPM;
    else if (!strcmp(v->model_name, "gpt2")) v->kind = HX_VOCAB_BPE;
    else
        return hx__set_error(HX_E_FORMAT,
                             "vocab: unsupported tokenizer.ggml.model '%s' (supported: llama "
                             "(SentencePiece), gpt2 (byte-level BPE))", v->model_name);
    if (v->kind == HX_VOCAB_SPM) {
        v->pre = HX_PRE_NONE;
        return HX_OK;
    }
    st = hx_get_str_key(g, "tokenizer.ggml.pre", v->pre_name, sizeof v->pre_name, &found);
    if (st) return st;
    if (!found) {
        HX_LOG_WARN("vocab: no tokenizer.ggml.pre; using the 'default' pre-tokenizer");
        memcpy(v->pre_name, "default", sizeof "default");
    }
    for (size_t i = 0; i < HX_ARRAY_LEN(hx_pre_names); i++) {
        if (strcmp(v->pre_name, hx_pre_names[i].name)) continue;
        v->pre = hx_pre_names[i].type;
        v->ignore_merges = hx_pre_names[i].ignore_merges;
        v->add_bos = hx_pre_names[i].add_bos;
        v->clean_spaces = !hx_pre_names[i].no_clean;
        return HX_OK;
    }
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    for (size_t i = 0; i < HX_ARRAY_LEN(hx_pre_names); i++)
        hx__sb_printf(&sb, "%s%s", i ? ", " : "", hx_pre_names[i].name);
    st = hx__set_error(HX_E_FORMAT, "vocab: unsupported tokenizer.ggml.pre '%s' (supported: %s)",
                       v->pre_name, sb.data ? sb.data : "");
    hx__sb_free(&sb);
    return st;
}

static int hx_load_tokens(struct hx_gguf *g, struct hx_vocab *v)
{
    struct hx_gguf_arr toks, types, scores;
    int st = hx__gguf_get_arr(g, "tokenizer.ggml.tokens", &toks);
    if (st == HX_E_NOTFOUND) return hx__set_error(HX_E_FORMAT, "vocab: missing key tokenizer.ggml.tokens");
    if (st) return st;
    if (toks.elem_type != HX_GGUF_STRING)
        return hx__set_error(HX_E_FORMAT, "vocab: tokenizer.ggml.tokens is not an array of strings");
    if (toks.count == 0 || toks.count >= INT32_MAX / 2)
        return hx__set_error(HX_E_FORMAT, "vocab: tokenizer.ggml.tokens has %llu entries",
                             (unsigned long long)toks.count);
    bool have_types = hx__gguf_get_arr(g, "tokenizer.ggml.token_type", &types) == HX_OK;
    bool have_scores = hx__gguf_get_arr(g, "tokenizer.ggml.scores", &scores) == HX_OK;
    hx__clear_error();
    if (have_types && (types.count != toks.count || types.elem_type == HX_GGUF_STRING ||
                       types.elem_type == HX_GGUF_ARRAY || types.elem_type == HX_GGUF_FLOAT32 ||
                       types.elem_type == HX_GGUF_FLOAT64 || types.elem_type == HX_GGUF_BOOL))
        return hx__set_error(HX_E_FORMAT, "vocab: tokenizer.ggml.token_type: %llu integer entries "
                             "expected", (unsigned long long)toks.count);
    if (have_scores && (scores.count != toks.count ||
                        (scores.elem_type != HX_GGUF_FLOAT32 && scores.elem_type != HX_GGUF_FLOAT64)))
        return hx__set_error(HX_E_FORMAT, "vocab: tokenizer.ggml.scores: %llu float entries expected",
                             (unsigned long long)toks.count);
    v->n_tokens = (int64_t)toks.count;
    v->tok = hx__calloc((size_t)v->n_tokens, sizeof *v->tok);
    if (!v->tok) return HX_E_NOMEM;
    size_t total = 0;
    for (int64_t i = 0; i < v->n_tokens; i++) {
        struct hx_gguf_str s = hx__gguf_arr_str(g, &toks, (uint64_t)i);
        if (s.len > UINT32_MAX / 2) return hx__set_error(HX_E_FORMAT, "vocab: token %lld too long", (long long)i);
        total += s.len + 1;
    }
    v->arena = hx__malloc(total);
    if (!v->arena) return HX_E_NOMEM;
    v->arena_len = total;
    char *p = v->arena;
    for (int64_t i = 0; i < v->n_tokens; i++) {
        struct hx_gguf_str s = hx__gguf_arr_str(g, &toks, (uint64_t)i);
        memcpy(p, s.ptr, s.len);
        p[s.len] = 0;
        struct hx_tok_entry *t = &v->tok[i];
        t->text = p;
        t->len = (uint32_t)s.len;
        p += s.len + 1;
        t->type = HX_TOK_NORMAL;
        if (have_types) {
            int64_t ty = hx__gguf_arr_int(&types, (uint64_t)i);
            if (ty < 0 || ty > HX_TOK_BYTE)
                return hx__set_error(HX_E_FORMAT, "vocab: token %lld has invalid type %lld",
                                     (long long)i, (long long)ty);
            t->type = (uint8_t)ty;
        }
        t->score = have_scores ? (float)hx__gguf_arr_float(&scores, (uint64_t)i) : 0.0f;
    }
    uint64_t cap = 1024;
    while (cap < (uint64_t)v->n_tokens * 2) cap *= 2;
    if ((st = hx_map_grow(v, cap))) return st;
    for (int64_t i = 0; i < v->n_tokens; i++) hx_map_put(v, (int32_t)i);
    return HX_OK;
}

static int hx_load_merges(struct hx_gguf *g, struct hx_vocab *v)
{
    struct hx_gguf_arr m;
    int st = hx__gguf_get_arr(g, "tokenizer.ggml.merges", &m);
    if (st == HX_E_NOTFOUND) return hx__set_error(HX_E_FORMAT, "vocab: gpt2 tokenizer without tokenizer.ggml.merges");
    if (st) return st;
    if (m.elem_type != HX_GGUF_STRING)
        return hx__set_error(HX_E_FORMAT, "vocab: tokenizer.ggml.merges is not an array of strings");
    if (m.count >= INT32_MAX / 4) return hx__set_error(HX_E_FORMAT, "vocab: too many merges");
    uint64_t cap = 1024;
    while (cap < m.count * 2) cap *= 2;
    v->merges.keys = hx__calloc(cap, sizeof *v->merges.keys);
    v->merges.rank = hx__malloc(cap * sizeof *v->merges.rank);
    v->merges.result = hx__malloc(cap * sizeof *v->merges.result);
    if (!v->merges.keys || !v->merges.rank || !v->merges.result) return HX_E_NOMEM;
    v->merges.mask = cap - 1;
    char *buf = NULL;
    size_t buf_cap = 0;
    for (uint64_t i = 0; i < m.count; i++) {
        struct hx_gguf_str s = hx__gguf_arr_str(g, &m, i);
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) {
            HX_LOG_DEBUG("vocab: merge %llu has no separator; skipped", (unsigned long long)i);
            continue;
        }
        size_t la = (size_t)(sp - s.ptr), lb = s.len - la - 1;
        int32_t a, b, r;
        if ((st = hx_intern(v, s.ptr, la, &a)) || (st = hx_intern(v, sp + 1, lb, &b))) break;
        if (la + lb > buf_cap) {
            buf_cap = (la + lb) * 2;
            char *nb = hx__realloc(buf, buf_cap);
            if (!nb) {
                st = HX_E_NOMEM;
                break;
            }
            buf = nb;
        }
        memcpy(buf, s.ptr, la);
        memcpy(buf + la, sp + 1, lb);
        if ((st = hx_intern(v, buf, la + lb, &r))) break;
        hx_merge_put(v, a, b, (int32_t)i, r);
    }
    hx__free(buf);
    v->n_merges = (int64_t)m.count;
    return st;
}

static int hx_cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

static int hx_add_eog(struct hx_vocab *v, hx_token t)
{
    if (t < 0) return HX_OK;
    for (int64_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == t) return HX_OK;
    hx_token *e = hx__realloc(v->eog, (size_t)(v->n_eog + 1) * sizeof *e);
    if (!e) return HX_E_NOMEM;
    v->eog = e;
    v->eog[v->n_eog++] = t;
    return HX_OK;
}

static int hx_finish_specials(struct hx_gguf *g, struct hx_vocab *v)
{
    int st;
    /* EOT fallback and the EOG set; such tokens are forced to CONTROL (llama.cpp). */
    if (v->eot == HX_TOKEN_NULL) {
        static const char *const eot_texts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>",
                                                "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>"};
        for (size_t i = 0; i < HX_ARRAY_LEN(eot_texts) && v->eot == HX_TOKEN_NULL; i++) {
            int32_t id = hx__vocab_lookup(v, eot_texts[i], strlen(eot_texts[i]));
            if (id >= 0 && id < v->n_tokens) v->eot = id;
        }
    }
    if ((st = hx_add_eog(v, v->eos)) || (st = hx_add_eog(v, v->eot)) || (st = hx_add_eog(v, v->eom)))
        return st;
    if (v->eot >= 0) v->tok[v->eot].type = HX_TOK_CONTROL;
    for (size_t i = 0; i < HX_ARRAY_LEN(hx_eog_texts); i++) {
        int32_t id = hx__vocab_lookup(v, hx_eog_texts[i], strlen(hx_eog_texts[i]));
        if (id < 0 || id >= v->n_tokens) continue;
        if (v->tok[id].type != HX_TOK_CONTROL) {
            HX_LOG_DEBUG("vocab: token %d '%s' forced to CONTROL", id, hx_eog_texts[i]);
            v->tok[id].type = HX_TOK_CONTROL;
        }
        if ((st = hx_add_eog(v, id))) return st;
    }
    /* phi-3 files: special tokens strip whitespace on their right (llama.cpp per-model rule). */
    char name[128] = "";
    bool found;
    if (hx_get_str_key(g, "general.name", name, sizeof name, &found)) hx__clear_error(), name[0] = 0;
    for (char *c = name; *c; c++)
        if (*c >= 'A' && *c <= 'Z') *c = (char)(*c + 32);
    bool phi3 = strstr(name, "phi-3") || strstr(name, "phi3");
    for (int64_t i = 0; i < v->n_tokens; i++) {
        uint8_t ty = v->tok[i].type;
        if ((ty == HX_TOK_CONTROL || ty == HX_TOK_USER_DEFINED || ty == HX_TOK_UNKNOWN) && v->tok[i].len)
            v->n_special++;
    }
    v->special = hx__malloc((size_t)(v->n_special ? v->n_special : 1) * sizeof *v->special);
    if (!v->special) return HX_E_NOMEM;
    int64_t k = 0;
    for (int64_t i = 0; i < v->n_tokens; i++) {
        uint8_t ty = v->tok[i].type;
        if ((ty == HX_TOK_CONTROL || ty == HX_TOK_USER_DEFINED || ty == HX_TOK_UNKNOWN) && v->tok[i].len) {
            v->special[k++] = (hx_token)i;
            if (phi3) v->tok[i].rstrip = true;
        }
    }
    if (phi3) {
        int32_t id = hx__vocab_lookup(v, "</s>", 4);
        if (id >= 0 && id < v->n_tokens) v->tok[id].rstrip = true;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < HX_ARRAY_LEN(keep); i++) {
            id = hx__vocab_lookup(v, keep[i], strlen(keep[i]));
            if (id >= 0 && id < v->n_tokens) v->tok[id].rstrip = false;
        }
    }
    /* longest text first, ties by id: sort keys (~len << 32 | id) */
    uint64_t *keys = hx__malloc((size_t)(v->n_special ? v->n_special : 1) * sizeof *keys);
    if (!keys) return HX_E_NOMEM;
    for (int64_t i = 0; i < v->n_special; i++)
        keys[i] = ((uint64_t)(UINT32_MAX - v->tok[v->special[i]].len) << 32) | (uint32_t)v->special[i];
    qsort(keys, (size_t)v->n_special, sizeof *keys, hx_cmp_u64);
    for (int64_t i = 0; i < v->n_special; i++) v->special[i] = (hx_token)(uint32_t)keys[i];
    hx__free(keys);
    return HX_OK;
}

static int hx_load_chat_template(struct hx_gguf *g, struct hx_vocab *v)
{
    struct hx_gguf_str s;
    int st = hx__gguf_get_str(g, "tokenizer.chat_template", &s);
    if (st == HX_E_NOTFOUND) {
        hx__clear_error();
        return HX_OK;
    }
    if (st) return st;
    v->chat_template = hx__malloc(s.len + 1);
    if (!v->chat_template) return HX_E_NOMEM;
    memcpy(v->chat_template, s.ptr, s.len);
    v->chat_template[s.len] = 0;
    return HX_OK;
}

int hx__vocab_load(struct hx_gguf *g, struct hx_vocab **out)
{
    *out = NULL;
    struct hx_vocab *v = hx__calloc(1, sizeof *v);
    if (!v) return HX_E_NOMEM;
    int st;
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->nl = HX_TOKEN_NULL;
    if ((st = hx_load_model_kind(g, v)) || (st = hx_load_tokens(g, v))) goto fail;
    if (v->kind == HX_VOCAB_SPM) {
        v->bos = v->n_tokens > 1 ? 1 : HX_TOKEN_NULL;
        v->eos = v->n_tokens > 2 ? 2 : HX_TOKEN_NULL;
        v->unk = 0;
        v->add_bos = true;
        v->add_space_prefix = true;
        v->clean_spaces = false;
    } else if ((st = hx_load_merges(g, v))) {
        goto fail;
    }
    hx_get_id(g, v, "tokenizer.ggml.bos_token_id", &v->bos);
    hx_get_id(g, v, "tokenizer.ggml.eos_token_id", &v->eos);
    hx_get_id(g, v, "tokenizer.ggml.eot_token_id", &v->eot);
    hx_get_id(g, v, "tokenizer.ggml.eom_token_id", &v->eom);
    hx_get_id(g, v, "tokenizer.ggml.unknown_token_id", &v->unk);
    hx_get_id(g, v, "tokenizer.ggml.seperator_token_id", &v->sep);
    hx_get_id(g, v, "tokenizer.ggml.padding_token_id", &v->pad);
    hx_get_bool(g, "tokenizer.ggml.add_bos_token", &v->add_bos);
    hx_get_bool(g, "tokenizer.ggml.add_eos_token", &v->add_eos);
    hx_get_bool(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);
    for (int b = 0; b < 256; b++) {
        char hex[8];
        static const char digits[] = "0123456789ABCDEF";
        hex[0] = '<', hex[1] = '0', hex[2] = 'x', hex[3] = digits[b >> 4], hex[4] = digits[b & 15];
        hex[5] = '>';
        int32_t id = hx__vocab_lookup(v, hex, 6);
        v->byte_tok[b] = (id >= 0 && id < v->n_tokens) ? id : HX_TOKEN_NULL;
    }
    if ((st = hx_finish_specials(g, v)) || (st = hx_load_chat_template(g, v))) goto fail;
    if (v->kind == HX_VOCAB_BPE && (st = hx__pretok_new(v->pre, &v->pretok))) goto fail;
    *out = v;
    return HX_OK;
fail:
    hx__vocab_free(v);
    return st;
}

void hx__vocab_free(struct hx_vocab *v)
{
    if (!v) return;
    for (int64_t i = 0; i < v->n_extra; i++) hx__free((void *)v->extra_text[i]);
    hx__free(v->extra_text);
    hx__free(v->extra_len);
    hx__free(v->map.slots);
    hx__free(v->merges.keys);
    hx__free(v->merges.rank);
    hx__free(v->merges.result);
    hx__free(v->tok);
    hx__free(v->arena);
    hx__free(v->eog);
    hx__free(v->special);
    hx__pretok_free(v->pretok);
    hx__free(v->chat_template);
    hx__free(v);
}

/* ---- accessors ------------------------------------------------------------------------------- */

int64_t hx__vocab_n_tokens(const struct hx_vocab *v) { return v ? v->n_tokens : 0; }
hx_token hx__vocab_bos(const struct hx_vocab *v) { return v ? v->bos : HX_TOKEN_NULL; }
hx_token hx__vocab_eos(const struct hx_vocab *v) { return v ? v->eos : HX_TOKEN_NULL; }
bool hx__vocab_add_bos(const struct hx_vocab *v) { return v && v->add_bos && v->bos >= 0; }
const char *hx__vocab_chat_template(const struct hx_vocab *v) { return v ? v->chat_template : NULL; }
const char *hx__vocab_model_name(const struct hx_vocab *v) { return v ? v->model_name : ""; }
const char *hx__vocab_pre_name(const struct hx_vocab *v) { return v ? v->pre_name : ""; }

bool hx__vocab_is_eog(const struct hx_vocab *v, hx_token t)
{
    if (!v || t < 0) return false;
    for (int64_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == t) return true;
    return false;
}

const char *hx__vocab_text(const struct hx_vocab *v, hx_token t)
{
    if (!v || t < 0 || t >= v->n_tokens) return NULL;
    return v->tok[t].text;
}

hx_token hx__vocab_find(const struct hx_vocab *v, const char *text, size_t len)
{
    if (!v) return HX_TOKEN_NULL;
    int32_t id = hx__vocab_lookup(v, text, len);
    return (id >= 0 && id < v->n_tokens) ? id : HX_TOKEN_NULL;
}

/* ---- special-token partition (formats.md §5.3) ---------------------------------------------- */

struct hx_frag {
    hx_token tok;     /* HX_TOKEN_NULL for raw text */
    size_t off, len;
};

struct hx_fragbuf {
    struct hx_frag *f;
    size_t n, cap;
};

static bool hx_frag_push(struct hx_fragbuf *b, hx_token tok, size_t off, size_t len)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        struct hx_frag *f = hx__realloc(b->f, cap * sizeof *f);
        if (!f) return false;
        b->f = f;
        b->cap = cap;
    }
    b->f[b->n++] = (struct hx_frag){tok, off, len};
    return true;
}

static bool hx_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Split the raw fragments of *cur on every occurrence of special token t. */
static int hx_partition_one(const struct hx_vocab *v, const char *text, hx_token t,
                            struct hx_fragbuf *cur, struct hx_fragbuf *next)
{
    const struct hx_tok_entry *e = &v->tok[t];
    next->n = 0;
    for (size_t i = 0; i < cur->n; i++) {
        struct hx_frag fr = cur->f[i];
        if (fr.tok != HX_TOKEN_NULL) {
            if (!hx_frag_push(next, fr.tok, 0, 0)) return HX_E_NOMEM;
            continue;
        }
        size_t off = fr.off, end = fr.off + fr.len;
        while (off < end) {
            const char *m = memmem(text + off, end - off, e->text, e->len);
            if (!m) break;
            size_t mpos = (size_t)(m - text);
            size_t llen = mpos - off;
            if (e->lstrip)
                while (llen > 0 && hx_is_space(text[off + llen - 1])) llen--;
            if (llen > 0 && !hx_frag_push(next, HX_TOKEN_NULL, off, llen)) return HX_E_NOMEM;
            if (!hx_frag_push(next, t, 0, 0)) return HX_E_NOMEM;
            off = mpos + e->len;
            if (e->rstrip)
                while (off < end && hx_is_space(text[off])) off++;
        }
        if (off < end && !hx_frag_push(next, HX_TOKEN_NULL, off, end - off)) return HX_E_NOMEM;
    }
    struct hx_fragbuf tmp = *cur;
    *cur = *next;
    *next = tmp;
    return HX_OK;
}

int hx__vocab_tokenize(const struct hx_vocab *v, const char *text, size_t len, bool add_special,
                       bool parse_special, hx_token *ids, int64_t cap, int64_t *n_out)
{
    *n_out = 0;
    if (!v || (!text && len) || cap < 0 || (cap > 0 && !ids))
        return hx__set_error(HX_E_INVAL, "tokenize: bad arguments");
    struct hx_fragbuf cur = {0}, next = {0};
    struct hx_tokbuf out = {0};
    int st = HX_OK;
    if (len > 0 && !hx_frag_push(&cur, HX_TOKEN_NULL, 0, len)) st = HX_E_NOMEM;
    for (int64_t i = 0; i < v->n_special && st == HX_OK && len > 0; i++) {
        hx_token t = v->special[i];
        if (!parse_special && v->tok[t].type != HX_TOK_USER_DEFINED) continue;
        if (v->tok[t].len > len) continue;
        st = hx_partition_one(v, text, t, &cur, &next);
    }
    bool prev_special = true; /* SPM: a space prefix goes before the first fragment */
    if (st == HX_OK && add_special && v->add_bos && v->bos >= 0) hx__tokbuf_push(&out, v->bos);
    for (size_t i = 0; i < cur.n && st == HX_OK; i++) {
        const struct hx_frag *fr = &cur.f[i];
        if (fr->tok != HX_TOKEN_NULL) {
            hx__tokbuf_push(&out, fr->tok);
            prev_special = true;
        } else if (v->kind == HX_VOCAB_SPM) {
            st = hx__spm_encode(v, text + fr->off, fr->len, v->add_space_prefix && prev_special, &out);
            prev_special = false;
        } else {
            st = hx__bpe_encode(v, text + fr->off, fr->len, &out);
        }
    }
    if (st == HX_OK && add_special && v->add_eos && v->eos >= 0) hx__tokbuf_push(&out, v->eos);
    if (st == HX_OK && out.failed) st = HX_E_NOMEM;
    if (st == HX_OK) {
        if (out.n > 0 && cap > 0) memcpy(ids, out.ids, (size_t)HX_MIN(out.n, cap) * sizeof *ids);
        *n_out = out.n;
    }
    hx__free(cur.f);
    hx__free(next.f);
    hx__free(out.ids);
    if (st == HX_E_NOMEM) return hx__set_error(st, "tokenize: out of memory");
    return st;
}
