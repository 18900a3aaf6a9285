/*
 * unicode.c — code-point property lookups over the generated tables, and UTF-8 decoding and
 * encoding for the tokenizers. Pure functions; the ASCII flag cache is built on first use
 * (idempotent, so a benign race between threads writes identical values).
 */
#include "unicode.h"

#include "hx-impl.h"

static uint16_t hx_ucd_ascii[128];
static bool hx_ucd_ascii_ready;

static uint32_t hx_ucd_search(uint32_t cp)
{
    uint32_t lo = 0, hi = hx__ucd_n_ranges; /* find the last start <= cp */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (hx__ucd_range_start[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return hx__ucd_range_flags[lo];
}

uint32_t hx__ucd_flags(uint32_t cp)
{
    if (cp < 128) {
        if (!hx_ucd_ascii_ready) {
            for (uint32_t c = 0; c < 128; c++) hx_ucd_ascii[c] = (uint16_t)hx_ucd_search(c);
            hx_ucd_ascii_ready = true;
        }
        return hx_ucd_ascii[cp];
    }
    if (cp > HX_UCD_MAX) return 0;
    return hx_ucd_search(cp);
}

uint32_t hx__ucd_tolower(uint32_t cp)
{
    if (cp < 128) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    uint32_t lo = 0, hi = hx__ucd_n_lower;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (hx__ucd_lower[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return (lo < hx__ucd_n_lower && hx__ucd_lower[lo][0] == cp) ? hx__ucd_lower[lo][1] : cp;
}

size_t hx__utf8_seq_len(unsigned char lead)
{
    static const uint8_t len_by_high_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len_by_high_nibble[lead >> 4];
}

size_t hx__utf8_decode(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned char c = u[0];
    size_t need;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (!(c & 0x40)) goto bad;                   /* stray continuation byte */
    if (!(c & 0x20)) need = 2, v = c & 0x1F;
    else if (!(c & 0x10)) need = 3, v = c & 0x0F;
    else if (!(c & 0x08)) need = 4, v = c & 0x07;
    else goto bad;
    if (need > n) goto bad;
    for (size_t i = 1; i < need; i++) {
        if ((u[i] & 0xC0) != 0x80) goto bad;
        v = (v << 6) | (u[i] & 0x3F);
    }
    *cp = v;
    return need;
bad:
    *cp = HX_UCD_REPLACEMENT;
    return 1;
}

size_t hx__utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int hx__utf8_check(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;       /* no overlongs */
        if (c == 0xED) hi = 0x9F;       /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;       /* <= U+10FFFF */
    } else {
        return -1;
    }
    for (size_t i = 1; i < need; i++) {
        if (i >= n) return 0;
        unsigned char b = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) return -1;
    }
    return (int)need;
}

int hx__utf8_to_cps(const char *s, size_t n, uint32_t **cps, size_t *n_cps)
{
    *cps = NULL;
    *n_cps = 0;
    size_t bytes;
    if (!hx__mul_size(n + 1, sizeof(uint32_t), &bytes)) return HX_E_OVERFLOW;
    uint32_t *out = hx__malloc(bytes);
    if (!out) return HX_E_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n;) i += hx__utf8_decode(s + i, n - i, &out[k++]);
    *cps = out;
    *n_cps = k;
    return HX_OK;
}
