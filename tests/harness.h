/*
 * harness.h — a tiny in-tree test harness. A test file defines TEST(name) functions and ends
 * with TEST_MAIN(). `./test-foo` runs every test in the file; `./test-foo NAME [NAME...]` runs
 * those (an unknown name is an error, exit 2). Output ends with the line "N passed, N failed,
 * N skipped[, N n/a]".
 *
 * Two ways not to run a test, each saying why:
 *   SKIP(...)    something the test needs is missing: the shared data, a Vulkan device, a
 *                library the build left out. The run exits 77, which CTest reports as a skip
 *                (not a pass), and in CI (CI=true) such a skip is a failure, since CI has all
 *                of these.
 *   SKIP_NA(...) the test does not apply to this machine (the CPU lacks AMX; a path only the
 *                simulator has): counted as n/a, and does not change the exit status.
 * Exit status: 1 if any test failed, else 77 if any was skipped, else 0.
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
static int hx_test_skipped;  /* current test skipped (1) or not applicable (2) */

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

/* Leave the current test as skipped (kind 1) or not applicable (kind 2), saying why. */
#define HX_TEST_LEAVE(kind, label, ...)                                                      \
    do {                                                                                     \
        fprintf(stderr, "  %s: ", label);                                                    \
        fprintf(stderr, __VA_ARGS__);                                                        \
        fprintf(stderr, "\n");                                                               \
        hx_test_skipped = (kind);                                                            \
        return;                                                                              \
    } while (0)
#define SKIP(...) HX_TEST_LEAVE(1, "SKIP", __VA_ARGS__)
#define SKIP_NA(...) HX_TEST_LEAVE(2, "N/A", __VA_ARGS__)

/* CI=true: a skip of something CI is expected to have is a failure there (tests/lib.sh has the
 * same rule for the shell tests). */
static inline int hx_test_in_ci(void)
{
    const char *ci = getenv("CI");
    return ci && (!strcmp(ci, "true") || !strcmp(ci, "1"));
}

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
    int passed = 0, failed = 0, skipped = 0, na = 0;
    for (int a = 1; a < argc; a++) {
        int known = 0;
        for (int i = 0; i < hx_n_tests; i++) known |= !strcmp(argv[a], hx_tests[i].name);
        if (!known) {
            fprintf(stderr, "%s: no test named '%s'; the tests are:", argv[0], argv[a]);
            for (int i = 0; i < hx_n_tests; i++) fprintf(stderr, " %s", hx_tests[i].name);
            fprintf(stderr, "\n");
            return 2;
        }
    }
    const int ci = hx_test_in_ci();
    for (int i = 0; i < hx_n_tests; i++) {
        int wanted = argc == 1;
        for (int a = 1; a < argc; a++) wanted |= !strcmp(argv[a], hx_tests[i].name);
        if (!wanted) continue;
        hx_test_failed = hx_test_skipped = 0;
        fprintf(stderr, "[ RUN  ] %s\n", hx_tests[i].name);
        hx_tests[i].fn();
        if (!hx_test_failed && hx_test_skipped == 1 && ci) {
            fprintf(stderr, "  FAIL: skipped in CI (CI=true), which has everything this test "
                            "needs\n");
            hx_test_failed = 1;
        }
        if (hx_test_failed) failed++, fprintf(stderr, "[ FAIL ] %s\n", hx_tests[i].name);
        else if (hx_test_skipped == 1) skipped++, fprintf(stderr, "[ SKIP ] %s\n", hx_tests[i].name);
        else if (hx_test_skipped == 2) na++, fprintf(stderr, "[ N/A  ] %s\n", hx_tests[i].name);
        else passed++, fprintf(stderr, "[  OK  ] %s\n", hx_tests[i].name);
    }
    printf("%d passed, %d failed, %d skipped", passed, failed, skipped);
    if (na) printf(", %d n/a (not applicable to this machine)", na);
    printf("\n");
    return failed ? 1 : skipped ? 77 : 0;
}

#define TEST_MAIN()                                                                          \
    int main(int argc, char **argv) { return hx_test_main(argc, argv); }
