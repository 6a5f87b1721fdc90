// The channel-blocked activation layout that Convs on oneDNN pass to each other (runtime/conv_layout.h):
// oneDNN's nChw8c. A logical NCHW tensor X [N, C, H, W] with C a multiple of kChannelBlock is stored as the
// Tensor B [N, C/8, H, W, 8] with
//   B[n, c / 8, h, w, c % 8] = X[n, c, h, w].
// C is always a multiple of 8, so there are no padding channels: every stored value is a value of X, and an
// elementwise op over two such tensors of one logical shape (Add) gives the blocked form of its NCHW result.
// The converters are plain loops (no oneDNN): a Conv that was told to read or write this layout and finds no
// oneDNN primitive for its shape converts around its own kernel with them.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace qtool::runtime::kernels::compute {

inline constexpr int64_t kChannelBlock = 8;

// [N, C, H, W] of a blocked tensor [N, C/8, H, W, 8]; BadInputError naming `what` for another shape.
Shape logical_nchw(const Tensor& blocked, const std::string& what);
// X [N, C, H, W] (C % 8 == 0) as [N, C/8, H, W, 8], and back.
Tensor to_blocked(const Tensor& X, int threads);
Tensor from_blocked(const Tensor& B, int threads);

}  // namespace qtool::runtime::kernels::compute
