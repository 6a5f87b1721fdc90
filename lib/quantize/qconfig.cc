#include "quantize/qconfig.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <re2/re2.h>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_io.h"
#include "core/json_parse.h"
#include "quantize/builtin_configs.h"

namespace qtool::quantize {
namespace {

using json = nlohmann::json;

struct Names {
  std::string_view name;
  int value;
};
constexpr std::array kGranularityNames = {Names{"per_tensor", 0}, Names{"per_channel", 1}, Names{"per_block", 2}};
constexpr std::array kRoundingNames = {Names{"nearest", 0}, Names{"kernel_sum", 1}};
constexpr std::array kTargetNames = {Names{"ort-cpu", 0}, Names{"tensorrt", 1}};
constexpr std::array kWeightAlgorithmNames = {Names{"rtn", 0}, Names{"clip_search", 1}, Names{"gptq", 2}, Names{"awq", 3}};

// Parsing context: the source file and JSON path, for error messages.
class Ctx {
 public:
  explicit Ctx(std::string source) : source_(std::move(source)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw BadInputError(source_ + ": " + path + ": " + what);
  }
  static std::string got(const json& j) { return j.dump(); }

  const json& object(const json& j, const std::string& path, std::initializer_list<std::string_view> allowed) const {
    if (!j.is_object()) fail(path, "expected an object, got " + got(j));
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool ok = false;
      for (auto a : allowed) ok = ok || it.key() == a;
      if (!ok) {
        std::string list;
        for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(path + "." + it.key(), "unknown key (expected one of " + list + ")");
      }
    }
    return j;
  }
  bool boolean(const json& j, const std::string& path) const {
    if (!j.is_boolean()) fail(path, "expected true or false, got " + got(j));
    return j.get<bool>();
  }
  int64_t integer(const json& j, const std::string& path) const {
    if (!j.is_number_integer()) fail(path, "expected an integer, got " + got(j));
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, "integer " + got(j) + " is too large");
    return j.get<int64_t>();
  }
  double number(const json& j, const std::string& path) const {
    if (!j.is_number()) fail(path, "expected a number, got " + got(j));
    return j.get<double>();
  }
  std::string string(const json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, "expected a string, got " + got(j));
    return j.get<std::string>();
  }
  template <size_t N>
  int choice(const json& j, const std::string& path, const std::array<Names, N>& names) const {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + std::string(n.name);
    if (!j.is_string()) fail(path, "expected one of " + list + ", got " + got(j));
    for (const auto& n : names)
      if (j.get<std::string>() == n.name) return n.value;
    fail(path, "expected one of " + list + ", got " + got(j));
  }

 private:
  std::string source_;
};

std::string key_path(const std::string& parent, const std::string& key) {
  // Keys that are not identifiers are quoted: $.node_names["conv 1"]
  bool ident = !key.empty();
  for (char c : key) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '*');
  return ident ? parent + "." + key : parent + "[" + json(key).dump() + "]";
}

// Tensor: a `tensors` override, which may name a weight or an activation; it accepts what either takes, and is
// checked against the tensor's kind where it is applied (check_override).
enum class SlotKind { Activation, Weight, Bias, Output, Tensor };
bool weight_like(SlotKind k) { return k == SlotKind::Weight || k == SlotKind::Tensor; }

