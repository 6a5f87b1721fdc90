#include "quantize/qdq.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>
#include <set>

#include "core/error.h"
#include "onnx/body_names.h"
#include "onnx/quantized_ops.h"
#include "onnx/sequence_values.h"
#include "quantize/graph.h"
#include "quantize/op_roles.h"
#include "quantize/qparams.h"
#include "quantize/saturation.h"
#include "quantize/weights/double_quant.h"
#include "quantize/weights/layer_inputs.h"
#include "quantize/weights/smooth_quant.h"
#include "quantize/weights/weight_quantizer.h"

namespace qtool::quantize {
namespace {

bool all_finite(const Tensor& t) {
  const float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(d[i])) return false;
  return true;
}

struct ActQ {
  QParams params;
};

constexpr const char* kCoordinatesNote =
    "its output is read as coordinates (GridSample grid, RoiAlign rois, NonMaxSuppression boxes, AffineGrid theta): "
    "it stays float";

class QdqBuilder {
 public:
  // plan: decide without ranges and stop at the first node quantized (plan_qdq).
  QdqBuilder(onnx::ModelProto& model, const QConfig& cfg, const calib::CalibrationTable& ranges,
             const RewriteInputs& inputs, bool plan = false)
      : g_(model), cfg_(cfg), ranges_(ranges), in_(inputs), plan_(plan) {
    // A name some graphs of the hierarchy define again (onnx/body_names.h, which quantize's preparation has run,
    // leaves only those of tables and models prepared before it): calibration merged their values under one name,
    // so such tensors stay float (weights are unaffected: their values are local).
    for (const auto& [name, scopes] : onnxio::definition_counts(model.graph()))
      if (scopes > 1) ambiguous_.insert(name);
    sequences_ = onnxio::sequence_values(model.graph());
  }
  // The body `body` of a node of `outer`'s graph.
  QdqBuilder(onnx::ModelProto& model, onnx::GraphProto& body, const Graph& outer, const QConfig& cfg,
             const calib::CalibrationTable& ranges, const std::set<std::string>& ambiguous,
             const std::set<std::string>& sequences, const RewriteInputs& inputs, bool plan)
      : g_(model, body, outer),
        cfg_(cfg),
        ranges_(ranges),
        in_(inputs),
        plan_(plan),
        ambiguous_(ambiguous),
        sequences_(sequences) {
    // A body the calibration samples never ran (an If branch they did not take) has no tensor in the table: its
    // activations stay float, and their absence says nothing about the table being another model's (the check
    // in quantize.cc, check_table_matches, counts the other graphs' missing tensors only).
    body_unobserved_ = !ranges_.tensors.empty();
    for (const auto& n : body.node())
      for (const auto& o : n.output())
        if (!o.empty() && ranges_.find(o)) body_unobserved_ = false;
    if (body_unobserved_) report_.unobserved_bodies.push_back(body.name());
  }

  QdqReport run() {
    if (!g_.outer()) check_names();
    const int n = g_.node_count();
    nq_.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const onnx::NodeProto& node = g_.node(i);
      if (smoothing_divisor(node))  // float whatever the rules say
        nq_[i].applied = {"$.weight_algorithms.smooth_quant_alpha"};
      else
        nq_[i] = cfg_.resolve(node.name(), node.op_type());
    }
    fused_.assign(static_cast<size_t>(n), false);
    report_.nodes.resize(static_cast<size_t>(n));
    plan_shared_ranges();
    plan_output_tail();
    plan_float_outputs();
    for (int i = 0; i < n; ++i) {
      plan_node(i);
      if (plan_ && report_.nodes[i].quantized) return std::move(report_);  // the answer plan_qdq asks
    }
    emit();
    quantize_bodies();
    return std::move(report_);
  }

  // A node of the report that is quantized (plan_qdq: the first), or null.
  static const NodeExplain* first_quantized(const QdqReport& r) {
    for (const auto& e : r.nodes)
      if (e.quantized) return &e;
    return nullptr;
  }

 private:
  // Every If/Loop/Scan body of this graph's nodes, with the same rules (their weights, and activations with the
  // ranges calibration observed inside the body), after this graph: a body may read this graph's names, never the
  // reverse, so its DQ and Q/DQ nodes and their initializers go inside the body.
  void quantize_bodies() {
    auto body_run = [&](onnx::GraphProto& body) {
      if (plan_ && first_quantized(report_)) return;  // planning stops at the first quantized node
      merge(QdqBuilder(g_.model(), body, g_, cfg_, ranges_, ambiguous_, sequences_, in_, plan_).run());
    };
    for (int i = 0; i < g_.node_count(); ++i)
      for (auto& a : *g_.node(i).mutable_attribute()) {
        if (a.has_g()) body_run(*a.mutable_g());
        for (auto& body : *a.mutable_graphs()) body_run(body);
      }
  }

  void merge(QdqReport b) {
    for (const auto& [op, k] : b.quantized_ops) report_.quantized_ops[op] += k;
    for (const auto& [op, k] : b.float_ops) report_.float_ops[op] += k;
    report_.qdq_pairs += b.qdq_pairs;
    report_.weights_quantized += b.weights_quantized;
    report_.biases_quantized += b.biases_quantized;
    const auto append = [](auto& to, auto& from) { std::move(from.begin(), from.end(), std::back_inserter(to)); };
    append(report_.nodes, b.nodes);
    append(report_.activation_tensors, b.activation_tensors);
    append(report_.weight_tensors, b.weight_tensors);
    append(report_.missing_ranges, b.missing_ranges);
    append(report_.unobserved_bodies, b.unobserved_bodies);
  }

  // Config names are checked against every graph of the model (a rule may name a node inside a body).
  void check_names() {
    std::vector<std::string> nodes, tensors;
    const auto collect = [&](const auto& self, const onnx::GraphProto& g) -> void {
      for (const auto& nd : g.node()) {
        nodes.push_back(nd.name());
        for (const auto& o : nd.output()) tensors.push_back(o);
        for (const auto& a : nd.attribute()) {
          if (a.has_g()) self(self, a.g());
          for (const auto& body : a.graphs()) self(self, body);
        }
      }
      for (const auto& in : g.input()) tensors.push_back(in.name());
      for (const auto& t : g.initializer()) tensors.push_back(t.name());
    };
    collect(collect, g_.proto());
    cfg_.check_names(nodes, tensors);
  }

  // Concat nodes whose output settings say shared_with_inputs: their output, their activation inputs and every
  // tensor linked to those through quantized pass-through ops (which keep their input's parameters) get one
  // range, the union of the members' calibrated ranges (the Concat's method), so that they share one scale and
  // zero point and the Concat copies integers instead of requantizing each input. Members that a rule gives a
  // fixed range or scale keep it (and then do not share).
  void plan_shared_ranges() {
    std::map<std::string, std::string> parent;
    const auto find = [&](std::string t) {
      while (parent.count(t) && parent[t] != t) t = parent[t] = parent[parent[t]];
      return t;
    };
    const auto unite = [&](const std::string& a, const std::string& b) {
      parent.emplace(a, a), parent.emplace(b, b);
      parent[find(a)] = find(b);
    };
    std::vector<std::pair<std::string, TensorSettings>> concats;  // output, its settings (method, percentile)
    for (int i = 0; i < g_.node_count(); ++i) {
      const auto& n = g_.node(i);
      const NodeQuant& q = nq_[i];
      if (!q.quantized || !q.output || !q.output->shared_with_inputs) continue;
      if (n.op_type() != "Concat")
        throw BadInputError(cfg_.source() + ": " + (q.applied.empty() ? std::string("$") : q.applied.back()) +
                            ".output.shared_with_inputs: applies to Concat only, but node '" + n.name() + "' is " +
                            n.op_type());
      for (const auto& in : n.input())
        if (!in.empty() && !g_.is_initializer(in)) unite(in, n.output(0));
      concats.emplace_back(n.output(0), *q.output);
    }
    if (concats.empty()) return;
    // Every quantized pass-through link, so chains of any length join (groups without a Concat are ignored).
    for (int i = 0; i < g_.node_count(); ++i) {
      const auto& n = g_.node(i);
      if (nq_[i].quantized && nq_[i].activation && op_role(n, &g_).kind == OpKind::PassThrough && n.input_size())
        for (const auto& out : n.output())
          if (!out.empty()) unite(n.input(0), out);
    }
    std::map<std::string, TensorSettings> settings_of;  // group root -> the Concat's output settings
    for (const auto& [out, settings] : concats) settings_of.emplace(find(out), settings);
    std::map<std::string, std::pair<double, double>> range_of_group;
    for (const auto& [t, unused] : parent) {
      const std::string root = find(t);
      const auto m = settings_of.find(root);
      if (m == settings_of.end()) continue;
      const auto r = range_of(t, m->second);
      if (!r) continue;
      auto [it, fresh] = range_of_group.emplace(root, *r);
      if (!fresh) it->second = {std::min(it->second.first, r->first), std::max(it->second.second, r->second)};
    }
    for (const auto& [t, unused] : parent)
      if (auto it = range_of_group.find(find(t)); it != range_of_group.end()) shared_range_[t] = it->second;
  }

