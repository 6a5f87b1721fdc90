#include "quantize/share_body_initializers.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace qtool::quantize {
namespace {

// Rewrites every reference to `from` in g and its nested bodies.
void rename_uses(onnx::GraphProto& g, const std::string& from, const std::string& to) {
  for (auto& n : *g.mutable_node()) {
    for (auto& i : *n.mutable_input())
      if (i == from) i = to;
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename_uses(*a.mutable_g(), from, to);
      for (auto& body : *a.mutable_graphs()) rename_uses(body, from, to);
    }
  }
  for (auto& o : *g.mutable_output())
    if (o.name() == from) o.set_name(to);
}

void erase_initializer(onnx::GraphProto& g, const std::string& name) {
  auto* inits = g.mutable_initializer();
  for (int k = 0; k < inits->size(); ++k)
    if (inits->Get(k).name() == name) {
      inits->DeleteSubrange(k, 1);
      return;
    }
}

const onnx::TensorProto* find_initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

// A DequantizeLinear of a body's own constants: its inputs (integer tensor, scale, zero point) and their values
// (dtype, dims, bytes: raw_data only, what qtool writes) with its attributes. Two bodies hold the same weight when
// these keys are equal; the three initializers move together (ONNX Runtime fused Gemm -> QGemm wrongly, naming
// two nodes alike, when only a branch's zero point came from the enclosing graph).
struct DqConstants {
  std::vector<std::string> names;
  std::string key;
};

std::optional<DqConstants> dq_constants(const onnx::GraphProto& g, const onnx::NodeProto& n) {
  if (n.op_type() != "DequantizeLinear" || !n.domain().empty() || n.input_size() != 3) return std::nullopt;
  DqConstants c;
  for (const auto& in : n.input()) {
    const onnx::TensorProto* t = find_initializer(g, in);
    if (!t || !t->has_raw_data() || t->data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
    c.names.push_back(in);
    c.key += std::to_string(t->data_type()) + ":";
    for (int64_t d : t->dims()) c.key += std::to_string(d) + ",";
    c.key += std::to_string(t->raw_data().size()) + ":" + t->raw_data() + "|";
  }
  for (const auto& a : n.attribute()) c.key += a.SerializeAsString();
  return c;
}

int share_in(onnx::GraphProto& g) {
  int moved = 0;
  for (auto& n : *g.mutable_node()) {
    std::vector<onnx::GraphProto*> bodies;
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) bodies.push_back(a.mutable_g());
      for (auto& body : *a.mutable_graphs()) bodies.push_back(&body);
    }
    for (onnx::GraphProto* b : bodies) moved += share_in(*b);  // innermost first
    if (bodies.size() < 2) continue;
    // key -> (body, its constants' names), first per body; keys in first-seen order for a deterministic result.
    std::map<std::string, std::vector<std::pair<onnx::GraphProto*, std::vector<std::string>>>> copies;
    std::vector<std::string> order;
    for (onnx::GraphProto* b : bodies)
      for (const auto& dq : b->node()) {
        auto c = dq_constants(*b, dq);
        if (!c) continue;
        auto& list = copies[c->key];
        if (list.empty()) order.push_back(c->key);
        if (list.empty() || list.back().first != b) list.emplace_back(b, std::move(c->names));
      }
    for (const std::string& k : order) {
      const auto& list = copies.at(k);
      if (list.size() < 2) continue;
      const auto& [first, names] = list.front();
      if (!std::all_of(list.begin(), list.end(), [&](const auto& e) {
            return std::all_of(e.second.begin(), e.second.end(),
                               [&](const std::string& x) { return find_initializer(*e.first, x) != nullptr; });
          }))
        continue;  // a constant already moved with another DequantizeLinear
      for (size_t j = 0; j < names.size(); ++j) {
        if (!find_initializer(g, names[j])) *g.add_initializer() = *find_initializer(*first, names[j]);
        for (const auto& [b, copy] : list) {
          erase_initializer(*b, copy[j]);
          if (copy[j] != names[j]) rename_uses(*b, copy[j], names[j]);
        }
      }
      ++moved;
    }
  }
  return moved;
}

}  // namespace

int share_body_initializers(onnx::ModelProto& model) { return share_in(*model.mutable_graph()); }

}  // namespace qtool::quantize