// The first field of `p` that has no effect on a tensor of this kind, and why; nullopt when all apply. A weight is
// quantized from its own values (no calibrated range, no fixed parameters); a bias is int32 at scale
// s_input·s_weight with zero point 0 (only its dtype is a choice); an activation is quantized per tensor. And a
// percentile is the parameter of method percentile only.
std::optional<std::pair<std::string, std::string>> inapplicable(const TensorSettingsPatch& p, SlotKind kind) {
  using Why = std::pair<std::string, std::string>;
  if (kind == SlotKind::Weight) {
    const char* why = "weights are quantized from their own values; calibrated ranges and fixed parameters apply to "
                      "\"activation\" and \"output\" settings";
    for (const auto& [set, key] : {std::pair{p.method.has_value(), "method"}, {p.percentile.has_value(), "percentile"},
                                   {p.range.has_value(), "range"}, {p.scale.has_value(), "scale"},
                                   {p.zero_point.has_value(), "zero_point"}})
      if (set) return Why{key, why};
  }
  if (kind == SlotKind::Bias) {
    for (const auto& [set, key] :
         {std::pair{p.symmetric.has_value(), "symmetric"}, {p.granularity.has_value(), "granularity"},
          {p.axis.has_value(), "axis"}, {p.block_size.has_value(), "block_size"},
          {p.narrow_range.has_value(), "narrow_range"}, {p.reduce_range.has_value(), "reduce_range"},
          {p.method.has_value(), "method"}, {p.percentile.has_value(), "percentile"}, {p.range.has_value(), "range"},
          {p.scale.has_value(), "scale"}, {p.zero_point.has_value(), "zero_point"}})
      if (set)
        return Why{key, "a bias is int32 with scale s_input * s_weight and zero point 0: only \"dtype\" applies"};
  }
  if (kind == SlotKind::Activation || kind == SlotKind::Output) {
    const char* why = "activations are quantized per_tensor; it applies to weights";
    for (const auto& [set, key] :
         {std::pair{p.granularity && *p.granularity != Granularity::PerTensor, "granularity"},
          {p.axis.has_value(), "axis"}, {p.block_size.has_value(), "block_size"},
          {p.saturation_safe.has_value(), "saturation_safe"}, {p.rounding.has_value(), "rounding"},
          {p.algorithm.has_value(), "algorithm"}, {p.scale_bits.has_value(), "scale_bits"},
          {p.scale_block_size.has_value(), "scale_block_size"}})
      if (set) return Why{key, why};
  }
  // A parameter beside a choice in the same block that does not read it.
  if (p.percentile && p.method && *p.method != RangeMethod::Percentile)
    return Why{"percentile", "applies to \"method\": \"percentile\", but this block's method is \"" +
                                 std::string(calib::range_method_name(*p.method)) + "\""};
  if (p.block_size && p.granularity && *p.granularity != Granularity::PerBlock)
    return Why{"block_size", "applies to \"granularity\": \"per_block\", but this block's granularity is \"" +
                                 std::string(granularity_name(*p.granularity)) + "\""};
  if (p.axis && p.granularity == Granularity::PerTensor)
    return Why{"axis", "applies to per_channel and per_block weights, but this block's granularity is \"per_tensor\""};
  return std::nullopt;
}

void check_dtype(const Ctx& ctx, DType d, SlotKind kind, const std::string& path) {
  const auto& info = dtype_info(d);
  if (kind == SlotKind::Bias) {
    if (d != DType::Int32)
      ctx.fail(path, "bias dtype must be int32 (use \"bias\": null to keep biases float), got \"" +
                         std::string(info.name) + "\"");
    return;
  }
  const bool ok = d == DType::Int8 || d == DType::UInt8 || d == DType::Int16 || d == DType::UInt16 ||
                  d == DType::Int4 || d == DType::UInt4 || d == DType::Float8E4M3FN || d == DType::Float8E5M2;
  if (!ok)
    ctx.fail(path, "expected one of int8, uint8, int16, uint16, int4, uint4, float8e4m3fn, float8e5m2, got \"" +
                       std::string(info.name) + "\"");
  if ((d == DType::Int4 || d == DType::UInt4) && !weight_like(kind))
    ctx.fail(path, "4-bit types are supported for weights only");
}

// Largest fixed scale: scale * 65536 (a 16-bit type's range) stays a finite float.
constexpr double kMaxFixedScale = 3.4028234663852886e38 / 65536.0;

void check_zero_point(const Ctx& ctx, int64_t zp, DType d, const std::string& path) {
  const auto& info = dtype_info(d);
  const bool ok = info.cls == DTypeClass::Integer ? (zp >= info.qmin && zp <= info.qmax) : zp == 0;
  if (!ok)
    ctx.fail(path, "zero_point " + std::to_string(zp) + " is outside the range of " + std::string(info.name) +
                       (info.cls == DTypeClass::Integer
                            ? " [" + std::to_string(info.qmin) + ", " + std::to_string(info.qmax) + "]"
                            : std::string(" (float8 zero points are 0)")));
}

