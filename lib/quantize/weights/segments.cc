#include "quantize/weights/segments.h"

#include <onnx/onnx_pb.h>

#include <set>

namespace qtool::quantize {

bool segmentable(const onnx::GraphProto& g) {
  std::set<std::string> available;
  for (const auto& vi : g.input()) available.insert(vi.name());
  for (const auto& t : g.initializer()) available.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute())
      if (a.has_g() || a.graphs_size() > 0) return false;
    for (const auto& in : n.input())
      if (!in.empty() && !available.count(in)) return false;
    for (const auto& out : n.output()) available.insert(out);
  }
  return true;
}

SegmentRunner::SegmentRunner(const onnx::ModelProto& model, const std::vector<std::map<std::string, Tensor>>& samples,
                             int threads, int end)
    : model_(model), samples_(samples), threads_(threads), end_(end) {
  for (int i = 0; i < end_; ++i)
    for (const auto& in : model_.graph().node(i).input()) last_use_[in] = i;
  restart();
}

void SegmentRunner::restart() {
  values_ = samples_;
  done_ = 0;
}

void SegmentRunner::run_to(int b, const runtime::TapFn& tap) {
  const onnx::GraphProto& g = model_.graph();
  const int a = done_;
  if (a == b) {  // graph inputs only: the tap sees them before any node runs
    if (tap && a == 0)
      for (const auto& v : values_)
        for (const auto& vi : g.input())
          if (auto t = v.find(vi.name()); t != v.end()) tap(vi.name(), t->second);
    return;
  }
  std::map<std::string, int> init_index;
  for (int i = 0; i < g.initializer_size(); ++i) init_index[g.initializer(i).name()] = i;
  onnx::ModelProto sub;
  sub.set_ir_version(model_.ir_version());
  *sub.mutable_opset_import() = model_.opset_import();
  *sub.mutable_functions() = model_.functions();
  onnx::GraphProto& sg = *sub.mutable_graph();
  sg.set_name(g.name() + "_nodes" + std::to_string(a) + "_" + std::to_string(b));
  std::set<std::string> produced, declared;
  auto add_input = [&](const std::string& name) {
    if (name.empty() || produced.count(name) || !declared.insert(name).second) return;
    if (auto it = init_index.find(name); it != init_index.end())
      *sg.add_initializer() = g.initializer(it->second);  // external data: only the reference is copied
    else
      sg.add_input()->set_name(name);
  };
  if (a == 0 && tap)  // graph inputs: the tap sees them as the piece's inputs
    for (const auto& vi : g.input())
      if (init_index.count(vi.name()) || (!values_.empty() && values_[0].count(vi.name()))) add_input(vi.name());
  for (int i = a; i < b; ++i) {
    const onnx::NodeProto& n = g.node(i);
    for (const auto& in : n.input()) add_input(in);
    *sg.add_node() = n;
    for (const auto& out : n.output()) produced.insert(out);
  }
  for (const auto& name : produced)
    if (auto u = last_use_.find(name); u != last_use_.end() && u->second >= b) sg.add_output()->set_name(name);
  if (sg.output_size() == 0) sg.add_output()->set_name(g.node(b - 1).output(0));
  const runtime::Session session(sub, {.threads = threads_});
  runtime::RunOptions ro;
  ro.tap = tap;
  for (auto& v : values_) {
    std::map<std::string, Tensor> in;
    for (const auto& vi : sg.input())
      if (auto t = v.find(vi.name()); t != v.end()) in[vi.name()] = t->second;
    for (auto& [name, t] : session.run(in, ro)) v[name] = std::move(t);
    for (auto it = v.begin(); it != v.end();) {
      auto u = last_use_.find(it->first);
      it = u == last_use_.end() || u->second < b ? v.erase(it) : std::next(it);
    }
  }
  done_ = b;
}

}  // namespace qtool::quantize