  // Weightless ops (Add, Mul, Concat, Softmax, pools...) whose output no integer kernel reads stay float. A Q/DQ pair
  // on a tensor serves the integer kernels that read it (ONNX Runtime fuses DQ -> op -> Q); where every reader runs
  // in float (LayerNormalization, Erf, ReduceMean, contrib ops: no integer kernel in ORT 1.30 CPU), the pair only
  // rounds the tensor, and the op itself costs the same either way (QLinearAdd + DQ, or the inputs' DQ + Add).
  // Transformers: the residual stream (Add -> LayerNorm and the next residual Add) and the bias Adds feeding it, one
  // rounding each per block on the widest, outlier-prone tensor a per-tensor grid serves. Decided last reader first
  // (nodes in reverse topological order), so a chain of such Adds stays float as a whole. MatMul / Gemm are left to
  // their output rule (a float output fuses; plan_node), Conv keeps its output Q (QLinearConv has no float output).
  void plan_float_outputs() {
    float_out_.assign(static_cast<size_t>(g_.node_count()), false);
    for (int i = g_.node_count() - 1; i >= 0; --i) {
      const onnx::NodeProto& node = g_.node(i);
      const NodeQuant& q = nq_[i];
      if (!q.quantized || !q.activation || float_output_fuses(node)) continue;
      const OpRole role = op_role(node, &g_);
      const bool has_weight = role.weight_input >= 0 && role.weight_input < node.input_size() &&
                              g_.is_float_initializer(node.input(role.weight_input));
      if (role.kind != OpKind::Compute || has_weight) continue;
      // plan_node keeps these float anyway: no output Q at all (the rule before this one)
      if (!q.output || node.output_size() != 1 || g_.is_graph_output(node.output(0))) {
        float_out_[i] = true;
        continue;
      }
      if (!q.output->shared_with_inputs && no_integer_reader(node.output(0))) float_out_[i] = true;
    }
  }

  // True when no integer kernel reads t: each reader runs in float (a rule keeps its op float, or
  // plan_float_outputs does), takes t where it quantizes nothing (a shape, a bound, a Where condition, coordinates),
  // or passes it on (Reshape, Transpose..., Relu / Clip) to readers that all run in float. A graph output is read in
  // float; a read inside a subgraph is not known here (false).
  bool no_integer_reader(const std::string& t, int depth = 0) const {
    if (g_.used_by_subgraph(t) || depth > 8) return false;
    for (int c : g_.consumers(t)) {
      const onnx::NodeProto& n = g_.node(c);
      if (!nq_[c].quantized || !nq_[c].activation || float_out_[c]) continue;
      const OpRole role = op_role(n, &g_);
      if (role.kind != OpKind::Compute) {  // keeps input 0's parameters, or is fused into its producer
        if (n.input(0) != t) continue;     // t is a shape, axes or bound there: nothing quantizes it
        for (const auto& out : n.output())
          if (!out.empty() && !g_.is_graph_output(out) && !no_integer_reader(out, depth + 1)) return false;
        continue;
      }
      for (int k = 0; k < n.input_size(); ++k) {
        if (n.input(k) != t || is_coordinate_input(n, k)) continue;
        const auto& d = role.data_inputs;
        if (d.empty() || std::find(d.begin(), d.end(), k) != d.end() || k == role.weight_input) return false;
      }
    }
    return true;
  }

  // The output tail of the main graph: nodes after the last weighted layer on every path, whose outputs go only to
  // graph outputs or to other tail nodes (box decoding, score Sigmoids, the Concat that assembles a detector's
  // output, a final Softmax). A tail node without a weight gets no Q/DQ: graph outputs stay float, so nothing after
  // it reads integers, and every Q/DQ there would only round a value on its way to being dequantized for the output
  // (YOLOv8's pixel boxes went through 4 such roundings, the last on a 2.1-pixel grid: its one range covers every
  // stride's boxes). Those ops run over output-sized tensors, and float costs one elementwise pass, as the integer
  // op would. Weighted layers (Conv, MatMul, Gemm with a constant weight) and Relu/Clip fused into them end a tail.
  // Not in If/Loop/Scan bodies: their outputs feed the loop, not the user.
  void plan_output_tail() {
    const int n = g_.node_count();
    tail_.assign(static_cast<size_t>(n), false);
    if (g_.outer()) return;
    for (int i = n - 1; i >= 0; --i) {  // graph order is topological: readers come later
      const onnx::NodeProto& node = g_.node(i);
      const OpRole role = op_role(node, &g_);
      const bool weighted = role.kind == OpKind::Compute && role.weight_input >= 0 &&
                            role.weight_input < node.input_size() &&
                            g_.is_float_initializer(node.input(role.weight_input));
      if (weighted || role.kind == OpKind::Activation) continue;
      bool tail = node.output_size() > 0;
      for (const auto& o : node.output()) {
        if (o.empty()) continue;
        if (g_.used_by_subgraph(o)) tail = false;
        for (int c : g_.consumers(o))
          if (c <= i || !tail_[static_cast<size_t>(c)]) tail = false;
      }
      tail_[static_cast<size_t>(i)] = tail;
    }
  }

  // Settings for an activation tensor after the tensor-level override; nullopt = keep it float.
  std::optional<TensorSettings> tensor_settings(const std::string& t, TensorSettings s) const {
    if (const SettingsSlot* o = cfg_.checked_override(t, false)) {
      if (o->is_null) return std::nullopt;
      apply_patch(s, o->patch);
    }
    return s;
  }

  // Calibration saw NaN or ±inf in `t`: no scale and zero point can hold them (Q would turn a mask's -inf into a
  // finite value), so the tensor stays float whatever the rules say.
  bool held_non_finite(const std::string& t) const {
    const calib::TensorCalibration* c = ranges_.find(t);
    return c && (c->inf_count > 0 || c->nan_count > 0);
  }
  // A value that holds integers by construction: an integer initializer or graph input, the output of an op that
  // yields indices or sizes (Shape, ArgMax, NonZero, TopK's indices, ...) or of a Cast to an integer type, or
  // integer arithmetic and data movement on such values (Range, Add, Sub, Abs, Where, Reshape, Gather, ...).
  bool integer_value(const std::string& v, int depth = 0) const {
    if (v.empty() || depth > 8) return false;
    auto integer_type = [](int64_t t) {
      using T = onnx::TensorProto;
      return t == T::INT8 || t == T::UINT8 || t == T::INT16 || t == T::UINT16 || t == T::INT32 || t == T::UINT32 ||
             t == T::INT64 || t == T::UINT64;
    };
    if (const onnx::TensorProto* init = g_.initializer(v)) return integer_type(init->data_type());
    if (g_.is_graph_input(v)) {
      for (const auto& in : g_.proto().input())
        if (in.name() == v) return integer_type(in.type().tensor_type().elem_type());
      return false;
    }
    const int p = g_.producer(v);
    if (p < 0) return false;
    const onnx::NodeProto& n = g_.node(p);
    if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
    const std::string& op = n.op_type();
    if (op == "Cast") return integer_type(attr_int(n, "to", 0));
    if (op == "Shape" || op == "Size" || op == "ArgMax" || op == "ArgMin" || op == "NonZero" ||
        op == "NonMaxSuppression" || (op == "TopK" && n.output_size() > 1 && n.output(1) == v))
      return true;
    static const std::set<std::string> kAllInputs = {"Range", "Add", "Sub", "Mul", "Min", "Max", "Mod", "Concat"};
    static const std::set<std::string> kFirstInput = {"Neg",   "Abs",   "Reshape", "Squeeze", "Unsqueeze", "Expand",
                                                      "Tile",  "Slice", "Gather",  "Flatten", "Transpose", "Identity",
                                                      "CumSum"};
    // Data inputs only: Where's condition and the index / shape inputs of data movement make no values.
    int first = 0, last = 1;
    if (op == "Where")
      first = 1, last = 3;
    else if (kAllInputs.count(op))
      last = n.input_size();
    else if (!kFirstInput.count(op))
      return false;
    if (n.input_size() < last) return false;
    for (int k = first; k < last; ++k)
      if (!n.input(k).empty() && !integer_value(n.input(k), depth + 1)) return false;
    return true;
  }

