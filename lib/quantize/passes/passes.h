// The preparation passes and the order prepare_model() runs them in.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "quantize/passes/pass.h"

namespace qtool::quantize {

// Constant nodes holding tensors become initializers (output name kept).
std::unique_ptr<NodePass> make_lift_constants_pass();
// BatchNormalization after Conv / ConvTranspose / Gemm folds into the weights and bias;
// the producer takes over the BatchNormalization's output name.
std::unique_ptr<NodePass> make_fold_batchnorm_pass();
// Initializers also listed as graph inputs (IR < 4 style) stop being inputs: they are weights, and a
// caller cannot usefully override them. The model's real inputs are unchanged.
int drop_initializer_inputs(Graph& g);
// Relu -> Min(c >= 0) becomes Clip(0, c); a Relu after Clip(lo >= 0, hi) goes away (relu_clip.cc).
std::unique_ptr<NodePass> make_relu_min_to_clip_pass();
std::unique_ptr<NodePass> make_drop_redundant_relu_pass();
// A zero constant Pad of the spatial axes folds into the Conv reading it (fold_pad.cc).
std::unique_ptr<NodePass> make_fold_pad_into_conv_pass();
// Div(x, C) with a constant C becomes Mul(x, 1/C): ONNX Runtime has an int8 Mul and no int8 Div (div_to_mul.cc).
std::unique_ptr<NodePass> make_div_to_mul_pass();
// A constant bias Add after a Conv / ConvTranspose and a scalar Mul / Add before a Conv fold into its weights and
// bias where exact, and chained scalar Muls merge, until none is left; returns the number of rewrites (fold_affine.cc).
// With scale_after_conv, a constant Mul after a Conv / ConvTranspose (per channel or one value) folds too.
int fold_affine(Graph& g, bool scale_after_conv = false);
// Target ONNX Runtime CPU: a 2x nearest Resize (asymmetric, floor) gets an identity Reshape after it, so ORT keeps
// it in NCHW, where it has a fast kernel for it, instead of moving it into the NHWC integer region
// (pin_resize_layout.cc). Run by quantize_model, not prepare_model: other runtimes do not need it.
std::unique_ptr<NodePass> make_pin_resize_layout_pass();
// Max(x, -inf) and Min(x, +inf) become Identity(x) (drop_infinite_bound.cc).
std::unique_ptr<NodePass> make_drop_infinite_bound_pass();
// Nodes whose outputs nobody reads (and that are not graph outputs) and unused initializers go away.
int remove_dead_nodes(Graph& g);
// Nodes with only initializer inputs run once in qtool's interpreter (lib/runtime) and become initializers.
int fold_constants(Graph& g);
// Raises the default-domain opset to `target`, converting the ops whose semantics changed on the way
// (BatchNormalization 9, Slice/TopK 10, Upsample -> Resize 10, Clip/Pad/Resize 11, Dropout 12,
// Squeeze/Unsqueeze/ReduceSum/Split/Softmax 13, Reduce* axes / Split num_outputs 18, GridSample modes 20,
// GroupNormalization per-channel scale 21).
// An op whose change qtool cannot convert is an UnsupportedError naming the node.
void upgrade_opset(Graph& g, int64_t target);

struct PrepareOptions {
  bool fold_scale_after_conv = false;  // fold_affine's scale_after_conv (QConfig weight_algorithms)
};

struct PrepareReport {
  std::map<std::string, int> rewrites;  // pass name -> count
  int64_t opset_before = 0, opset_after = 0;
};
// All passes in order: drop initializer inputs, lift constants, fold constants, fold BatchNormalization, upgrade opset,
// Relu/Clip clean-ups, Div -> Mul, affine folds (then BatchNormalization again), Pad folding,
// dead nodes.
PrepareReport prepare_model(onnx::ModelProto& model, int64_t min_opset, const PrepareOptions& options = {});

}  // namespace qtool::quantize
