// Paths baked in by tests/CMakeLists.txt.
#pragma once
#include <filesystem>

namespace qtool::test {
inline std::filesystem::path source_dir() { return QTOOL_SOURCE_DIR; }
inline std::filesystem::path shared_dir() { return QTOOL_SHARED_DIR; }
inline std::filesystem::path shared_models() { return shared_dir() / "models"; }
inline std::filesystem::path shared_tensors() { return shared_dir() / "data" / "tensors"; }
inline std::filesystem::path binary_dir() { return QTOOL_BINARY_DIR; }
inline std::filesystem::path qtool_exe() { return QTOOL_EXE; }
// A fresh, empty scratch folder under the build tree for one test.
std::filesystem::path scratch_dir(const std::string& name);
}  // namespace qtool::test
