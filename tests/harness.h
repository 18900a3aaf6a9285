/*
 * harness.h — a tiny in-tree test harness. A test file defines TEST(name) functions and ends
 * with TEST_MAIN(). `./test-foo` runs every test in the file; `./test-foo NAME` runs one.
 * Output ends with the line "N passed, N failed, N skipped"; the exit status is non-zero if
 * any test failed. A skipped test says why.
 */
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*hx_test_fn)(void);
struct hx_test_case {
    const char *name;
    hx_test_fn fn;
};

#define HX_TEST_MAX 512
static struct hx_test_case hx_tests[HX_TEST_MAX];
static int hx_n_tests;
static int hx_test_failed;   /* current test failed */
static int hx_test_skipped;  /* current test skipped */

#define TEST(name)                                                                           \
    static void test_##name(void);                                                           \
    __attribute__((constructor)) static void register_##name(void)                          \
    {                                                                                        \
        if (hx_n_tests < HX_TEST_MAX) hx_tests[hx_n_tests++] = (struct hx_test_case){#name, test_##name}; \
    }                                                                                        \
    static void test_##name(void)

#define HX_FAIL_AT(...)                                                                      \
    do {                                                                                     \
        fprintf(stderr, "  FAIL %s:%d: ", __FILE__, __LINE__);                               \
        fprintf(stderr, __VA_ARGS__);                                                        \
        fprintf(stderr, "\n");                                                               \
        hx_test_failed = 1;                                                                  \
    } while (0)

#define ASSERT_TRUE(c)                                                                       \
    do {                                                                                     \
        if (!(c)) {                                                                          \
            HX_FAIL_AT("expected true: %s", #c);                                             \
            return;                                                                          \
        }                                                                                    \
    } while (0)

#define ASSERT_EQ(a, b)                                                                      \
    do {                                                                                     \
        long long hx_a_ = (long long)(a), hx_b_ = (long long)(b);                            \
        if (hx_a_ != hx_b_) {                                                                \
            HX_FAIL_AT("%s == %s: %lld vs %lld", #a, #b, hx_a_, hx_b_);                       \
            return;                                                                          \
        }                                                                                    \
    } while (0)

#define ASSERT_NE(a, b)                                                                      \
    do {                                                                                     \
        long long hx_a_ = (long long)(a), hx_b_ = (long long)(b);                            \
        if (hx_a_ == hx_b_) {                                                                \
            HX_FAIL_AT("%s != %s: both %lld", #a, #b, hx_a_);                                 \
            return;                                                                          \
        }                                                                                    \
    } while (0)

#define ASSERT_OK(x)                                                                         \
    do {                                                                                     \
        int hx_s_ = (x);                                                                     \
        if (hx_s_ != 0) {                                                                    \
            HX_FAIL_AT("%s returned %d (%s)", #x, hx_s_, hx_last_error());                   \
            return;                                                                          \
        }                                                                                    \
    } while (0)

#define ASSERT_NEAR(a, b, tol)                                                               \
    do {                                                                                     \
        double hx_a_ = (double)(a), hx_b_ = (double)(b);                                     \
        if (!(fabs(hx_a_ - hx_b_) <= (tol))) {                                               \
            HX_FAIL_AT("%s ~= %s: %.9g vs %.9g (tol %g)", #a, #b, hx_a_, hx_b_, (double)(tol)); \
            return;                                                                          \
        }                                                                                    \
    } while (0)

#define ASSERT_STREQ(a, b)                                                                   \
    do {                                                                                     \
        const char *hx_a_ = (a), *hx_b_ = (b);                                               \
        if (!hx_a_ || !hx_b_ || strcmp(hx_a_, hx_b_) != 0) {                                 \
            HX_FAIL_AT("%s == %s: \"%s\" vs \"%s\"", #a, #b, hx_a_ ? hx_a_ : "(null)",         \
                       hx_b_ ? hx_b_ : "(null)");                                            \
            return;                                                                          \
        }                                                                                    \
    } while (0)

#define SKIP(...)                                                                            \
    do {                                                                                     \
        fprintf(stderr, "  SKIP: ");                                                         \
        fprintf(stderr, __VA_ARGS__);                                                        \
        fprintf(stderr, "\n");                                                               \
        hx_test_skipped = 1;                                                                 \
        return;                                                                              \
    } while (0)

/* Path of a file in the shared data folder (HX_DATA env, else ../shared/data). */
static inline const char *hx_test_data(const char *rel)
{
    static char buf[8][1024];
    static int k;
    const char *root = getenv("HX_DATA");
    char *b = buf[k++ & 7];
    snprintf(b, sizeof buf[0], "%s/%s", root ? root : "../shared/data", rel);
    return b;
}

/* Make a fresh scratch directory "<TMPDIR or the system's temp dir>/hx-TAG-XXXXXX" into buf;
 * returns buf, or NULL if it cannot be created. */
static inline char *hx_test_mkdtemp(char *buf, size_t n, const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, n, "%s/hx-%s-XXXXXX", base && *base ? base : P_tmpdir, tag);
    return mkdtemp(buf);
}

static inline int hx_test_main(int argc, char **argv)
{
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < hx_n_tests; i++) {
        if (argc > 1 && strcmp(argv[1], hx_tests[i].name) != 0) continue;
        hx_test_failed = hx_test_skipped = 0;
        fprintf(stderr, "[ RUN  ] %s\n", hx_tests[i].name);
        hx_tests[i].fn();
        if (hx_test_failed) failed++, fprintf(stderr, "[ FAIL ] %s\n", hx_tests[i].name);
        else if (hx_test_skipped) skipped++, fprintf(stderr, "[ SKIP ] %s\n", hx_tests[i].name);
        else passed++, fprintf(stderr, "[  OK  ] %s\n", hx_tests[i].name);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}

#define TEST_MAIN()                                                                          \
    int main(int argc, char **argv) { return hx_test_main(argc, argv); }
