#include "calib/trt_cache.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace qtool::calib {

bool is_trt_cache(const std::string& text) { return text.rfind("TRT-", 0) == 0; }

std::string trt_cache_from_table(const CalibrationTable& table, int trt_version) {
  const bool entropy = table.settings.methods.count(RangeMethod::Entropy) != 0;
  std::string out =
      "TRT-" + std::to_string(trt_version) + (entropy ? "-EntropyCalibration2\n" : "-MinMaxCalibration\n");
  for (const auto& [name, t] : table.tensors) {
    if (!t.minmax) continue;
    const auto it = t.ranges.find(entropy ? RangeMethod::Entropy : RangeMethod::MinMax);
    const Range r = it != t.ranges.end() ? it->second : *t.minmax;
    const float scale = std::max(std::fabs(r.lo), std::fabs(r.hi)) / kTrtInt8Max;
    char hex[16];
    std::snprintf(hex, sizeof hex, "%x", std::bit_cast<uint32_t>(scale));
    out += name + ": " + hex + "\n";
  }
  return out;
}

CalibrationTable table_from_trt_cache(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (!is_trt_cache(line))
    throw BadInputError(origin +
                        ": line 1: expected a TensorRT calibration cache header such as "
                        "'TRT-8601-EntropyCalibration2'");
  CalibrationTable table;
  table.model = "";
  table.settings.methods = kDefaultRangeMethods;
  table.settings.target_dtype = DType::Int8;
  table.settings.target_symmetric = true;
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = origin + ": line " + std::to_string(number);
    // Tensor names may hold ": " themselves; the scale is after the last one.
    const size_t colon = line.rfind(": ");
    if (colon == std::string::npos || colon == 0)
      throw BadInputError(where + ": expected 'tensor_name: hex_scale', got '" + line.substr(0, 80) + "'");
    const std::string name = line.substr(0, colon), hex = line.substr(colon + 2);
    char* end = nullptr;
    const unsigned long bits = std::strtoul(hex.c_str(), &end, 16);
    if (hex.empty() || hex.size() > 8 || *end != '\0' || hex.find_first_of("+- x") != std::string::npos)
      throw BadInputError(where + ": '" + hex + "' is not a float32 in hexadecimal (at most 8 digits)");
    const float scale = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (!std::isfinite(scale) || scale < 0)
      throw BadInputError(where + ": scale of '" + name + "' is " + std::to_string(scale) +
                          ", expected a finite scale >= 0");
    if (table.tensors.count(name)) throw BadInputError(where + ": tensor '" + name + "' is listed twice");
    const float amax = scale * kTrtInt8Max;
    TensorCalibration& t = table.tensors[name];
    t.minmax = Range{-amax, amax};
    for (RangeMethod m : table.settings.methods) t.ranges[m] = *t.minmax;
  }
  if (table.tensors.empty()) throw BadInputError(origin + ": the TensorRT calibration cache lists no tensor");
  return table;
}

}  // namespace qtool::calib
