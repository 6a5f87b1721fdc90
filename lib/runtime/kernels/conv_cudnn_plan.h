// How a Conv node runs on cuDNN (the GPU row in cuda_kernels.cu), decided on the host. Compiled in every build, so
// tests/kernels/conv_cudnn_test.cc checks each decision against the CPU Conv's conventions without a GPU.
//
// cuDNN's 2-D convolution (cudnnConvolutionForward, CUDNN_CROSS_CORRELATION) pads each spatial axis by the same p
// on both sides:
//   y[n, m, o] = sum_{c in group(m), k} x[n, c, o*s - p + k*d] * w[m, c, k],  out = 1 + (in + 2p - (K-1)d - 1) / s
// ONNX pads the begin and the end of an axis separately (pads, auto_pad SAME_UPPER/SAME_LOWER). Per axis the plan:
//  - gives cuDNN p = begin when that yields ONNX's output size. The windows then read the same values: cuDNN's
//    last window ends at or before ONNX's end padding, so a smaller end pad is never passed and a larger one is
//    never read. This covers every symmetric pad and the SAME pads whose unequal end is not reached;
//  - otherwise gives cuDNN p = min(begin, end) and zero-pads the input explicitly by begin - p before and end - p
//    after (device_conv::pad_planes_loop, on the device), after which cuDNN's windows are ONNX's one for one.
// A 1-D Conv runs as 2-D with height 1. On the CPU instead: 3-D and larger Convs, and tensors over 2^31 elements
// (cuDNN's dimensions and strides are int); and shapes the CPU kernel rejects, so its error names the problem.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "runtime/kernel.h"

namespace qtool::runtime::kernels::cudnn_conv {

struct Plan {
  // The 4-D NCHW float descriptors: x is what cuDNN reads (after the explicit pad step), y equals ONNX's Y.
  std::array<int, 4> x{}, w{}, y{};
  std::array<int, 2> pad{}, stride{}, dilation{};
  int groups = 1;
  // The explicit pad step, when pad_step: input planes [N*C, in[0], in[1]] copied into [N*C, x[2], x[3]] at row
  // pad_begin[0], column pad_begin[1], zeros around.
  bool pad_step = false;
  std::array<int64_t, 2> in{}, pad_begin{};
  Shape y_shape;  // Y's ONNX shape (rank 3 for a 1-D Conv)
};

// A plan, or why the node runs on its CPU kernel for these shapes.
struct Decision {
  std::optional<Plan> plan;
  std::string cpu_reason;
};

// The plan for node's attributes and the shapes of X, W and (nullptr when absent) B. BadInputError for malformed
// attributes, as the CPU kernel reports them.
Decision plan_conv(const NodeInfo& node, const Shape& x, const Shape& w, const Shape* b);

// cuDNN's output size of one axis (cudnnGetConvolution2dForwardOutputDim).
int64_t cudnn_output_dim(int64_t in, int64_t pad, int64_t stride, int64_t dilation, int64_t kernel);

// cuDNN's forward algorithms, in cudnnConvolutionFwdAlgo_t's order (cuda_kernels.cu static_asserts the values).
enum class Algo : int { ImplicitGemm, ImplicitPrecompGemm, Gemm, Direct, Fft, FftTiling, Winograd, WinogradNonfused };
std::string_view algo_name(Algo a);

// One entry of cuDNN's ranked list (cudnnGetConvolutionForwardAlgorithm_v7's cudnnConvolutionFwdAlgoPerf_t).
struct AlgoCandidate {
  Algo algo = Algo::ImplicitGemm;
  bool ok = false;             // status CUDNN_STATUS_SUCCESS
  bool deterministic = false;  // determinism CUDNN_DETERMINISTIC
  bool fp32_fma = false;       // mathType CUDNN_FMA_MATH: float products and sums, no TF32 tensor cores
  size_t workspace = 0;        // bytes
};

// Largest workspace one Conv may use (the per-thread device buffer grows to the largest chosen).
inline constexpr size_t kMaxWorkspace = size_t{256} << 20;

// The algorithm of a node: the first candidate, in cuDNN's order, that succeeded, is deterministic, computes in
// float32 FMA math, sums the products directly as the CPU kernel does (implicit GEMM, precomputed-index implicit
// GEMM, explicit GEMM, direct: the CPU's formula in another summation order; FFT and Winograd transform the
// operands and round differently) and needs at most max_workspace bytes. ImplicitGemm (deterministic, no
// workspace, every shape) when none qualifies. cuDNN ranks by heuristics, without timing anything, so the same
// GPU, cuDNN and shapes give the same algorithm, hence the same values, on every run.
AlgoCandidate choose_algo(std::span<const AlgoCandidate> ranked, size_t max_workspace = kMaxWorkspace);

}  // namespace qtool::runtime::kernels::cudnn_conv
