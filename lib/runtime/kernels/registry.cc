// The one explicit list of kernels: op type, opset range, factory. Nothing registers itself.
// A node whose (domain, op, opset) has no row here is reported before the model runs.
#include <array>

#include "runtime/kernels/kernels.h"
#include "runtime/kernels/quantized_ops.h"

namespace qtool::runtime {

using namespace kernels;

namespace {
// The newest ai.onnx opset every row below was checked against (docs/interpreter.md, "Opsets 22-26": what each
// version changed for these ops and what qtool does about it). Most bumps of 22-26 only widen the allowed types
// (bfloat16, float4e2m1, float8e8m0, int2/uint2); a row is split where the semantics change.
constexpr int kMaxOpset = 26;
// KernelDef::sequences: the row's kernel takes or makes sequences (runtime/value.h); every other kernel sees tensors.
constexpr bool kSequences = true;
// clang-format off
const KernelDef kKernels[] = {
  // --- core: elementwise, shape, tensor manipulation, control flow, QDQ ---
  {"", "Exp", 1, kMaxOpset, make_float_unary},
  {"", "Log", 1, kMaxOpset, make_float_unary},
  {"", "Sqrt", 1, kMaxOpset, make_float_unary},
  {"", "Sin", 1, kMaxOpset, make_float_unary},
  {"", "Cos", 1, kMaxOpset, make_float_unary},
  {"", "Tan", 1, kMaxOpset, make_float_unary},
  {"", "Asin", 1, kMaxOpset, make_float_unary},
  {"", "Acos", 1, kMaxOpset, make_float_unary},
  {"", "Atan", 1, kMaxOpset, make_float_unary},
  {"", "Sinh", 1, kMaxOpset, make_float_unary},
  {"", "Cosh", 1, kMaxOpset, make_float_unary},
  {"", "Asinh", 1, kMaxOpset, make_float_unary},
  {"", "Acosh", 1, kMaxOpset, make_float_unary},
  {"", "Atanh", 1, kMaxOpset, make_float_unary},
  {"", "Tanh", 1, kMaxOpset, make_float_unary},
  {"", "Sigmoid", 1, kMaxOpset, make_float_unary},
  {"", "Erf", 1, kMaxOpset, make_float_unary},
  {"", "Reciprocal", 1, kMaxOpset, make_float_unary},
  {"", "Floor", 1, kMaxOpset, make_float_unary},
  {"", "Ceil", 1, kMaxOpset, make_float_unary},
  {"", "Round", 1, kMaxOpset, make_float_unary},
  {"", "Softplus", 1, kMaxOpset, make_float_unary},
  {"", "Softsign", 1, kMaxOpset, make_float_unary},
  {"", "HardSigmoid", 1, kMaxOpset, make_float_unary},
  {"", "HardSwish", 1, kMaxOpset, make_float_unary},
  {"", "Elu", 1, kMaxOpset, make_float_unary},
  {"", "Selu", 1, kMaxOpset, make_float_unary},
  {"", "Celu", 1, kMaxOpset, make_float_unary},
  {"", "LeakyRelu", 1, kMaxOpset, make_float_unary},
  {"", "ThresholdedRelu", 1, kMaxOpset, make_float_unary},
  {"", "Mish", 1, kMaxOpset, make_float_unary},
  {"", "Gelu", 20, kMaxOpset, make_float_unary},
  {"", "Swish", 24, kMaxOpset, make_float_unary},
  {"", "Abs", 1, kMaxOpset, make_numeric_unary},
  {"", "Neg", 1, kMaxOpset, make_numeric_unary},
  {"", "Sign", 1, kMaxOpset, make_numeric_unary},
  {"", "Relu", 1, kMaxOpset, make_numeric_unary},
  {"", "Not", 1, kMaxOpset, make_not},
  {"", "IsNaN", 9, kMaxOpset, make_isnan},
  {"", "IsInf", 10, kMaxOpset, make_isinf},
  {"", "Clip", 1, kMaxOpset, make_clip},
  {"", "Shrink", 9, kMaxOpset, make_shrink},
  {"", "Add", 1, kMaxOpset, make_arith},
  {"", "Sub", 1, kMaxOpset, make_arith},
  {"", "Mul", 1, kMaxOpset, make_arith},
  {"", "Div", 1, kMaxOpset, make_arith},
  {"", "Pow", 1, kMaxOpset, make_arith},
  {"", "Max", 1, kMaxOpset, make_arith},
  {"", "Min", 1, kMaxOpset, make_arith},
  {"", "Sum", 1, kMaxOpset, make_arith},
  {"", "Mean", 1, kMaxOpset, make_arith},
  {"", "Mod", 10, kMaxOpset, make_arith},
  {"", "Equal", 1, kMaxOpset, make_compare},
  {"", "Less", 1, kMaxOpset, make_compare},
  {"", "Greater", 1, kMaxOpset, make_compare},
  {"", "LessOrEqual", 12, kMaxOpset, make_compare},
  {"", "GreaterOrEqual", 12, kMaxOpset, make_compare},
  {"", "And", 1, kMaxOpset, make_logic},
  {"", "Or", 1, kMaxOpset, make_logic},
  {"", "Xor", 1, kMaxOpset, make_logic},
  {"", "BitShift", 11, kMaxOpset, make_bitshift},
  {"", "PRelu", 1, kMaxOpset, make_prelu},
  {"", "Where", 9, kMaxOpset, make_where},
  {"", "Cast", 1, kMaxOpset, make_cast},
  {"", "CastLike", 15, kMaxOpset, make_castlike},
  {"", "Identity", 1, kMaxOpset, make_identity, kSequences},
  {"", "Dropout", 1, kMaxOpset, make_dropout},
  {"", "Shape", 1, kMaxOpset, make_shape},
  {"", "Size", 1, kMaxOpset, make_size},
  {"", "Reshape", 5, kMaxOpset, make_reshape},
  {"", "Flatten", 1, kMaxOpset, make_flatten},
  {"", "Squeeze", 1, kMaxOpset, make_squeeze},
  {"", "Unsqueeze", 1, kMaxOpset, make_unsqueeze},
  {"", "Expand", 8, kMaxOpset, make_expand},
  {"", "Tile", 6, kMaxOpset, make_tile},
  {"", "ConstantOfShape", 9, kMaxOpset, make_constant_of_shape},
  {"", "Range", 11, kMaxOpset, make_range},
  {"", "EyeLike", 9, kMaxOpset, make_eyelike},
  {"", "Transpose", 1, kMaxOpset, make_transpose},
  {"", "Concat", 4, kMaxOpset, make_concat},
  {"", "Split", 2, kMaxOpset, make_split},
  {"", "Slice", 1, kMaxOpset, make_slice},
  {"", "Pad", 2, kMaxOpset, make_pad},
  {"", "DepthToSpace", 1, kMaxOpset, make_depth_space},
  {"", "SpaceToDepth", 1, kMaxOpset, make_depth_space},
  {"", "Trilu", 14, kMaxOpset, make_trilu},
  {"", "ReverseSequence", 10, kMaxOpset, make_reverse_sequence},
  {"", "Gather", 1, kMaxOpset, make_gather},
  {"", "GatherElements", 11, kMaxOpset, make_gather_elements},
  {"", "GatherND", 11, kMaxOpset, make_gather_nd},
  {"", "Scatter", 9, 10, make_scatter_elements},
  {"", "ScatterElements", 11, kMaxOpset, make_scatter_elements},
  {"", "ScatterND", 11, kMaxOpset, make_scatter_nd},
  {"", "OneHot", 9, kMaxOpset, make_onehot},
  {"", "NonZero", 9, kMaxOpset, make_nonzero},
  {"", "Compress", 9, kMaxOpset, make_compress},
  {"", "TopK", 1, kMaxOpset, make_topk},
  {"", "Unique", 11, kMaxOpset, make_unique_op},
  {"", "CumSum", 11, kMaxOpset, make_cumsum},
  {"", "If", 1, kMaxOpset, make_if, kSequences},
  {"", "Loop", 1, kMaxOpset, make_loop, kSequences},
  {"", "Scan", 8, kMaxOpset, make_scan},
  // Sequences of tensors (sequence.cc): ONNX opset 11 (SequenceMap 17); later versions widen the element types.
  {"", "SequenceEmpty", 11, kMaxOpset, make_sequence_empty, kSequences},
  {"", "SequenceConstruct", 11, kMaxOpset, make_sequence_construct, kSequences},
  {"", "SequenceInsert", 11, kMaxOpset, make_sequence_insert, kSequences},
  {"", "SequenceAt", 11, kMaxOpset, make_sequence_at, kSequences},
  {"", "SequenceErase", 11, kMaxOpset, make_sequence_erase, kSequences},
  {"", "SequenceLength", 11, kMaxOpset, make_sequence_length, kSequences},
  {"", "SplitToSequence", 11, kMaxOpset, make_split_to_sequence, kSequences},
  {"", "ConcatFromSequence", 11, kMaxOpset, make_concat_from_sequence, kSequences},
  {"", "SequenceMap", 17, kMaxOpset, make_sequence_map, kSequences},
  {"", "QuantizeLinear", 10, kMaxOpset, make_quantize_linear},
  {"", "DequantizeLinear", 10, kMaxOpset, make_dequantize_linear},
  {"", "DynamicQuantizeLinear", 11, kMaxOpset, make_dynamic_quantize_linear},
  // Integer and QLinear ops of already-quantized models (quantized_ops.h; ORT 1.30's CPU arithmetic).
  {"", "MatMulInteger", 10, kMaxOpset, make_matmul_integer},
  {"", "ConvInteger", 10, kMaxOpset, make_conv_integer},
  {"", "QLinearMatMul", 10, kMaxOpset, make_qlinear_matmul},
  {"", "QLinearConv", 10, kMaxOpset, make_qlinear_conv},

  // --- compute: GEMM/conv, pooling, normalization, reductions, resize, recurrent ---
  {"", "Conv", 1, kMaxOpset, make_conv},
  {"", "ConvTranspose", 1, kMaxOpset, make_conv_transpose},
  {"", "Gemm", 1, kMaxOpset, make_gemm},
  {"", "MatMul", 1, kMaxOpset, make_matmul},
  {"", "MaxPool", 1, kMaxOpset, make_max_pool},
  {"", "AveragePool", 1, kMaxOpset, make_average_pool},
  {"", "LpPool", 1, kMaxOpset, make_lp_pool},
  {"", "MaxUnpool", 9, kMaxOpset, make_max_unpool},
  {"", "GlobalAveragePool", 1, kMaxOpset, make_global_average_pool},
  {"", "GlobalMaxPool", 1, kMaxOpset, make_global_max_pool},
  {"", "GlobalLpPool", 1, kMaxOpset, make_global_lp_pool},
  {"", "BatchNormalization", 1, kMaxOpset, make_batch_norm},
  {"", "InstanceNormalization", 1, kMaxOpset, make_instance_norm},
  {"", "LayerNormalization", 17, kMaxOpset, make_layer_norm},
  // RMSNormalization-23, also formed by graph preparation (runtime/fuse_rmsnorm.h) in models of any opset.
  {"", "RMSNormalization", 23, kMaxOpset, make_rms_norm},
  {"", "RotaryEmbedding", 23, kMaxOpset, make_rotary_embedding},
  {"", "Attention", 23, kMaxOpset, make_onnx_attention},
  {"", "GroupNormalization", 18, kMaxOpset, make_group_norm},
  {"", "LpNormalization", 1, kMaxOpset, make_lp_norm},
  {"", "MeanVarianceNormalization", 9, kMaxOpset, make_mean_variance_norm},
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
  {"", "Det", 11, kMaxOpset, make_det},
  {"", "NonMaxSuppression", 10, kMaxOpset, make_non_max_suppression},
  {"", "RoiAlign", 10, kMaxOpset, make_roi_align},
  {"", "GridSample", 16, kMaxOpset, make_grid_sample},
  {"", "AffineGrid", 20, kMaxOpset, make_affine_grid},
  {"", "DFT", 17, kMaxOpset, make_dft},
  {"", "STFT", 17, kMaxOpset, make_stft},
  {"", "HannWindow", 17, kMaxOpset, make_window},
  {"", "HammingWindow", 17, kMaxOpset, make_window},
  {"", "BlackmanWindow", 17, kMaxOpset, make_window},
  {"", "MelWeightMatrix", 17, kMaxOpset, make_mel_weight_matrix},
  {"", "RandomNormal", 1, kMaxOpset, make_random},
  {"", "RandomUniform", 1, kMaxOpset, make_random},
  {"", "RandomNormalLike", 1, kMaxOpset, make_random},
  {"", "RandomUniformLike", 1, kMaxOpset, make_random},
  {"", "Bernoulli", 15, kMaxOpset, make_random},
  {"", "Multinomial", 7, kMaxOpset, make_random},

  // --- ONNX Runtime contrib ops (kernels/contrib_*.cc, normalization.cc, gemm.cc): what ORT's transformer optimizer
  // writes. LayerNormalization and SimplifiedLayerNormalization are contrib ops ORT registers in the default domain
  // (opsets 1-16 for the first, every opset for the second); the others are in com.microsoft, opset 1.
  {"", "LayerNormalization", 1, 16, make_layer_norm},
  {"", "SimplifiedLayerNormalization", 1, kMaxOpset, make_rms_norm},
  {"com.microsoft", "SkipLayerNormalization", 1, 1, make_skip_layer_norm},
  {"com.microsoft", "SkipSimplifiedLayerNormalization", 1, 1, make_skip_simplified_layer_norm},
  {"com.microsoft", "Gelu", 1, 1, make_contrib_activation},
  {"com.microsoft", "BiasGelu", 1, 1, make_contrib_activation},
  {"com.microsoft", "FastGelu", 1, 1, make_contrib_activation},
  {"com.microsoft", "QuickGelu", 1, 1, make_contrib_activation},
  {"com.microsoft", "FusedMatMul", 1, 1, make_fused_matmul},
  {"com.microsoft", "Attention", 1, 1, make_attention},
  {"com.microsoft", "MultiHeadAttention", 1, 1, make_multi_head_attention},
  {"com.microsoft", "GroupQueryAttention", 1, 1, make_group_query_attention},
  {"com.microsoft", "EmbedLayerNormalization", 1, 1, make_embed_layer_norm},
  {"com.microsoft", "RotaryEmbedding", 1, 1, make_contrib_rotary_embedding},
  // ORT's QOperator, dynamic-quantization and int4 contrib ops (quantized_ops.h).
  {"com.microsoft", "QLinearAdd", 1, 1, make_qlinear_binary},
  {"com.microsoft", "QLinearMul", 1, 1, make_qlinear_binary},
  {"com.microsoft", "QLinearSigmoid", 1, 1, make_qlinear_lookup},
  {"com.microsoft", "QLinearLeakyRelu", 1, 1, make_qlinear_lookup},
  {"com.microsoft", "QLinearGlobalAveragePool", 1, 1, make_qlinear_global_avg_pool},
  {"com.microsoft", "QLinearConcat", 1, 1, make_qlinear_concat},
  {"com.microsoft", "QLinearAveragePool", 1, 1, make_qlinear_average_pool},
  {"com.microsoft", "QLinearSoftmax", 1, 1, make_qlinear_softmax},
  {"com.microsoft", "QGemm", 1, 1, make_qgemm},
  {"com.microsoft", "MatMulIntegerToFloat", 1, 1, make_matmul_integer_to_float},
  {"com.microsoft", "DynamicQuantizeMatMul", 1, 1, make_dynamic_quantize_matmul},
  {"com.microsoft", "MatMulNBits", 1, 1, make_matmul_nbits},
  {"com.microsoft", "GatherBlockQuantized", 1, 1, make_gather_block_quantized},

  // sentinel, never matched (keeps the array non-empty while families are added)
  {"qtool.internal", "", 0, -1, nullptr},
};
// clang-format on
}  // namespace

std::span<const KernelDef> registered_kernels() { return kKernels; }

// The GPU rows, searched first under --device cuda (find_kernel); a node without one runs on its CPU row above.
// Each GPU kernel hands what it has no GPU path for (dtype, shape) to the CPU kernel of its node.
#if defined(QTOOL_HAVE_CUDA)
namespace {
// clang-format off
const KernelDef kCudaKernels[] = {
  {"", "Relu", 1, kMaxOpset, make_cuda_unary},
  {"", "LeakyRelu", 1, kMaxOpset, make_cuda_unary},
  {"", "HardSigmoid", 1, kMaxOpset, make_cuda_unary},
  {"", "HardSwish", 1, kMaxOpset, make_cuda_unary},
  {"", "Sigmoid", 1, kMaxOpset, make_cuda_unary},
  {"", "Clip", 1, kMaxOpset, make_cuda_unary},
  {"", "Add", 1, kMaxOpset, make_cuda_binary},
  {"", "Sub", 1, kMaxOpset, make_cuda_binary},
  {"", "Mul", 1, kMaxOpset, make_cuda_binary},
  {"", "Div", 1, kMaxOpset, make_cuda_binary},
  {"", "Max", 1, kMaxOpset, make_cuda_binary},
  {"", "Min", 1, kMaxOpset, make_cuda_binary},
  {"", "MatMul", 1, kMaxOpset, make_cuda_matmul},
  {"", "Gemm", 11, kMaxOpset, make_cuda_gemm},
  {"", "Conv", 1, kMaxOpset, make_cuda_conv},
};
// clang-format on
}  // namespace
std::span<const KernelDef> registered_cuda_kernels() { return kCudaKernels; }
#else
std::span<const KernelDef> registered_cuda_kernels() { return {}; }
#endif

}  // namespace qtool::runtime
