/* bench-gemm.c — the kernel benchmark as its own program: same options as
 * `engine bench --kernels` (app/bench/cmd-bench-kernels.c). */
#include "app.h"

int main(int argc, char **argv)
{
    char *args[256];
    int n = 0;
    args[n++] = "bench";
    for (int i = 1; i < argc && n < 255; i++) args[n++] = argv[i];
    args[n] = 0;
    return hx_cmd_bench_kernels(n, args);
}
