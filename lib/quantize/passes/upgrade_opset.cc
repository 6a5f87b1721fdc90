// Opset upgrade: each converter is a NodePass for one op whose inputs or semantics changed at a given
// version. upgrade_opset() runs those that apply between the model's opset and the target, refuses
// ops it cannot convert, then sets the opset import.
#include <onnx/shape_inference/implementation.h>

#include <map>

#include "core/error.h"
#include "quantize/passes/passes.h"

namespace qtool::quantize {
namespace {

// The stem of the names given to what a conversion adds for node `n`: its name, else its first output.
std::string name_base(const onnx::NodeProto& n) { return n.name().empty() ? n.output(0) : n.name(); }

// Moves an ints attribute into a new int64 initializer input at position `pos` (filling gaps with "").
void attr_to_input(Graph& g, int i, const std::string& attr, int pos, const std::string& suffix) {
  auto& n = g.node(i);
  const auto* a = find_attr(n, attr);
  if (!a) return;
  std::vector<int64_t> v(a->ints().begin(), a->ints().end());
  const std::string name = g.unique_name(name_base(n) + "_" + suffix);
  g.set_initializer(name, Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v));
  while (n.input_size() < pos) g.set_input(i, n.input_size(), "");
  g.set_input(i, pos, name);
  remove_attr(n, attr);
}

// A converter applies to nodes of `ops` when the model's opset is below `since`.
class Converter : public NodePass {
 public:
  Converter(int64_t since, int64_t from) : since_(since), from_(from) {}
  int64_t since() const { return since_; }
  bool applies(int64_t from) const { return from < since_; }
  bool match(const Graph&, int) const override { return from_ < since_; }

 protected:
  int64_t since_, from_;
};

// Squeeze/Unsqueeze/ReduceSum (13): axes attribute -> input 1. Split (13): split attribute -> input 1.
class AxesToInput final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset13_axes_to_input"; }
  std::vector<std::string_view> op_types() const override { return {"Squeeze", "Unsqueeze", "ReduceSum", "Split"}; }
  void rewrite(Graph& g, int i) const override {
    if (g.node(i).op_type() == "Split")
      attr_to_input(g, i, "split", 1, "split");
    else
      attr_to_input(g, i, "axes", 1, "axes");
  }
};

// The other Reduce* ops (18): axes attribute -> input 1.
class ReduceAxesToInput final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset18_reduce_axes_to_input"; }
  std::vector<std::string_view> op_types() const override {
    return {"ReduceMean", "ReduceMax",    "ReduceMin",       "ReduceProd",     "ReduceL1",
            "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  }
  void rewrite(Graph& g, int i) const override { attr_to_input(g, i, "axes", 1, "axes"); }
};

// Split (18): without a `split` input the output count is no longer implied; num_outputs must say it (ONNX Runtime
// refuses the model otherwise: "Neither 'split' input nor 'num_outputs' attribute has been given").
class SplitNumOutputs final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset18_split_num_outputs"; }
  std::vector<std::string_view> op_types() const override { return {"Split"}; }
  bool match(const Graph& g, int i) const override {
    const auto& n = g.node(i);
    return Converter::match(g, i) && (n.input_size() < 2 || n.input(1).empty()) && !find_attr(n, "num_outputs");
  }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    set_attr_int(n, "num_outputs", n.output_size());
  }
};

// GridSample (20): modes renamed for N-D grids, bilinear -> linear and bicubic -> cubic (same sampling on 4-D).
// Without it a model taken to opset 21 (int4 / blocked weights) kept "bilinear", which ONNX Runtime refuses.
class GridSampleModes20 final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset20_grid_sample_modes"; }
  std::vector<std::string_view> op_types() const override { return {"GridSample"}; }
  void rewrite(Graph& g, int i) const override {
    for (auto& a : *g.node(i).mutable_attribute())
      if (a.name() == "mode" && (a.s() == "bilinear" || a.s() == "bicubic"))
        a.set_s(a.s() == "bilinear" ? "linear" : "cubic");
  }
};

// Clip (11): min/max attributes -> inputs 1, 2 (float scalars; attribute Clip only took float types).
class ClipToInputs final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset11_clip_inputs"; }
  std::vector<std::string_view> op_types() const override { return {"Clip"}; }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const std::string base = name_base(n);
    const auto* lo = find_attr(n, "min");
    const auto* hi = find_attr(n, "max");
    std::string lo_name, hi_name;
    if (lo) g.set_initializer(lo_name = g.unique_name(base + "_min"), Tensor::scalar<float>(lo->f()));
    if (hi) g.set_initializer(hi_name = g.unique_name(base + "_max"), Tensor::scalar<float>(hi->f()));
    remove_attr(n, "min");
    remove_attr(n, "max");
    if (hi) {
      g.set_input(i, n.input_size(), lo_name);  // "" (no lower bound) when only max was given
      g.set_input(i, n.input_size(), hi_name);
    } else if (lo) {
      g.set_input(i, n.input_size(), lo_name);
    }
  }
};

