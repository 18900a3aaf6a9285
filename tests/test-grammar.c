/*
 * test-grammar.c — constrained decoding (core/grammar.c, docs/grammar.md): the notation's
 * errors, matching text, and sampling on the Qwen3 vocabulary (151,936 tokens) of the shared
 * micro model: every token sampled keeps the text in the grammar, greedy picks the best
 * allowed token (checked against a brute-force pass over the whole vocabulary), and a budget
 * closes the sentence in time.
 */
#include "harness.h"
#include "hx.h"

static struct hx_model *qwen(void)
{
    static struct hx_model *m;
    if (!m && hx_model_load(hx_test_data("qwen3/qwen3-micro-q8_0.gguf"), NULL, &m) != HX_OK)
        m = NULL;
    return m;
}

static int compile(const char *src, struct hx_grammar **g)
{
    return hx_grammar_new(qwen(), src, strlen(src), g);
}

static bool accepts(struct hx_grammar *g, const char *text)
{
    hx_grammar_reset(g);
    return hx_grammar_accept_text(g, text, strlen(text)) == HX_OK && hx_grammar_can_end(g);
}

TEST(errors_name_the_line_and_the_problem)
{
    if (!qwen()) SKIP("qwen3-micro-q8_0.gguf not found under HX_DATA");
    static const struct {
        const char *src, *want;
    } cases[] = {
        {"root ::= foo", "'foo' is used but not defined"},
        {"a ::= \"x\"", "no rule named 'root'"},
        {"root ::= root \"x\" | \"y\"", "can reach itself"},
        {"root ::= x* \"a\"\nx ::= \"\" | \"b\"", "can reach itself"},
        {"root ::= \"\"*", "can match nothing"},
        {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
        {"root ::= \"abc", "unterminated"},
        {"root ::= [abc", "unterminated class"},
        {"root ::= [z-a]", "out of order"},
        {"root ::= (\"a\" | \"b\"", "missing ')'"},
        {"root ::= \"a\"{3,2}", "n <= m"},
        {"root ::= \"a\"{20000}", "over 10000"},
        {"root ::= \"\\q\"", "unknown escape"},
        {"root ::= \"a\" }", "unexpected '}'"},
        {"root ::= x\nx ::= x \"a\"", "can reach itself"},
        {"root ::= x\nx ::= \"a\" x", "never finish"},
        {"root ::= \"a\" | x\nx ::= \"b\" x", "'x' can never finish"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hx_grammar *g = (struct hx_grammar *)1;
        int rc = compile(cases[i].src, &g);
        if (rc != HX_E_INVAL || g != NULL || !strstr(hx_last_error(), cases[i].want)) {
            HX_FAIL_AT("case %zu (%s): rc %d, error \"%s\", want \"%s\"", i, cases[i].src, rc,
                       hx_last_error(), cases[i].want);
            return;
        }
        ASSERT_TRUE(strstr(hx_last_error(), "line ") != NULL ||
                    strstr(hx_last_error(), "root") != NULL);
    }
}

/* Grammars from hostile input: a long chain of rules nested at their start is refused (matching
 * expands such chains recursively), a long chain that consumes a byte first compiles (and the
 * shortest-sentence analysis does not go quadratic over it, whatever the rules' order). */
TEST(long_rule_chains)
{
    if (!qwen()) SKIP("qwen3-micro-q8_0.gguf not found under HX_DATA");
    enum { N = 20000 };
    char *src = malloc((size_t)N * 40 + 64);
    ASSERT_TRUE(src != NULL);
    for (int left = 0; left < 2; left++) {
        size_t n = (size_t)sprintf(src, "root ::= r0\n");
        for (int i = N - 1; i >= 0; i--) /* defined last-first: the worst order */
            n += (size_t)(i + 1 < N ? sprintf(src + n,
                                              left ? "r%d ::= r%d \"x\"\n" : "r%d ::= \"x\" r%d\n",
                                              i, i + 1)
                                    : sprintf(src + n, "r%d ::= \"y\"\n", i));
        struct hx_grammar *g = NULL;
        int rc = hx_grammar_new(qwen(), src, n, &g);
        if (left) {
            ASSERT_EQ(rc, HX_E_INVAL);
            ASSERT_TRUE(strstr(hx_last_error(), "nest more than 1000 deep") != NULL);
        } else {
            ASSERT_OK(rc);
            ASSERT_OK(hx_grammar_accept_text(g, "xxx", 3));
            ASSERT_TRUE(!hx_grammar_can_end(g));
            hx_grammar_free(g);
        }
    }
    free(src);
}

TEST(text_matching)
{
    if (!qwen()) SKIP("qwen3-micro-q8_0.gguf not found under HX_DATA");
    struct hx_grammar *g;
    ASSERT_OK(compile("# numbers and words\n"
                      "root ::= \"{\" ws item (\",\" ws item){0,2} \"}\"\n"
                      "item ::= num | word | \"null\"\n"
                      "num  ::= \"-\"? ([0-9] | [1-9] [0-9]+)\n"
                      "word ::= \"\\\"\" [^\"\\\\]{1,4} \"\\\"\"\n"
                      "ws   ::= [ \\t\\n]{0,2}\n",
                      &g));
    static const char *const good[] = {"{1}", "{ -12}", "{null,\"ab\"}", "{\"é😀\",  0,\n7}",
                                       "{\"a\\u0000\"}" /* a backslash is outside the class */};
    static const char *const bad[] = {"{}",     "{01}", "{1,2,3,4}", "{\"\"}", "{\"abcde\"}",
                                      "{   1}", "{1",   "{nul}",     "{1}x"};
    ASSERT_TRUE(accepts(g, good[0]) && accepts(g, good[1]) && accepts(g, good[2]) &&
                accepts(g, good[3]));
    ASSERT_TRUE(!accepts(g, good[4]));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (accepts(g, bad[i])) {
            HX_FAIL_AT("accepted %s", bad[i]);
            return;
        }
    /* a prefix is fine but not whole; a whole sentence with nothing after it is done */
    hx_grammar_reset(g);
    ASSERT_OK(hx_grammar_accept_text(g, "{12", 3));
    ASSERT_TRUE(!hx_grammar_can_end(g) && !hx_grammar_done(g));
    ASSERT_OK(hx_grammar_accept_text(g, "}", 1));
    ASSERT_TRUE(hx_grammar_can_end(g) && hx_grammar_done(g));
    /* a refused text leaves the state as it was */
    hx_grammar_reset(g);
    ASSERT_OK(hx_grammar_accept_text(g, "{1", 2));
    ASSERT_EQ(hx_grammar_accept_text(g, "x", 1), HX_E_INVAL);
    ASSERT_OK(hx_grammar_accept_text(g, "5}", 2));
    ASSERT_TRUE(hx_grammar_done(g));
    hx_grammar_free(g);
    /* a number may go on: whole but not done */
    ASSERT_OK(compile("root ::= [0-9]+", &g));
    ASSERT_OK(hx_grammar_accept_text(g, "12", 2));
    ASSERT_TRUE(hx_grammar_can_end(g) && !hx_grammar_done(g));
    hx_grammar_free(g);
    /* classes over code points: 2-, 3- and 4-byte characters, and no surrogates */
    ASSERT_OK(compile("root ::= [\\u00e0-\\u00ff\\u4e00-\\u9fff\\U0001F600-\\U0001F64F]+", &g));
    ASSERT_TRUE(accepts(g, "é中😀"));
    ASSERT_TRUE(!accepts(g, "a") && !accepts(g, "\xed\xa0\x80") && !accepts(g, "\xc3"));
    hx_grammar_free(g);
    ASSERT_OK(compile("root ::= .{2}", &g));
    ASSERT_TRUE(accepts(g, "a\xf4\x8f\xbf\xbf") && !accepts(g, "\xed\xa0\x80x") &&
                !accepts(g, "\xf4\x90\x80\x80x"));
    hx_grammar_free(g);
}

/* Token bytes as the grammar sees them. */
static bool token_text(int32_t tok, char *buf, size_t cap, size_t *len)
{
    char *s;
    size_t n;
    if (hx_detokenize(qwen(), &tok, 1, false, &s, &n) != HX_OK) return false;
    bool ok = n < cap;
    if (ok) memcpy(buf, s, n), *len = n;
    hx_free(s);
    return ok;
}

/* Generate under g from random logits; returns the text (static) and checks every step. */
static const char *generate(struct hx_grammar *g, const struct hx_sampler_params *sp,
                            int64_t budget, uint64_t seed, int64_t *n_tokens, bool *ok)
{
    static char text[8192];
    size_t len = 0;
    int64_t nv = hx_vocab_n_tokens(qwen());
    float *logits = malloc((size_t)nv * sizeof *logits);
    struct hx_sampler *s;
    *ok = logits && hx_sampler_new(sp, nv, &s) == HX_OK;
    if (!*ok) return "";
    hx_grammar_reset(g);
    uint64_t x = seed;
    *n_tokens = 0;
    while (!hx_grammar_done(g) && *n_tokens < budget) {
        for (int64_t i = 0; i < nv; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            logits[i] = (float)((x >> 40) & 0xffff) / 4096.0f;
        }
        hx_token t = hx_sampler_sample_grammar(s, g, logits, budget - *n_tokens);
        if (t == HX_TOKEN_NULL || hx_grammar_accept(g, t) != HX_OK) {
            *ok = false;
            break;
        }
        (*n_tokens)++;
        if (hx_vocab_is_eog(qwen(), t)) break;
        size_t n = 0;
        if (!token_text(t, text + len, sizeof text - len - 1, &n)) {
            *ok = false;
            break;
        }
        len += n;
    }
    text[len] = '\0';
    hx_sampler_free(s);
    free(logits);
    return text;
}

static const char *const json_gbnf =
    "root   ::= \"{\" ws \"\\\"name\\\":\" ws str \",\" ws \"\\\"tags\\\":\" ws \"[\" (str (\",\" ws str)*)? \"]\" ws \"}\"\n"
    "str    ::= \"\\\"\" ([^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrt])* \"\\\"\"\n"
    "ws     ::= [ \\n]{0,3}\n";

TEST(sampling_stays_in_the_grammar_and_closes_within_the_budget)
{
    if (!qwen()) SKIP("qwen3-micro-q8_0.gguf not found under HX_DATA");
    struct hx_grammar *g, *check;
    ASSERT_OK(compile(json_gbnf, &g));
    ASSERT_OK(compile(json_gbnf, &check));
    struct hx_sampler_params sp;
    hx_sampler_params_init(&sp);
    for (int mode = 0; mode < 3; mode++) {
        sp.temperature = mode == 0 ? 0.0f : 1.0f;
        sp.top_k = mode == 2 ? 0 : 40; /* top-k off: the whole-vocabulary path */
        for (uint64_t seed = 1; seed <= 3; seed++) {
            sp.seed = seed;
            int64_t n = 0;
            bool ok;
            int64_t budget = 24 + 10 * (int64_t)seed;
            const char *text = generate(g, &sp, budget, seed * 77, &n, &ok);
            if (!ok || !accepts(check, text) || n > budget) {
                HX_FAIL_AT("mode %d seed %llu: ok %d, %lld tokens of %lld, text %s", mode,
                           (unsigned long long)seed, ok, (long long)n, (long long)budget, text);
                return;
            }
        }
    }
    hx_grammar_free(g);
    hx_grammar_free(check);
}

/* Greedy under the grammar = the best token that a brute-force check over the whole vocabulary
 * allows (each token tried from the same state). */
TEST(greedy_is_the_best_allowed_token)
{
    if (!qwen()) SKIP("qwen3-micro-q8_0.gguf not found under HX_DATA");
    struct hx_grammar *g;
    ASSERT_OK(compile(json_gbnf, &g));
    int64_t nv = hx_vocab_n_tokens(qwen());
    float *logits = malloc((size_t)nv * sizeof *logits);
    struct hx_sampler_params sp;
    hx_sampler_params_init(&sp);
    sp.temperature = 0;
    struct hx_sampler *s;
    ASSERT_OK(hx_sampler_new(&sp, nv, &s));
    static const char *const prefixes[] = {"", "{", "{\"name\": \"ab", "{\"name\":\"x\",",
                                           "{\"name\":\"\", \"tags\":[\"q\""};
    uint64_t x = 99;
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
        for (int64_t i = 0; i < nv; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            logits[i] = (float)((x >> 40) & 0xffff) / 4096.0f;
        }
        size_t pl = strlen(prefixes[k]);
        hx_grammar_reset(g);
        ASSERT_OK(hx_grammar_accept_text(g, prefixes[k], pl));
        hx_token got = hx_sampler_sample_grammar(s, g, logits, 0);
        int64_t best = -1, n_allowed = 0;
        for (int64_t t = 0; t < nv; t++) {
            hx_grammar_reset(g);
            hx_grammar_accept_text(g, prefixes[k], pl);
            if (hx_grammar_accept(g, (hx_token)t) != HX_OK || hx_vocab_is_eog(qwen(), (hx_token)t))
                continue;
            n_allowed++;
            if (best < 0 || logits[t] > logits[best]) best = t;
        }
        if (got != best) {
            HX_FAIL_AT("prefix %zu: sampled %d, best allowed %lld (%lld allowed)", k, got,
                       (long long)best, (long long)n_allowed);
            break;
        }
    }
    hx_sampler_free(s);
    hx_grammar_free(g);
    free(logits);
}
TEST_MAIN()
