// Times whole-model fp32 forwards in the interpreter (runtime::Session), for scripts/bench_runtime.sh.
//
// usage: bench_session MODEL --input NAME=FILE.npy [...] [--threads T] [--repeat N] [--check DIR] [--per-node K]
// One warm-up run, then N timed runs. --check DIR compares each output with DIR/<output>.npy (the
// reference outputs of ONNX Runtime in ../shared/data/reference_outputs) and reports the max |diff|.
// Prints one JSON line: {"median_ms", "min_ms", "runs", "threads", "max_abs_diff": {output: value}}.
// --per-node K first prints, to stderr, each op type's sum of per-node medians over the N runs and the K slowest
// nodes (a node's time: from the previous node's output to its own, through the tap, so the executor's per-node
// bookkeeping is counted with the node; the JSON line's runs are timed without the tap).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/omp_wait.h"
#include "onnx/model_io.h"
#include "runtime/session.h"
#include "tensorio/tensorio.h"

using namespace qtool;

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Per-node times through the tap (see the usage above), to stderr.
void print_per_node(const runtime::Session& session, const std::map<std::string, Tensor>& inputs, int repeat,
                    size_t top) {
  const runtime::Graph& g = session.graph();
  std::map<std::string, size_t> node_of;  // first output name -> node index
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!g.nodes[i].info.outputs.empty()) node_of[g.nodes[i].info.outputs[0]] = i;
  std::vector<std::vector<double>> ms(g.nodes.size());
  auto last = std::chrono::steady_clock::now();
  runtime::RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor&) {
    const auto now = std::chrono::steady_clock::now();
    const auto it = node_of.find(name);
    if (it == node_of.end()) return;  // a graph input, or a node's second output
    ms[it->second].push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  };
  for (int r = 0; r < repeat; ++r) {
    last = std::chrono::steady_clock::now();
    session.run(inputs, ro);
  }
  std::map<std::string, std::pair<double, int>> per_op;
  std::vector<std::pair<double, size_t>> nodes;
  double total = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const double m = median_of(ms[i]);
    auto& [sum, count] = per_op[g.nodes[i].info.op_type];
    sum += m;
    ++count;
    total += m;
    nodes.emplace_back(m, i);
  }
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [op, v] : per_op) ops.emplace_back(v.first, op);
  std::sort(ops.rbegin(), ops.rend());
  std::fprintf(stderr, "sum of per-node medians %.3f ms over %zu nodes\n", total, g.nodes.size());
  for (const auto& [m, op] : ops)
    std::fprintf(stderr, "  %-28s %8.3f ms %5.1f %% %4d nodes\n", op.c_str(), m, 100 * m / total, per_op[op].second);
  std::sort(nodes.rbegin(), nodes.rend());
  for (size_t k = 0; k < std::min(top, nodes.size()); ++k) {
    const auto& n = g.nodes[nodes[k].second].info;
    std::fprintf(stderr, "  %8.3f ms  %-14s %s\n", nodes[k].first, n.op_type.c_str(), n.name.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  qtool::core::adopt_thread_environment(argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_session MODEL --input NAME=FILE.npy [--threads T] [--repeat N] [--check DIR]\n");
    return 1;
  }
  int threads = 1, repeat = 10, per_node = -1;
  std::map<std::string, Tensor> inputs;
  std::string check;
  try {
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--threads") threads = std::stoi(v);
      if (k == "--repeat") repeat = std::stoi(v);
      if (k == "--check") check = v;
      if (k == "--per-node") per_node = std::stoi(v);
      if (k == "--input") {
        const size_t eq = v.find('=');
        inputs[v.substr(0, eq)] = tensorio::read_npy(v.substr(eq + 1));
      }
    }
    const onnxio::LoadedModel model = onnxio::load_model(argv[1]);
    // QTOOL_BENCH_NO_FUSE=1 times the graph as the model has it (every activation a node of its own).
    runtime::SessionOptions options{.threads = threads};
    if (!std::getenv("QTOOL_BENCH_NO_FUSE")) options.observed = std::set<std::string>{};
    runtime::Session session(model, options);
    auto outputs = session.run(inputs);  // warm-up
    if (per_node >= 0) print_per_node(session, inputs, repeat, static_cast<size_t>(per_node));
    std::vector<double> ms;
    for (int r = 0; r < repeat; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      outputs = session.run(inputs);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    nlohmann::json out;
    out["median_ms"] = ms.empty() ? 0.0 : ms[ms.size() / 2];
    out["min_ms"] = ms.empty() ? 0.0 : ms.front();
    out["runs"] = repeat;
    out["threads"] = threads;
    if (!check.empty()) {
      for (const auto& [name, t] : outputs) {
        std::string file = name;
        for (char& c : file)
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
        const Tensor want = tensorio::read_npy(check + "/" + file + ".npy");
        double d = t.shape() == want.shape() && t.dtype() == DType::Float32 ? 0.0 : INFINITY;
        for (int64_t i = 0; std::isfinite(d) && i < t.numel(); ++i)
          d = std::max(d, std::fabs(double(t.data<float>()[i]) - want.data<float>()[i]));
        out["max_abs_diff"][name] = d;
      }
    }
    std::cout << out.dump() << std::endl;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_session: %s\n", e.what());
    return 2;
  }
  return 0;
}
