// The one explicit list of kernels: op type, opset range, factory. Nothing registers itself.
// A node whose (domain, op, opset) has no row here is reported before the model runs.
#include <array>

#include "runtime/kernels/kernels.h"

namespace qtool::runtime {

using namespace kernels;

namespace {
constexpr int kMaxOpset = 21;
// clang-format off
const KernelDef kKernels[] = {
  // --- core: elementwise, shape, tensor manipulation, control flow, QDQ ---

  // --- compute: GEMM/conv, pooling, normalization, reductions, resize, recurrent ---
  {"", "Conv", 1, kMaxOpset, make_conv},
  {"", "ConvTranspose", 1, kMaxOpset, make_conv_transpose},
  {"", "Gemm", 1, kMaxOpset, make_gemm},
  {"", "MatMul", 1, kMaxOpset, make_matmul},
  {"", "MaxPool", 1, kMaxOpset, make_max_pool},
  {"", "AveragePool", 1, kMaxOpset, make_average_pool},
  {"", "LpPool", 1, kMaxOpset, make_lp_pool},
  {"", "GlobalAveragePool", 1, kMaxOpset, make_global_average_pool},
  {"", "GlobalMaxPool", 1, kMaxOpset, make_global_max_pool},
  {"", "BatchNormalization", 1, kMaxOpset, make_batch_norm},
  {"", "InstanceNormalization", 1, kMaxOpset, make_instance_norm},
  {"", "LayerNormalization", 17, kMaxOpset, make_layer_norm},
  {"", "LRN", 1, kMaxOpset, make_lrn},
  {"", "Softmax", 1, kMaxOpset, make_softmax},
  {"", "LogSoftmax", 1, kMaxOpset, make_log_softmax},
  {"", "Hardmax", 1, kMaxOpset, make_hardmax},
  {"", "ReduceSum", 1, kMaxOpset, make_reduce_sum},
  {"", "ReduceMean", 1, kMaxOpset, make_reduce_mean},
  {"", "ReduceMax", 1, kMaxOpset, make_reduce_max},
  {"", "ReduceMin", 1, kMaxOpset, make_reduce_min},
  {"", "ReduceProd", 1, kMaxOpset, make_reduce_prod},
  {"", "ReduceL1", 1, kMaxOpset, make_reduce_l1},
  {"", "ReduceL2", 1, kMaxOpset, make_reduce_l2},
  {"", "ReduceLogSum", 1, kMaxOpset, make_reduce_log_sum},
  {"", "ReduceLogSumExp", 1, kMaxOpset, make_reduce_log_sum_exp},
  {"", "ReduceSumSquare", 1, kMaxOpset, make_reduce_sum_square},
  {"", "ArgMax", 1, kMaxOpset, make_arg_max},
  {"", "ArgMin", 1, kMaxOpset, make_arg_min},
  {"", "Resize", 10, kMaxOpset, make_resize},
  {"", "Upsample", 7, 9, make_upsample},
  {"", "LSTM", 1, kMaxOpset, make_lstm},
  {"", "GRU", 1, kMaxOpset, make_gru},
  {"", "RNN", 1, kMaxOpset, make_rnn},
  {"", "Einsum", 12, kMaxOpset, make_einsum},

  // sentinel, never matched (keeps the array non-empty while families are added)
  {"qtool.internal", "", 0, -1, nullptr},
};
// clang-format on
}  // namespace

std::span<const KernelDef> registered_kernels() { return kKernels; }

}  // namespace qtool::runtime