TensorSettingsPatch parse_patch(const Ctx& ctx, const json& j, const std::string& path, SlotKind kind) {
  ctx.object(j, path,
             {"dtype", "symmetric", "granularity", "axis", "block_size", "narrow_range", "reduce_range", "saturation_safe", "method",
              "rounding", "algorithm", "scale_bits", "scale_block_size", "percentile", "range", "scale", "zero_point",
              "shared_with_inputs"});
  TensorSettingsPatch p;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string kp = path + "." + k;
    const json& v = it.value();
    if (k == "dtype") {
      auto d = dtype_from_name(ctx.string(v, kp));
      if (!d) ctx.fail(kp, "unknown dtype " + v.dump());
      check_dtype(ctx, *d, kind, kp);
      p.dtype = d;
    } else if (k == "symmetric") {
      p.symmetric = ctx.boolean(v, kp);
    } else if (k == "granularity") {
      p.granularity = static_cast<Granularity>(ctx.choice(v, kp, kGranularityNames));
      if (*p.granularity != Granularity::PerTensor && !weight_like(kind) && kind != SlotKind::Bias)
        ctx.fail(kp, "activations are quantized per_tensor only");
    } else if (k == "axis") {
      p.axis = ctx.integer(v, kp);
    } else if (k == "block_size") {
      p.block_size = ctx.integer(v, kp);
      if (*p.block_size < 2) ctx.fail(kp, "block_size must be at least 2, got " + v.dump());
    } else if (k == "narrow_range") {
      p.narrow_range = ctx.boolean(v, kp);
    } else if (k == "reduce_range") {
      p.reduce_range = ctx.boolean(v, kp);
    } else if (k == "saturation_safe") {
      p.saturation_safe = ctx.boolean(v, kp);
      if (!weight_like(kind)) ctx.fail(kp, "saturation_safe applies to weights only");
    } else if (k == "method") {
      const auto m = v.is_string() ? calib::range_method_from_name(v.get<std::string>()) : std::nullopt;
      if (!m) ctx.fail(kp, "expected one of " + calib::known_range_methods() + ", got " + v.dump());
      p.method = *m;
    } else if (k == "rounding") {
      p.rounding = static_cast<Rounding>(ctx.choice(v, kp, kRoundingNames));
      if (!weight_like(kind)) ctx.fail(kp, "rounding applies to weights only");
    } else if (k == "algorithm") {
      p.algorithm = static_cast<WeightAlgorithm>(ctx.choice(v, kp, kWeightAlgorithmNames));
      if (!weight_like(kind)) ctx.fail(kp, "algorithm applies to weights only");
    } else if (k == "scale_bits") {
      p.scale_bits = ctx.integer(v, kp);
      if (*p.scale_bits != 8 && *p.scale_bits != 4) ctx.fail(kp, "scale_bits must be 8 or 4, got " + v.dump());
      if (!weight_like(kind)) ctx.fail(kp, "scale_bits applies to weights only");
    } else if (k == "scale_block_size") {
      p.scale_block_size = ctx.integer(v, kp);
      if (*p.scale_block_size < 1) ctx.fail(kp, "scale_block_size must be at least 1, got " + v.dump());
      if (!weight_like(kind)) ctx.fail(kp, "scale_block_size applies to weights only");
    } else if (k == "percentile") {
      const double pc = ctx.number(v, kp);
      if (!(pc > 50.0 && pc <= 100.0)) ctx.fail(kp, "percentile must be in (50, 100], got " + v.dump());
      p.percentile = pc;
    } else if (k == "range") {
      if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number())
        ctx.fail(kp, "expected [lo, hi] (two numbers), got " + v.dump());
      const double lo = v[0].get<double>(), hi = v[1].get<double>();
      if (!(lo <= hi)) ctx.fail(kp, "lo must not exceed hi, got " + v.dump());
      if (std::fabs(lo) > std::numeric_limits<float>::max() || std::fabs(hi) > std::numeric_limits<float>::max())
        ctx.fail(kp, "range " + v.dump() + " does not fit a float (largest finite float is 3.4e38)");
      p.range = std::make_pair(lo, hi);
    } else if (k == "scale") {
      const double s = ctx.number(v, kp);
      if (!(s > 0.0)) ctx.fail(kp, "scale must be positive, got " + v.dump());
      // Scales are stored as float: a subnormal one loses precision (and 1/scale overflows), and one whose
      // 16-bit range (scale * 65536) is not a finite float cannot represent any tensor.
      if (s < std::numeric_limits<float>::min())
        ctx.fail(kp, "scale " + v.dump() + " is below the smallest normal float (1.2e-38)");
      if (s > kMaxFixedScale)
        ctx.fail(kp, "scale " + v.dump() + " is absurdly large (at most 5.2e33, so that scale * 65536 is a finite float)");
      p.scale = s;
    } else if (k == "zero_point") {
      p.zero_point = ctx.integer(v, kp);
      if (*p.zero_point < -32768 || *p.zero_point > 65535)
        ctx.fail(kp, "zero_point " + v.dump() + " fits no quantized dtype (int16 to uint16 range)");
    } else if (k == "shared_with_inputs") {
      p.shared_with_inputs = ctx.boolean(v, kp);
      if (kind != SlotKind::Output) ctx.fail(kp, "applies to \"output\" settings only (of a Concat)");
    }
  }
  if (p.scale.has_value() != p.zero_point.has_value())
    ctx.fail(path, "\"scale\" and \"zero_point\" must be given together");
  if (p.zero_point && p.dtype) check_zero_point(ctx, *p.zero_point, *p.dtype, path + ".zero_point");
  if (p.granularity == Granularity::PerBlock && weight_like(kind) && !p.block_size)
    ctx.fail(path + ".granularity", "per_block needs \"block_size\"");
  if (const auto bad = inapplicable(p, kind)) ctx.fail(path + "." + bad->first, bad->second);
  return p;
}

