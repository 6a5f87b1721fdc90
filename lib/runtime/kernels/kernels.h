// Factory declarations for every kernel; the registry (registry.cc) lists them with their op and
// opset range. Each factory lives in the kernels/*.cc file of its family.
#pragma once

#include "runtime/kernel.h"

namespace qtool::runtime::kernels {

// --- core: elementwise, shape, tensor manipulation, control flow, QDQ (runtime core) ---
// Factories that serve several ops map node.op_type to an enum once, when the node is prepared.
// elementwise_unary.cc
std::unique_ptr<Kernel> make_float_unary(const NodeInfo& n);    // Exp, Log, Sigmoid, Erf, Gelu, Elu, Swish, ...
std::unique_ptr<Kernel> make_numeric_unary(const NodeInfo& n);  // Abs, Neg, Sign, Relu
std::unique_ptr<Kernel> make_not(const NodeInfo& n);
std::unique_ptr<Kernel> make_isnan(const NodeInfo& n);
std::unique_ptr<Kernel> make_isinf(const NodeInfo& n);
std::unique_ptr<Kernel> make_clip(const NodeInfo& n);
std::unique_ptr<Kernel> make_shrink(const NodeInfo& n);
// elementwise_binary.cc
std::unique_ptr<Kernel> make_arith(const NodeInfo& n);    // Add Sub Mul Div Pow Mod Max Min Sum Mean
std::unique_ptr<Kernel> make_compare(const NodeInfo& n);  // Equal Less Greater LessOrEqual GreaterOrEqual
std::unique_ptr<Kernel> make_logic(const NodeInfo& n);    // And Or Xor
std::unique_ptr<Kernel> make_bitshift(const NodeInfo& n);
std::unique_ptr<Kernel> make_prelu(const NodeInfo& n);
std::unique_ptr<Kernel> make_where(const NodeInfo& n);
// cast.cc
std::unique_ptr<Kernel> make_cast(const NodeInfo& n);
std::unique_ptr<Kernel> make_castlike(const NodeInfo& n);
std::unique_ptr<Kernel> make_identity(const NodeInfo& n);
std::unique_ptr<Kernel> make_dropout(const NodeInfo& n);
// Converts x to dtype `to` (numeric, bool, float16, bfloat16, FP8); returns x itself when the dtype
// already matches. `saturate` applies to FP8 targets (Cast-19).
Tensor cast_tensor(const Tensor& x, DType to, const NodeInfo& node, int threads, bool saturate = true);
// float16, bfloat16 and the FP8 formats: elementwise kernels compute these in float32 and round back.
bool is_narrow_float(DType t);
// shape.cc
std::unique_ptr<Kernel> make_shape(const NodeInfo& n);
std::unique_ptr<Kernel> make_size(const NodeInfo& n);
std::unique_ptr<Kernel> make_reshape(const NodeInfo& n);
std::unique_ptr<Kernel> make_flatten(const NodeInfo& n);
std::unique_ptr<Kernel> make_squeeze(const NodeInfo& n);
std::unique_ptr<Kernel> make_unsqueeze(const NodeInfo& n);
std::unique_ptr<Kernel> make_expand(const NodeInfo& n);
std::unique_ptr<Kernel> make_tile(const NodeInfo& n);
std::unique_ptr<Kernel> make_constant_of_shape(const NodeInfo& n);
std::unique_ptr<Kernel> make_range(const NodeInfo& n);
std::unique_ptr<Kernel> make_eyelike(const NodeInfo& n);
// tensor_ops.cc
std::unique_ptr<Kernel> make_transpose(const NodeInfo& n);
std::unique_ptr<Kernel> make_concat(const NodeInfo& n);
std::unique_ptr<Kernel> make_split(const NodeInfo& n);
std::unique_ptr<Kernel> make_slice(const NodeInfo& n);
std::unique_ptr<Kernel> make_depth_space(const NodeInfo& n);  // DepthToSpace, SpaceToDepth
std::unique_ptr<Kernel> make_trilu(const NodeInfo& n);
std::unique_ptr<Kernel> make_reverse_sequence(const NodeInfo& n);
// pad.cc
std::unique_ptr<Kernel> make_pad(const NodeInfo& n);
// gather_scatter.cc
std::unique_ptr<Kernel> make_gather(const NodeInfo& n);
std::unique_ptr<Kernel> make_gather_elements(const NodeInfo& n);
std::unique_ptr<Kernel> make_gather_nd(const NodeInfo& n);
std::unique_ptr<Kernel> make_scatter_elements(const NodeInfo& n);  // ScatterElements, Scatter (opset 9-10)
std::unique_ptr<Kernel> make_scatter_nd(const NodeInfo& n);
std::unique_ptr<Kernel> make_onehot(const NodeInfo& n);
std::unique_ptr<Kernel> make_nonzero(const NodeInfo& n);
std::unique_ptr<Kernel> make_compress(const NodeInfo& n);
// topk_cumsum.cc
std::unique_ptr<Kernel> make_topk(const NodeInfo& n);
std::unique_ptr<Kernel> make_cumsum(const NodeInfo& n);
// unique.cc
std::unique_ptr<Kernel> make_unique_op(const NodeInfo& n);  // Unique
// control_flow.cc
std::unique_ptr<Kernel> make_if(const NodeInfo& n);
std::unique_ptr<Kernel> make_loop(const NodeInfo& n);
std::unique_ptr<Kernel> make_scan(const NodeInfo& n);
// sequence.cc (runtime/value.h)
std::unique_ptr<Kernel> make_sequence_empty(const NodeInfo& n);
std::unique_ptr<Kernel> make_sequence_construct(const NodeInfo& n);
std::unique_ptr<Kernel> make_sequence_insert(const NodeInfo& n);
std::unique_ptr<Kernel> make_sequence_at(const NodeInfo& n);
std::unique_ptr<Kernel> make_sequence_erase(const NodeInfo& n);
std::unique_ptr<Kernel> make_sequence_length(const NodeInfo& n);
std::unique_ptr<Kernel> make_split_to_sequence(const NodeInfo& n);
std::unique_ptr<Kernel> make_concat_from_sequence(const NodeInfo& n);
std::unique_ptr<Kernel> make_sequence_map(const NodeInfo& n);
// qdq.cc (over lib/numerics)
std::unique_ptr<Kernel> make_quantize_linear(const NodeInfo& n);
std::unique_ptr<Kernel> make_dequantize_linear(const NodeInfo& n);
std::unique_ptr<Kernel> make_dynamic_quantize_linear(const NodeInfo& n);

// --- compute: GEMM/conv, pooling, normalization, reductions, resize, recurrent (runtime kernels) ---
std::unique_ptr<Kernel> make_conv(const NodeInfo& node);            // conv.cc
std::unique_ptr<Kernel> make_conv_transpose(const NodeInfo& node);  // conv_transpose.cc
std::unique_ptr<Kernel> make_gemm(const NodeInfo& node);            // gemm.cc
std::unique_ptr<Kernel> make_matmul(const NodeInfo& node);          // gemm.cc

// --- GPU rows (cuda_kernels.cu, CUDA builds only; listed in registry.cc) ---
std::unique_ptr<Kernel> make_cuda_unary(const NodeInfo& node);   // Relu LeakyRelu HardSigmoid HardSwish Sigmoid Clip
std::unique_ptr<Kernel> make_cuda_binary(const NodeInfo& node);  // Add Sub Mul Div Max Min
std::unique_ptr<Kernel> make_cuda_matmul(const NodeInfo& node);
std::unique_ptr<Kernel> make_cuda_gemm(const NodeInfo& node);
std::unique_ptr<Kernel> make_cuda_conv(const NodeInfo& node);  // cuDNN (conv_cudnn_plan.h)
// "<node label>: runs on the GPU (<how>)" at -v, on a GPU kernel's first run on the device (runtime/kernel.h
// log_cpu_fallback names the nodes that run on the CPU instead).
void log_gpu_node(const NodeInfo& node, std::string_view how);
std::unique_ptr<Kernel> make_max_pool(const NodeInfo& node);            // pool.cc
std::unique_ptr<Kernel> make_average_pool(const NodeInfo& node);        // pool.cc
std::unique_ptr<Kernel> make_lp_pool(const NodeInfo& node);             // pool.cc
std::unique_ptr<Kernel> make_max_unpool(const NodeInfo& node);          // pool.cc
std::unique_ptr<Kernel> make_global_average_pool(const NodeInfo& node); // pool.cc
std::unique_ptr<Kernel> make_global_max_pool(const NodeInfo& node);     // pool.cc
std::unique_ptr<Kernel> make_global_lp_pool(const NodeInfo& node);      // pool.cc
std::unique_ptr<Kernel> make_batch_norm(const NodeInfo& node);          // normalization.cc
std::unique_ptr<Kernel> make_instance_norm(const NodeInfo& node);       // normalization.cc
std::unique_ptr<Kernel> make_layer_norm(const NodeInfo& node);          // normalization.cc
std::unique_ptr<Kernel> make_rms_norm(const NodeInfo& node);            // normalization.cc
std::unique_ptr<Kernel> make_rotary_embedding(const NodeInfo& node);  // rotary_embedding.cc
std::unique_ptr<Kernel> make_onnx_attention(const NodeInfo& node);    // attention_onnx.cc
std::unique_ptr<Kernel> make_lrn(const NodeInfo& node);                 // normalization.cc
std::unique_ptr<Kernel> make_group_norm(const NodeInfo& node);          // normalization.cc
std::unique_ptr<Kernel> make_lp_norm(const NodeInfo& node);             // normalization.cc
std::unique_ptr<Kernel> make_mean_variance_norm(const NodeInfo& node);  // normalization.cc
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
std::unique_ptr<Kernel> make_det(const NodeInfo& node);                 // det.cc
std::unique_ptr<Kernel> make_non_max_suppression(const NodeInfo& node); // detection.cc
std::unique_ptr<Kernel> make_roi_align(const NodeInfo& node);           // detection.cc
std::unique_ptr<Kernel> make_grid_sample(const NodeInfo& node);         // grid_sample.cc
std::unique_ptr<Kernel> make_affine_grid(const NodeInfo& node);         // grid_sample.cc
std::unique_ptr<Kernel> make_dft(const NodeInfo& node);                 // spectral.cc
std::unique_ptr<Kernel> make_stft(const NodeInfo& node);                // spectral.cc
std::unique_ptr<Kernel> make_window(const NodeInfo& node);              // spectral.cc: Hann/Hamming/BlackmanWindow
std::unique_ptr<Kernel> make_mel_weight_matrix(const NodeInfo& node);   // spectral.cc
std::unique_ptr<Kernel> make_random(const NodeInfo& node);  // random.cc: Random{Normal,Uniform}[Like] Bernoulli Multinomial

// --- ONNX Runtime contrib ops (com.microsoft; registry.cc's last block) ---
std::unique_ptr<Kernel> make_skip_layer_norm(const NodeInfo& node);             // normalization.cc
std::unique_ptr<Kernel> make_skip_simplified_layer_norm(const NodeInfo& node);  // normalization.cc
std::unique_ptr<Kernel> make_contrib_activation(const NodeInfo& node);  // contrib_activation.cc: Gelu BiasGelu FastGelu
                                                                        // QuickGelu
std::unique_ptr<Kernel> make_fused_matmul(const NodeInfo& node);        // gemm.cc
std::unique_ptr<Kernel> make_attention(const NodeInfo& node);           // attention.cc
std::unique_ptr<Kernel> make_multi_head_attention(const NodeInfo& node);  // attention_mha.cc
std::unique_ptr<Kernel> make_group_query_attention(const NodeInfo& node);  // attention_gqa.cc
std::unique_ptr<Kernel> make_embed_layer_norm(const NodeInfo& node);    // normalization.cc
std::unique_ptr<Kernel> make_contrib_rotary_embedding(const NodeInfo& node);  // contrib_rotary_embedding.cc

}  // namespace qtool::runtime::kernels
