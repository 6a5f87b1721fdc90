// Times the compute kernels of a real model, node by node, on the shapes the model really uses.
//
// usage: bench_kernels NODES.json [--threads T] [--repeat N] [--per-node 1] [--only NAME,NAME]
// NODES.json comes from scripts/bench/compute_nodes.py (node indices and runtime input shapes). Constant
// inputs (initializers, Constant nodes) are the model's own; other inputs are random tensors of the right
// shape. Prints one JSON line: total median milliseconds over all compute nodes and a per-op breakdown.
// This is the interpreter's compute share; scripts/bench_runtime.sh compares whole models once
// `qtool run` exists.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/omp_wait.h"
#include "kernel_harness.h"
#include "onnx/model_io.h"
#include "onnx/tensor_proto.h"

using namespace qtool;

int main(int argc, char** argv) {
  qtool::core::adopt_thread_environment(argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_kernels NODES.json [--threads T] [--repeat N]\n");
    return 1;
  }
  int threads = 1, repeat = 10;
  bool per_node = false;
  std::set<std::string> only;  // node names to time (all when empty)
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") threads = std::stoi(argv[i + 1]);
    if (k == "--repeat") repeat = std::stoi(argv[i + 1]);
    if (k == "--only") {
      std::stringstream list(argv[i + 1]);
      for (std::string name; std::getline(list, name, ',');) only.insert(name);
    }
    if (k == "--per-node") per_node = std::string(argv[i + 1]) == "1";
  }
  try {
    std::ifstream f(argv[1]);
    const nlohmann::json spec = nlohmann::json::parse(f);
    const onnxio::LoadedModel model = onnxio::load_model(spec["model"].get<std::string>());
    const onnx::GraphProto& g = model.proto->graph();
    int opset = 0;
    for (const auto& imp : model.proto->opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx") opset = static_cast<int>(imp.version());
    std::map<std::string, Tensor> consts;
    for (const auto& init : g.initializer()) consts[init.name()] = onnxio::tensor_from_proto(init, init.name());
    for (const auto& n : g.node())
      if (n.op_type() == "Constant")
        for (const auto& a : n.attribute())
          if (a.name() == "value") consts[n.output(0)] = onnxio::tensor_from_proto(a.t(), n.output(0));

    std::map<std::string, double> per_op;
    double total = 0;
    int timed = 0, skipped = 0;
    uint32_t seed = 1;
    for (const auto& jn : spec["nodes"]) {
      const onnx::NodeProto& np = g.node(jn["index"].get<int>());
      if (!only.empty() && !only.count(np.name())) continue;
      runtime::NodeInfo node = test::node_info_from_proto(np, opset, consts);
      std::vector<Tensor> inputs(node.inputs.size());
      bool ok = true;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i].empty()) continue;
        if (node.const_inputs[i]) {
          inputs[i] = *node.const_inputs[i];
          continue;
        }
        const auto& ji = jn["inputs"][i];
        if (ji.is_null() || ji.contains("missing") || ji["dtype"] != "float32") {
          ok = false;
          break;
        }
        inputs[i] = test::random_tensor(ji["shape"].get<Shape>(), seed++);
      }
      const runtime::KernelDef* def = runtime::find_kernel("", node.op_type, opset);
      if (!ok || !def) {
        ++skipped;
        continue;
      }
      auto kernel = def->make(node);
      std::vector<const Tensor*> ins;
      for (const Tensor& t : inputs) ins.push_back(t.empty() ? nullptr : &t);
      std::vector<Tensor> outs(node.outputs.size());
      runtime::KernelContext ctx{node, ins, outs, threads, nullptr};
      kernel->run(ctx);  // warm-up
      std::vector<double> ms;
      for (int r = 0; r < repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        kernel->run(ctx);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      per_op[node.op_type] += med;
      if (per_node) {
        std::string shapes;
        for (const Tensor& t : inputs) shapes += (t.empty() ? std::string("-") : shape_str(t.shape())) + " ";
        std::fprintf(stderr, "%8.3f ms (min %8.3f)  %-20s %s %s\n", med, ms.front(), node.op_type.c_str(),
                     node.name.c_str(), shapes.c_str());
      }
      total += med;
      ++timed;
    }
    nlohmann::json out;
    out["compute_ms"] = total;
    out["per_op_ms"] = per_op;
    out["nodes"] = timed;
    out["skipped"] = skipped;
    out["threads"] = threads;
    std::cout << out.dump() << std::endl;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return 2;
  }
  return 0;
}
