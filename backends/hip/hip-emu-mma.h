/*
 * hip-emu-mma.h — between hip-emu.cpp (the warp collective) and hip-emu-mma.cpp (the layouts
 * and the arithmetic of each matrix fragment op).
 */
#pragma once

#include "hip-emu.h"

/* D of every lane of a warp's fragment op `kind` (HX_EMU_*), from lanes[l], the registers lane
 * l offered (hx_emu_mma's `in` layout): out[l][0..3] (MMA) or [0..7] (WMMA). */
void hx_emu_mma_compute(int kind, const uint32_t *const *lanes, uint32_t (*out)[8]);
/* The float-weight ops (HX_EMU_MMA_BF16, HX_EMU_MMA_TF32): hx_emu_mma_compute hands them here. */
void hx_emu_mma_float(int kind, const uint32_t *const *lanes, uint32_t (*out)[8]);

/* The register counts of the AMD kinds from 16 up (HX_EMU_WMMA_I8, ...): *n_in and *n_out set
 * for them, left as they are for the others. */
void hx_emu_mma_amd_words(int kind, int *n_in, int *n_out);
