// Times whole-model fp32 forwards in the interpreter (runtime::Session), for scripts/bench_runtime.sh.
//
// usage: bench_session MODEL --input NAME=FILE.npy [...] [--threads T] [--repeat N] [--check DIR]
// One warm-up run, then N timed runs. --check DIR compares each output with DIR/<output>.npy (the
// reference outputs of ONNX Runtime in ../shared/data/reference_outputs) and reports the max |diff|.
// Prints one JSON line: {"median_ms", "min_ms", "runs", "threads", "max_abs_diff": {output: value}}.
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

int main(int argc, char** argv) {
  qtool::core::adopt_passive_omp_wait(argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_session MODEL --input NAME=FILE.npy [--threads T] [--repeat N] [--check DIR]\n");
    return 1;
  }
  int threads = 1, repeat = 10;
  std::map<std::string, Tensor> inputs;
  std::string check;
  try {
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--threads") threads = std::stoi(v);
      if (k == "--repeat") repeat = std::stoi(v);
      if (k == "--check") check = v;
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