  // A Cast to float of an integer value: positions, distances, token ids, counts, as exports compute position
  // embeddings at run time (T5's relative position buckets: log of the distance, then Cast back to an index;
  // rotary angles: position times frequency, then Sin / Cos). One 8-bit grid over [0, T) holds few of these
  // integers exactly (step T / 255): rounding moves a value by up to half a step, which moves it across an index
  // boundary (a different bucket: T5 at distance 16, where log2(16/8)·8/4 = 2 exactly) or scales into radians of
  // angle, and a sequence longer than calibration's clips. Such tensors stay float (as does the arithmetic that reads
  // only them, for want of a quantized input); they are position-sized, not activation-sized, so this costs nothing.
  bool cast_of_integer(const std::string& t) const {
    const int p = g_.producer(t);
    if (p < 0) return false;
    const onnx::NodeProto& n = g_.node(p);
    return (n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == "Cast" && n.input_size() == 1 &&
           integer_value(n.input(0));
  }

  std::string no_range_reason(const std::string& t) const {
    if (sequences_.count(t)) return "input " + t + " is a sequence of tensors: it stays float";
    if (ambiguous_.count(t))
      return "input " + t + " is defined in more than one graph (If/Loop/Scan bodies): it stays float";
    if (cast_of_integer(t))
      return "input " + t + " holds integers cast to float (positions, indices): it stays float";
    return held_non_finite(t) ? "input " + t + " held ±inf or NaN during calibration: it stays float"
                              : "no calibration range for input " + t;
  }

  // add_window = false: without add_input_window (which asks the Add outputs' own parameters that way, so that it
  // never recurses down a chain of Adds; their range is then at least as wide, and the window only wider).
  std::optional<QParams> act_params(const std::string& t, const TensorSettings& base, bool add_window = true) const {
    auto s = tensor_settings(t, base);
    if (!s || held_non_finite(t) || ambiguous_.count(t) || sequences_.count(t) || cast_of_integer(t))
      return std::nullopt;
    if (s->scale) {
      return fixed_params(*s->scale, *s->zero_point, s->dtype);
    }
    std::optional<std::pair<double, double>> r = s->range;
    if (!r)
      if (auto it = shared_range_.find(t); it != shared_range_.end()) r = it->second;
    if (!r) {
      r = range_of(t, *s);
      if (!r) return std::nullopt;
      if (const auto floor = softmax_floor(t, *s)) r->first = std::max(r->first, std::min(*floor, r->second));
      if (const auto ceiling = softmax_output_ceiling(t, *s)) r->second = std::max(r->second, *ceiling);
      // A tensor read only by a clamp (Min/Clip with constant bounds) needs no more range than the clamp's
      // output: quantizing with that range clips nothing the clamp would not, and resolves values finer.
      const auto& cons = g_.consumers(t);
      if (cons.size() == 1 && !g_.is_graph_output(t) && is_const_clamp(cons[0]))
        if (auto out = range_of(g_.node(cons[0]).output(0), *s))
          r = std::make_pair(std::max(r->first, out->first), std::min(r->second, out->second));
      if (const auto w = add_window ? add_input_window(t) : std::nullopt)
        r = std::make_pair(std::max(r->first, std::min(w->first, r->second)),
                           std::min(r->second, std::max(w->second, r->first)));
    }
    return params_from_range(r->first, r->second, *s);
  }

  // Softmax inputs (calibration recorded their smallest row maximum m and row length n, calib::SoftmaxRows): a value
  // more than W = ln(n) + (b + 1)·ln 2 below its row's maximum moves no b-bit Softmax output by more than half a
  // step of [0, 1], even with all n - 1 others that low (n·e^-W = 2^-(b+1)). So the range needs nothing below
  // m - W: mask fills (-1e4, -1e9, the float minimum) no longer set it, and the levels go to the values that count.
  std::optional<double> softmax_floor(const std::string& t, const TensorSettings& s) const {
    const calib::TensorCalibration* c = ranges_.find(t);
    const auto& info = dtype_info(s.dtype);
    if (!c || !c->softmax_rows || info.cls != DTypeClass::Integer) return std::nullopt;
    const double n = static_cast<double>(std::max<int64_t>(c->softmax_rows->row_length, 1));
    return c->softmax_rows->min_row_max - (std::log(n) + (info.bits + 1) * std::log(2.0));
  }

  // A tensor b read only by quantized Adds y = a + b whose outputs get their own Q/DQ on [y_lo, y_hi] (a in
  // [a_lo, a_hi]): a value of b below y_lo - a_hi makes every sum fall below y_lo, where the output's Q saturates
  // anyway, and one above y_hi - a_lo every sum rise above y_hi; so b's range needs nothing outside
  // [y_lo - a_hi, y_hi - a_lo] (the union over its Adds), and no output value changes: clamp_add_constant's rule
  // for a constant operand, applied to an activation's range. Such values are mask fills:
  // an attention mask computed at run time (Hugging Face fills with the float32 minimum) added to the scores before
  // a Softmax, whose input window (softmax_floor) then bounds y. Without the window, b's step would be ~1e36 and ONNX
  // Runtime's QLinearAdd, which computes zp_y - (s_a/s_y)·zp_a - (s_b/s_y)·zp_b + (s_a/s_y)·q_a + (s_b/s_y)·q_b in
  // float32 (MLAS qladd.cpp), loses every unmasked score to cancellation or overflow (a 2-layer KV-cache decoder:
  // logits 31 -> 14 dB in ORT while qtool's Q/DQ simulation stayed exact; tests/quantize/kv_cache_decoder.py).
  // a's and y's ranges are those of their grids ([qmin - z, qmax - z]·s), as act_params gives them without their
  // own windows (so that no chain of Adds recurses): as wide as the grids they get, or wider, to within a step.
  std::optional<std::pair<double, double>> add_input_window(const std::string& t) const {
    const auto& cons = g_.consumers(t);
    if (cons.empty() || g_.is_graph_output(t)) return std::nullopt;
    std::optional<std::pair<double, double>> w;
    for (int c : cons) {
      const auto& n = g_.node(c);
      const NodeQuant& q = nq_[c];
      if (n.op_type() != "Add" || n.input_size() != 2 || n.input(0) == n.input(1) || !q.quantized || !q.activation ||
          !q.output || float_out_[c])
        return std::nullopt;
      const std::string& y = n.output(0);
      const auto& ycons = g_.consumers(y);
      if (g_.is_graph_output(y) || (ycons.size() == 1 && fusable_activation(ycons[0]))) return std::nullopt;
      const std::string& a = n.input(n.input(0) == t ? 1 : 0);
      const auto ap = g_.is_initializer(a) ? std::nullopt : act_params(a, *q.activation, false);
      const auto yp = act_params(y, *q.output, false);
      if (!ap || !yp) return std::nullopt;
      const auto ar = grid_range(*ap), yr = grid_range(*yp);
      if (!ar || !yr) return std::nullopt;
      const double lo = yr->first - ar->second, hi = yr->second - ar->first;
      w = w ? std::make_pair(std::min(w->first, lo), std::max(w->second, hi)) : std::make_pair(lo, hi);
    }
    return w;
  }

  // The values a per-tensor grid can represent: [(qmin - z)·s, (qmax - z)·s] of its dtype; nullopt per axis.
  static std::optional<std::pair<double, double>> grid_range(const QParams& p) {
    if (p.scale.numel() != 1) return std::nullopt;
    const auto& info = dtype_info(p.dtype());
    const double s = p.scales()[0], z = static_cast<double>(p.zero_points()[0]);
    return std::make_pair((static_cast<double>(info.qmin) - z) * s, (static_cast<double>(info.qmax) - z) * s);
  }

  // Softmax outputs in 8 bits, for ONNX Runtime: ORT fuses DQ -> Softmax -> Q into QLinearSoftmax, whose kernel
  // (contrib_ops/cpu/quantization/qlinear_softmax.cc) scales an exp lookup table to about 2^32 / (e^5·n) for rows of
  // length n and multiplies it by ⌊1 / y_scale⌋ before dividing by the row sum; past 1 / y_scale ≈ e^5·n the
  // product overflows and every output reads 0 (found with tests/quantize/zoo.py: a 4-class segmentation Softmax,
  // calibrated maximum 0.31, 1 / y_scale = 829). The top of the range is raised to 2/n (1 / y_scale ≤ 127.5·n for
  // 255 steps), capped at 1: it binds only for short, near-uniform rows (n = 4: 0.5; n = 100: 0.02) and costs them at
  // most one bit.
  std::optional<double> softmax_output_ceiling(const std::string& t, const TensorSettings& s) const {
    const int p = g_.producer(t);
    if (p < 0 || g_.node(p).op_type() != "Softmax") return std::nullopt;
    const auto& info = dtype_info(s.dtype);
    const calib::TensorCalibration* c = ranges_.find(g_.node(p).input(0));
    if (info.cls != DTypeClass::Integer || info.bits != 8 || !c || !c->softmax_rows) return std::nullopt;
    return std::min(1.0, 2.0 / static_cast<double>(std::max<int64_t>(c->softmax_rows->row_length, 1)));
  }

  // The calibrated range of `t` for the method of `s`; nullopt when the table has no finite value of `t`.
  // BadInputError when the table has data for `t` but did not record the method (no silent fallback).
  // Method percentile with a percentile the rule sets: selected from t's histogram at that percentile (the table's
  // own range when the table was calibrated at that percentile); BadInputError when the table holds no histogram.
  // Planning (plan_qdq): every tensor has the finite range [-1, 1].
  std::optional<std::pair<double, double>> range_of(const std::string& t, const TensorSettings& s) const {
    if (plan_) return std::make_pair(-1.0, 1.0);
    const RangeMethod method = s.method;
    const calib::TensorCalibration* c = ranges_.find(t);
    if (!c || !c->minmax) return std::nullopt;
    const auto it = c->ranges.find(method);
    if (method == RangeMethod::Percentile && s.percentile &&
        !(*s.percentile == ranges_.settings.percentile && it != c->ranges.end())) {
      if (!c->histogram.empty()) {
        const calib::Range r = calib::select_percentile(c->histogram, *s.percentile);
        return std::make_pair(r.lo, r.hi);
      }
      if (it != c->ranges.end()) {
        char p[32];
        std::snprintf(p, sizeof p, "%.9g", *s.percentile);
        throw BadInputError("the calibration table has no histogram for tensor '" + t + "', which the rule's " +
                            "\"percentile\": " + p + " is selected from (it holds one range per method: a TensorRT " +
                            "cache, or a table without histograms): re-run qtool calibrate on the model, or drop " +
                            "\"percentile\" from the rule to use the table's percentile range");
      }
    }
    if (it != c->ranges.end()) return std::make_pair(it->second.lo, it->second.hi);
    if (method == RangeMethod::MinMax) return std::make_pair(c->minmax->lo, c->minmax->hi);
    calib::RangeMethods wanted = ranges_.settings.methods;
    wanted.insert(method);
    throw BadInputError("the calibration table has no '" + std::string(calib::range_method_name(method)) +
                        "' range for tensor '" + t + "' (it recorded " +
                        calib::range_methods_str(ranges_.settings.methods) +
                        "): re-run qtool calibrate with --methods " + calib::range_methods_str(wanted));
  }

  bool is_const_clamp(int c) const {
    const auto& n = g_.node(c);
    if (n.op_type() != "Min" && n.op_type() != "Clip") return false;
    for (int k = 1; k < n.input_size(); ++k)
      if (!n.input(k).empty() && !g_.is_initializer(n.input(k))) return false;
    return n.op_type() == "Clip" || n.input_size() == 2;
  }

  void keep_float(int i, const std::string& why) {
    auto& e = report_.nodes[i];
    e.quantized = false;
    e.note = why;
  }

  // Weight input k of node i -> integer initializer + DequantizeLinear; nullopt when it stays float.
  // `value`: the weight already decoded by the caller (decoded here when null).
  std::optional<QParams> quantize_weight(int i, int k, const NodeQuant& q, const Tensor* bias = nullptr,
                                         std::optional<float> input_scale = std::nullopt,
                                         const Tensor* value = nullptr) {
    const std::string name = g_.node(i).input(k);
    const std::optional<TensorSettings> wset = weight_settings(cfg_, q, name);
    if (!wset || !g_.is_float_initializer(name)) return std::nullopt;
    const Tensor w = value ? *value : g_.initializer_tensor(name);
    TensorSettings ws = *wset;
    // Planning (plan_qdq): the rounding algorithm decides no node's fate, and GPTQ / AWQ would need samples.
    if (plan_) ws.algorithm = WeightAlgorithm::Rtn;
    int64_t axis = -1;
    if (ws.granularity != Granularity::PerTensor) {
      axis = ws.axis                                     ? *ws.axis
             : ws.granularity == Granularity::PerChannel ? weight_channel_axis(g_.node(i), w.rank())
                                                         : weight_block_axis(g_.node(i), w.rank());
      if (axis < 0 && ws.axis) axis += w.rank();
      if (axis < 0 || axis >= w.rank()) ws.granularity = Granularity::PerTensor, axis = -1;
    }
    const onnx::NodeProto& node = g_.node(i);
    WeightInput in{w, ws, axis};
    in.threads = in_.threads;
    if (ws.saturation_safe)
      in.pair_sums = u8s8_pair_sums(node, w, ws.granularity == Granularity::PerChannel ? axis : -1);
    if (needs_layer_inputs(ws.algorithm)) {
      const std::string algo = "\"algorithm\": \"" + std::string(weight_algorithm_name(ws.algorithm)) + "\"";
      const bool layer = (node.op_type() == "MatMul" || node.op_type() == "Gemm") && k == 1 && w.rank() == 2;
      const bool conv = node.op_type() == "Conv" && k == 1 && w.rank() == 4 && ws.algorithm == WeightAlgorithm::Gptq;
      if (!layer && !conv)
        throw BadInputError("node '" + node.name() + "' (" + node.op_type() + "): " + algo + " applies to " +
                            (ws.algorithm == WeightAlgorithm::Gptq ? "2-D MatMul/Gemm and 2-D Conv weights"
                                                                    : "2-D MatMul/Gemm weights") +
                            "; use \"clip_search\" or \"rtn\" for this node's weight");
      if (ws.algorithm == WeightAlgorithm::Awq && (q.activation || attr_int(node, "transA", 0) != 0))
        throw BadInputError("node '" + node.name() + "' (" + node.op_type() + "): " + algo + " scales the layer's " +
                            "input by a Mul, so it applies to weight-only rules (\"activation\": null) and Gemm " +
                            "without transA; use \"gptq\" here");
      // A conv's patch Hessians are keyed by its weight (conv_gptq.h), a MatMul/Gemm's by its data input.
      const LayerHessian* h = in_.hessians ? in_.hessians->find(conv ? name : node.input(0)) : nullptr;
      if (!h)
        throw BadInputError("node '" + node.name() + "': " + algo + " needs the layer's calibration inputs: " +
                         "run qtool quantize with --data (or --random)");
      in.k_axis = conv ? 1 : weight_block_axis(node, w.rank());
      in.hessian = h;
    }
    WeightResult r = quantize_weight_values(in);
    QParams& p = r.params;
    if (bias && input_scale && q.bias && p.block_size == 0) {
      const std::vector<float> before = p.scales();
      widen_for_bias(p, *bias, *input_scale);
      if (p.scales() != before) r.codes = quantize_tensor(w, p, ws.rounding);
    }
    std::optional<ScaleCodes> scale_codes;
    if (ws.scale_bits > 0) {
      if (p.block_size == 0 || w.rank() != 2)
        throw BadInputError("node '" + node.name() + "' (" + node.op_type() + "): \"scale_bits\" double-quantizes the " +
                            "scales of per_block 2-D weights; give this weight \"granularity\": \"per_block\" or " +
                            "drop scale_bits");
      scale_codes = double_quantize_scales(p, r.codes, ws.scale_bits, ws.scale_block_size);
    }
    if (r.input_scale) {  // AWQ: x W = (x * input_scale) (W / input_scale)
      const std::string x = g_.node(i).input(0);
      const std::string sn = g_.unique_name(name + "_awq_input_scale");
      const std::string out = g_.unique_name(x + "_awq_scaled");
      g_.set_initializer(sn, *r.input_scale);
      onnx::NodeProto mul;
      mul.set_op_type("Mul");
      mul.set_name(g_.unique_name(name + "_awq_Mul"));
      mul.add_input(x);
      mul.add_input(sn);
      mul.add_output(out);
      g_.insert_before(i, std::move(mul));
      g_.node(i).set_input(0, out);
    }
    const std::string dq = add_const_dq(name, std::move(r.codes), p, i, scale_codes ? &*scale_codes : nullptr);
    g_.node(i).set_input(k, dq);
    ++report_.weights_quantized;
    report_.weight_tensors.push_back(name);
    TensorExplain te = explain(name, "weight", p);
    te.algorithm = weight_algorithm_name(ws.algorithm);
    te.metric = r.metric;
    te.error = r.error;
    report_.nodes[i].tensors.push_back(std::move(te));
    return p;
  }

  // A node of a model that already holds Q/DQ (quantization-aware training exports, a quantized model given
  // again): it is left as it is.
  bool in_qdq_form(const onnx::NodeProto& node) const {
    auto is = [&](int n, const char* op) {
      return n >= 0 && g_.node(n).op_type() == op && (g_.node(n).domain().empty() || g_.node(n).domain() == "ai.onnx");
    };
    for (const auto& in : node.input())
      if (!in.empty() && is(g_.producer(in), "DequantizeLinear")) return true;
    for (const auto& out : node.output())
      if (!out.empty())
        for (int c : g_.consumers(out))
          if (is(c, "QuantizeLinear")) return true;
    return false;
  }

  // A value that is the integer result of an already-quantized op (onnx/quantized_ops.h, integer_result: ONNX
  // Runtime's QOperator and dynamic formats, MatMulInteger, ConvInteger, QLinearConv, DynamicQuantizeLinear's scale
  // and zero point, ...) or the arithmetic
  // that dequantizes one (a Cast, or a Mul by such a value: y = float(acc) * (a_scale * b_scale), as ORT's dynamic
  // quantizer writes it). Re-quantizing it would round an exact integer accumulator, or a runtime scale, to 8 bits.
  bool integer_derived(const std::string& value, int depth = 0) const {
    const int p = value.empty() ? -1 : g_.producer(value);
    if (p < 0) return false;
    const onnx::NodeProto& n = g_.node(p);
    if (const onnxio::QuantizedOp* q = onnxio::quantized_op(n); q && q->integer_result) return true;
    const bool ort_domain = n.domain().empty() || n.domain() == "ai.onnx" || n.domain() == "com.microsoft";
    if (depth >= 4 || !ort_domain || (n.op_type() != "Cast" && n.op_type() != "Mul")) return false;
    for (const auto& in : n.input())
      if (integer_derived(in, depth + 1)) return true;
    return false;
  }

  void plan_node(int i) {
    const onnx::NodeProto& node = g_.node(i);
    NodeExplain& e = report_.nodes[i];
    e.node = node.name().empty() && node.output_size() ? "(" + node.output(0) + ")" : node.name();
    e.op_type = node.op_type();
    e.rules = nq_[i].applied;
    const NodeQuant& q = nq_[i];
    if (smoothing_divisor(node))
      return keep_float(i,
                        "smoothing divisor (weight_algorithms.smooth_quant_alpha): divides its input by s per "
                        "channel in float; the MatMul / Gemm weights after it hold s");
    if (!q.quantized) return keep_float(i, "rule keeps it float");
    if (in_qdq_form(node))
      return keep_float(i, "already in Q/DQ form (reads a DequantizeLinear output or feeds a QuantizeLinear): "
                           "quantizing it again would round twice");
    for (const auto& in : node.input())
      if (integer_derived(in))
        return keep_float(i, "reads " + in + ", the integer result of an already-quantized op or its dequantization: "
                             "quantizing it again would round an exact accumulator or a runtime scale");
    const OpRole role = op_role(node, &g_);
    if (!q.activation) {  // weight-only quantization (e.g. int4 / fp8 weights): no activation Q/DQ
      if (role.weight_input < 0 || role.weight_input >= node.input_size() || !quantize_weight(i, role.weight_input, q))
        return keep_float(i, "activation: null and no weight to quantize");
      e.quantized = true;
      e.note = "weight only";
      return;
    }

    if (role.kind == OpKind::Activation) {
      if (!fused_[i])
        return keep_float(i, "not after a quantized node (a standalone " + node.op_type() + " stays float)");
      const std::string& out = node.output(0);
      TensorSettings os = q.output ? *q.output : *q.activation;
      auto p = act_params(out, os);
      if (!p || output_values(out)) return keep_float(i, "its output is kept float");
      if (read_as_coordinates(out)) return keep_float(i, kCoordinatesNote);
      add_act(out, *p);
      made_as_integers_.insert(out);
      e.quantized = true;
      e.note = "fused: its producer's output has no Q/DQ";
      return;
    }

    if (role.kind == OpKind::PassThrough) {
      const std::string& in = node.input(0);
      auto it = act_.find(in);
      if (it == act_.end()) return keep_float(i, "input " + in + " is not quantized");
      const QParams p = it->second.params;
      for (const auto& out : node.output())
        if (!out.empty() && !g_.is_graph_output(out) && tensor_settings(out, *q.activation) &&
            !read_as_coordinates(out)) {
          add_act(out, p);
          made_as_integers_.insert(out);
        }
      e.quantized = true;
      e.note = "pass-through: output keeps the input's scale and zero point";
      return;
    }

    // A weightless op whose output gets no Q (a graph output, or "output": null) has no integer form in ONNX
    // Runtime (DQ -> op -> Q is what it fuses): quantizing its inputs would only add error.
    const bool has_weight = role.weight_input >= 0 && role.weight_input < node.input_size() &&
                            g_.is_float_initializer(node.input(role.weight_input));
    if (!has_weight && (!q.output || node.output_size() != 1 || output_values(node.output(0))))
      return keep_float(i, "no weight and its output is not quantized: float is as fast and exact");
    const bool coordinates_out = node.output_size() == 1 && read_as_coordinates(node.output(0));
    if (!has_weight && coordinates_out) return keep_float(i, kCoordinatesNote);
    if (!has_weight && tail_[static_cast<size_t>(i)])
      return keep_float(i, "output tail: only graph outputs (through float ops) read its result, so a Q/DQ would "
                           "only round it");

    if (float_out_[i])  // plan_float_outputs
      return keep_float(i, "no integer kernel reads its output (its readers run in float): a Q/DQ pair would only "
                           "round it, and the op costs the same in float");
    if (plan_rescale(i, q)) return;
    if (!has_weight && is_elementwise_arithmetic(node) && inputs_made_in_float(node, role))
      return keep_float(i,
                        "its inputs are made in float (no integer kernel produces them): as an integer op it would "
                        "round each input and its constants first; float costs the same, and its integer readers' "
                        "Q/DQ goes on its output");
    if (!has_weight && is_elementwise_arithmetic(node))
      if (const auto why = spread_io(node)) return keep_float(i, *why);

    // Compute ops: every data input must be quantizable.
    std::vector<int> data = role.data_inputs;
    if (data.empty())
      for (int k = 0; k < node.input_size(); ++k) data.push_back(k);
    if (role.weight_input >= 0 && std::find(data.begin(), data.end(), role.weight_input) == data.end())
      data.push_back(role.weight_input);
    struct Plan {
      int index;
      std::string name;
      enum { Act, Weight, Const } kind;
      std::optional<QParams> params;
      std::optional<Tensor> value;  // Weight and Const: the initializer, decoded once
    };
    std::vector<Plan> plans;
    for (int k : data) {
      if (k >= node.input_size() || node.input(k).empty()) continue;
      if (is_coordinate_input(node, k)) continue;  // stays float (op_roles.h)
      const std::string& t = node.input(k);
      if (g_.is_initializer(t)) {
        if (!g_.is_float_initializer(t)) return keep_float(i, "input " + t + " is not float");
        Tensor value = g_.initializer_tensor(t);
        if (!all_finite(value)) return keep_float(i, "constant " + t + " holds ±inf or NaN: no integer grid holds it");
        if (k == role.weight_input) {
          plans.push_back({k, t, Plan::Weight, std::nullopt, std::move(value)});
        } else {
          if (const SettingsSlot* o = cfg_.tensor_override(t); o && o->is_null) continue;  // stays float
          plans.push_back({k, t, Plan::Const, std::nullopt, std::move(value)});
        }
        continue;
      }
      std::optional<QParams> p;
      if (auto it = act_.find(t); it != act_.end())
        p = it->second.params;
      else
        p = act_params(t, *q.activation);
      if (!p) {
        if (!tensor_settings(t, *q.activation)) continue;  // the config keeps this tensor float
        if (!ranges_.tensors.empty() && !ranges_.find(t) && !body_unobserved_) report_.missing_ranges.push_back(t);
        return keep_float(i, no_range_reason(t));
      }
      plans.push_back({k, t, Plan::Act, p, std::nullopt});
    }
    if (node.op_type() == "Concat" && q.output && !q.output->shared_with_inputs)
      if (auto why = mixed_concat(plans)) return keep_float(i, *why);
    // Commit.
    onnx::NodeProto& mnode = g_.node(i);
    std::optional<float> input_scale;
    std::vector<float> weight_scales;
    for (auto& pl : plans) {
      if (pl.kind == Plan::Act) {
        add_act(pl.name, *pl.params);
        if (pl.index == 0) input_scale = pl.params->scales()[0];
        e.tensors.push_back(explain(pl.name, "input", *pl.params));
      }
    }
    for (auto& pl : plans) {
      if (pl.kind == Plan::Weight) {
        std::optional<Tensor> bias;
        if (role.bias_input >= 0 && role.bias_input < node.input_size() &&
            g_.is_float_initializer(node.input(role.bias_input)))
          bias = g_.initializer_tensor(node.input(role.bias_input));
        if (auto p = quantize_weight(i, pl.index, q, bias ? &*bias : nullptr, input_scale, &*pl.value))
          weight_scales = p->scales();
      } else if (pl.kind == Plan::Const) {
        const Tensor c = clamp_add_constant(i, plans, *pl.value, q);
        const QParams p = weight_params(
            c,
            [&] {
              TensorSettings s = *q.activation;
              s.granularity = Granularity::PerTensor;
              return s;
            }(),
            -1);
        const std::string dq = add_const_dq(pl.name, quantize_tensor(c, p), p, i);
        mnode.set_input(pl.index, dq);
        e.tensors.push_back(explain(pl.name, "constant", p));
        report_.weight_tensors.push_back(pl.name);
      }
    }
    // Bias: int32 with scale s_input * s_weight.
    if (role.bias_input >= 0 && q.bias && input_scale && !weight_scales.empty() &&
        role.bias_input < node.input_size() && g_.is_float_initializer(node.input(role.bias_input))) {
      const std::string b = node.input(role.bias_input);
      const Tensor bt = g_.initializer_tensor(b);
      const bool per_col = bt.rank() == 1 && (weight_scales.size() == 1 || bt.numel() == (int64_t)weight_scales.size());
      if (per_col) {
        const QParams bp = bias_params(*input_scale, weight_scales, bt.numel());
        if (auto qb = quantize_bias(bt, bp)) {
          const std::string dq = add_const_dq(b, *qb, bp, i);
          g_.node(i).set_input(role.bias_input, dq);
          ++report_.biases_quantized;
          e.tensors.push_back(explain(b, "bias", bp));
        } else {
          e.note = "bias " + b + " kept float: it exceeds int32 at scale s_input * s_weight";
        }
      }
    }
    if (e.tensors.empty())
      return keep_float(i, "every input of it is kept float (\"tensors\" overrides, or the accuracy guard)");
    // Output.
    if (q.output && node.output_size() == 1) {
      const std::string& out = node.output(0);
      const auto& cons = g_.consumers(out);
      if (coordinates_out) {
        e.note = kCoordinatesNote;
      } else if (float_output_fuses(node) &&
                 (read_only_by_contrib_ops(out) || (no_integer_reader(out) && !read_by_bias_add(node)))) {
        // Before the fused activation: a MatMul -> Relu whose output only float ops read (a smoothing divisor)
        // keeps both float, as without the Relu.
        e.note = "output kept float: only ops that run in float read it (ORT runs DQ -> " + node.op_type() +
                 " with a float output as one integer kernel)";
      } else if (!output_values(out) && cons.size() == 1 && fusable_activation(cons[0])) {
        fused_[cons[0]] = true;
        e.note = "output quantized after " + g_.node(cons[0]).op_type();
      } else if (!output_values(out)) {
        if (auto p = act_params(out, *q.output)) {
          add_act(out, *p);
          made_as_integers_.insert(out);
          e.tensors.push_back(explain(out, "output", *p));
        }
      }
    }
    if (q.output && q.output->shared_with_inputs && shared_range_.count(node.output(0))) {
      const auto [lo, hi] = shared_range_.at(node.output(0));
      e.note = "inputs and output share one range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    }
    e.quantized = true;
  }

  // Mul(x, c), c one positive finite constant, x quantized per tensor with (s, z): c·DQ(q; s, z) = (q - z)·c·s =
  // DQ(q; c·s, z) exactly, so y = c·x is x's own integers read with the scale c·s: no Mul and no QuantizeLinear of
  // its own. Node i becomes that DequantizeLinear (emit()). Why: ONNX Runtime has no kernel that folds a constant
  // factor into its neighbours, so DQ -> Mul -> Q runs as a QLinearMul pass over the whole tensor that also rounds
  // c·x to y's grid a second time (PP-LCNetV3, the backbone of PP-OCRv4 det and rec, scales every conv and
  // activation output by a learnable scalar, and HardSwish divides by 6: ppocrv4-det has 39 such Muls, 7 % of its
  // int8 time in ORT 1.30). ORT fuses the consumers of the new DequantizeLinear as before (QLinearAdd ...): a
  // QuantizeLinear read by DequantizeLinears with different scales is valid QDQ. Not for c <= 0 (the integers would
  // have to be negated: a pass again), a y that the rules give other settings than x (dtype, symmetry, a fixed
  // range or scale), a y quantized after a fused Relu/Clip, one in a Concat's shared range, a graph output, or one
  // read inside a subgraph (the name y disappears). A constant of rank r broadcasts x up to rank r: x's recorded shape
  // must have at least r dimensions. For "target": "ort-cpu" only: the reason is ONNX Runtime's (TensorRT fuses a
  // constant Mul into its neighbouring kernels itself).
  bool plan_rescale(int i, const NodeQuant& q) {
    const auto& n = g_.node(i);
    if (cfg_.target() != Target::OrtCpu || n.op_type() != "Mul" || n.input_size() != 2 || n.output_size() != 1 ||
        !q.output)
      return false;
    const bool c0 = g_.is_float_initializer(n.input(0)), c1 = g_.is_float_initializer(n.input(1));
    if (c0 == c1 || g_.is_initializer(n.input(c0 ? 1 : 0))) return false;
    const std::string &x = n.input(c0 ? 1 : 0), &cname = n.input(c0 ? 0 : 1), &y = n.output(0);
    const std::optional<float> c = g_.scalar_float_initializer(cname);
    if (!c || !(*c > 0.0f) || !std::isfinite(*c)) return false;
    if (const int64_t rank = g_.initializer_tensor(cname).rank(); rank > 0) {
      const calib::TensorCalibration* cx = ranges_.find(x);
      if (!cx || static_cast<int64_t>(cx->shape.size()) < rank) return false;  // unknown, or x broadcasts up
    }
    if (g_.is_graph_output(y) || g_.used_by_subgraph(y) || shared_range_.count(y)) return false;
    const auto& cons = g_.consumers(y);
    if (cons.size() == 1 && fusable_activation(cons[0])) return false;
    const auto xs = tensor_settings(x, *q.activation), ys = tensor_settings(y, *q.output);
    if (!xs || !ys || ys->scale || ys->range || ys->dtype != xs->dtype || ys->symmetric != xs->symmetric ||
        !act_params(y, *q.output))
      return false;
    std::optional<QParams> px;
    if (auto it = act_.find(x); it != act_.end())
      px = it->second.params;
    else
      px = act_params(x, *q.activation);
    if (!px || px->scale.numel() != 1 || px->dtype() != ys->dtype) return false;
    QParams py = *px;
    py.scale = px->scale.clone();
    const double s = static_cast<double>(px->scales()[0]) * static_cast<double>(*c);
    py.scale.data<float>()[0] = static_cast<float>(s);
    if (!std::isnormal(py.scale.data<float>()[0])) return false;
    add_act(x, *px);
    add_act(y, py);
    made_as_integers_.insert(y);
    rescale_[y] = {i, x};
    NodeExplain& e = report_.nodes[i];
    e.tensors.push_back(explain(x, "input", *px));
    e.tensors.push_back(explain(y, "output", py));
    e.quantized = true;
    e.note = "rescale: becomes a DequantizeLinear of the input's integers with scale c·s (no Mul pass)";
    return true;
  }

  // Add(x, C) whose output gets a range [lo, hi]: an element of C below lo - x_hi (above hi - x_lo) sends every sum
  // below lo (above hi), where the output's QuantizeLinear saturates anyway; so C is clipped to
  // [lo - x_hi, hi - x_lo] first, exactly, with x's range the one its own Q/DQ can represent. Without it a mask
  // fill (-1e4, -1e9) sets C's grid: every real entry then shares one step of millions, and ONNX Runtime's fused
  // QLinearAdd loses the sum (measured: a masked attention block from 32 dB to 3.5 dB against float).
  template <class Plans>
  Tensor clamp_add_constant(int i, const Plans& plans, Tensor c, const NodeQuant& q) const {
    const auto& node = g_.node(i);
    if (node.op_type() != "Add" || !q.output || node.output_size() != 1 || g_.is_graph_output(node.output(0)))
      return c;
    const QParams* x = nullptr;
    for (const auto& pl : plans)
      if (pl.params) {
        if (x) return c;  // two activation inputs: not a constant operand
        x = &*pl.params;
      }
    const auto out = x ? act_params(node.output(0), *q.output) : std::nullopt;
    const auto xr = x ? grid_range(*x) : std::nullopt;
    const auto outr = out ? grid_range(*out) : std::nullopt;
    if (!xr || !outr) return c;
    const auto [xlo, xhi] = *xr;
    const auto [olo, ohi] = *outr;
    Tensor clipped = c.clone();
    float* d = clipped.data<float>();
    for (int64_t k = 0; k < clipped.numel(); ++k)
      d[k] = static_cast<float>(std::clamp(static_cast<double>(d[k]), olo - xhi, ohi - xlo));
    return clipped;
  }

  // A Concat whose inputs' ranges differ so much that one output scale would leave the narrowest input fewer than
  // 2^(b/2) of the b-bit levels (it would lose more than half its bits: 16 levels of 256 for 8 bits), e.g. box
  // regressions in the hundreds beside probabilities in [0, 1]: the Concat stays float and each input keeps its own
  // scale. Returns why, or nullopt when one scale is fine.
  template <class Plans>
  std::optional<std::string> mixed_concat(const Plans& plans) const {
    double widest = 0, narrowest = std::numeric_limits<double>::infinity();
    std::string narrow_name;
    int bits = 8;
    for (const auto& pl : plans) {
      if (!pl.params || pl.params->scale.numel() != 1) continue;
      const auto& info = dtype_info(pl.params->dtype());
      if (info.cls != DTypeClass::Integer) return std::nullopt;
      bits = info.bits;
      const double w = static_cast<double>(pl.params->scales()[0]) * static_cast<double>(info.qmax - info.qmin);
      widest = std::max(widest, w);
      if (w < narrowest) narrowest = w, narrow_name = pl.name;
    }
    if (!(narrowest > 0) || widest <= narrowest * std::ldexp(1.0, bits / 2)) return std::nullopt;
    char buf[160];
    std::snprintf(buf, sizeof buf, "input ranges differ %.0fx: one scale would leave %s under %d levels", widest / narrowest,
                  narrow_name.c_str(), 1 << (bits / 2));
    return std::string(buf);
  }

  // True when every reader of `t` takes it as coordinates (op_roles.h is_coordinate_input), directly or through
  // pass-through ops (Reshape, Transpose, Slice...) whose outputs are all read that way: then `t` gets no Q/DQ.
  bool read_as_coordinates(const std::string& t, int depth = 0) const {
    const auto& cons = g_.consumers(t);
    if (cons.empty() || depth > 8) return false;
    for (int c : cons) {
      const auto& n = g_.node(c);
      bool coordinates = true;
      for (int k = 0; k < n.input_size(); ++k)
        if (n.input(k) == t) coordinates = coordinates && is_coordinate_input(n, k);
      if (coordinates) continue;
      if (op_role(n, &g_).kind != OpKind::PassThrough || n.input(0) != t) return false;
      for (const auto& out : n.output())
        if (!out.empty() && !read_as_coordinates(out, depth + 1)) return false;
    }
    return true;
  }

  // The values of a graph output, at most rearranged: t is a graph output, or every reader of t is a Reshape,
  // Flatten, Squeeze, Unsqueeze, Transpose or Identity whose outputs are such tensors. Graph outputs stay float (the
  // task's decoder reads them), and a Q/DQ on t would round every one of their values just the same, one reshape
  // earlier. Such chains are common: upgrading a Softmax of opset < 13 over an axis of unknown rank writes
  // Flatten -> Softmax -> Reshape (passes/upgrade_opset.cc), so ppocrv4-rec's CTC probabilities, its graph output,
  // were rounded to 1/255 before the Reshape (mean KL per time step 0.88 -> 0.18 nats on scripts/rec_heldout.py).
  bool output_values(const std::string& t, int depth = 0) const {
    if (g_.is_graph_output(t)) return true;
    const auto& cons = g_.consumers(t);
    if (depth >= 16 || cons.empty() || g_.used_by_subgraph(t)) return false;
    return std::all_of(cons.begin(), cons.end(), [&](int c) {
      const auto& n = g_.node(c);
      static constexpr std::string_view kRearranging[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                                          "Identity"};
      const bool rearranges = (n.domain().empty() || n.domain() == "ai.onnx") && n.input_size() >= 1 &&
                              n.input(0) == t && n.output_size() == 1 &&
                              std::find(std::begin(kRearranging), std::end(kRearranging), n.op_type()) !=
                                  std::end(kRearranging);
      return rearranges && output_values(n.output(0), depth + 1);
    });
  }

  // MatMul and Gemm: ORT 1.30 fuses DQ -> MatMul / Gemm without a QuantizeLinear after it into one integer kernel
  // with a float output (MatMulIntegerToFloat, QGemm), so an output Q/DQ is needed only by a quantized reader.
  static bool float_output_fuses(const onnx::NodeProto& n) {
    return (n.op_type() == "MatMul" || n.op_type() == "Gemm") && (n.domain().empty() || n.domain() == "ai.onnx");
  }
  // Every reader of t is an op of another domain (ORT's contrib ops: SkipLayerNormalization, FastGelu, Attention,
  // MultiHeadAttention, GroupQueryAttention...) or ai.onnx Attention (opsets 23+), which stay float (op_roles.h gives
  // them no role, ORT 1.30 has no int8 kernel or QDQ fusion for them): a Q/DQ pair on t would only round it.
  bool read_only_by_contrib_ops(const std::string& t) const {
    const auto& cons = g_.consumers(t);
    return !g_.is_graph_output(t) && !cons.empty() && std::all_of(cons.begin(), cons.end(), [&](int c) {
      const auto& n = g_.node(c);
      const std::string& d = n.domain();
      return (!d.empty() && d != "ai.onnx") || n.op_type() == "Attention";
    });
  }

  // A MatMul whose one reader adds a constant (a bias): with a float output, ONNX Runtime 1.30's MatMulAddFusion
  // (graph level basic, before its QDQ fusions) turns MatMul + Add into a float Gemm, with Reshapes around it for
  // N-D inputs of static shape, and the weight's DequantizeLinear then runs on every inference (digits-vit with a
  // static batch: ORT int8 time x1.7; mobilenetv2's classifier: x1.4). A Q/DQ pair on the MatMul output keeps it
  // an integer kernel (QLinearMatMul), the Add then reads its DequantizeLinear.
  bool read_by_bias_add(const onnx::NodeProto& n) const {
    if (n.op_type() != "MatMul") return false;
    const auto& cons = g_.consumers(n.output(0));
    if (cons.size() != 1) return false;
    const auto& add = g_.node(cons[0]);
    return add.op_type() == "Add" && add.input_size() == 2 &&
           (g_.is_float_initializer(add.input(0)) || g_.is_float_initializer(add.input(1)));
  }

  bool fusable_activation(int c) const {
    const auto& n = g_.node(c);
    if (op_role(n).kind != OpKind::Activation || !nq_[c].quantized || !nq_[c].activation) return false;
    if (g_.is_graph_output(n.output(0))) return false;
    if (n.op_type() == "Clip")  // constant bounds only
      for (int k = 1; k < n.input_size(); ++k)
        if (!n.input(k).empty() && !g_.is_initializer(n.input(k))) return false;
    return true;
  }

  static TensorExplain explain(const std::string& t, const std::string& role, const QParams& p) {
    const int64_t n = p.scale.numel();
    if (n > kExplainMaxValues) return {t, role, p.dtype(), {}, {}, n, p.axis};
    return {t, role, p.dtype(), p.scales(), p.zero_points(), n, p.axis};
  }

  // A sequence of tensors never gets Q/DQ (ONNX Runtime refuses QuantizeLinear on one): act_params says so, and so
  // does this, for pass-through outputs.
  void add_act(const std::string& t, const QParams& p) {
    if (sequences_.count(t)) return;
    if (!act_.count(t)) {
      act_.emplace(t, ActQ{p});
      act_order_.push_back(t);
    }
  }

  // Integer initializer + scale + zero point + DequantizeLinear before node `before`; returns the DQ output.
  // `scale_codes`: the scale is not stored but expanded from its codes by a DequantizeLinear (double_quant.h).
  std::string add_const_dq(const std::string& name, const Tensor& q, const QParams& p, int before,
                           const ScaleCodes* scale_codes = nullptr) {
    const std::string qn = g_.unique_name(name + "_quantized");
    const std::string sn = g_.unique_name(name + "_scale");
    const std::string zn = g_.unique_name(name + "_zero_point");
    const std::string out = g_.unique_name(name + "_dq");
    g_.set_initializer(qn, q);
    if (scale_codes) {
      const std::string cn = g_.unique_name(name + "_scale_codes");
      const std::string csn = g_.unique_name(name + "_scale_codes_scale");
      g_.set_initializer(cn, scale_codes->codes);
      g_.set_initializer(csn, scale_codes->scale);
      onnx::NodeProto sdq;
      sdq.set_op_type("DequantizeLinear");
      sdq.set_name(g_.unique_name(name + "_scale_DequantizeLinear"));
      sdq.add_input(cn);
      sdq.add_input(csn);
      sdq.add_output(sn);
      set_attr_int(sdq, "axis", scale_codes->axis);
      set_attr_int(sdq, "block_size", scale_codes->block_size);
      g_.insert_before(before, std::move(sdq));  // queued ahead of the weight's DQ
    } else {
      g_.set_initializer(sn, p.scale);
    }
    g_.set_initializer(zn, p.zero_point);
    onnx::NodeProto dq;
    dq.set_op_type("DequantizeLinear");
    dq.set_name(g_.unique_name(name + "_DequantizeLinear"));
    dq.add_input(qn);
    dq.add_input(sn);
    dq.add_input(zn);
    dq.add_output(out);
    if (p.axis >= 0 && p.scale.rank() > 0) set_attr_int(dq, "axis", p.axis);
    if (p.block_size > 0) set_attr_int(dq, "block_size", p.block_size);
    g_.insert_before(before, std::move(dq));
    return out;
  }

  // Min/Max against a constant between two tensors with the same parameters runs on the integers:
  // Q(min(DQ(q), c)) = min(q, Q(c)) exactly (Q is monotone), so x -> Q -> Min(q, Q(c)) -> DQ replaces
  // x -> Q -> DQ -> Min -> Q -> DQ, one Q and one DQ fewer and no float pass (ONNX Runtime runs uint8 Min).
  std::map<std::string, int> integer_clamps() const {
    std::map<std::string, int> out;
    for (int i = 0; i < g_.node_count(); ++i) {
      const auto& n = g_.node(i);
      if ((n.op_type() != "Min" && n.op_type() != "Max") || !report_.nodes[i].quantized || n.input_size() != 2 ||
          !g_.is_float_initializer(n.input(1)) || n.output_size() != 1)
        continue;
      auto a = act_.find(n.input(0)), b = act_.find(n.output(0));
      if (a == act_.end() || b == act_.end() || dtype_info(a->second.params.dtype()).bits != 8) continue;
      if (a->second.params.scales() == b->second.params.scales() &&
          a->second.params.zero_points() == b->second.params.zero_points() &&
          a->second.params.dtype() == b->second.params.dtype())
        out[n.output(0)] = i;
    }
    return out;
  }

  // The float tensor node i read before emit() redirected it to a DQ output.
  std::string original_input(int i) const { return clamp_inputs_.at(i); }

  // Names of an activation's Q/DQ pair, with its scale and zero point stored as initializers.
  struct Names {
    std::string scale, zero_point, q, dq;
  };
  Names names_for(const std::string& t, const QParams& p) {
    Names n{g_.unique_name(t + "_scale"), g_.unique_name(t + "_zero_point"), g_.unique_name(t + "_q"),
            g_.unique_name(t + "_dq")};
    g_.set_initializer(n.scale, p.scale);
    g_.set_initializer(n.zero_point, p.zero_point);
    return n;
  }
  onnx::NodeProto make_qdq_node(const std::string& op, const std::string& in, const Names& nm, const std::string& out,
                                const std::string& base) {
    onnx::NodeProto n;
    n.set_op_type(op);
    n.set_name(g_.unique_name(base + "_" + op));
    n.add_input(in), n.add_input(nm.scale), n.add_input(nm.zero_point), n.add_output(out);
    return n;
  }
  // A Mul that smoothing inserted before a MatMul's input (weights/smooth_quant.h).
  static bool smoothing_divisor(const onnx::NodeProto& n) {
    return n.op_type() == "Mul" && n.doc_string() == kSmoothingDivisor;
  }
  // Why n must stay float for a spread input or output (slice_spread.h): "t's slices on axis a span ...", or nullopt.
  std::optional<std::string> spread_io(const onnx::NodeProto& n) const {
    std::vector<std::string> io(n.input().begin(), n.input().end());
    io.insert(io.end(), n.output().begin(), n.output().end());
    for (const std::string& t : io) {
      const auto it = in_.spread.find(t);
      if (t.empty() || it == in_.spread.end()) continue;
      char share[32];
      std::snprintf(share, sizeof share, "%.3g", it->second.share);
      return t + "'s slices span ranges far apart (axis " + std::to_string(it->second.axis) + ", " +
             std::to_string(it->second.slices) + " slices: the median one covers " + share +
             " of the tensor's range, under 1/16): one per-tensor grid would leave most of them a few levels, and "
             "as an integer op it saves only one elementwise pass";
    }
    return std::nullopt;
  }
  // Every activation input of n (constants aside) is made in float: a graph input, or the output of a node that
  // quantizes nothing there (made_as_integers_: the outputs a Q follows where their producer is planned, which
  // comes first in graph order). A norm written out (x - mean) / std * g + b: its g and b would be rounded on one
  // per-tensor grid each (a gain vector with 24x channels puts the unit gains 0.09 apart) and its input once more.
  bool inputs_made_in_float(const onnx::NodeProto& n, const OpRole& role) const {
    bool any = false;
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string& t = n.input(k);
      if (t.empty() || g_.is_initializer(t)) continue;
      if (!role.data_inputs.empty() &&
          std::find(role.data_inputs.begin(), role.data_inputs.end(), k) == role.data_inputs.end())
        continue;
      if (made_as_integers_.count(t)) return false;
      any = true;
    }
    return any;
  }

  // The readers of t read `to` (its DequantizeLinear) instead. With only_quantized, readers that run in float keep
  // reading t: t exists in float anyway (its producer runs in float), and its rounding would only add error to them.
  // A post-norm encoder's residual Add read the norm output's Q/DQ, made for the next block's projections: the
  // norm's rounding on an outlier-set grid went into the residual stream at every block (zoo BERT, issue 12).
  void redirect_consumers(const std::string& t, const std::string& to, bool only_quantized = false) {
    for (int c : g_.consumers(t)) {
      if (only_quantized && !report_.nodes[static_cast<size_t>(c)].quantized) continue;
      auto& cn = g_.node(c);
      for (int k = 0; k < cn.input_size(); ++k)
        if (cn.input(k) == t) cn.set_input(k, to);
    }
  }

  void emit() {
    for (int i = 0; i < g_.node_count(); ++i)
      if (g_.node(i).input_size() > 0) clamp_inputs_[i] = g_.node(i).input(0);
    const std::map<std::string, int> clamps = integer_clamps();
    std::map<std::string, std::string> q_of;  // tensor -> its QuantizeLinear output
    std::set<std::string> act_dqs;            // the activation DequantizeLinear outputs made here
    for (const std::string& t : act_order_) {
      const QParams& p = act_.at(t).params;
      if (auto it = rescale_.find(t); it != rescale_.end()) {  // see plan_rescale
        const auto [i, x] = it->second;
        const Names nm = names_for(t, p);
        redirect_consumers(t, nm.dq);
        g_.set_inputs(i, {q_of.at(x), nm.scale, nm.zero_point});
        g_.set_outputs(i, {nm.dq});
        auto& n = g_.node(i);
        n.set_op_type("DequantizeLinear");
        n.clear_domain();
        n.clear_attribute();
        n.set_name(g_.unique_name(t + "_DequantizeLinear"));
        q_of[t] = q_of.at(x);
        continue;
      }
      if (auto it = clamps.find(t); it != clamps.end()) {
        auto& n = g_.node(it->second);
        const Names nm = names_for(t, p);
        const std::string c = n.input(1), cq = g_.unique_name(c + "_quantized");
        g_.set_initializer(cq, quantize_tensor(g_.initializer_tensor(c), p));
        n.set_input(0, q_of.at(original_input(it->second)));
        n.set_input(1, cq);
        n.set_output(0, nm.q);
        redirect_consumers(t, nm.dq);
        g_.insert_before(it->second + 1, make_qdq_node("DequantizeLinear", nm.q, nm, nm.dq, t));
        q_of[t] = nm.q;
        continue;
      }
      const Names nm = names_for(t, p);
      redirect_consumers(t, nm.dq, !made_as_integers_.count(t));
      q_of[t] = nm.q;
      onnx::NodeProto qn = make_qdq_node("QuantizeLinear", t, nm, nm.q, t);
      onnx::NodeProto dqn = make_qdq_node("DequantizeLinear", nm.q, nm, nm.dq, t);
      act_dqs.insert(nm.dq);
      const int prod = g_.producer(t);
      g_.insert_before(prod + 1, std::move(qn));
      g_.insert_before(prod + 1, std::move(dqn));
      ++report_.qdq_pairs;
    }
    for (size_t i = 0; i < report_.nodes.size(); ++i) {
      const auto& e = report_.nodes[i];
      (e.quantized ? report_.quantized_ops : report_.float_ops)[e.op_type]++;
    }
    report_.activation_tensors = act_order_;
    g_.compact();
    // A DequantizeLinear that nothing reads any more (its tensor's readers were all rescales or integer clamps,
    // which read the QuantizeLinear output) goes: ONNX Runtime would run it, and keep it in NCHW between its NHWC
    // integer kernels (two Transposes each).
    bool dead = false;
    for (int i = 0; i < g_.node_count(); ++i) {
      const auto& n = g_.node(i);
      if (n.op_type() == "DequantizeLinear" && n.output_size() == 1 && act_dqs.count(n.output(0)) &&
          g_.consumers(n.output(0)).empty() && !g_.is_graph_output(n.output(0)) && !g_.used_by_subgraph(n.output(0)))
        g_.remove_node(i), dead = true;
    }
    if (dead) g_.compact();
  }

  Graph g_;
  const QConfig& cfg_;
  const calib::CalibrationTable& ranges_;
  const RewriteInputs& in_;       // GPTQ/AWQ Hessians (asked in node order), threads, spread tensors
  bool plan_ = false;             // plan_qdq: ranges assumed, stops at the first quantized node
  std::vector<NodeQuant> nq_;
  std::vector<bool> fused_;
  std::vector<bool> float_out_;  // see plan_float_outputs
  std::vector<bool> tail_;       // plan_output_tail
  std::map<std::string, ActQ> act_;
  std::set<std::string> made_as_integers_;  // outputs a QuantizeLinear follows where their producer runs as integers
  std::vector<std::string> act_order_;
  std::map<int, std::string> clamp_inputs_;
  std::map<std::string, std::pair<int, std::string>> rescale_;     // y -> (its Mul node, x): see plan_rescale
  std::map<std::string, std::pair<double, double>> shared_range_;  // see plan_shared_ranges
  QdqReport report_;
  std::set<std::string> ambiguous_;         // names defined in more than one graph
  std::set<std::string> sequences_;         // values holding sequences of tensors (onnx/sequence_values.h)
  bool body_unobserved_ = false;            // a body none of whose tensors the calibration table holds
};

}  // namespace

QdqReport insert_qdq(onnx::ModelProto& model, const QConfig& config, const calib::CalibrationTable& ranges,
                     const RewriteInputs& inputs) {
  return QdqBuilder(model, config, ranges, inputs).run();
}

std::optional<NodeExplain> plan_qdq(onnx::ModelProto& model, const QConfig& config) {
  const calib::CalibrationTable none;
  const RewriteInputs no_inputs;
  const QdqReport r = QdqBuilder(model, config, none, no_inputs, /*plan=*/true).run();
  if (const NodeExplain* e = QdqBuilder::first_quantized(r)) return *e;
  return std::nullopt;
}

}  // namespace qtool::quantize
