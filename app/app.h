/*
 * app.h — the `engine` subcommands. Each lives in app/cmd-<name>.c as
 * `int hx_cmd_<name>(int argc, char **argv)` where argv[0] is the subcommand name; it returns
 * the process exit status (0 ok, 1 runtime failure, 2 usage error). Only app/, tests/ and
 * bench/ write to stdout/stderr.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

int hx_cmd_inspect(int argc, char **argv);
int hx_cmd_devices(int argc, char **argv);
int hx_cmd_run(int argc, char **argv);
int hx_cmd_chat(int argc, char **argv);
int hx_cmd_tokenize(int argc, char **argv);
int hx_cmd_plan(int argc, char **argv);
int hx_cmd_bench(int argc, char **argv);
int hx_cmd_bench_kernels(int argc, char **argv);   /* engine bench --kernels ... */
int hx_cmd_diff(int argc, char **argv);
int hx_cmd_serve(int argc, char **argv);
int hx_cmd_quantize(int argc, char **argv);
int hx_cmd_mkmodel(int argc, char **argv);

/* Print "engine <cmd>: <message>" to stderr. */
void hx_app_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse helpers: strict (whole string, range-checked); false on bad input. */
bool hx_app_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool hx_app_parse_f32(const char *s, float lo, float hi, float *out);
