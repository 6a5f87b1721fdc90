#include "calib/calibration_table.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calib/sha256.h"
#include "calib/trt_cache.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/json_parse.h"

namespace qtool::calib {

const TensorCalibration* CalibrationTable::find(const std::string& tensor) const {
  auto it = tensors.find(tensor);
  return it == tensors.end() ? nullptr : &it->second;
}

const TensorCalibration& CalibrationTable::at(const std::string& tensor) const {
  if (const TensorCalibration* t = find(tensor)) return *t;
  throw BadInputError("calibration table of " + model + " has no tensor '" + tensor +
                      "': calibrate again with the model that is being quantized");
}

// ---------------------------------------------------------------------------------------------------
// Writing: a fixed layout with keys in sorted order, so the same table always gives the same bytes.

namespace {

std::string num(double v, const char* fmt) {
  char buf[40];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}
std::string f9(float v) { return num(static_cast<double>(v), "%.9g"); }
std::string d17(double v) { return num(v, "%.17g"); }
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

void write_tensor(std::ostringstream& o, const TensorCalibration& t) {
  o << "{\"count\": " << t.count << ", \"dtype\": " << quoted(std::string(dtype_name(t.dtype)));
  if (!t.histogram.empty()) {
    o << ",\n      \"histogram\": {\"counts\": [";
    for (size_t i = 0; i < t.histogram.counts.size(); ++i) o << (i ? "," : "") << t.histogram.counts[i];
    o << "], \"max\": " << d17(t.histogram.hi()) << ", \"min\": " << d17(t.histogram.lo) << "},\n      ";
  } else {
    o << ", ";
  }
  o << "\"inf_count\": " << t.inf_count;
  if (t.minmax) o << ", \"max\": " << f9(t.minmax->hi) << ", \"min\": " << f9(t.minmax->lo);
  o << ", \"nan_count\": " << t.nan_count;
  if (!t.ranges.empty()) {
    // Sorted by name, as every other object in the file.
    std::map<std::string_view, Range> by_name;
    for (const auto& [m, r] : t.ranges) by_name[range_method_name(m)] = r;
    o << ",\n      \"ranges\": {";
    bool first = true;
    for (const auto& [name, r] : by_name) {
      o << (first ? "" : ", ") << "\"" << name << "\": [" << f9(r.lo) << ", " << f9(r.hi) << "]";
      first = false;
    }
    o << "}";
  }
  o << ", \"shape\": [";
  for (size_t i = 0; i < t.shape.size(); ++i) o << (i ? "," : "") << t.shape[i];
  o << "]";
  if (t.softmax_rows)
    o << ",\n      \"softmax_rows\": {\"min_row_max\": " << f9(t.softmax_rows->min_row_max)
      << ", \"row_length\": " << t.softmax_rows->row_length << "}";
  o << "}";
}

}  // namespace

std::string calibration_to_json(const CalibrationTable& table) {
  std::ostringstream o;
  o << "{\n  \"batch_size\": " << table.batch_size << ",\n  \"format\": \"" << kCalibrationFormat << "\",\n"
    << "  \"model\": " << quoted(table.model) << ",\n  \"model_sha256\": " << quoted(table.model_sha256) << ",\n"
    << "  \"samples\": " << table.samples << ",\n"
    << "  \"settings\": {\"histogram_bins\": " << table.settings.histogram_bins << ", \"methods\": [";
  for (RangeMethod m : table.settings.methods)
    o << (m == *table.settings.methods.begin() ? "" : ", ") << "\"" << range_method_name(m) << "\"";
  o << "], \"percentile\": " << num(table.settings.percentile, "%.9g")
    << ", \"target_dtype\": " << quoted(std::string(dtype_name(table.settings.target_dtype)))
    << (table.settings.target_symmetric ? ", \"target_symmetric\": true" : "") << "},\n"
    << "  \"tensors\": {";
  bool first = true;
  for (const auto& [name, t] : table.tensors) {
    o << (first ? "\n    " : ",\n    ") << quoted(name) << ": ";
    write_tensor(o, t);
    first = false;
  }
  o << (first ? "},\n" : "\n  },\n") << "  \"version\": " << kCalibrationVersion << "\n}\n";
  return o.str();
}

void write_calibration(const CalibrationTable& table, const std::filesystem::path& path) {
  fileio::write_file_atomic(path, calibration_to_json(table));
}

// ---------------------------------------------------------------------------------------------------
// Reading and validation. Every error names the file and the JSON path.

namespace {

using nlohmann::json;

struct Reader {
  std::string origin;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw BadInputError(origin + ": " + path + ": " + what);
  }
  const json& field(const json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(path.empty() ? key : path + "." + key, "missing");
    return *it;
  }
  const json& object(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_object()) fail(join(path, key), "expected an object");
    return v;
  }
  int64_t integer(const json& v, const std::string& path, int64_t min) const {
    if (!v.is_number_integer()) fail(path, "expected an integer");
    const int64_t i = v.get<int64_t>();
    if (i < min) fail(path, "expected an integer >= " + std::to_string(min));
    return i;
  }
  double number(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(path, "expected a finite number");
    return d;
  }
  std::string string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string");
    return v.get<std::string>();
  }
  static std::string join(const std::string& path, const char* key) { return path.empty() ? key : path + "." + key; }
};

