// Factory declarations for every kernel; the registry (registry.cc) lists them with their op and
// opset range. Each factory lives in the kernels/*.cc file of its family.
#pragma once

#include "runtime/kernel.h"

namespace qtool::runtime::kernels {

// --- core: elementwise, shape, tensor manipulation, control flow, QDQ (runtime core) ---

// --- compute: GEMM/conv, pooling, normalization, reductions, resize, recurrent (runtime kernels) ---
std::unique_ptr<Kernel> make_conv(const NodeInfo& node);            // conv.cc
std::unique_ptr<Kernel> make_conv_transpose(const NodeInfo& node);  // conv_transpose.cc
std::unique_ptr<Kernel> make_gemm(const NodeInfo& node);            // gemm.cc
std::unique_ptr<Kernel> make_matmul(const NodeInfo& node);          // gemm.cc
std::unique_ptr<Kernel> make_max_pool(const NodeInfo& node);            // pool.cc
std::unique_ptr<Kernel> make_average_pool(const NodeInfo& node);        // pool.cc
std::unique_ptr<Kernel> make_lp_pool(const NodeInfo& node);             // pool.cc
std::unique_ptr<Kernel> make_global_average_pool(const NodeInfo& node); // pool.cc
std::unique_ptr<Kernel> make_global_max_pool(const NodeInfo& node);     // pool.cc
std::unique_ptr<Kernel> make_batch_norm(const NodeInfo& node);          // normalization.cc
std::unique_ptr<Kernel> make_instance_norm(const NodeInfo& node);       // normalization.cc
std::unique_ptr<Kernel> make_layer_norm(const NodeInfo& node);          // normalization.cc
std::unique_ptr<Kernel> make_lrn(const NodeInfo& node);                 // normalization.cc
std::unique_ptr<Kernel> make_softmax(const NodeInfo& node);             // softmax.cc
std::unique_ptr<Kernel> make_log_softmax(const NodeInfo& node);         // softmax.cc
std::unique_ptr<Kernel> make_hardmax(const NodeInfo& node);             // softmax.cc
std::unique_ptr<Kernel> make_reduce_sum(const NodeInfo& node);          // reduce.cc
std::unique_ptr<Kernel> make_reduce_mean(const NodeInfo& node);         // reduce.cc
std::unique_ptr<Kernel> make_reduce_max(const NodeInfo& node);          // reduce.cc
std::unique_ptr<Kernel> make_reduce_min(const NodeInfo& node);          // reduce.cc
std::unique_ptr<Kernel> make_reduce_prod(const NodeInfo& node);         // reduce.cc
std::unique_ptr<Kernel> make_reduce_l1(const NodeInfo& node);           // reduce.cc
std::unique_ptr<Kernel> make_reduce_l2(const NodeInfo& node);           // reduce.cc
std::unique_ptr<Kernel> make_reduce_log_sum(const NodeInfo& node);      // reduce.cc
std::unique_ptr<Kernel> make_reduce_log_sum_exp(const NodeInfo& node);  // reduce.cc
std::unique_ptr<Kernel> make_reduce_sum_square(const NodeInfo& node);   // reduce.cc
std::unique_ptr<Kernel> make_arg_max(const NodeInfo& node);             // reduce.cc
std::unique_ptr<Kernel> make_arg_min(const NodeInfo& node);             // reduce.cc
std::unique_ptr<Kernel> make_resize(const NodeInfo& node);              // resize.cc
std::unique_ptr<Kernel> make_upsample(const NodeInfo& node);            // resize.cc
std::unique_ptr<Kernel> make_lstm(const NodeInfo& node);                // recurrent.cc
std::unique_ptr<Kernel> make_gru(const NodeInfo& node);                 // recurrent.cc
std::unique_ptr<Kernel> make_rnn(const NodeInfo& node);                 // recurrent.cc
std::unique_ptr<Kernel> make_einsum(const NodeInfo& node);              // einsum.cc

}  // namespace qtool::runtime::kernels
