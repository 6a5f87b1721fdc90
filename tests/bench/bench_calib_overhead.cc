// Observer overhead of calibration: time per sample of the plain forward pass (the interpreter as `qtool run`
// uses it) against the same runs with every float tensor observed by a Calibrator (as `qtool calibrate`).
//   bench_calib_overhead MODEL --shape NAME=d0,d1,... [--samples N] [--threads T] [--methods LIST]
// (--methods as `qtool calibrate --methods`; default minmax,percentile,entropy,mse)
// Inputs are seeded random normal values. Prints one JSON line: wall and process CPU time per sample.
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "calib/calibrate.h"
#include "calib/calibrator.h"
#include "onnx/model_io.h"
#include "runtime/session.h"

using namespace qtool;

namespace {
// CPU time of the whole process (all threads): less sensitive than wall time to other jobs on a shared machine.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_calib_overhead MODEL --shape NAME=d0,d1,... [--samples N] [--threads T]\n");
    return 1;
  }
  const std::string model_path = argv[1];
  int64_t samples = 5;
  int threads = 0;
  std::string methods = "minmax,percentile,entropy,mse";
  std::map<std::string, Shape> shapes;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--samples"))
      samples = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--methods"))
      methods = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--shape")) {
      const std::string s = argv[i + 1];
      const size_t eq = s.find('=');
      Shape dims;
      for (size_t p = eq + 1; p <= s.size();) {
        const size_t c = std::min(s.find(',', p), s.size());
        dims.push_back(std::atoll(s.substr(p, c - p).c_str()));
        p = c + 1;
      }
      shapes[s.substr(0, eq)] = dims;
    }
  }
  // The allocator settings of the qtool process (apps/qtool/main.cc), so both passes run as `qtool run` and
  // `qtool calibrate` do: activations are reused from the heap instead of fresh (page-faulting) mappings.
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 64 << 20);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 256 << 20);
  try {
    const onnxio::LoadedModel model = onnxio::load_model(model_path);
    const runtime::Session session(model, {.threads = threads});
    const std::vector<calib::InputSpec> inputs = calib::input_specs(session);
    auto source = calib::open_random(inputs, samples, 0, shapes);
    calib::CalibratorOptions copt;
    copt.exec.threads = session.threads();
    copt.methods = calib::parse_range_methods(methods, "--methods");
    calib::Calibrator calibrator(copt);
    runtime::RunOptions observed;
    observed.tap = [&](const std::string& name, const Tensor& v) { calibrator.observe(name, v); };

    session.run(source->batch(0, 1));  // warm-up
    double plain = 0, with_observers = 0, plain_cpu = 0, observed_cpu = 0;
    for (int64_t i = 0; i < samples; ++i) {  // interleaved, so machine noise hits both alike
      const auto in = source->batch(i, 1);
      const double c0 = cpu_seconds();
      auto t0 = std::chrono::steady_clock::now();
      session.run(in);
      auto t1 = std::chrono::steady_clock::now();
      const double c1 = cpu_seconds();
      session.run(in, observed);
      auto t2 = std::chrono::steady_clock::now();
      const double c2 = cpu_seconds();
      plain_cpu += c1 - c0;
      observed_cpu += c2 - c1;
      plain += std::chrono::duration<double>(t1 - t0).count();
      with_observers += std::chrono::duration<double>(t2 - t1).count();
    }
    const auto t3 = std::chrono::steady_clock::now();
    const calib::CalibrationTable table = calibrator.finish();
    const double finish = std::chrono::duration<double>(std::chrono::steady_clock::now() - t3).count();
    std::printf(
        "{\"model\": \"%s\", \"methods\": \"%s\", \"samples\": %lld, \"threads\": %d, \"tensors\": %zu, \"plain_s_per_sample\": %.6f, "
        "\"observed_s_per_sample\": %.6f, \"overhead\": %.4f, \"plain_cpu_s_per_sample\": %.6f, "
        "\"observed_cpu_s_per_sample\": %.6f, \"cpu_overhead\": %.4f, \"finish_s\": %.4f}\n",
        model_path.c_str(), calib::range_methods_str(copt.methods).c_str(), static_cast<long long>(samples), session.threads(), table.tensors.size(),
        plain / double(samples), with_observers / double(samples), with_observers / plain - 1.0,
        plain_cpu / double(samples), observed_cpu / double(samples), observed_cpu / plain_cpu - 1.0, finish);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
