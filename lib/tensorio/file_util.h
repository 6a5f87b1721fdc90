// Whole-file reads and atomic writes shared by the tensor file formats.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace qtool::tensorio::detail {

// The file's bytes; BadInputError naming the file when it cannot be read.
std::vector<std::byte> read_file(const std::filesystem::path& path);
// Writes to a temporary file beside `path`, then renames it over `path`.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace qtool::tensorio::detail
