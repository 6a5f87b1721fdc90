#include "onnx/body_names.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>

#include "onnx/model_walk.h"

namespace qtool::onnxio {
namespace {

using Renames = std::map<std::string, std::string>;

void count(const onnx::GraphProto& g, std::map<std::string, int>& defs) {
  std::set<std::string> here;
  for (const auto& v : g.input()) here.insert(v.name());
  for (const auto& t : g.initializer()) here.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output())
      if (!o.empty()) here.insert(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) count(a.g(), defs);
      for (const auto& body : a.graphs()) count(body, defs);
    }
  }
  for (const auto& name : here) ++defs[name];
}

class Scoper {
 public:
  explicit Scoper(const onnx::GraphProto& main) : defs_(definition_counts(main)) {
    for (const auto& [name, n] : defs_) used_.insert(name);
    collect_reads(main, used_);  // with the definitions: the names a new one must avoid
  }

  // Rewrites graph g (a body when `prefix` is not empty) with the renames it inherits from enclosing graphs.
  void scope(onnx::GraphProto& g, const std::string& prefix, Renames renames) {
    if (!prefix.empty()) {
      auto define = [&](const std::string& name) {
        if (name.empty() || defs_.at(name) < 2) {
          renames.erase(name);  // a local definition shadows an enclosing rename
          return;
        }
        std::string fresh = prefix + name;
        for (int k = 1; used_.count(fresh); ++k) fresh = prefix + name + "_" + std::to_string(k);
        used_.insert(fresh);
        renames[name] = fresh;
        ++renamed_;
      };
      for (const auto& v : g.input()) define(v.name());
      for (const auto& t : g.initializer()) define(t.name());
      for (const auto& n : g.node())
        for (const auto& o : n.output()) define(o);
    }
    auto apply = [&](std::string* name) {
      if (auto it = renames.find(*name); it != renames.end()) *name = it->second;
    };
    for (auto& v : *g.mutable_input()) apply(v.mutable_name());
    for (auto& t : *g.mutable_initializer()) apply(t.mutable_name());
    for (auto& v : *g.mutable_output()) apply(v.mutable_name());
    for (auto& v : *g.mutable_value_info()) apply(v.mutable_name());
    int index = 0;
    for (auto& n : *g.mutable_node()) {
      for (auto& i : *n.mutable_input()) apply(&i);
      for (auto& o : *n.mutable_output()) apply(&o);
      const std::string node = n.name().empty() ? n.op_type() + "_" + std::to_string(index) : n.name();
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) scope(*a.mutable_g(), prefix + node + "/" + a.name() + "/", renames);
        int k = 0;
        for (auto& body : *a.mutable_graphs())
          scope(body, prefix + node + "/" + a.name() + "_" + std::to_string(k++) + "/", renames);
      }
      ++index;
    }
  }

  int renamed() const { return renamed_; }

 private:
  std::map<std::string, int> defs_;
  std::set<std::string> used_;
  int renamed_ = 0;
};

}  // namespace

std::map<std::string, int> definition_counts(const onnx::GraphProto& g) {
  std::map<std::string, int> defs;
  count(g, defs);
  return defs;
}

bool body_names_clash(const onnx::ModelProto& model) {
  for (const auto& [name, n] : definition_counts(model.graph()))
    if (n > 1) return true;
  return false;
}

int scope_body_names(onnx::ModelProto& model) {
  Scoper s(model.graph());
  s.scope(*model.mutable_graph(), "", {});
  return s.renamed();
}

}  // namespace qtool::onnxio
