/*
 * sanitized.h — HX_T_SANITIZED: 1 when this test is built with AddressSanitizer (CI's second
 * run, -DHX_SANITIZE=ON), where a test may leave its slowest repeats to the Release run and
 * says so (docs/testing.md). gcc defines __SANITIZE_ADDRESS__; clang answers __has_feature.
 */
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define HX_T_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HX_T_SANITIZED 1
#endif
#endif
#ifndef HX_T_SANITIZED
#define HX_T_SANITIZED 0
#endif