TensorCalibration read_tensor(const Reader& r, const json& j, const std::string& path) {
  if (!j.is_object()) r.fail(path, "expected an object");
  TensorCalibration t;
  const std::string dtype = r.string(r.field(j, path, "dtype"), path + ".dtype");
  const auto dt = dtype_from_name(dtype);
  if (!dt || !is_float(*dt)) r.fail(path + ".dtype", "'" + dtype + "' is not a float dtype");
  t.dtype = *dt;
  const json& shape = r.field(j, path, "shape");
  if (!shape.is_array()) r.fail(path + ".shape", "expected an array of integers");
  for (size_t i = 0; i < shape.size(); ++i)
    t.shape.push_back(r.integer(shape[i], path + ".shape[" + std::to_string(i) + "]", 0));
  t.count = r.integer(r.field(j, path, "count"), path + ".count", 0);
  t.nan_count = r.integer(r.field(j, path, "nan_count"), path + ".nan_count", 0);
  t.inf_count = r.integer(r.field(j, path, "inf_count"), path + ".inf_count", 0);
  const bool has_min = j.contains("min"), has_max = j.contains("max");
  if (has_min != has_max) r.fail(path + (has_min ? ".max" : ".min"), "missing (min and max come together)");
  if (t.count > 0 && !has_min) r.fail(path + ".min", "missing (count > 0)");
  if (has_min) {
    const double lo = r.number(j["min"], path + ".min"), hi = r.number(j["max"], path + ".max");
    if (lo > hi) r.fail(path + ".min", "greater than max");
    t.minmax = Range{static_cast<float>(lo), static_cast<float>(hi)};
  }
  if (j.contains("histogram")) {
    const std::string hp = path + ".histogram";
    const json& h = j["histogram"];
    if (!h.is_object()) r.fail(hp, "expected an object");
    if (!t.minmax) r.fail(path + ".min", "missing (a histogram needs min and max)");
    const double lo = r.number(r.field(h, hp, "min"), hp + ".min"), hi = r.number(r.field(h, hp, "max"), hp + ".max");
    const json& counts = r.field(h, hp, "counts");
    if (!counts.is_array() || counts.empty()) r.fail(hp + ".counts", "expected a non-empty array of integers");
    if (!(lo < hi)) r.fail(hp + ".min", "must be less than histogram max");
    t.histogram.counts.reserve(counts.size());
    for (size_t i = 0; i < counts.size(); ++i)
      t.histogram.counts.push_back(
          static_cast<uint64_t>(r.integer(counts[i], hp + ".counts[" + std::to_string(i) + "]", 0)));
    t.histogram.lo = lo;
    t.histogram.width = (hi - lo) / static_cast<double>(counts.size());
    t.histogram.data_min = t.minmax->lo;
    t.histogram.data_max = t.minmax->hi;
  }
  if (j.contains("softmax_rows")) {
    const std::string sp = path + ".softmax_rows";
    const json& sr = j["softmax_rows"];
    if (!sr.is_object()) r.fail(sp, "expected an object");
    SoftmaxRows rows;
    rows.min_row_max = static_cast<float>(r.number(r.field(sr, sp, "min_row_max"), sp + ".min_row_max"));
    rows.row_length = r.integer(r.field(sr, sp, "row_length"), sp + ".row_length", 1);
    t.softmax_rows = rows;
  }
  if (j.contains("ranges")) {
    const std::string rp = path + ".ranges";
    const json& ranges = j["ranges"];
    if (!ranges.is_object()) r.fail(rp, "expected an object");
    for (const auto& [name, v] : ranges.items()) {
      const auto method = range_method_from_name(name);
      const std::string mp = rp + "." + name;
      if (!method) r.fail(mp, "unknown range method (known: " + known_range_methods() + ")");
      if (!v.is_array() || v.size() != 2) r.fail(mp, "expected [lo, hi]");
      const double lo = r.number(v[0], mp + "[0]"), hi = r.number(v[1], mp + "[1]");
      if (lo > hi) r.fail(mp, "expected [lo, hi] with lo <= hi");
      t.ranges[*method] = Range{static_cast<float>(lo), static_cast<float>(hi)};
    }
  }
  return t;
}

}  // namespace