SettingsSlot parse_slot(const Ctx& ctx, const json& j, const std::string& path, SlotKind kind) {
  SettingsSlot s;
  s.present = true;
  if (j.is_null()) {
    s.is_null = true;
    return s;
  }
  s.patch = parse_patch(ctx, j, path, kind);
  return s;
}

Rule parse_rule(const Ctx& ctx, const json& j, const std::string& path) {
  Rule r;
  r.path = path;
  if (j.is_null()) {
    r.is_null = true;
    return r;
  }
  ctx.object(j, path, {"activation", "weight", "bias", "output"});
  if (j.contains("activation"))
    r.activation = parse_slot(ctx, j["activation"], path + ".activation", SlotKind::Activation);
  if (j.contains("weight")) r.weight = parse_slot(ctx, j["weight"], path + ".weight", SlotKind::Weight);
  if (j.contains("bias")) r.bias = parse_slot(ctx, j["bias"], path + ".bias", SlotKind::Bias);
  if (j.contains("output")) r.output = parse_slot(ctx, j["output"], path + ".output", SlotKind::Output);
  return r;
}

// Opset the settings need from DequantizeLinear/QuantizeLinear.
int64_t opset_for(const TensorSettingsPatch& p) {
  int64_t v = 10;
  if (p.granularity == Granularity::PerChannel) v = std::max<int64_t>(v, 13);
  if (p.dtype == DType::Float8E4M3FN || p.dtype == DType::Float8E5M2) v = std::max<int64_t>(v, 19);
  if (p.dtype == DType::Int4 || p.dtype == DType::UInt4 || p.dtype == DType::Int16 || p.dtype == DType::UInt16 ||
      p.granularity == Granularity::PerBlock)
    v = std::max<int64_t>(v, 21);
  return v;
}

int64_t opset_for(const Rule& r) {
  int64_t v = 10;
  for (const SettingsSlot* s : {&r.activation, &r.weight, &r.bias, &r.output})
    if (s->present && !s->is_null) v = std::max(v, opset_for(s->patch));
  return v;
}

}  // namespace

std::string_view granularity_name(Granularity g) { return kGranularityNames.at(static_cast<size_t>(g)).name; }
std::string_view rounding_name(Rounding r) { return kRoundingNames.at(static_cast<size_t>(r)).name; }
std::string_view weight_algorithm_name(WeightAlgorithm a) {
  return kWeightAlgorithmNames.at(static_cast<size_t>(a)).name;
}

std::string_view target_name(Target t) { return kTargetNames.at(static_cast<size_t>(t)).name; }

namespace {

// ONNX Runtime 1.30's CPU provider cannot load FP8 activation Q/DQ with its default graph optimizations: its
// QDQ fusions (ClipQuantFusion, DQ->Conv->Q into QLinearConv) expect 8-bit integer zero points and have no FP8
// kernels. FP8 weights alone load (a DequantizeLinear of an initializer feeding a float op).
std::string float8_on_ort_cpu(const std::string& what) {
  return what + ": ONNX Runtime's CPU provider cannot load FP8 activation Q/DQ with its default graph " +
         "optimizations; set \"target\": \"tensorrt\" in the config for a TensorRT deployment (check it in ONNX " +
         "Runtime with graph optimizations disabled), or keep FP8 for weights only";
}

void check_target(const Ctx& ctx, const Rule& r, Target target) {
  if (target != Target::OrtCpu || r.is_null) return;
  for (const auto& [slot, name] : {std::pair{&r.activation, "activation"}, std::pair{&r.output, "output"}})
    if (slot->present && !slot->is_null && slot->patch.dtype && is_float8(*slot->patch.dtype))
      ctx.fail(r.path + "." + name + ".dtype", float8_on_ort_cpu("float8 activations"));
}

}  // namespace

