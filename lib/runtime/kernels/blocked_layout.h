// The channel-blocked activation layout that Convs on oneDNN pass to each other (runtime/conv_layout.h). A logical
// NCHW tensor X [N, C, H, W] is stored in blocks of B channels as the Tensor [N, C/B, H, W, B] with
//   blocked[n, c / B, h, w, c % B] = X[n, c, h, w].
// B is chosen once per process, by the kernels oneDNN runs on this CPU (channel_block):
//   - B = 8 (oneDNN's nChw8c) where its Convs run AVX2 kernels, which read and write nChw8c; C must be a multiple
//     of 8, so there are no padding channels;
//   - B = C (one block: [N, 1, H, W, C], which is NHWC) where they run AVX-512 kernels: oneDNN's AVX-512 pointwise
//     and depthwise kernels (brgconv_1x1, brdgmm_dw) read NHWC, run 1.7-1.9x faster than the AVX2 ones on nChw8c
//     (mobilenetv2's 52 Convs, one thread: 3.40 against 5.81 ms, docs/interpreter.md "NHWC between Convs on
//     AVX-512"), and a run of whole rows of NHWC is contiguous, so row parts read and write it in place.
// Every stored value is a value of X either way, and an elementwise op over two such tensors of one logical shape
// (Add) gives the blocked form of its NCHW result. The converters are plain loops (no oneDNN): a Conv that was told
// to read or write this layout and finds no oneDNN primitive for its shape converts around its own kernel with them.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace qtool::runtime::kernels::compute {

// The block of the nChw8c form.
inline constexpr int64_t kChannelBlock = 8;

// True when this process keeps blocked activations as NHWC (B = C), false for nChw8c (B = 8): oneDNN's effective
// instruction set (ONEDNN_MAX_CPU_ISA caps it) includes AVX-512 (avx512_core). False in builds without oneDNN.
bool blocked_layout_is_nhwc();
// B for a tensor of C channels in this process's blocked layout; 0 when C channels cannot be stored blocked.
int64_t channel_block(int64_t C);
// "nhwc" or "nChw8c": the suffix conv_layout.h gives a blocked tensor's name.
const char* blocked_layout_name();

// [N, C, H, W] of a blocked tensor [N, C/B, H, W, B] (B = 8 or one block of C); BadInputError naming `what` for
// another shape.
Shape logical_nchw(const Tensor& blocked, const std::string& what);
// X [N, C, H, W] as [N, C/B, H, W, B] for a block B that divides C (8, or C itself), and back (B from the shape).
Tensor to_blocked(const Tensor& X, int threads, int64_t block);
// In this process's layout (channel_block).
Tensor to_blocked(const Tensor& X, int threads);
Tensor from_blocked(const Tensor& B, int threads);

}  // namespace qtool::runtime::kernels::compute
