/*
 * pretok.c — the BPE pre-tokenizer sets per vocabulary family (formats.md §5.4), each a list
 * of regexes for the engine of regex.c, and the split that applies a set to a text.
 *
 * A pre-tokenizer set is a list of regexes applied in turn: each splits every current piece
 * into matches and the unmatched text between them (llama.cpp unicode_regex_split). Each
 * piece is an independent subject: lookahead and $ see the piece's end as the end of text.
 */
#include "vocab.h"

/* ---- pre-tokenizer sets -------------------------------------------------------------------- */

#define HX_RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define HX_RE_LLAMA3_HEAD "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|" \
                          "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define HX_RE_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* DeepSeek LLM's letter class (the cased letters of its tokenizer.json), as escapes. */
#define HX_RE_DEEPSEEK_LETTERS                                                                   \
    "[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"               \
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"        \
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"                  \
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"    \
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"                 \
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"                 \
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}"         \
    "\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}"        \
    "\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}"                 \
    "\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"         \
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}"         \
    "\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"                   \
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"                  \
    "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}"                 \
    "\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"                 \
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}"             \
    "\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}"         \
    "\\x{1E900}-\\x{1E943}]"
#define HX_RE_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

static const char *const hx_pre_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+", HX_RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};
static const char *const hx_pre_llama3[] = {HX_RE_LLAMA3_HEAD "\\p{N}{1,3}" HX_RE_LLAMA3_TAIL, NULL};
static const char *const hx_pre_qwen2[] = {HX_RE_LLAMA3_HEAD "\\p{N}" HX_RE_LLAMA3_TAIL, NULL};
static const char *const hx_pre_gpt2[] = {HX_RE_GPT2, NULL};
static const char *const hx_pre_deepseek_llm[] = {
    "[\\r\\n]",
    "\\s?" HX_RE_DEEPSEEK_LETTERS "+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    HX_RE_CJK,
    "\\p{N}+",
    NULL};
static const char *const hx_pre_deepseek_coder[] = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", HX_RE_CJK, "\\p{N}", NULL};
static const char *const hx_pre_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+", HX_RE_GPT2, "[0-9][0-9][0-9]", NULL};
static const char *const hx_pre_starcoder[] = {"\\p{N}", HX_RE_GPT2, NULL};

static const char *const *const hx_pre_sets[HX_PRE_COUNT] = {
    [HX_PRE_NONE] = NULL,
    [HX_PRE_DEFAULT] = hx_pre_default,
    [HX_PRE_LLAMA3] = hx_pre_llama3,
    [HX_PRE_QWEN2] = hx_pre_qwen2,
    [HX_PRE_GPT2] = hx_pre_gpt2,
    [HX_PRE_DEEPSEEK_LLM] = hx_pre_deepseek_llm,
    [HX_PRE_DEEPSEEK_CODER] = hx_pre_deepseek_coder,
    [HX_PRE_FALCON] = hx_pre_falcon,
    [HX_PRE_STARCODER] = hx_pre_starcoder,
};

#define HX_PRE_MAX_REGEX 8

struct hx_pretok {
    struct hx_regex *re[HX_PRE_MAX_REGEX];
    int n_re;
};

void hx__pretok_free(struct hx_pretok *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_re; i++) hx__regex_free(p->re[i]);
    hx__free(p);
}

int hx__pretok_new(enum hx_pre_type type, struct hx_pretok **out)
{
    *out = NULL;
    if ((unsigned)type >= HX_PRE_COUNT || !hx_pre_sets[type])
        return hx__set_error(HX_E_INVAL, "pretok: no regex set for type %d", (int)type);
    struct hx_pretok *p = hx__calloc(1, sizeof *p);
    if (!p) return HX_E_NOMEM;
    for (const char *const *r = hx_pre_sets[type]; *r; r++) {
        HX_ASSERT(p->n_re < HX_PRE_MAX_REGEX);
        int st = hx__regex_compile(*r, &p->re[p->n_re]);
        if (st != HX_OK) {
            hx__pretok_free(p);
            return st;
        }
        p->n_re++;
    }
    *out = p;
    return HX_OK;
}

struct hx_lenbuf {
    size_t *v;
    size_t n, cap;
};

static bool hx_lenbuf_push(struct hx_lenbuf *b, size_t len)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        size_t *v = hx__realloc(b->v, cap * sizeof *v);
        if (!v) return false;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = len;
    return true;
}

/* Split one piece [0, n) of cps with re, appending piece lengths to out. */
static int hx_pretok_split_one(const struct hx_regex *re, const uint32_t *cps, size_t n,
                               struct hx_lenbuf *out)
{
    size_t pos = 0, unmatched = 0;
    while (pos < n) {
        int64_t m = hx__regex_match_at(re, cps, n, pos);
        if (m == -2) return hx__set_error(HX_E_NOMEM, "pretok: regex match ran out of memory");
        if (m <= 0) {
            pos++;
            continue;
        }
        if (pos > unmatched && !hx_lenbuf_push(out, pos - unmatched)) return HX_E_NOMEM;
        if (!hx_lenbuf_push(out, (size_t)m)) return HX_E_NOMEM;
        pos += (size_t)m;
        unmatched = pos;
    }
    if (n > unmatched && !hx_lenbuf_push(out, n - unmatched)) return HX_E_NOMEM;
    return HX_OK;
}

int hx__pretok_split(const struct hx_pretok *p, const uint32_t *cps, size_t n, size_t **lens,
                     size_t *n_pieces)
{
    *lens = NULL;
    *n_pieces = 0;
    struct hx_lenbuf cur = {0}, next = {0};
    int st = HX_OK;
    if (n > UINT32_MAX) return hx__set_error(HX_E_RANGE, "pretok: text too long");
    if (n == 0) return HX_OK;
    if (!hx_lenbuf_push(&cur, n)) return HX_E_NOMEM;
    for (int r = 0; r < p->n_re && st == HX_OK; r++) {
        next.n = 0;
        size_t off = 0;
        for (size_t i = 0; i < cur.n && st == HX_OK; i++) {
            st = hx_pretok_split_one(p->re[r], cps + off, cur.v[i], &next);
            off += cur.v[i];
        }
        struct hx_lenbuf t = cur;
        cur = next;
        next = t;
    }
    hx__free(next.v);
    if (st != HX_OK) {
        hx__free(cur.v);
        return st;
    }
    *lens = cur.v;
    *n_pieces = cur.n;
    return HX_OK;
}