const SettingsSlot* QConfig::checked_override(const std::string& tensor, bool weight) const {
  const SettingsSlot* o = tensor_override(tensor);
  if (!o || o->is_null) return o;
  if (const auto bad = inapplicable(o->patch, weight ? SlotKind::Weight : SlotKind::Activation))
    Ctx(source_).fail(key_path("$.tensors", tensor) + "." + bad->first,
                      json(tensor).dump() + " is " + (weight ? "a weight" : "an activation") + ": " + bad->second);
  return o;
}

std::optional<TensorSettings> weight_settings(const QConfig& config, const NodeQuant& q, const std::string& weight) {
  std::optional<TensorSettings> w = q.weight;
  if (const SettingsSlot* o = config.checked_override(weight, true); o && w) {
    if (o->is_null) return std::nullopt;
    apply_patch(*w, o->patch);
  }
  return w;
}

void apply_patch(TensorSettings& s, const TensorSettingsPatch& p) {
  if (p.dtype) s.dtype = *p.dtype;
  if (p.symmetric) s.symmetric = *p.symmetric;
  if (p.granularity) s.granularity = *p.granularity;
  if (p.axis) s.axis = p.axis;
  if (p.block_size) s.block_size = *p.block_size;
  if (p.narrow_range) s.narrow_range = *p.narrow_range;
  if (p.reduce_range) s.reduce_range = *p.reduce_range;
  if (p.saturation_safe) s.saturation_safe = *p.saturation_safe;
  if (p.method) s.method = *p.method;
  if (p.percentile) s.percentile = p.percentile;
  if (p.rounding) s.rounding = *p.rounding;
  if (p.algorithm) s.algorithm = *p.algorithm;
  if (p.scale_bits) s.scale_bits = *p.scale_bits;
  if (p.scale_block_size) s.scale_block_size = *p.scale_block_size;
  if (p.range) s.range = p.range;
  if (p.scale) s.scale = p.scale;
  if (p.zero_point) s.zero_point = p.zero_point;
  if (p.shared_with_inputs) s.shared_with_inputs = *p.shared_with_inputs;
}

