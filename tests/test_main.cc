#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/omp_wait.h"
#include "test_paths.h"

namespace qtool::test {
std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = binary_dir() / "test_scratch" / (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace qtool::test

int main(int argc, char** argv) {
  qtool::core::adopt_thread_environment(argv);  // as the CLI does: test binaries often run side by side
  return Catch::Session().run(argc, argv);
}
