#!/usr/bin/env bash
# Install everything hx builds and tests with, from Debian 12's packages (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
    build-essential cmake ninja-build pkg-config clang lld libclang-rt-14-dev \
    libuv1-dev libhttp-parser-dev libjansson-dev \
    libvulkan-dev mesa-vulkan-drivers glslc glslang-tools spirv-tools vulkan-validationlayers vulkan-tools \
    hipcc libamdhip64-dev rocm-device-libs clang-19 libxrt-dev wrk ca-certificates curl python3 procps >/dev/null
