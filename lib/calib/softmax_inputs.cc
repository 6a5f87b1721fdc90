#include "calib/softmax_inputs.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <set>

namespace qtool::calib {

std::map<std::string, SoftmaxAxis> find_softmax_inputs(const onnx::ModelProto& model) {
  int64_t opset = 1;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  const auto& g = model.graph();
  std::map<std::string, std::vector<const onnx::NodeProto*>> readers;
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : g.node()) {
    for (const auto& in : n.input())
      if (!in.empty()) readers[in].push_back(&n);
    for (const auto& out : n.output())
      if (!out.empty()) producer[out] = &n;
  }
  std::set<std::string> outputs;
  for (const auto& o : g.output()) outputs.insert(o.name());
  auto softmax_like = [](const onnx::NodeProto& n) {
    return (n.domain().empty() || n.domain() == "ai.onnx") && (n.op_type() == "Softmax" || n.op_type() == "LogSoftmax");
  };
  auto forwards = [](const onnx::NodeProto& n) {  // value-preserving single-input ops a Softmax input may pass through
    return (n.domain().empty() || n.domain() == "ai.onnx") && (n.op_type() == "Cast" || n.op_type() == "Identity") &&
           n.input_size() >= 1 && n.output_size() == 1;
  };
  // Flatten(axis a) -> Softmax over the second axis normalises the flattened dimensions from a on, as an opset < 13
  // Softmax at axis a does (what upgrading one to opset 13 writes where the input's rank is unknown).
  auto flattens = [](const onnx::NodeProto& n) {
    return (n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == "Flatten" && n.input_size() >= 1 &&
           n.output_size() == 1;
  };
  auto flatten_axis = [](const onnx::NodeProto& n) {
    for (const auto& a : n.attribute())
      if (a.name() == "axis") return a.i();
    return int64_t{1};
  };
  auto spec_of = [&](const onnx::NodeProto& n) {
    SoftmaxAxis s;
    s.coerce_2d = opset < 13;
    s.axis = s.coerce_2d ? 1 : -1;
    for (const auto& a : n.attribute())
      if (a.name() == "axis") s.axis = a.i();
    return s;
  };
  // The axis spec every reader of `t` agrees on, or nullopt when some reader is not a Softmax (through forwarders).
  std::map<std::string, std::optional<SoftmaxAxis>> memo;
  std::function<std::optional<SoftmaxAxis>(const std::string&, int)> rows_of = [&](const std::string& t, int depth) {
    if (auto it = memo.find(t); it != memo.end()) return it->second;
    std::optional<SoftmaxAxis> spec;
    bool ok = !outputs.count(t) && readers.count(t) && depth < 16;
    for (const onnx::NodeProto* r : ok ? readers[t] : std::vector<const onnx::NodeProto*>{}) {
      if ((r->domain().empty() || r->domain() == "ai.onnx") && (r->op_type() == "Shape" || r->op_type() == "Size"))
        continue;  // sees t's shape only (the Reshape back after a Flatten -> Softmax reads it)
      std::optional<SoftmaxAxis> s;
      if (softmax_like(*r) && r->input(0) == t)
        s = spec_of(*r);
      else if (forwards(*r) && r->input(0) == t)
        s = rows_of(r->output(0), depth + 1);
      else if (flattens(*r) && r->input(0) == t)
        if (const auto f = rows_of(r->output(0), depth + 1); f && (f->axis == 1 || f->axis == -1))
          s = SoftmaxAxis{flatten_axis(*r), true};  // the 2-D output's rows are its input's trailing dims
      if (!s || (spec && (spec->axis != s->axis || spec->coerce_2d != s->coerce_2d))) {
        ok = false;
        break;
      }
      spec = s;
    }
    return memo[t] = ok ? spec : std::nullopt;
  };
  std::map<std::string, SoftmaxAxis> out;
  for (const auto& n : g.node()) {
    if (!softmax_like(n) || n.input_size() < 1 || n.input(0).empty()) continue;
    // From the Softmax input back through forwarders and a Flatten: each of those tensors is normalised by the same
    // Softmax.
    std::string t = n.input(0);
    for (int depth = 0; depth < 16; ++depth) {
      const auto spec = rows_of(t, 0);
      if (!spec) break;
      out[t] = *spec;
      auto p = producer.find(t);
      if (p == producer.end() || !(forwards(*p->second) || flattens(*p->second))) break;
      t = p->second->input(0);
    }
  }
  return out;
}

}  // namespace qtool::calib
