/*
 * cmd-bench.c — `engine bench`: `--kernels` selects the kernel benchmark
 * (app/bench/cmd-bench-kernels.c); everything else is the end-to-end model benchmark
 * (app/bench/cmd-bench-model.c).
 */
#include <string.h>

#include "app.h"
#include "bench-util.h"

int hx_cmd_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--kernels")) return hx_cmd_bench_kernels(argc, argv);
    return hx_cmd_bench_model(argc, argv);
}