// Slice (10): starts/ends/axes attributes -> inputs 1, 2, 3.
class SliceToInputs final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset10_slice_inputs"; }
  std::vector<std::string_view> op_types() const override { return {"Slice"}; }
  void rewrite(Graph& g, int i) const override {
    attr_to_input(g, i, "starts", 1, "starts");
    attr_to_input(g, i, "ends", 2, "ends");
    attr_to_input(g, i, "axes", 3, "axes");
  }
};

// Pad (11): pads/value attributes -> inputs 1, 2.
class PadToInputs final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset11_pad_inputs"; }
  std::vector<std::string_view> op_types() const override { return {"Pad"}; }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const float value = attr_float(n, "value", 0.0f);
    remove_attr(n, "value");
    attr_to_input(g, i, "pads", 1, "pads");
    const std::string vname = g.unique_name(name_base(n) + "_value");
    g.set_initializer(vname, Tensor::scalar<float>(value));
    g.set_input(i, n.input_size(), vname);
  }
};

void set_attr_string(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  remove_attr(n, name);
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// Upsample (7-9; deprecated at 10) -> Resize in its opset-10 form (X, scales), same mode: both map an output index x
// to x / scale (asymmetric) and nearest takes floor (Upsample's scales are >= 1). Upsample 7/8 give the scales as an
// attribute: it becomes a float initializer. ResizeV11 below then takes the node on to opset 11's inputs when the
// target asks for it.
class UpsampleToResize final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset10_upsample_to_resize"; }
  std::vector<std::string_view> op_types() const override { return {"Upsample"}; }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    if (const auto* a = find_attr(n, "scales")) {
      std::vector<float> v(a->floats().begin(), a->floats().end());
      const std::string name = g.unique_name(name_base(n) + "_scales");
      g.set_initializer(name, Tensor::from_vector<float>({static_cast<int64_t>(v.size())}, v));
      g.set_input(i, 1, name);
      remove_attr(n, "scales");
    }
    n.set_op_type("Resize");
  }
};

// Resize (11): inputs (X, scales) -> (X, roi, scales); opset 10 Resize is "asymmetric" nearest/linear. Every Resize
// of a model below opset 11 has the opset-10 form (Upsample included, converted above).
class ResizeV11 final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset11_resize_inputs"; }
  std::vector<std::string_view> op_types() const override { return {"Resize"}; }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const std::string scales = n.input(1);
    const std::string roi = g.unique_name(name_base(n) + "_roi");
    g.set_initializer(roi, Tensor(DType::Float32, {0}));
    g.set_input(i, 1, roi);
    g.set_input(i, 2, scales);
    set_attr_string(n, "coordinate_transformation_mode", "asymmetric");
    if (attr_string(n, "mode", "nearest") == "nearest") set_attr_string(n, "nearest_mode", nearest_mode(g, n, scales));
  }

 private:
  // Nearest before opset 11 (ONNX Runtime's "simple" mode) takes floor along an axis that grows and ceil along one
  // that shrinks; opset 11 has one nearest_mode for all axes. Scales computed at run time: floor (upsampling).
  static std::string nearest_mode(const Graph& g, const onnx::NodeProto& n, const std::string& scales) {
    if (!g.is_float_initializer(scales)) return "floor";
    const Tensor t = g.initializer_tensor(scales);
    bool grows = false, shrinks = false;
    for (float v : t.span<float>()) grows = grows || v > 1, shrinks = shrinks || v < 1;
    if (grows && shrinks)
      throw UnsupportedError(describe(n) +
                             ": nearest Resize that grows some axes and shrinks others has no opset-11 "
                             "form (floor and ceil at once); re-export the model with opset >= 11");
    return shrinks ? "ceil" : "floor";
  }
};

// TopK (10): the k attribute -> a 1-D int64 input.
class TopKToInput final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset10_topk_input"; }
  std::vector<std::string_view> op_types() const override { return {"TopK"}; }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const auto* a = find_attr(n, "k");
    if (!a) return;  // refused below: TopK without k is not a valid opset 1-9 node
    const std::string name = g.unique_name(name_base(n) + "_k");
    g.set_initializer(name, Tensor::from_vector<int64_t>({1}, {a->i()}));
    g.set_input(i, 1, name);
    remove_attr(n, "k");
  }
};

