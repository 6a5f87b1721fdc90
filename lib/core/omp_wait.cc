#include "core/omp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace qtool::core {

void adopt_passive_omp_wait(char** argv) {
#if defined(__linux__)
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: run on with libgomp's default
  unsetenv("OMP_WAIT_POLICY");
#else
  (void)argv;
#endif
}

}  // namespace qtool::core
