#include "quantize/share_body_initializers.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <tuple>
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

// Identity of an initializer's value: dtype, dims and its bytes (raw_data only: what qtool writes; tensors kept in
// typed fields or external data are left alone).
using Key = std::tuple<int, std::vector<int64_t>, std::string>;

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
    std::map<Key, std::vector<std::pair<onnx::GraphProto*, std::string>>> copies;
    std::vector<Key> order;  // first-seen order, for a deterministic result
    for (onnx::GraphProto* b : bodies)
      for (const auto& t : b->initializer()) {
        if (!t.has_raw_data() || t.data_location() == onnx::TensorProto::EXTERNAL) continue;
        Key k{t.data_type(), {t.dims().begin(), t.dims().end()}, t.raw_data()};
        auto& list = copies[k];
        if (list.empty()) order.push_back(k);
        if (list.empty() || list.back().first != b) list.emplace_back(b, t.name());
      }
    for (const Key& k : order) {
      const auto& list = copies.at(k);
      if (list.size() < 2) continue;
      const std::string& name = list.front().second;
      for (const auto& t : list.front().first->initializer())
        if (t.name() == name) {
          *g.add_initializer() = t;
          break;
        }
      for (const auto& [b, copy] : list) {
        erase_initializer(*b, copy);
        if (copy != name) rename_uses(*b, copy, name);
      }
      ++moved;
    }
  }
  return moved;
}

}  // namespace

int share_body_initializers(onnx::ModelProto& model) { return share_in(*model.mutable_graph()); }

}  // namespace qtool::quantize
