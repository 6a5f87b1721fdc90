#include "core/omp_wait.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace qtool::core {
namespace {

// The OPENBLAS_CORETYPE to ask for when OpenBLAS did not recognise this CPU and fell back to its Prescott (SSE3)
// kernels, or null. OpenBLAS 0.3.21 (Debian 12) names Sapphire Rapids, as its KVM guests present it, Prescott: its
// sgemm ran 15 multiply-adds per ns there against 60-72 with OPENBLAS_CORETYPE=SkylakeX (tests/bench/bench_gemm,
// 1024x1024x64 and 256x1024x512, 2026-11-25). Asked only when the running OpenBLAS reports Prescott, so a CPU it
// knows keeps its own choice.
const char* openblas_coretype() {
#if defined(__x86_64__) && defined(__GNUC__)
  using CoreName = const char* (*)();
  auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!corename) return nullptr;  // OpenBLAS not linked (or not a DYNAMIC_ARCH build)
  const char* name = corename();
  if (!name || std::strcmp(name, "Prescott") != 0) return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

}  // namespace

void adopt_thread_environment(char** argv) {
#if defined(__linux__)
  bool changed = false;
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT"))
    changed |= setenv("OMP_WAIT_POLICY", "PASSIVE", 0) == 0;
  if (!std::getenv("OPENBLAS_NUM_THREADS") && sysconf(_SC_NPROCESSORS_ONLN) > 1)
    changed |= setenv("OPENBLAS_NUM_THREADS", "1", 0) == 0;
  if (!std::getenv("OPENBLAS_CORETYPE"))
    if (const char* core = openblas_coretype()) changed |= setenv("OPENBLAS_CORETYPE", core, 0) == 0;
  if (!changed) return;
  execv("/proc/self/exe", argv);  // returns only on failure: run on with the libraries' defaults
#else
  (void)argv;
#endif
}

}  // namespace qtool::core
