// qtool inspect MODEL [--json]: formats the library's ModelSummary as an aligned report or one JSON object.
// qtool inspect QUANT --against FLOAT --data ...: compares the two models (inspect_compare.cc).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calib/calibration_table.h"
#include "command.h"
#include "core/dtype.h"
#include "core/limits.h"
#include "inspect/inspect.h"
#include "inspect_compare.h"
#include "options.h"
#include "onnx/model_io.h"
#include "quantize/quantize.h"
#include "text_table.h"

namespace qtool::cli {
namespace {

using inspect::ModelSummary;
using inspect::ValueInfo;
using nlohmann::ordered_json;

// "float"; a sequence or optional of tensors: "sequence of float"; a map or an unknown element type: its kind and "?".
std::string dtype_label(const ValueInfo& v) {
  const std::string dt = v.dtype ? std::string(dtype_name(*v.dtype)) : std::string("?");
  return v.type == "tensor" ? dt : v.type + " of " + dt;
}

std::string shape_label(const ValueInfo& v) {
  if (!v.shape) return "[?]";
  std::string s = "[";
  for (size_t i = 0; i < v.shape->size(); ++i) {
    const auto& d = (*v.shape)[i];
    if (i) s += ",";
    s += d.value ? std::to_string(*d.value) : d.symbol.empty() ? "?" : d.symbol;
  }
  return s + "]";
}

// 1234567 -> "1,234,567"
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// 1 -> "1 tensor", 3 -> "3 tensors"
std::string plural(int64_t n, const std::string& noun) { return grouped(n) + " " + noun + (n == 1 ? "" : "s"); }

ordered_json value_json(const ValueInfo& v) {
  ordered_json j;
  j["name"] = v.name;
  j["type"] = v.type;
  j["dtype"] = v.dtype ? ordered_json(std::string(dtype_name(*v.dtype))) : ordered_json(nullptr);
  if (!v.shape) {
    j["shape"] = nullptr;
  } else {
    ordered_json dims = ordered_json::array();
    for (const auto& d : *v.shape)
      dims.push_back(d.value            ? ordered_json(*d.value)
                     : d.symbol.empty() ? ordered_json(nullptr)
                                        : ordered_json(d.symbol));
    j["shape"] = dims;
  }
  return j;
}

ordered_json to_json(const ModelSummary& s) {
  ordered_json j;
  j["model"] = s.path.string();
  j["file_bytes"] = s.file_bytes;
  j["ir_version"] = s.ir_version;
  j["opset_imports"] = ordered_json::object();
  for (const auto& [domain, version] : s.opset_imports) j["opset_imports"][domain] = version;
  j["producer"] = {{"name", s.producer_name}, {"version", s.producer_version}};
  j["metadata"] = ordered_json::object();
  for (const auto& [key, value] : s.metadata) j["metadata"][key] = value;
  j["inputs"] = ordered_json::array();
  for (const auto& v : s.inputs) j["inputs"].push_back(value_json(v));
  j["outputs"] = ordered_json::array();
  for (const auto& v : s.outputs) j["outputs"].push_back(value_json(v));
  j["nodes"] = s.node_count;
  j["subgraphs"] = s.subgraph_count;
  j["op_counts"] = ordered_json::object();
  for (const auto& [op, n] : s.op_counts) j["op_counts"][op] = n;
  auto& p = j["parameters"];
  p["count"] = s.parameters.count;
  p["bytes"] = s.parameters.bytes;
  p["tensors"] = s.parameters.tensors;
  p["external_bytes"] = s.parameters.external_bytes;
  p["by_dtype"] = ordered_json::object();
  for (const auto& [dt, t] : s.parameters.by_dtype)
    p["by_dtype"][std::string(dtype_name(dt))] = {{"count", t.count}, {"bytes", t.bytes}, {"tensors", t.tensors}};
  auto uses_json = [](const std::map<DType, inspect::ConstantUse>& uses) {
    ordered_json o = ordered_json::object();
    for (const auto& [dt, u] : uses) {
      ordered_json ops = ordered_json::object();
      for (const auto& [op, n] : u.ops) ops[op] = n;
      o[std::string(dtype_name(dt))] = {{"bytes", u.bytes}, {"tensors", u.tensors}, {"nodes", u.nodes}, {"ops", ops}};
    }
    return o;
  };
  j["weight_bytes"] = {{"weights", uses_json(s.weight_bytes.weights)},
                       {"quantization_parameters", uses_json(s.weight_bytes.quant_params)}};
  auto& q = j["quantization"];
  q["quantized"] = s.quantization.quantized();
  q["quantize_linear"] = s.quantization.quantize_linear;
  q["dequantize_linear"] = s.quantization.dequantize_linear;
  q["quantized_ops"] = ordered_json::object();
  for (const auto& [op, n] : s.quantization.quantized_ops) q["quantized_ops"][op] = n;
  q["weights"] = ordered_json::array();
  for (const auto& w : s.quantization.weights) {
    ordered_json e = {{"dtype", std::string(dtype_name(w.dtype))},
                      {"granularity", std::string(inspect::granularity_name(w.granularity))}};
    if (w.axis) e["axis"] = *w.axis;
    if (w.block_size > 0) e["block_size"] = w.block_size;
    e["count"] = w.count;
    q["weights"].push_back(e);
  }
  q["activations"] = ordered_json::object();
  for (const auto& [dt, n] : s.quantization.activations) q["activations"][std::string(dtype_name(dt))] = n;
  return j;
}

std::string to_text(const ModelSummary& s) {
  std::ostringstream os;
  std::string opsets;
  for (const auto& [domain, version] : s.opset_imports)
    opsets += (opsets.empty() ? "" : ", ") + domain + " " + std::to_string(version);
  std::string producer = s.producer_name.empty() ? "(not recorded)" : s.producer_name;
  if (!s.producer_version.empty()) producer += " " + s.producer_version;
  std::vector<std::vector<std::string>> head = {{"model", s.path.string() + " (" + format_bytes(s.file_bytes) + ")"},
                                                 {"ir version", std::to_string(s.ir_version)},
                                                 {"opsets", opsets},
                                                 {"producer", producer}};
  for (const auto& [key, value] : s.metadata) head.push_back({"metadata", key + " = " + value});
  os << table(head, "");

  std::vector<std::vector<std::string>> io;
  for (const auto& v : s.inputs) io.push_back({"input", v.name, dtype_label(v), shape_label(v)});
  for (const auto& v : s.outputs) io.push_back({"output", v.name, dtype_label(v), shape_label(v)});
  os << "\n" << table(io, "");

  os << "\noperators  " << grouped(s.node_count) << " nodes, " << s.op_counts.size() << " op types";
  if (s.subgraph_count) os << ", " << s.subgraph_count << " subgraph" << (s.subgraph_count > 1 ? "s" : "");
  os << "\n";
  std::vector<std::pair<std::string, int64_t>> ops(s.op_counts.begin(), s.op_counts.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::vector<std::string>> op_rows;
  for (const auto& [op, n] : ops) op_rows.push_back({op, grouped(n)});
  os << table(op_rows, "  ", {false, true});

  const auto& p = s.parameters;
  os << "\nparameters  " << grouped(p.count) << " in " << plural(p.tensors, "tensor") << ", " << format_bytes(p.bytes);
  if (p.external_bytes) os << " (" << format_bytes(p.external_bytes) << " in external data)";
  os << "\n";
  std::vector<std::vector<std::string>> prow;
  for (const auto& [dt, t] : p.by_dtype)
    prow.push_back({std::string(dtype_name(dt)), grouped(t.count), format_bytes(t.bytes), plural(t.tensors, "tensor")});
  os << table(prow, "  ", {false, true, true, false});

  // "12 nodes: MatMul 10, Gather 2", op types by count
  auto readers = [](const inspect::ConstantUse& u) {
    std::vector<std::pair<std::string, int64_t>> by_count(u.ops.begin(), u.ops.end());
    std::stable_sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::string out = plural(u.nodes, "node") + ":";
    for (size_t i = 0; i < by_count.size(); ++i) out += (i ? ", " : " ") + by_count[i].first + " " + grouped(by_count[i].second);
    return out;
  };
  std::vector<std::vector<std::string>> wrows;
  for (const auto& [dt, u] : s.weight_bytes.weights)
    wrows.push_back({"weights", std::string(dtype_name(dt)), format_bytes(u.bytes), plural(u.tensors, "tensor"),
                     readers(u)});
  for (const auto& [dt, u] : s.weight_bytes.quant_params)
    wrows.push_back({"scales, zero points", std::string(dtype_name(dt)), format_bytes(u.bytes),
                     plural(u.tensors, "tensor"), readers(u)});
  if (!wrows.empty())
    os << "\nweight bytes by stored dtype (through Q/DQ to the nodes that read them)\n"
       << table(wrows, "  ", {false, false, true, false, false});

  const auto& q = s.quantization;
  os << "\nquantization  ";
  if (!q.quantized()) {
    os << "none (float model)\n";
    return os.str();
  }
  // Every op that holds quantized values, with its count: the Q/DQ pair (shown when the model has either), then
  // ONNX Runtime's QOperator / dynamic / int4 nodes ("ConvInteger 119, DynamicQuantizeLinear 119").
  std::vector<std::string> held;
  if (q.quantize_linear > 0 || q.dequantize_linear > 0)
    held = {"QuantizeLinear " + grouped(q.quantize_linear), "DequantizeLinear " + grouped(q.dequantize_linear)};
  for (const auto& [op, n] : q.quantized_ops) held.push_back(op + " " + grouped(n));
  for (size_t i = 0; i < held.size(); ++i) os << (i ? ", " : "") << held[i];
  os << "\n";
  std::vector<std::vector<std::string>> qrows;
  for (const auto& w : q.weights) {
    std::string g(inspect::granularity_name(w.granularity));
    if (w.axis) g += " (axis " + std::to_string(*w.axis);
    if (w.block_size > 0) g += ", block " + std::to_string(w.block_size);
    if (w.axis) g += ")";
    qrows.push_back({"weights", std::string(dtype_name(w.dtype)), g, plural(w.count, "tensor")});
  }
  for (const auto& [dt, n] : q.activations)
    qrows.push_back({"activations", std::string(dtype_name(dt)), "", grouped(n) + " QuantizeLinear"});
  os << table(qrows, "  ");
  return os.str();
}

}  // namespace

Action add_inspect_command(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect",
                                 "Summarise an ONNX model: inputs, outputs, ops, parameters, quantization; with "
                                 "--against, compare it with its float original");
  auto model = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  sub->add_option("MODEL", *model, "Path to an .onnx model")->required();
  sub->add_flag("--json", *json, "Print one JSON object instead of the text report");
  // Quantization preview (lib/quantize): which QConfig rule applies to each node and what it would become.
  auto qconfig = std::make_shared<std::string>(), calib = std::make_shared<std::string>();
  auto explain = std::make_shared<bool>(false);
  sub->add_option("--config", *qconfig, "QConfig JSON for --explain (default: built-in int8)");
  sub->add_option("--calib", *calib,
                  "Calibration file for --explain (scales of activations), or for --report (its histograms)");
  auto* explain_flag = sub->add_flag("--explain", *explain,
                                     "Per node: the QConfig rules that apply, int/float, dtype, scale, zero point");
  // Comparison with the float original (lib/analysis): metrics per output and the sensitivity ranking.
  auto cmp = std::make_shared<CompareArgs>();
  sub->add_option("--against", cmp->against,
                  "FLOAT.onnx: run MODEL (quantized) and this float model on the samples and print, per output, "
                  "SQNR, cosine, max/mean abs error, argmax agreement and KL, then each activation's sensitivity")
      ->excludes(explain_flag);
  add_sample_options(
      *sub, cmp->samples, "With --against: NAME=FILE.npy|.npz|.pb per input (first axis = samples), or a folder",
      "With --against: compare on N random standard-normal samples instead of --data");
  add_threads_option(*sub, cmp->threads, "With --against: threads");
  sub->add_option("--top", cmp->top, "With --against: sensitivity rows in the text report (default 20)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--report", cmp->report,
                  "With --against: also write one self-contained HTML file: output metrics, sensitivity chart, and "
                  "per quantized activation its histogram (from --calib, else recomputed) under its range");
  auto no_sens = std::make_shared<bool>(false);
  sub->add_flag("--no-sensitivity", *no_sens, "With --against: skip the sensitivity ranking (one run per activation)");
  return [model, json, qconfig, calib, explain, cmp, no_sens]() -> int {
    if (!cmp->against.empty()) {
      cmp->quant = *model;
      cmp->json = *json;
      cmp->sensitivity = !*no_sens;
      cmp->calib = *calib;
      return run_inspect_compare(*cmp);
    }
    if (!cmp->samples.data.empty() || cmp->samples.random > 0)
      throw UsageError("inspect: --data and --random are for --against FLOAT.onnx");
    if (!cmp->report.empty()) throw UsageError("inspect: --report is for --against FLOAT.onnx");
    if (*explain) {
      const auto cfg = qconfig->empty() ? quantize::QConfig::builtin_default() : quantize::QConfig::load(*qconfig);
      const auto ranges = calib->empty() ? calib::CalibrationTable{} : calib::read_calibration(*calib);
      std::cout << quantize::explain_text(quantize::explain_model(*onnxio::load_model(*model).proto, cfg, ranges));
      return 0;
    }
    spdlog::debug("inspecting {}", *model);
    const ModelSummary s = inspect::inspect_model(*model);
    spdlog::debug("{}: {} nodes, {} parameters", *model, s.node_count, s.parameters.count);
    if (*json)
      std::cout << to_json(s).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else
      std::cout << to_text(s);
    std::cout.flush();
    return 0;
  };
}

}  // namespace qtool::cli
