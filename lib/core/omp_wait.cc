#include "core/omp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace qtool::core {

void adopt_thread_environment(char** argv) {
#if defined(__linux__)
  bool changed = false;
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT"))
    changed |= setenv("OMP_WAIT_POLICY", "PASSIVE", 0) == 0;
  if (!std::getenv("OPENBLAS_NUM_THREADS") && sysconf(_SC_NPROCESSORS_ONLN) > 1)
    changed |= setenv("OPENBLAS_NUM_THREADS", "1", 0) == 0;
  if (!changed) return;
  execv("/proc/self/exe", argv);  // returns only on failure: run on with the libraries' defaults
#else
  (void)argv;
#endif
}

}  // namespace qtool::core
