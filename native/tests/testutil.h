/* A minimal test harness: TEST(name) defines a test, RUN(name) runs it, CHECK fails it
 * (the test goes on, so one run reports every failure), SUMMARY prints
 * "N passed, N failed" and returns the exit code. */
#ifndef SMARTT_TESTUTIL_H
#define SMARTT_TESTUTIL_H

#include <stdio.h>

static int t_failed_now, t_passed, t_failed;

#define TEST(name) static void test_##name(void)
#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); \
            t_failed_now = 1;                                                      \
        }                                                                          \
    } while (0)
#define CHECK_EQ(a, b)                                                                   \
    do {                                                                                 \
        long long a_ = (long long)(a), b_ = (long long)(b);                              \
        if (a_ != b_) {                                                                  \
            fprintf(stderr, "  %s:%d: %s == %lld, want %s == %lld\n", __FILE__, __LINE__, \
                    #a, a_, #b, b_);                                                     \
            t_failed_now = 1;                                                            \
        }                                                                                \
    } while (0)
#define RUN(name)                                                           \
    do {                                                                    \
        t_failed_now = 0;                                                   \
        test_##name();                                                      \
        printf("%s %s\n", t_failed_now ? "--- FAIL:" : "ok  ", #name);      \
        fflush(stdout);                                                     \
        if (t_failed_now)                                                   \
            t_failed++;                                                     \
        else                                                                \
            t_passed++;                                                     \
    } while (0)
#define SUMMARY(what) \
    (printf("%s: %d passed, %d failed\n", what, t_passed, t_failed), t_failed ? 1 : 0)

#endif