QConfig QConfig::parse(const std::string& json_text, const std::string& source) {
  const Ctx ctx(source);
  const json j = parse_json_limited(json_text, source);
  ctx.object(j, "$",
             {"format", "version", "name", "description", "target", "global", "op_types", "node_name_regex",
              "node_names", "tensors", "accuracy_guard", "weight_algorithms"});
  QConfig c;
  c.source_ = source;
  c.parsed_json_ = j.dump();
  if (!j.contains("format") || j["format"] != "qtool-qconfig")
    ctx.fail("$.format", "expected \"qtool-qconfig\", got " + (j.contains("format") ? j["format"].dump() : "nothing"));
  if (!j.contains("version") || ctx.integer(j["version"], "$.version") != 1)
    ctx.fail("$.version", "expected 1, got " + (j.contains("version") ? j["version"].dump() : "nothing"));
  if (j.contains("name")) c.name_ = ctx.string(j["name"], "$.name");
  if (j.contains("description")) ctx.string(j["description"], "$.description");
  if (j.contains("target")) c.target_ = static_cast<Target>(ctx.choice(j["target"], "$.target", kTargetNames));
  if (!j.contains("global")) ctx.fail("$.global", "missing (a rule object, or null to quantize nothing by default)");
  c.global_ = parse_rule(ctx, j["global"], "$.global");
  check_target(ctx, c.global_, c.target_);
  c.required_opset_ = std::max(c.required_opset_, opset_for(c.global_));
  if (j.contains("op_types")) {
    const json& ops = j["op_types"];
    if (!ops.is_object()) ctx.fail("$.op_types", "expected an object {op type: rule}, got " + ops.dump());
    for (auto it = ops.begin(); it != ops.end(); ++it) {
      const std::string p = key_path("$.op_types", it.key());
      Rule r = parse_rule(ctx, it.value(), p);
      check_target(ctx, r, c.target_);
      c.required_opset_ = std::max(c.required_opset_, opset_for(r));
      if (it.key() == "*")
        c.op_types_default_ = std::move(r);
      else
        c.op_types_.emplace(it.key(), std::move(r));
    }
  }
  if (j.contains("node_name_regex")) {
    const json& arr = j["node_name_regex"];
    if (!arr.is_array()) ctx.fail("$.node_name_regex", "expected a list of {\"pattern\": ..., \"rule\": ...}");
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string p = "$.node_name_regex[" + std::to_string(i) + "]";
      ctx.object(arr[i], p, {"pattern", "rule"});
      if (!arr[i].contains("pattern")) ctx.fail(p + ".pattern", "missing");
      if (!arr[i].contains("rule")) ctx.fail(p + ".rule", "missing (a rule object, or null to keep matches float)");
      RegexRule rr;
      rr.pattern = ctx.string(arr[i]["pattern"], p + ".pattern");
      RE2::Options opts;
      opts.set_log_errors(false);  // errors are reported below, on one line
      auto re = std::make_shared<const RE2>(rr.pattern, opts);
      if (!re->ok())
        ctx.fail(p + ".pattern", "bad regular expression " + json(rr.pattern).dump() + " (" + re->error() +
                                     "; patterns use RE2 syntax: no backreferences or lookaround)");
      rr.re = std::move(re);
      rr.rule = parse_rule(ctx, arr[i]["rule"], p + ".rule");
      check_target(ctx, rr.rule, c.target_);
      c.required_opset_ = std::max(c.required_opset_, opset_for(rr.rule));
      c.regex_rules_.push_back(std::move(rr));
    }
  }
  if (j.contains("node_names")) {
    const json& nn = j["node_names"];
    if (!nn.is_object()) ctx.fail("$.node_names", "expected an object {node name: rule}, got " + nn.dump());
    for (auto it = nn.begin(); it != nn.end(); ++it) {
      Rule r = parse_rule(ctx, it.value(), key_path("$.node_names", it.key()));
      check_target(ctx, r, c.target_);
      c.required_opset_ = std::max(c.required_opset_, opset_for(r));
      c.node_names_.emplace(it.key(), std::move(r));
    }
  }
  if (j.contains("tensors")) {
    const json& tt = j["tensors"];
    if (!tt.is_object()) ctx.fail("$.tensors", "expected an object {tensor name: settings}, got " + tt.dump());
    for (auto it = tt.begin(); it != tt.end(); ++it) {
      // A tensor override may name a weight or an activation: checked where it is applied (check_override).
      SettingsSlot s = parse_slot(ctx, it.value(), key_path("$.tensors", it.key()), SlotKind::Tensor);
      if (s.present && !s.is_null) c.required_opset_ = std::max(c.required_opset_, opset_for(s.patch));
      c.tensors_.emplace(it.key(), std::move(s));
    }
  }
  if (j.contains("accuracy_guard") && !j["accuracy_guard"].is_null()) {
    const std::string p = "$.accuracy_guard";
    const json& g =
        ctx.object(j["accuracy_guard"], p,
                   {"min_sqnr_db", "state_min_sqnr_db", "max_float_tensors", "max_kl", "keep_clear_top1",
                    "per_sample_sqnr", "weights_only_margin_db", "state"});
    c.guard_.enabled = true;
    for (const char* key : {"min_sqnr_db", "state_min_sqnr_db", "max_float_tensors"})
      if (!g.contains(key)) ctx.fail(p + "." + key, "missing");
    c.guard_.min_sqnr_db = ctx.number(g["min_sqnr_db"], p + ".min_sqnr_db");
    c.guard_.state_min_sqnr_db = ctx.number(g["state_min_sqnr_db"], p + ".state_min_sqnr_db");
    c.guard_.max_float_tensors = ctx.integer(g["max_float_tensors"], p + ".max_float_tensors");
    if (c.guard_.max_float_tensors < 0) ctx.fail(p + ".max_float_tensors", "expected 0 or more");
    if (g.contains("max_kl")) {
      c.guard_.max_kl = ctx.number(g["max_kl"], p + ".max_kl");
      if (!(c.guard_.max_kl >= 0)) ctx.fail(p + ".max_kl", "expected a KL divergence in nats, 0 or more");
    }
    if (g.contains("weights_only_margin_db")) {
      c.guard_.weights_only_margin_db = ctx.number(g["weights_only_margin_db"], p + ".weights_only_margin_db");
      if (!(c.guard_.weights_only_margin_db >= 0) || !std::isfinite(c.guard_.weights_only_margin_db))
        ctx.fail(p + ".weights_only_margin_db", "expected a margin in dB, 0 (off) or more");
    }
    if (g.contains("keep_clear_top1"))
      c.guard_.keep_clear_top1 = ctx.boolean(g["keep_clear_top1"], p + ".keep_clear_top1");
    if (g.contains("per_sample_sqnr"))
      c.guard_.per_sample_sqnr = ctx.boolean(g["per_sample_sqnr"], p + ".per_sample_sqnr");
    if (g.contains("state")) {
      const json& st = g["state"];
      if (!st.is_object())
        ctx.fail(p + ".state", "expected an object {state output: the input it feeds}, got " + st.dump());
      for (auto it = st.begin(); it != st.end(); ++it)
        c.guard_.state[it.key()] = ctx.string(it.value(), key_path(p + ".state", it.key()));
    }
  }
  if (j.contains("weight_algorithms")) {
    const std::string p = "$.weight_algorithms";
    const json& w =
        ctx.object(j["weight_algorithms"], p,
                   {"cross_layer_equalization", "bias_correction", "activation_bias_correction", "fold_scale_after_conv",
                    "smooth_quant_alpha"});
    if (w.contains("cross_layer_equalization"))
      c.weight_algorithms_.cross_layer_equalization =
          ctx.boolean(w["cross_layer_equalization"], p + ".cross_layer_equalization");
    if (w.contains("bias_correction"))
      c.weight_algorithms_.bias_correction = ctx.boolean(w["bias_correction"], p + ".bias_correction");
    if (w.contains("activation_bias_correction"))
      c.weight_algorithms_.activation_bias_correction =
          ctx.boolean(w["activation_bias_correction"], p + ".activation_bias_correction");
    if (w.contains("fold_scale_after_conv"))
      c.weight_algorithms_.fold_scale_after_conv =
          ctx.boolean(w["fold_scale_after_conv"], p + ".fold_scale_after_conv");
    if (w.contains("smooth_quant_alpha")) {
      const double a = ctx.number(w["smooth_quant_alpha"], p + ".smooth_quant_alpha");
      if (!(a >= 0 && a <= 1))
        ctx.fail(p + ".smooth_quant_alpha", "expected a number from 0 (off) to 1, got " + w["smooth_quant_alpha"].dump());
      c.weight_algorithms_.smooth_quant_alpha = a;
    }
  }
  return c;
}

