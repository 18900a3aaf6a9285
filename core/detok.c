/*
 * detok.c — token → bytes (formats.md §5.4/5.5), whole-sequence detokenization and the
 * streaming detokenizer.
 *
 * Piece rules: CONTROL/UNKNOWN render their text only with `special`; USER_DEFINED always
 * render their text; NORMAL: SPM "▁" → ' ', BPE through the inverse GPT-2 byte map (code
 * points outside the map pass through as UTF-8); BYTE tokens <0xXX> → that byte; UNUSED and
 * UNDEFINED render nothing. Whole-sequence: SPM (add_space_prefix) drops the single leading
 * space of the first non-empty piece; BPE vocabularies with clean_spaces get llama.cpp's three
 * clean-up passes. Streaming never emits an incomplete or invalid UTF-8 sequence: invalid
 * bytes become U+FFFD at once, an incomplete tail is held until completed or flushed (U+FFFD).
 */
#include <string.h>

#include "unicode.h"
#include "vocab.h"

static int hx_hex(char c)
{
    return (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10
         : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

static void hx_put(char *buf, size_t cap, size_t *n, const char *s, size_t len)
{
    if (*n < cap) memcpy(buf + *n, s, HX_MIN(len, cap - *n));
    *n += len;
}

int hx__vocab_piece(const struct hx_vocab *v, hx_token tok, bool special, char *buf, size_t cap,
                    size_t *len)
{
    *len = 0;
    if (!v || tok < 0 || tok >= v->n_tokens)
        return hx__set_error(HX_E_INVAL, "detokenize: token %d out of range [0, %lld)", (int)tok,
                             v ? (long long)v->n_tokens : 0LL);
    const struct hx_tok_entry *e = &v->tok[tok];
    size_t n = 0;
    switch (e->type) {
    case HX_TOK_CONTROL:
    case HX_TOK_UNKNOWN:
        if (special) hx_put(buf, cap, &n, e->text, e->len);
        break;
    case HX_TOK_USER_DEFINED: hx_put(buf, cap, &n, e->text, e->len); break;
    case HX_TOK_BYTE:
        if (e->len == 6 && hx_hex(e->text[3]) >= 0 && hx_hex(e->text[4]) >= 0) {
            char b = (char)(hx_hex(e->text[3]) * 16 + hx_hex(e->text[4]));
            hx_put(buf, cap, &n, &b, 1);
        }
        break;
    case HX_TOK_NORMAL:
        if (v->kind == HX_VOCAB_SPM) {
            for (uint32_t i = 0; i < e->len;) {
                if (i + 3 <= e->len && !memcmp(e->text + i, "\xE2\x96\x81", 3)) {
                    hx_put(buf, cap, &n, " ", 1);
                    i += 3;
                } else {
                    hx_put(buf, cap, &n, e->text + i, 1);
                    i++;
                }
            }
        } else {
            for (uint32_t i = 0; i < e->len;) {
                uint32_t cp;
                size_t k = hx__utf8_decode(e->text + i, e->len - i, &cp);
                int b = hx__bpe_cp_to_byte(cp);
                if (b >= 0) {
                    char c = (char)b;
                    hx_put(buf, cap, &n, &c, 1);
                } else {
                    hx_put(buf, cap, &n, e->text + i, k);
                }
                i += (uint32_t)k;
            }
        }
        break;
    default: break;
    }
    *len = n;
    return HX_OK;
}

/* llama.cpp's clean_up_tokenization passes, in place; returns the new length. */
static size_t hx_clean_spaces(char *t, size_t total)
{
    size_t n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) { /* " ?", " !", " .", " ," */
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) n--;
        t[n++] = x;
    }
    total = n;
    n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) { /* " ' " → "'" */
        char x = t[i];
        if (x == '\'' && i + 1 < total && t[i - 1] == ' ' && t[i + 1] == ' ') {
            n--;
            t[n++] = x;
            i++; /* drop the next space */
            continue;
        }
        t[n++] = x;
    }
    total = n;
    n = total ? 1 : 0;
    for (size_t i = 1; i < total; i++) { /* " 's", " 'm", " 're", " 've" */
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < total) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm') n--;
            else if (i + 2 < total && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e')))
                n--;
        }
        t[n++] = x;
    }
    return n;
}

