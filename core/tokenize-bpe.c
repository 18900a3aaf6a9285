/*
 * tokenize-bpe.c — byte-level BPE (tokenizer.ggml.model = "gpt2"), formats.md §5.4.
 *
 * A raw fragment is decoded to code points (invalid UTF-8 becomes U+FFFD, as llama.cpp),
 * split by the vocabulary's pre-tokenizer, and each piece is byte-encoded through the GPT-2
 * byte→code point map. With ignore_merges a piece that is itself a token is emitted whole;
 * otherwise symbols (one per encoded byte) are merged by lowest merge rank, ties leftmost,
 * using a binary heap of candidate pairs with lazy invalidation: an entry is stale when either
 * side's length changed since it was pushed (symbols only grow by absorbing their right
 * neighbour, which then has length 0). Merge lookups are (left id, right id) hash probes.
 */
#include <string.h>

#include "unicode.h"
#include "vocab.h"

/* ---- GPT-2 byte map ------------------------------------------------------------------------ */

static bool hx_bpe_byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t hx__bpe_byte_to_cp(uint8_t b)
{
    if (hx_bpe_byte_is_printable(b)) return b;
    uint32_t k = 0; /* rank of b among the non-printable bytes */
    for (unsigned c = 0; c < b; c++)
        if (!hx_bpe_byte_is_printable(c)) k++;
    return 0x100 + k;
}

int hx__bpe_cp_to_byte(uint32_t cp)
{
    if (cp < 0x100) return hx_bpe_byte_is_printable(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t k = cp - 0x100;
    for (unsigned c = 0; c < 256; c++)
        if (!hx_bpe_byte_is_printable(c) && k-- == 0) return (int)c;
    return -1;
}

/* Encoded form of each byte (UTF-8 of its mapped code point); built once, idempotently. */
static char hx_bpe_enc[256][2];
static uint8_t hx_bpe_enc_len[256];
static bool hx_bpe_enc_ready;

static void hx_bpe_enc_init(void)
{
    if (hx_bpe_enc_ready) return;
    for (unsigned b = 0; b < 256; b++) {
        char tmp[4];
        size_t n = hx__utf8_encode(hx__bpe_byte_to_cp((uint8_t)b), tmp);
        memcpy(hx_bpe_enc[b], tmp, n);
        hx_bpe_enc_len[b] = (uint8_t)n;
    }
    hx_bpe_enc_ready = true;
}

/* ---- merge loop --------------------------------------------------------------------------- */

struct hx_bpe_sym {
    uint32_t off, len;   /* bytes in the encoded piece; len 0 = absorbed */
    int32_t prev, next;
    int32_t id;          /* token/extra id of the text, -1 if unknown */
};

struct hx_bpe_pair {
    int32_t rank, left, right, result;
    uint32_t llen, rlen;
};

struct hx_bpe_scratch {
    char *enc;
    size_t enc_cap;
    struct hx_bpe_sym *sym;
    size_t sym_cap;
    struct hx_bpe_pair *heap;
    size_t n_heap, heap_cap;
};

static bool hx_pair_less(const struct hx_bpe_pair *a, const struct hx_bpe_pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static bool hx_heap_push(struct hx_bpe_scratch *s, struct hx_bpe_pair p)
{
    if (s->n_heap == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        struct hx_bpe_pair *h = hx__realloc(s->heap, cap * sizeof *h);
        if (!h) return false;
        s->heap = h;
        s->heap_cap = cap;
    }
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!hx_pair_less(&p, &s->heap[parent])) break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = p;
    return true;
}

static struct hx_bpe_pair hx_heap_pop(struct hx_bpe_scratch *s)
{
    struct hx_bpe_pair top = s->heap[0], last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && hx_pair_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!hx_pair_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n > 0) s->heap[i] = last;
    return top;
}

static bool hx_bpe_try_pair(const struct hx_vocab *v, struct hx_bpe_scratch *s, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return true;
    int32_t result;
    int32_t rank = hx__vocab_merge_rank(v, s->sym[l].id, s->sym[r].id, &result);
    if (rank < 0) return true;
    return hx_heap_push(s, (struct hx_bpe_pair){rank, l, r, result, s->sym[l].len, s->sym[r].len});
}