std::string QConfig::canonical_json() const {
  json j = json::parse(parsed_json_);
  if (!guard_.enabled) {
    j["accuracy_guard"] = nullptr;
  } else {
    json g = {{"min_sqnr_db", guard_.min_sqnr_db},
              {"state_min_sqnr_db", guard_.state_min_sqnr_db},
              {"max_float_tensors", guard_.max_float_tensors},
              {"max_kl", guard_.max_kl},
              {"keep_clear_top1", guard_.keep_clear_top1}};
    if (guard_.weights_only_margin_db > 0) g["weights_only_margin_db"] = guard_.weights_only_margin_db;
    if (guard_.per_sample_sqnr) g["per_sample_sqnr"] = true;
    if (!guard_.state.empty()) g["state"] = guard_.state;
    j["accuracy_guard"] = g;
  }
  return j.dump();
}

QConfig QConfig::with_float_tensors(const std::vector<std::string>& names) const {
  QConfig c = *this;
  for (const auto& n : names) {
    SettingsSlot& s = c.tensors_[n];
    s = SettingsSlot{};
    s.present = s.is_null = true;
  }
  return c;
}

QConfig QConfig::load(const std::filesystem::path& path) {
  return parse(fileio::read_file(path, "config"), path.filename().string());
}

QConfig QConfig::builtin_default() { return parse(std::string(kBuiltinInt8Config), "built-in int8.json"); }

