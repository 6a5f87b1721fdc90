#include "quantize/calib_ranges.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace qtool::quantize {

std::optional<std::pair<double, double>> ActivationRanges::get(const std::string& tensor, RangeMethod method) const {
  auto it = tensors.find(tensor);
  if (it == tensors.end()) return std::nullopt;
  const auto& r = it->second.by_method[static_cast<size_t>(method)];
  if (r) return r;
  return std::make_pair(it->second.min, it->second.max);
}

ActivationRanges read_activation_ranges(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw BadInputError("cannot open calibration file '" + path.string() + "': check the path");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw BadInputError(path.string() + ": not valid JSON (" + e.what() + ")");
  }
  const std::string src = path.filename().string();
  if (!j.is_object() || j.value("format", "") != "qtool-calibration")
    throw BadInputError(src + ": $.format: expected \"qtool-calibration\" (write it with qtool calibrate)");
  if (!j.contains("tensors") || !j["tensors"].is_object())
    throw BadInputError(src + ": $.tensors: expected an object {tensor name: statistics}");
  ActivationRanges r;
  r.model_sha256 = j.value("model_sha256", "");
  static constexpr const char* kMethods[] = {"minmax", "percentile", "entropy", "mse", "torch_histogram"};
  for (auto it = j["tensors"].begin(); it != j["tensors"].end(); ++it) {
    const auto& t = it.value();
    const std::string p = src + ": $.tensors[" + nlohmann::json(it.key()).dump() + "]";
    if (!t.is_object() || !t.contains("min") || !t.contains("max") || !t["min"].is_number() || !t["max"].is_number())
      throw BadInputError(p + ": expected numbers \"min\" and \"max\"");
    TensorRanges tr;
    tr.min = t["min"].get<double>();
    tr.max = t["max"].get<double>();
    if (t.contains("ranges") && t["ranges"].is_object())
      for (size_t m = 0; m < 5; ++m)
        if (t["ranges"].contains(kMethods[m])) {
          const auto& v = t["ranges"][kMethods[m]];
          if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number())
            throw BadInputError(p + ".ranges." + kMethods[m] + ": expected [lo, hi]");
          tr.by_method[m] = std::make_pair(v[0].get<double>(), v[1].get<double>());
        }
    r.tensors.emplace(it.key(), tr);
  }
  return r;
}

}  // namespace qtool::quantize
