#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "test_paths.h"

#include <unistd.h>

namespace qtool::test {
std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = binary_dir() / "test_scratch" / (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace qtool::test