// BatchNormalization (9): the `spatial` attribute went away; spatial = 1 (the default: one mean/var per channel) is
// what opset 9 always does. spatial = 0 (per activation) stays refused.
class BatchNormSpatial9 final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "opset9_batchnorm_spatial"; }
  std::vector<std::string_view> op_types() const override { return {"BatchNormalization"}; }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    if (attr_int(n, "spatial", 1) == 1) remove_attr(n, "spatial");
  }
};

// Dropout (12 changed its inputs): in an inference graph it is the identity.
class DropoutToIdentity final : public Converter {
 public:
  using Converter::Converter;
  std::string_view name() const override { return "dropout_to_identity"; }
  std::vector<std::string_view> op_types() const override { return {"Dropout"}; }
  bool match(const Graph& g, int i) const override {
    const auto& n = g.node(i);
    return Converter::match(g, i) && (n.output_size() < 2 || n.output(1).empty() || g.consumers(n.output(1)).empty());
  }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    n.set_op_type("Identity");
    n.clear_attribute();
    g.set_inputs(i, {n.input(0)});
    g.set_outputs(i, {n.output(0)});
  }
};

// Softmax/LogSoftmax/Hardmax (13): before 13 the input is flattened to 2-D at `axis` (default 1) and
// normalised over the second dimension; from 13 over `axis` alone. Same when axis is the last
// dimension; otherwise Flatten(axis) -> op(axis=1) -> Reshape(Shape(x)) reproduces the old meaning.
class SoftmaxAxis13 final : public Converter {
 public:
  SoftmaxAxis13(int64_t since, int64_t from, std::map<std::string, int> ranks)
      : Converter(since, from), ranks_(std::move(ranks)) {}
  std::string_view name() const override { return "opset13_softmax_axis"; }
  std::vector<std::string_view> op_types() const override { return {"Softmax", "LogSoftmax", "Hardmax"}; }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const int64_t axis = attr_int(n, "axis", 1);
    auto r = ranks_.find(n.input(0));
    if (axis == -1 || (r != ranks_.end() && axis == r->second - 1)) {
      set_attr_int(n, "axis", -1);
      return;
    }
    const std::string base = name_base(n);
    const std::string x = n.input(0), y = n.output(0);
    const std::string flat = g.unique_name(base + "_flat"), shape = g.unique_name(base + "_shape"),
                      y2 = g.unique_name(base + "_2d");
    onnx::NodeProto sh, fl, rs;
    sh.set_op_type("Shape"), sh.set_name(g.unique_name(base + "_Shape")), sh.add_input(x), sh.add_output(shape);
    fl.set_op_type("Flatten"), fl.set_name(g.unique_name(base + "_Flatten")), fl.add_input(x), fl.add_output(flat);
    set_attr_int(fl, "axis", axis);
    rs.set_op_type("Reshape"), rs.set_name(g.unique_name(base + "_Reshape")), rs.add_input(y2), rs.add_input(shape);
    rs.add_output(y);
    g.set_input(i, 0, flat);
    g.set_output(i, 0, y2);
    set_attr_int(n, "axis", 1);
    g.insert_before(i, sh);
    g.insert_before(i, fl);
    g.insert_before(i + 1, rs);
  }

 private:
  std::map<std::string, int> ranks_;
};

// Ops with changes no converter handles: upgrading past `since` is refused, for the nodes `left` says the converters
// could not take (all when null).
struct Blocked {
  std::string_view op;
  int64_t since;
  bool (*left)(const onnx::NodeProto&) = nullptr;
};
bool topk_k_left(const onnx::NodeProto& n) { return n.input_size() < 2; }
bool bn_spatial_left(const onnx::NodeProto& n) { return find_attr(n, "spatial") != nullptr; }
const Blocked kBlocked[] = {{"TopK", 10, topk_k_left},
                            {"Scan", 9},
                            {"Loop", 11},
                            {"If", 11},
                            {"BatchNormalization", 9, bn_spatial_left},
                            {"Dropout", 12}};

// Ranks, and the size of axis 1 where shape inference gives it (0 where not), of the model's tensors.
struct Shapes {
  std::map<std::string, int> ranks;
  std::map<std::string, int64_t> channels;
};
Shapes infer_shapes(const onnx::ModelProto& model) {
  Shapes out;
  onnx::ModelProto copy = model;
  try {
    onnx::shape_inference::InferShapes(copy);
  } catch (const std::exception&) {
    return out;  // shapes stay unknown; converters fall back to the always-correct rewrite or refuse
  }
  auto add = [&](const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    const auto& shape = vi.type().tensor_type().shape();
    out.ranks[vi.name()] = shape.dim_size();
    if (shape.dim_size() > 1 && shape.dim(1).has_dim_value()) out.channels[vi.name()] = shape.dim(1).dim_value();
  };
  for (const auto& vi : copy.graph().value_info()) add(vi);
  for (const auto& vi : copy.graph().input()) add(vi);
  for (const auto& vi : copy.graph().output()) add(vi);
  return out;
}

