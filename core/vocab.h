/*
 * vocab.h — the tokenizer (core-private): vocabulary loaded from a GGUF's tokenizer.* keys
 * (formats.md §5), byte-level BPE and SentencePiece encoders, the special-token partition,
 * pre-tokenizer regexes, and the token → bytes rules used by the detokenizers.
 *
 * A struct hx_vocab is immutable after hx__vocab_load and owns copies of everything it needs
 * (it does not keep pointers into the GGUF), so it may outlive the file and be shared by
 * threads. Tokenizing allocates only per-call scratch memory.
 *
 * Files: vocab.c (loading, lookups, special-token partition, tokenize dispatch),
 * tokenize-bpe.c, tokenize-spm.c, regex.c (the regex engine), pretok.c (pre-tokenizer sets),
 * detok.c (pieces, whole-string and streaming detokenization), chat.c (templates).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "hx-impl.h"

struct hx_vocab;

/* ---- API used by the rest of core ---------------------------------------------------------- */

/* Build from the tokenizer.* keys. HX_E_FORMAT (message names the key) for missing or invalid
 * keys; an unknown tokenizer.ggml.model or .pre is HX_E_FORMAT listing the supported ones. */
int hx__vocab_load(struct hx_gguf *g, struct hx_vocab **out);
void hx__vocab_free(struct hx_vocab *v);

/* Tokenize len bytes of text (need not be NUL-terminated, may be invalid UTF-8). add_special:
 * BOS/EOS as the vocabulary asks. parse_special: match CONTROL/UNKNOWN token text
 * (USER_DEFINED tokens always match). Writes at most cap ids; *n_out = full count. */
int hx__vocab_tokenize(const struct hx_vocab *v, const char *text, size_t len, bool add_special,
                       bool parse_special, hx_token *ids, int64_t cap, int64_t *n_out);

/* The raw output bytes of one token (no NUL added; *len = full length even if > cap).
 * special: render CONTROL/UNKNOWN tokens as their text (USER_DEFINED always rendered).
 * HX_E_INVAL for an out-of-range token. */
int hx__vocab_piece(const struct hx_vocab *v, hx_token tok, bool special, char *buf, size_t cap,
                    size_t *len);

/* Whole-sequence detokenization (SPM leading-space removal, BPE clean_spaces); *out is
 * NUL-terminated, released with hx_free. */
int hx__vocab_detokenize(const struct hx_vocab *v, const hx_token *ids, int64_t n, bool special,
                         char **out, size_t *len);

int64_t hx__vocab_n_tokens(const struct hx_vocab *v);
hx_token hx__vocab_bos(const struct hx_vocab *v);
hx_token hx__vocab_eos(const struct hx_vocab *v);
bool hx__vocab_is_eog(const struct hx_vocab *v, hx_token t);
bool hx__vocab_add_bos(const struct hx_vocab *v);
const char *hx__vocab_text(const struct hx_vocab *v, hx_token t);
/* tokenizer.chat_template (NUL-terminated copy) or NULL. */
const char *hx__vocab_chat_template(const struct hx_vocab *v);
/* Token id of exact text, or HX_TOKEN_NULL. */
hx_token hx__vocab_find(const struct hx_vocab *v, const char *text, size_t len);
/* "gpt2"/"llama" and the pre-tokenizer name ("qwen2", "llama-bpe", ...; "" for SPM). */
const char *hx__vocab_model_name(const struct hx_vocab *v);
const char *hx__vocab_pre_name(const struct hx_vocab *v);

/* ---- internals shared by the tokenizer files ------------------------------------------------ */

enum hx_tok_type {
    HX_TOK_UNDEFINED = 0,
    HX_TOK_NORMAL = 1,
    HX_TOK_UNKNOWN = 2,
    HX_TOK_CONTROL = 3,
    HX_TOK_USER_DEFINED = 4,
    HX_TOK_UNUSED = 5,
    HX_TOK_BYTE = 6,
};

enum hx_vocab_kind { HX_VOCAB_SPM, HX_VOCAB_BPE };

/* Pre-tokenizer sets (each a list of regexes applied in turn, formats.md §5.4). */
enum hx_pre_type {
    HX_PRE_NONE,           /* SPM: no pre-tokenizer */
    HX_PRE_DEFAULT,
    HX_PRE_LLAMA3,
    HX_PRE_QWEN2,
    HX_PRE_GPT2,           /* gpt-2, mpt, olmo, ... */
    HX_PRE_DEEPSEEK_LLM,
    HX_PRE_DEEPSEEK_CODER,
    HX_PRE_FALCON,
    HX_PRE_STARCODER,      /* starcoder, refact, command-r, smollm, ... */
    HX_PRE_COUNT
};

struct hx_tok_entry {
    const char *text;      /* NUL-terminated, in the vocab's arena */
    uint32_t len;
    uint8_t type;          /* enum hx_tok_type */
    bool lstrip, rstrip;   /* strip adjacent whitespace when matched as special */
    float score;
};

/* String → id hash table (open addressing; ids index hx_vocab.tok or the merge-only extras). */
struct hx_str_map {
    int32_t *slots;        /* -1 = empty */
    uint64_t mask;
};

