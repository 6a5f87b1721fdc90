#include "onnx/sequence_values.h"

#include <onnx/onnx_pb.h>

#include <string_view>

namespace qtool::onnxio {
namespace {

bool makes_sequences(const onnx::NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  static const std::set<std::string_view> kOps = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert",
                                                  "SequenceErase", "SplitToSequence",   "SequenceMap"};
  return kOps.count(n.op_type()) > 0;
}

const onnx::GraphProto* body(const onnx::NodeProto& n, std::string_view attr) {
  for (const auto& a : n.attribute())
    if (a.name() == attr && a.has_g()) return &a.g();
  return nullptr;
}

// One pass over g and its bodies; true when it added a name.
bool pass(const onnx::GraphProto& g, std::set<std::string>& seq) {
  bool grew = false;
  auto add = [&](const std::string& name) {
    if (!name.empty() && seq.insert(name).second) grew = true;
  };
  auto declared = [&](const onnx::ValueInfoProto& vi) {
    if (vi.type().has_sequence_type()) add(vi.name());
  };
  for (const auto& vi : g.input()) declared(vi);
  for (const auto& vi : g.output()) declared(vi);
  for (const auto& vi : g.value_info()) declared(vi);
  for (const auto& n : g.node()) {
    const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (makes_sequences(n)) {
      for (const auto& o : n.output()) add(o);
    } else if (onnx_domain && n.op_type() == "Identity" && n.input_size() == 1 && seq.count(n.input(0))) {
      add(n.output(0));
    } else if (onnx_domain && n.op_type() == "If") {
      for (const auto* branch : {body(n, "then_branch"), body(n, "else_branch")})
        if (branch)
          for (int k = 0; k < branch->output_size() && k < n.output_size(); ++k)
            if (seq.count(branch->output(k).name())) add(n.output(k));
    } else if (onnx_domain && n.op_type() == "Loop") {
      const onnx::GraphProto* b = body(n, "body");
      for (int i = 2; i < n.input_size(); ++i) {  // carried value i - 2: node input i, body input i, body output i - 1
        const bool in = seq.count(n.input(i)) || (b && i < b->input_size() && seq.count(b->input(i).name())) ||
                        (b && i - 1 < b->output_size() && seq.count(b->output(i - 1).name()));
        if (!in) continue;
        if (i - 2 < n.output_size()) add(n.output(i - 2));
        if (b && i < b->input_size()) add(b->input(i).name());
      }
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) grew = pass(a.g(), seq) || grew;
      for (const auto& sub : a.graphs()) grew = pass(sub, seq) || grew;
    }
  }
  return grew;
}

}  // namespace

std::set<std::string> sequence_values(const onnx::GraphProto& g) {
  std::set<std::string> seq;
  while (pass(g, seq)) {
  }
  return seq;
}

}  // namespace qtool::onnxio