static int hx_bpe_word(const struct hx_vocab *v, struct hx_bpe_scratch *s, const char *w, size_t n,
                       struct hx_tokbuf *out)
{
    if (v->ignore_merges) {
        int32_t id = hx__vocab_lookup(v, w, n);
        if (id >= 0 && id < v->n_tokens) return hx__tokbuf_push(out, id) ? HX_OK : HX_E_NOMEM;
    }
    if (n > s->sym_cap) {
        struct hx_bpe_sym *sym = hx__realloc(s->sym, n * sizeof *sym);
        if (!sym) return HX_E_NOMEM;
        s->sym = sym;
        s->sym_cap = n;
    }
    int32_t n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t cl = HX_MIN(hx__utf8_seq_len((unsigned char)w[off]), n - off);
        s->sym[n_sym] = (struct hx_bpe_sym){(uint32_t)off, (uint32_t)cl, n_sym - 1, -1,
                                            hx__vocab_lookup(v, w + off, cl)};
        if (n_sym > 0) s->sym[n_sym - 1].next = n_sym;
        n_sym++;
        off += cl;
    }
    s->n_heap = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (!hx_bpe_try_pair(v, s, i - 1, i)) return HX_E_NOMEM;
    while (s->n_heap > 0) {
        struct hx_bpe_pair p = hx_heap_pop(s);
        struct hx_bpe_sym *L = &s->sym[p.left], *R = &s->sym[p.right];
        if (L->len != p.llen || R->len != p.rlen || L->len == 0 || R->len == 0) continue;
        L->len += R->len;
        L->id = p.result;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) s->sym[R->next].prev = p.left;
        if (!hx_bpe_try_pair(v, s, L->prev, p.left) || !hx_bpe_try_pair(v, s, p.left, L->next))
            return HX_E_NOMEM;
    }
    for (int32_t i = 0; i >= 0 && i < n_sym; i = s->sym[i].next) {
        const struct hx_bpe_sym *y = &s->sym[i];
        if (y->id >= 0 && y->id < v->n_tokens) {
            if (!hx__tokbuf_push(out, y->id)) return HX_E_NOMEM;
            continue;
        }
        for (uint32_t k = 0; k < y->len; k++) { /* not a token: its single bytes, if any are */
            int32_t id = hx__vocab_lookup(v, w + y->off + k, 1);
            if (id >= 0 && id < v->n_tokens && !hx__tokbuf_push(out, id)) return HX_E_NOMEM;
        }
    }
    return out->failed ? HX_E_NOMEM : HX_OK;
}

int hx__bpe_encode(const struct hx_vocab *v, const char *text, size_t len, struct hx_tokbuf *out)
{
    hx_bpe_enc_init();
    uint32_t *cps = NULL;
    size_t n_cps = 0, *lens = NULL, n_pieces = 0;
    struct hx_bpe_scratch s = {0};
    int st = hx__utf8_to_cps(text, len, &cps, &n_cps);
    if (st == HX_OK) st = hx__pretok_split(v->pretok, cps, n_cps, &lens, &n_pieces);
    size_t at = 0;
    for (size_t p = 0; p < n_pieces && st == HX_OK; p++) {
        size_t need = lens[p] * 8;
        if (need > s.enc_cap) {
            char *e = hx__realloc(s.enc, need);
            if (!e) {
                st = HX_E_NOMEM;
                break;
            }
            s.enc = e;
            s.enc_cap = need;
        }
        size_t n = 0;
        for (size_t i = 0; i < lens[p]; i++) {
            char u[4];
            size_t ul = hx__utf8_encode(cps[at + i], u);
            for (size_t k = 0; k < ul; k++) {
                unsigned char b = (unsigned char)u[k];
                memcpy(s.enc + n, hx_bpe_enc[b], hx_bpe_enc_len[b]);
                n += hx_bpe_enc_len[b];
            }
        }
        at += lens[p];
        st = hx_bpe_word(v, &s, s.enc, n, out);
    }
    hx__free(cps);
    hx__free(lens);
    hx__free(s.enc);
    hx__free(s.sym);
    hx__free(s.heap);
    return st;
}
