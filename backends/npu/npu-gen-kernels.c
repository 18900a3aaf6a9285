/*
 * npu-gen-kernels.c — build-time tool: writes the simulator's synthetic kernel set (the
 * Qwen3-0.6B GEMM shapes plus two tile kernels) to DIR as manifest.json, design-descriptor
 * xclbins and generated TXN instruction streams, so `--npu-kernels DIR` runs the file path of
 * the backend (manifest parsing, instruction files) without an mlir-aie build. Nothing it
 * writes is committed; CMake regenerates it into the build folder.
 */
#include "npu-impl.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        HX_LOG_ERROR("usage: hx-npu-gen-kernels DIR");
        return 2;
    }
    char err[512];
    int st = hx__npu_write_synthetic_kernels(argv[1], err, sizeof err);
    if (st) {
        HX_LOG_ERROR("hx-npu-gen-kernels: %s", err);
        return 1;
    }
    return 0;
}