// GroupNormalization (21): scale and bias hold one value per channel instead of one per group; each group's value is
// repeated over its C / G channels. C comes from shape inference; where it cannot say, the node is refused.
class GroupNormPerChannel21 final : public Converter {
 public:
  GroupNormPerChannel21(int64_t since, int64_t from, std::map<std::string, int64_t> channels)
      : Converter(since, from), channels_(std::move(channels)) {}
  std::string_view name() const override { return "opset21_group_norm_per_channel"; }
  std::vector<std::string_view> op_types() const override { return {"GroupNormalization"}; }
  void rewrite(Graph& g, int i) const override {
    auto& n = g.node(i);
    const int64_t groups = attr_int(n, "num_groups", 0);
    const auto c = channels_.find(n.input(0));
    const bool known = c != channels_.end() && c->second > 0 && groups > 0 && c->second % groups == 0;
    for (int k = 1; k <= 2; ++k) {
      if (n.input_size() <= k || !g.is_float_initializer(n.input(k)) || !known)
        throw UnsupportedError(
            describe(n) + ": cannot upgrade GroupNormalization from opset " + std::to_string(from_) +
            " to 21 (scale and bias per channel since 21) without " +
            "constant scale and bias and a known channel count; re-export the model with opset >= 21");
      const Tensor t = g.initializer_tensor(n.input(k));
      if (t.numel() != groups) continue;  // already per channel (C = G)
      std::vector<float> v;
      for (float x : t.span<float>()) v.insert(v.end(), static_cast<size_t>(c->second / groups), x);
      const std::string name = g.unique_name(n.input(k) + "_per_channel");
      g.set_initializer(name, Tensor::from_vector<float>({c->second}, v));
      g.set_input(i, k, name);
    }
  }

 private:
  std::map<std::string, int64_t> channels_;
};

}  // namespace

void upgrade_opset(Graph& g, int64_t target) {
  const int64_t from = g.opset();
  if (from >= target) return;
  std::vector<std::unique_ptr<Converter>> converters;
  converters.push_back(std::make_unique<BatchNormSpatial9>(9, from));
  converters.push_back(std::make_unique<SliceToInputs>(10, from));
  converters.push_back(std::make_unique<TopKToInput>(10, from));
  converters.push_back(std::make_unique<ClipToInputs>(11, from));
  converters.push_back(std::make_unique<PadToInputs>(11, from));
  converters.push_back(std::make_unique<UpsampleToResize>(10, from));
  converters.push_back(std::make_unique<ResizeV11>(11, from));
  converters.push_back(std::make_unique<DropoutToIdentity>(12, from));
  converters.push_back(std::make_unique<AxesToInput>(13, from));
  converters.push_back(std::make_unique<ReduceAxesToInput>(18, from));
  converters.push_back(std::make_unique<SplitNumOutputs>(18, from));
  converters.push_back(std::make_unique<GridSampleModes20>(20, from));
  if ((from < 13 && target >= 13) || (from < 21 && target >= 21)) {
    Shapes shapes = infer_shapes(g.model());
    if (from < 13 && target >= 13)
      converters.push_back(std::make_unique<SoftmaxAxis13>(13, from, std::move(shapes.ranks)));
    if (from < 21 && target >= 21)
      converters.push_back(std::make_unique<GroupNormPerChannel21>(21, from, std::move(shapes.channels)));
  }
  for (const auto& c : converters)
    if (c->since() <= target) run_pass(g, *c);
  for (int i = 0; i < g.node_count(); ++i) {
    const auto& n = g.node(i);
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    for (const auto& b : kBlocked)
      if (n.op_type() == b.op && from < b.since && target >= b.since && (!b.left || b.left(n)))
        throw UnsupportedError(describe(n) + ": cannot upgrade " + std::string(b.op) + " from opset " +
                               std::to_string(from) + " to " + std::to_string(target) +
                               " (its semantics changed at opset " + std::to_string(b.since) +
                               "); re-export the model with opset >= " + std::to_string(target));
  }
  g.set_opset(target);
  // IR version 7 is the first that knows opset 13.
  if (g.model().ir_version() < 7) g.model().set_ir_version(7);
}

}  // namespace qtool::quantize