/* (left id, right id) → merge rank and result id. */
struct hx_merge_map {
    uint64_t *keys;        /* (left << 32 | right) + 1; 0 = empty */
    int32_t *rank;
    int32_t *result;
    uint64_t mask;
};

struct hx_regex;
struct hx_pretok;

struct hx_vocab {
    enum hx_vocab_kind kind;
    enum hx_pre_type pre;
    char model_name[16];
    char pre_name[48];
    int64_t n_tokens;
    struct hx_tok_entry *tok;
    /* BPE merge-only strings (results/sides of merges that are not vocab tokens): ids >= n_tokens */
    int64_t n_extra, cap_extra;
    const char **extra_text;
    uint32_t *extra_len;
    struct hx_str_map map;
    struct hx_merge_map merges;
    int64_t n_merges;
    char *arena;           /* all token text */
    size_t arena_len, arena_cap;
    char **arena_blocks;
    int64_t n_arena_blocks;

    hx_token bos, eos, eot, eom, unk, sep, pad, nl;
    bool add_bos, add_eos, add_space_prefix, ignore_merges, clean_spaces;
    hx_token *eog;         /* end-of-generation set */
    int64_t n_eog;
    hx_token *special;     /* CONTROL/USER_DEFINED/UNKNOWN ids, longest text first */
    int64_t n_special;
    hx_token byte_tok[256];/* SPM <0xXX> tokens (HX_TOKEN_NULL if absent) */
    struct hx_pretok *pretok;
    char *chat_template;
};

/* Hash of bytes (FNV-1a 64). */
uint64_t hx__vocab_hash(const char *s, size_t n);
/* Id of text among tokens and merge-only extras, or -1. */
int32_t hx__vocab_lookup(const struct hx_vocab *v, const char *s, size_t n);
/* Text/length of an id from hx__vocab_lookup (token or extra). */
const char *hx__vocab_id_text(const struct hx_vocab *v, int32_t id, uint32_t *len);
/* Merge of (a, b): rank (>= 0) and result id, or -1. */
int32_t hx__vocab_merge_rank(const struct hx_vocab *v, int32_t a, int32_t b, int32_t *result);

/* A growable array of token ids for the encoders. */
struct hx_tokbuf {
    hx_token *ids;
    int64_t n, cap;
    bool failed;
};
bool hx__tokbuf_push(struct hx_tokbuf *b, hx_token t);

/* Encode one raw-text fragment (after the special-token partition). */
int hx__bpe_encode(const struct hx_vocab *v, const char *text, size_t len, struct hx_tokbuf *out);
int hx__spm_encode(const struct hx_vocab *v, const char *text, size_t len, bool space_prefix,
                   struct hx_tokbuf *out);

/* Streaming detokenizer over a vocab (detok.c); hx_detok_* wrap these. */
struct hx_detok;
int hx__detok_new(const struct hx_vocab *v, bool special, struct hx_detok **out);
void hx__detok_free(struct hx_detok *d);
int hx__detok_push(struct hx_detok *d, hx_token tok, const char **piece, size_t *len);
int hx__detok_flush(struct hx_detok *d, const char **piece, size_t *len);
/* GPT-2 byte <-> code point map. */
uint32_t hx__bpe_byte_to_cp(uint8_t b);
int hx__bpe_cp_to_byte(uint32_t cp); /* -1 if cp is not in the map */

/* ---- regex engine (regex.c) and pre-tokenizers (pretok.c) ---------------------------------- */

/*
 * Supported syntax (what the pre-tokenizer regexes use): literals, escapes \r \n \t \f \v
 * \\ and escaped punctuation, \s \S \d \D \w \W, \p{L} \p{N} \p{P} \p{S} \p{M} \p{Z} \p{C}
 * (and \P{..}), classes [...] / [^...] with ranges and the escapes above, '.', groups (...)
 * and (?:...), (?i:...) (ASCII case folding), lookahead (?=...) (?!...), alternation |,
 * greedy quantifiers ? * + {n} {n,} {n,m}, anchors ^ $. Matching is backtracking with
 * leftmost-first alternation (ECMAScript/Perl semantics) on code points.
 */
int hx__regex_compile(const char *pattern, struct hx_regex **out);
void hx__regex_free(struct hx_regex *re);
/* Length of the match starting exactly at pos (cps[0..n) is the whole subject), -1 if none,
 * -2 if it ran out of memory or steps. */
int64_t hx__regex_match_at(const struct hx_regex *re, const uint32_t *cps, size_t n, size_t pos);

int hx__pretok_new(enum hx_pre_type type, struct hx_pretok **out);
void hx__pretok_free(struct hx_pretok *p);
/*
 * Split cps[0..n) into pieces: each regex of the set in turn splits every current piece into
 * its matches and the unmatched text between them (both kept, in order). *lens receives the
 * piece lengths in code points (hx_free), *n_pieces their count.
 */
int hx__pretok_split(const struct hx_pretok *p, const uint32_t *cps, size_t n, size_t **lens,
                     size_t *n_pieces);
