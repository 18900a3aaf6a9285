/*
 * cmd-bench.c — `engine bench`: routes `--kernels` to the kernel benchmark
 * (app/cmd-bench-kernels.c). The end-to-end model benchmark (pp/tg per backend) is not in
 * this build yet and says so.
 */
#include <stdio.h>
#include <string.h>

#include "app.h"

int hx_cmd_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--kernels")) return hx_cmd_bench_kernels(argc, argv);
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: engine bench --kernels [options]   (kernel GEMV/GEMM benchmark; --kernels --help)\n");
        return 0;
    }
    hx_app_error("bench", "the end-to-end model benchmark is not in this build yet; use --kernels");
    return 2;
}
