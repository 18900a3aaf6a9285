/*
 * tokenize-spm.c — SentencePiece-style BPE (tokenizer.ggml.model = "llama") as llama.cpp does
 * it, formats.md §5.5: optional leading space, every ' ' → "▁" (U+2581), one symbol per UTF-8
 * character, then repeatedly merge the adjacent pair whose concatenation is the vocab token
 * with the highest score (ties: leftmost), via a max-heap with lazy invalidation. A merged
 * symbol is always a token; a remaining single character that is not a token falls back to
 * its bytes as <0xXX> tokens (or the single-byte token, else unk).
 */
#include <string.h>

#include "unicode.h"
#include "vocab.h"

struct hx_spm_sym {
    uint32_t off, len;
    int32_t prev, next;
};

struct hx_spm_pair {
    float score;
    int32_t left, right, id;
    uint32_t llen, rlen;
};

struct hx_spm_heap {
    struct hx_spm_pair *h;
    size_t n, cap;
};

static bool hx_spm_before(const struct hx_spm_pair *a, const struct hx_spm_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static bool hx_spm_push(struct hx_spm_heap *q, struct hx_spm_pair p)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        struct hx_spm_pair *h = hx__realloc(q->h, cap * sizeof *h);
        if (!h) return false;
        q->h = h;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0 && hx_spm_before(&p, &q->h[(i - 1) / 2])) {
        q->h[i] = q->h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->h[i] = p;
    return true;
}

static struct hx_spm_pair hx_spm_pop(struct hx_spm_heap *q)
{
    struct hx_spm_pair top = q->h[0], last = q->h[--q->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && hx_spm_before(&q->h[c + 1], &q->h[c])) c++;
        if (!hx_spm_before(&q->h[c], &last)) break;
        q->h[i] = q->h[c];
        i = c;
    }
    if (q->n > 0) q->h[i] = last;
    return top;
}

static bool hx_spm_try(const struct hx_vocab *v, const char *t, const struct hx_spm_sym *sym,
                       struct hx_spm_heap *q, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return true;
    int32_t id = hx__vocab_lookup(v, t + sym[l].off, sym[l].len + sym[r].len);
    if (id < 0 || id >= v->n_tokens) return true;
    return hx_spm_push(q, (struct hx_spm_pair){v->tok[id].score, l, r, id, sym[l].len, sym[r].len});
}

static bool hx_spm_byte(const struct hx_vocab *v, unsigned char b, struct hx_tokbuf *out)
{
    hx_token t = v->byte_tok[b];
    if (t == HX_TOKEN_NULL) {
        char c = (char)b;
        int32_t id = hx__vocab_lookup(v, &c, 1);
        t = (id >= 0 && id < v->n_tokens) ? id : v->unk;
    }
    return t == HX_TOKEN_NULL || hx__tokbuf_push(out, t);
}

int hx__spm_encode(const struct hx_vocab *v, const char *text, size_t len, bool space_prefix,
                   struct hx_tokbuf *out)
{
    size_t n_sp = space_prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
    size_t cap = len + (space_prefix ? 1 : 0) + 2 * n_sp;
    char *t = hx__malloc(cap ? cap : 1);
    struct hx_spm_sym *sym = hx__malloc((cap ? cap : 1) * sizeof *sym);
    struct hx_spm_heap q = {0};
    int st = HX_OK;
    if (!t || !sym) {
        st = HX_E_NOMEM;
        goto done;
    }
    size_t n = 0;
    if (space_prefix) memcpy(t, "\xE2\x96\x81", 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(t + n, "\xE2\x96\x81", 3), n += 3;
        else t[n++] = text[i];
    }
    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t cl = HX_MIN(hx__utf8_seq_len((unsigned char)t[off]), n - off);
        sym[n_sym] = (struct hx_spm_sym){(uint32_t)off, (uint32_t)cl, n_sym - 1, -1};
        if (n_sym > 0) sym[n_sym - 1].next = n_sym;
        n_sym++;
        off += cl;
    }
    for (int32_t i = 1; i < n_sym; i++)
        if (!hx_spm_try(v, t, sym, &q, i - 1, i)) {
            st = HX_E_NOMEM;
            goto done;
        }
    while (q.n > 0) {
        struct hx_spm_pair p = hx_spm_pop(&q);
        struct hx_spm_sym *L = &sym[p.left], *R = &sym[p.right];
        if (L->len != p.llen || R->len != p.rlen || !L->len || !R->len) continue;
        L->len += R->len;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = p.left;
        if (!hx_spm_try(v, t, sym, &q, L->prev, p.left) || !hx_spm_try(v, t, sym, &q, p.left, L->next)) {
            st = HX_E_NOMEM;
            goto done;
        }
    }
    for (int32_t i = 0; i >= 0 && i < n_sym; i = sym[i].next) {
        int32_t id = hx__vocab_lookup(v, t + sym[i].off, sym[i].len);
        if (id >= 0 && id < v->n_tokens) {
            if (!hx__tokbuf_push(out, id)) st = HX_E_NOMEM;
            continue;
        }
        for (uint32_t k = 0; k < sym[i].len; k++)
            if (!hx_spm_byte(v, (unsigned char)t[sym[i].off + k], out)) st = HX_E_NOMEM;
    }
done:
    hx__free(t);
    hx__free(sym);
    hx__free(q.h);
    return st;
}