CalibrationTable calibration_from_json(const std::string& text, const std::string& origin) {
  Reader r{origin};
  const json doc = parse_json_limited(text, origin);
  if (!doc.is_object()) r.fail("(root)", "expected an object");
  const std::string format = r.string(r.field(doc, "", "format"), "format");
  if (format != kCalibrationFormat) r.fail("format", "is '" + format + "', expected 'qtool-calibration'");
  const int64_t version = r.integer(r.field(doc, "", "version"), "version", 0);
  if (version != kCalibrationVersion)
    r.fail("version", std::to_string(version) + " is not supported (this qtool reads version 1)");
  CalibrationTable t;
  t.model = r.string(r.field(doc, "", "model"), "model");
  t.model_sha256 = r.string(r.field(doc, "", "model_sha256"), "model_sha256");
  t.samples = r.integer(r.field(doc, "", "samples"), "samples", 0);
  t.batch_size = r.integer(r.field(doc, "", "batch_size"), "batch_size", 1);
  const json& s = r.object(doc, "", "settings");
  t.settings.histogram_bins = r.integer(r.field(s, "settings", "histogram_bins"), "settings.histogram_bins", 1);
  t.settings.percentile = r.number(r.field(s, "settings", "percentile"), "settings.percentile");
  t.settings.methods = {std::begin(kRangeMethods),
                        std::end(kRangeMethods)};  // what version-1 files without the key held
  if (s.contains("methods")) {
    const json& ms = s["methods"];
    if (!ms.is_array()) r.fail("settings.methods", "expected an array of range method names");
    t.settings.methods.clear();
    for (size_t i = 0; i < ms.size(); ++i) {
      const std::string mp = "settings.methods[" + std::to_string(i) + "]";
      const auto m = range_method_from_name(r.string(ms[i], mp));
      if (!m) r.fail(mp, "unknown range method (known: " + known_range_methods() + ")");
      t.settings.methods.insert(*m);
    }
  }
  const std::string dt = r.string(r.field(s, "settings", "target_dtype"), "settings.target_dtype");
  const auto target = dtype_from_name(dt);
  if (!target) r.fail("settings.target_dtype", "unknown dtype '" + dt + "'");
  t.settings.target_dtype = *target;
  if (s.contains("target_symmetric")) {
    const json& sym = s["target_symmetric"];
    if (!sym.is_boolean()) r.fail("settings.target_symmetric", "expected true or false");
    t.settings.target_symmetric = sym.get<bool>();
  }
  const json& tensors = r.object(doc, "", "tensors");
  for (const auto& [name, v] : tensors.items())
    t.tensors[name] = read_tensor(r, v, "tensors[" + json(name).dump() + "]");
  return t;
}

CalibrationTable read_calibration(const std::filesystem::path& path) {
  const std::string text = fileio::read_file(path, "calibration file");
  if (is_trt_cache(text)) return table_from_trt_cache(text, path.string());
  return calibration_from_json(text, path.string());
}

void check_calibration_model(const CalibrationTable& table, const std::filesystem::path& model,
                             const std::string& table_name) {
  if (table.model_sha256.empty()) return;  // nothing recorded: nothing to compare
  const std::string actual = sha256_file(model);
  if (actual == table.model_sha256) return;
  throw BadInputError("calibration file '" + table_name + "' was made for model '" + table.model + "' (sha256 " +
                      table.model_sha256.substr(0, 12) + "...), not for '" + model.string() + "' (sha256 " +
                      actual.substr(0, 12) + "...): re-run qtool calibrate on this model, or pass --allow-calib-mismatch");
}

}  // namespace qtool::calib
