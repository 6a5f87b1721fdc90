// SHA-256 (FIPS 180-4) of a file, for the calibration file's model_sha256 (and for `qtool quantize` to check
// that a calibration file belongs to the model it quantizes).
#pragma once

#include <filesystem>
#include <span>
#include <string>

namespace qtool::calib {

// Lower-case hex digest. BadInputError when the file cannot be read.
std::string sha256_file(const std::filesystem::path& path);
std::string sha256_hex(std::span<const unsigned char> bytes);

}  // namespace qtool::calib