int hx__vocab_detokenize(const struct hx_vocab *v, const hx_token *ids, int64_t n, bool special,
                         char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (!v || n < 0 || (n > 0 && !ids)) return hx__set_error(HX_E_INVAL, "detokenize: bad arguments");
    struct hx_strbuf sb;
    hx__sb_init(&sb);
    char small[256];
    bool remove_space = v->kind == HX_VOCAB_SPM && v->add_space_prefix;
    for (int64_t i = 0; i < n; i++) {
        size_t pl;
        int st = hx__vocab_piece(v, ids[i], special, small, sizeof small, &pl);
        if (st) {
            hx__sb_free(&sb);
            return st;
        }
        const char *p = small;
        char *big = NULL;
        if (pl > sizeof small) {
            big = hx__malloc(pl);
            if (!big) {
                hx__sb_free(&sb);
                return HX_E_NOMEM;
            }
            hx__vocab_piece(v, ids[i], special, big, pl, &pl);
            p = big;
        }
        if (pl > 0 && remove_space) {
            if (p[0] == ' ') p++, pl--;
            remove_space = false;
        }
        hx__sb_append(&sb, p, pl);
        hx__free(big);
    }
    hx__sb_append(&sb, "", 0);
    if (sb.failed) {
        hx__sb_free(&sb);
        return HX_E_NOMEM;
    }
    size_t total = sb.len;
    char *s = hx__sb_take(&sb);
    if (!s) {
        s = hx__malloc(1);
        if (!s) return HX_E_NOMEM;
        total = 0;
    }
    if (v->clean_spaces) total = hx_clean_spaces(s, total);
    s[total] = 0;
    *out = s;
    *len = total;
    return HX_OK;
}

/* ---- streaming ----------------------------------------------------------------------------- */

struct hx_detok {
    const struct hx_vocab *v;
    bool special;
    unsigned char pend[4];
    size_t n_pend;
    char *piece;            /* scratch for one token's bytes */
    size_t piece_cap;
    char *out;              /* returned text, valid until the next call */
    size_t out_len, out_cap;
};

static bool hx_detok_emit(struct hx_detok *d, const char *s, size_t n)
{
    if (d->out_len + n + 1 > d->out_cap) {
        size_t cap = (d->out_len + n + 1) * 2;
        char *o = hx__realloc(d->out, cap);
        if (!o) return false;
        d->out = o;
        d->out_cap = cap;
    }
    memcpy(d->out + d->out_len, s, n);
    d->out_len += n;
    d->out[d->out_len] = 0;
    return true;
}

#define HX_FFFD "\xEF\xBF\xBD"

static bool hx_detok_byte(struct hx_detok *d, unsigned char b)
{
    for (;;) {
        d->pend[d->n_pend++] = b;
        int k = hx__utf8_check(d->pend, d->n_pend);
        if (k > 0) {
            bool ok = hx_detok_emit(d, (const char *)d->pend, d->n_pend);
            d->n_pend = 0;
            return ok;
        }
        if (k == 0) return true; /* incomplete: wait */
        bool fresh = d->n_pend == 1;
        d->n_pend = 0;
        if (!hx_detok_emit(d, HX_FFFD, 3)) return false;
        if (fresh) return true; /* the byte itself is invalid */
        /* the byte broke a pending prefix: reprocess it as a new lead */
    }
}

int hx__detok_new(const struct hx_vocab *v, bool special, struct hx_detok **out)
{
    *out = NULL;
    if (!v) return hx__set_error(HX_E_INVAL, "detok: no vocabulary");
    struct hx_detok *d = hx__calloc(1, sizeof *d);
    if (!d) return HX_E_NOMEM;
    d->v = v;
    d->special = special;
    *out = d;
    return HX_OK;
}

void hx__detok_free(struct hx_detok *d)
{
    if (!d) return;
    hx__free(d->piece);
    hx__free(d->out);
    hx__free(d);
}

int hx__detok_push(struct hx_detok *d, hx_token tok, const char **piece, size_t *len)
{
    *piece = "";
    *len = 0;
    if (!d) return hx__set_error(HX_E_INVAL, "detok: NULL decoder");
    size_t pl;
    int st = hx__vocab_piece(d->v, tok, d->special, d->piece, d->piece_cap, &pl);
    if (st) return st;
    if (pl > d->piece_cap) {
        char *p = hx__realloc(d->piece, pl);
        if (!p) return HX_E_NOMEM;
        d->piece = p;
        d->piece_cap = pl;
        hx__vocab_piece(d->v, tok, d->special, d->piece, d->piece_cap, &pl);
    }
    d->out_len = 0;
    if (!hx_detok_emit(d, "", 0)) return HX_E_NOMEM;
    for (size_t i = 0; i < pl; i++)
        if (!hx_detok_byte(d, (unsigned char)d->piece[i])) return HX_E_NOMEM;
    *piece = d->out;
    *len = d->out_len;
    return HX_OK;
}

int hx__detok_flush(struct hx_detok *d, const char **piece, size_t *len)
{
    *piece = "";
    *len = 0;
    if (!d) return hx__set_error(HX_E_INVAL, "detok: NULL decoder");
    d->out_len = 0;
    if (!hx_detok_emit(d, "", 0)) return HX_E_NOMEM;
    if (d->n_pend > 0) {
        d->n_pend = 0;
        if (!hx_detok_emit(d, HX_FFFD, 3)) return HX_E_NOMEM;
    }
    *piece = d->out;
    *len = d->out_len;
    return HX_OK;
}