NodeQuant QConfig::resolve(const std::string& node_name, const std::string& op_type) const {
  std::vector<const Rule*> levels{&global_};
  if (auto it = op_types_.find(op_type); it != op_types_.end())
    levels.push_back(&it->second);
  else if (op_types_default_)
    levels.push_back(&*op_types_default_);
  for (const auto& rr : regex_rules_)
    if (RE2::PartialMatch(node_name, *rr.re)) {
      levels.push_back(&rr.rule);
      break;
    }
  if (auto it = node_names_.find(node_name); it != node_names_.end()) levels.push_back(&it->second);

  // Built-in starting points: uint8 asymmetric activations, int8 symmetric per-channel weights, int32 biases.
  TensorSettings act, wt, bias;
  wt.dtype = DType::Int8;
  wt.symmetric = true;
  wt.granularity = Granularity::PerChannel;
  bias.dtype = DType::Int32;
  bias.symmetric = true;
  bool act_on = true, wt_on = true, bias_on = true, out_on = true;
  TensorSettingsPatch out_patch;
  std::vector<const TensorSettingsPatch*> out_patches;

  NodeQuant nq;
  for (const Rule* r : levels) {
    nq.applied.push_back(r->path);
    nq.quantized = !r->is_null;
    if (r->is_null) continue;
    auto merge = [](const SettingsSlot& s, TensorSettings& t, bool& on) {
      if (!s.present) return;
      on = !s.is_null;
      if (on) apply_patch(t, s.patch);
    };
    merge(r->activation, act, act_on);
    merge(r->weight, wt, wt_on);
    merge(r->bias, bias, bias_on);
    if (r->output.present) {
      out_on = !r->output.is_null;
      if (out_on) out_patches.push_back(&r->output.patch);
    }
  }
  if (!nq.quantized) return nq;
  // A zero point set on one level must fit the dtype another level chose (uint8 by default).
  const Ctx ctx(source_);
  const std::string where = nq.applied.empty() ? std::string("$") : nq.applied.back();
  for (const auto& [on, s] : {std::pair{act_on, &act}, {wt_on, &wt}, {bias_on, &bias}})
    if (on && s->zero_point) check_zero_point(ctx, *s->zero_point, s->dtype, where + " (node " + json(node_name).dump() + ")");
  if (act_on) nq.activation = act;
  if (wt_on) nq.weight = wt;
  if (bias_on) nq.bias = bias;
  if (act_on && out_on) {
    TensorSettings out = act;
    for (const auto* p : out_patches) apply_patch(out, *p);
    nq.output = out;
  }
  return nq;
}

calib::RangeMethods QConfig::range_methods() const {
  calib::RangeMethods out{RangeMethod::MinMax};
  auto slot = [&](const SettingsSlot& s) {
    if (s.present && !s.is_null && s.patch.method) out.insert(*s.patch.method);
  };
  auto rule = [&](const Rule& r) {
    for (const SettingsSlot* s : {&r.activation, &r.weight, &r.bias, &r.output}) slot(*s);
  };
  rule(global_);
  for (const auto& [name, r] : op_types_) rule(r);
  if (op_types_default_) rule(*op_types_default_);
  for (const RegexRule& r : regex_rules_) rule(r.rule);
  for (const auto& [name, r] : node_names_) rule(r);
  for (const auto& [name, s] : tensors_) slot(s);
  return out;
}

const SettingsSlot* QConfig::tensor_override(const std::string& tensor_name) const {
  auto it = tensors_.find(tensor_name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void QConfig::check_names(const std::vector<std::string>& node_names,
                          const std::vector<std::string>& tensor_names) const {
  const Ctx ctx(source_);
  for (const auto& [name, rule] : node_names_)
    if (std::find(node_names.begin(), node_names.end(), name) == node_names.end())
      ctx.fail(rule.path, "no node of the model is named " + json(name).dump());
  for (size_t i = 0; i < regex_rules_.size(); ++i) {
    bool any = false;
    for (const auto& n : node_names) any = any || RE2::PartialMatch(n, *regex_rules_[i].re);
    if (!any)
      ctx.fail("$.node_name_regex[" + std::to_string(i) + "].pattern",
               json(regex_rules_[i].pattern).dump() + " matches no node name of the model");
  }
  const std::set<std::string> tensors(tensor_names.begin(), tensor_names.end());
  for (const auto& [name, slot] : tensors_)
    if (!tensors.count(name))
      ctx.fail(key_path("$.tensors", name), "no tensor of the model is named " + json(name).dump());
}

}  // namespace qtool::quantize
