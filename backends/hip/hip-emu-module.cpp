/*
 * hip-emu-module.cpp — hx-hip-emu.so: hip-module.hip compiled by the host C++ compiler with
 * HX_HIP_EMU, so the module code and every kernel run on the CPU through hip-emu.cpp.
 */
#include "hip-module.hip"
