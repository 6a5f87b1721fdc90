// Observer overhead of calibration: wall time per sample of `qtool calibrate`'s observed runs against the plain
// forward pass of `qtool run` with the same --threads.
//   bench_calib_overhead MODEL --shape NAME=d0,d1,... [--samples N] [--rounds R] [--threads T]
//                        [--observer-threads K] [--methods LIST] [--isa baseline|avx2|avx512]
// (--threads, --observer-threads and --methods as `qtool calibrate`; default methods minmax,percentile,entropy,mse;
// --isa caps the vector instruction set of the observer loops, default the CPU's widest)
// Each round times N plain runs, then N observed runs split across threads as calibrate does
// (calib::plan_threads, calib::observe_samples), waiting for the last observer. Rounds alternate, so machine
// noise hits both alike; the overhead is the median of the per-round ratios. Inputs are seeded random normal
// values. Prints one JSON line, with process CPU time per sample as well.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "calib/calibrator.h"
#include "core/omp_wait.h"
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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  qtool::core::adopt_thread_environment(argv);
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: bench_calib_overhead MODEL --shape NAME=d0,d1,... [--samples N] [--rounds R] [--threads T] "
                 "[--observer-threads K] [--methods LIST] [--isa baseline|avx2|avx512]\n");
    return 1;
  }
  const std::string model_path = argv[1];
  int64_t samples = 5;
  int rounds = 5, threads = 0, observer_threads = -1;
  std::string methods = "minmax,percentile,entropy,mse";
  std::map<std::string, Shape> shapes;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--samples"))
      samples = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--methods"))
      methods = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--observer-threads"))
      observer_threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--isa")) {
      const std::optional<calib::CpuIsa> isa = calib::cpu_isa_from_name(argv[i + 1]);
      if (!isa) {
        std::fprintf(stderr, "error: --isa %s: expected baseline, avx2 or avx512\n", argv[i + 1]);
        return 2;
      }
      calib::set_cpu_isa_limit(*isa);
    } else if (!std::strcmp(argv[i], "--shape")) {
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
    const runtime::Session plain_session(model, {.threads = threads});
    calib::CalibratorOptions copt;
    copt.methods = calib::parse_range_methods(methods, "--methods");
    const calib::ThreadPlan plan = calib::plan_threads(threads, observer_threads, copt.methods);
    copt.exec.threads = plan.forward + plan.observers;
    const runtime::Session observed_session(model, {.threads = plan.forward});
    const std::vector<calib::InputSpec> inputs = calib::input_specs(plain_session);
    auto source = calib::open_random(inputs, samples, 0, shapes, model.proto.get());
    calib::Calibrator calibrator(copt);

    plain_session.run(source->batch(0, 1));  // warm-up
    std::vector<double> plain, observed, ratio, plain_cpu, observed_cpu;
    for (int r = 0; r < rounds; ++r) {
      const double c0 = cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < samples; ++i) plain_session.run(source->batch(i, 1));
      const auto t1 = std::chrono::steady_clock::now();
      const double c1 = cpu_seconds();
      calib::observe_samples(observed_session, *source, 1, calibrator, plan);
      const auto t2 = std::chrono::steady_clock::now();
      const double c2 = cpu_seconds();
      const double n = double(samples);
      plain.push_back(std::chrono::duration<double>(t1 - t0).count() / n);
      observed.push_back(std::chrono::duration<double>(t2 - t1).count() / n);
      ratio.push_back(observed.back() / plain.back());
      plain_cpu.push_back((c1 - c0) / n);
      observed_cpu.push_back((c2 - c1) / n);
    }
    const auto t3 = std::chrono::steady_clock::now();
    const calib::CalibrationTable table = calibrator.finish();
    const double finish = std::chrono::duration<double>(std::chrono::steady_clock::now() - t3).count();
    std::printf(
        "{\"model\": \"%s\", \"methods\": \"%s\", \"samples\": %lld, \"rounds\": %d, \"threads\": %d, "
        "\"forward_threads\": %d, \"observer_threads\": %d, \"tensors\": %zu, \"plain_s_per_sample\": %.6f, "
        "\"observed_s_per_sample\": %.6f, \"overhead\": %.4f, \"plain_cpu_s_per_sample\": %.6f, "
        "\"observed_cpu_s_per_sample\": %.6f, \"cpu_overhead\": %.4f, \"finish_s\": %.4f, \"isa\": \"%s\"}\n",
        model_path.c_str(), calib::range_methods_str(copt.methods).c_str(), static_cast<long long>(samples), rounds,
        plain_session.threads(), plan.forward, plan.observers, table.tensors.size(), median(plain), median(observed),
        median(ratio) - 1.0, median(plain_cpu), median(observed_cpu), median(observed_cpu) / median(plain_cpu) - 1.0,
        finish, std::string(calib::cpu_isa_name(calib::cpu_isa())).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
