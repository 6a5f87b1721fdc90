// qtool run MODEL --input NAME=FILE [...] [--output-dir DIR] [--threads N] [--repeat N] [--json]:
// runs a model with qtool's interpreter on .npy/.npz/.pb inputs and writes each output as .npy.
// A sequence output (runtime/value.h) is written one file per element, NAME_0.npy, NAME_1.npy, ...; an input the
// model declares a sequence is read from an ONNX SequenceProto .pb (the layout of ONNX's test data).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "command.h"
#include "core/error.h"
#include "core/file_io.h"
#include "limit_options.h"
#include "onnx/model_io.h"
#include "options.h"
#include "runtime/session.h"
#include "tensorio/tensorio.h"

namespace qtool::cli {
namespace {

namespace fs = std::filesystem;

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  int threads = 0;  // all cores
  int repeat = 0;
  bool json = false;
  bool profile = false;
  std::string device = "cpu";
};

// Time per op type over one run, from the tap: a node's time is the time since the previous node's
// output (or the inputs) was reported, so executor overhead is included.
struct OpTime {
  double ms = 0;
  int nodes = 0;
};
std::vector<std::pair<std::string, OpTime>> profile_run(const runtime::Session& session,
                                                        const std::map<std::string, runtime::Value>& inputs) {
  std::map<std::string, const runtime::NodeInfo*> producer;  // first output -> node
  for (const auto& n : session.graph().nodes)
    for (const auto& o : n.info.outputs)
      if (!o.empty()) {
        producer.emplace(o, &n.info);
        break;
      }
  std::map<std::string, OpTime> by_op;
  auto last = std::chrono::steady_clock::now();
  runtime::RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor&) {
    const auto now = std::chrono::steady_clock::now();
    auto it = producer.find(name);
    if (it != producer.end()) {
      OpTime& t = by_op[it->second->op_type];
      t.ms += std::chrono::duration<double, std::milli>(now - last).count();
      ++t.nodes;
    }
    last = now;
  };
  // One tapped run first, untimed: the first run with a tap took fresh pages for about one large tensor (mobilenetv2:
  // ~1,200 page faults, 8 ms charged to its Pads, whose steady cost is ~0.1 ms each; 2026-11-24, perf stat).
  runtime::RunOptions warm;
  warm.tap = [](const std::string&, const Tensor&) {};
  session.run_values(inputs, warm);
  last = std::chrono::steady_clock::now();
  session.run_values(inputs, ro);
  std::vector<std::pair<std::string, OpTime>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  return rows;
}

// A sequence input: an ONNX SequenceProto .pb; its dtype is the declared one when the sequence is empty.
runtime::Value read_sequence_input(const runtime::ValueDecl& decl, const std::string& file) {
  if (fs::path(file).extension() != ".pb")
    throw UsageError("--input " + decl.name + "=" + file + ": the model declares '" + decl.name + "' " +
                     runtime::describe_decl(decl) + "; give it as an ONNX SequenceProto .pb file");
  auto s = std::make_shared<runtime::TensorSequence>();
  s->items = tensorio::read_sequence_pb(file, &s->elem_dtype);
  if (s->elem_dtype == DType::Undefined) s->elem_dtype = decl.sequence_of.value_or(DType::Undefined);
  return runtime::Value(std::move(s));
}

// "NAME=FILE" binds one input; a bare .npz binds each member to the input of the same name.
std::map<std::string, runtime::Value> read_inputs(const std::vector<std::string>& specs,
                                                  const std::vector<runtime::ValueDecl>& decls) {
  std::map<std::string, runtime::Value> inputs;
  auto put = [&](const std::string& name, runtime::Value v, const std::string& from) {
    if (!inputs.emplace(name, std::move(v)).second)
      throw UsageError("input '" + name + "' is given twice (again by " + from + ")");
  };
  auto sequence_decl = [&](const std::string& name) -> const runtime::ValueDecl* {
    for (const auto& d : decls)
      if (d.name == name && d.sequence_of) return &d;
    return nullptr;
  };
  for (const std::string& spec : specs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos) {
      if (fs::path(spec).extension() != ".npz")
        throw UsageError("--input '" + spec + "': expected NAME=FILE (or an .npz whose member names are input names)");
      for (auto& [name, t] : tensorio::read_npz(spec)) put(name, std::move(t), spec);
      continue;
    }
    const std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    if (name.empty() || file.empty()) throw UsageError("--input '" + spec + "': expected NAME=FILE");
    if (const runtime::ValueDecl* d = sequence_decl(name))
      put(name, read_sequence_input(*d, file), spec);
    else
      put(name, tensorio::read_tensor_file(file), spec);
  }
  return inputs;
}

// Output file name: the output name with characters outside [A-Za-z0-9_.-] replaced by '_'.
std::string file_stem(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) c = '_';
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int run_command(const RunArgs& a) {
  const device::DeviceKind device = parse_device_option(a.device).kind;
  const auto t_load = std::chrono::steady_clock::now();
  // Nothing is observed here (the profile's tap only times nodes), so fusion may fold every activation.
  runtime::Session session(onnxio::load_model(a.model),
                           {.threads = a.threads, .observed = std::set<std::string>{}, .device = device});
  const double prepare_ms = ms_since(t_load);
  const std::map<std::string, runtime::Value> inputs = read_inputs(a.inputs, session.inputs());

  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, runtime::Value> outputs = session.run_values(inputs);
  const double first_ms = ms_since(t0);
  std::vector<double> times;
  for (int i = 0; i < a.repeat; ++i) {
    const auto t = std::chrono::steady_clock::now();
    session.run_values(inputs);
    times.push_back(ms_since(t));
  }

  nlohmann::ordered_json j;
  j["model"] = a.model;
  j["threads"] = session.threads();
  j["prepare_ms"] = prepare_ms;
  j["first_run_ms"] = first_ms;
  j["outputs"] = nlohmann::ordered_json::array();
  // NumPy has no bfloat16/FP8/4-bit dtypes: those are written as TensorProto .pb. Element k of a sequence output
  // goes to <name>_k.
  auto output_file = [&](const std::string& stem, const Tensor& t) {
    const bool npy = !dtype_info(t.dtype()).numpy_descr.empty();
    return fs::path(a.output_dir) / (file_stem(stem) + (npy ? ".npy" : ".pb"));
  };
  // (file, tensor) for every output: one per tensor output, one per element of a sequence output.
  auto files_of = [&](const std::string& name) {
    std::vector<std::pair<fs::path, Tensor>> files;
    const runtime::Value& v = outputs.at(name);
    if (!v.is_sequence()) {
      files.emplace_back(output_file(name, v.tensor), v.tensor);
      return files;
    }
    for (size_t k = 0; k < v.sequence->items.size(); ++k)
      files.emplace_back(output_file(name + "_" + std::to_string(k), v.sequence->items[k]), v.sequence->items[k]);
    return files;
  };
  if (!a.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(a.output_dir, ec);
    if (ec) throw BadInputError("cannot create output folder '" + a.output_dir + "': " + ec.message());
    // Every file is checked before the first is written: none may be an input (or a FIFO, device, folder), and no
    // two outputs may write one file (output 'x_0' and element 0 of a sequence output 'x').
    std::map<fs::path, std::string> planned;
    for (const auto& decl : session.outputs())
      for (const auto& [file, t] : files_of(decl.name)) {
        fileio::check_output_target(file);
        if (auto [it, fresh] = planned.emplace(file, decl.name); !fresh)
          throw BadInputError("outputs '" + it->second + "' and '" + decl.name + "' would both be written to " +
                              file.string() + "; run without --output-dir, or rename an output");
      }
  }
  for (const auto& decl : session.outputs()) {
    const runtime::Value& v = outputs.at(decl.name);
    nlohmann::ordered_json o;
    o["name"] = decl.name;
    if (v.is_sequence()) {
      o["sequence"] = true;
      o["dtype"] = std::string(dtype_name(v.sequence->elem_dtype));
      o["shapes"] = nlohmann::ordered_json::array();
      for (const Tensor& t : v.sequence->items) o["shapes"].push_back(t.shape());
    } else {
      o["dtype"] = std::string(dtype_name(v.tensor.dtype()));
      o["shape"] = v.tensor.shape();
    }
    if (!a.output_dir.empty()) {
      std::vector<std::string> written;
      for (const auto& [file, t] : files_of(decl.name)) {
        tensorio::write_tensor_file(file, t);
        written.push_back(file.string());
      }
      if (v.is_sequence())
        o["files"] = written;
      else
        o["file"] = written.front();
    }
    j["outputs"].push_back(o);
  }
  if (!times.empty()) {
    std::vector<double> s = times;
    std::sort(s.begin(), s.end());
    const size_t n = s.size();
    j["repeat"] = n;
    j["median_ms"] = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    j["min_ms"] = s.front();
    j["max_ms"] = s.back();
  }

  std::vector<std::pair<std::string, OpTime>> prof;
  if (a.profile) {
    prof = profile_run(session, inputs);
    j["profile"] = nlohmann::ordered_json::array();
    for (const auto& [op, t] : prof) j["profile"].push_back({{"op", op}, {"ms", t.ms}, {"nodes", t.nodes}});
  }

  if (a.json) {
    std::cout << j.dump() << "\n";
  } else {
    for (const auto& o : j["outputs"]) {
      std::cout << o["name"].get<std::string>() << "  ";
      if (o.contains("sequence")) {  // "seq  sequence of 2 float [2,3] [1,3]  -> out/seq_0.npy .. out/seq_1.npy"
        const auto& shapes = o["shapes"];
        std::cout << "sequence of " << shapes.size() << " " << o["dtype"].get<std::string>();
        for (const auto& sh : shapes) std::cout << " " << shape_str(sh.get<Shape>());
        if (o.contains("files") && !o["files"].empty())
          std::cout << "  -> " << o["files"].front().get<std::string>()
                    << (o["files"].size() > 1 ? " .. " + o["files"].back().get<std::string>() : "");
      } else {
        std::cout << o["dtype"].get<std::string>() << " " << shape_str(o["shape"].get<Shape>());
        if (o.contains("file")) std::cout << "  -> " << o["file"].get<std::string>();
      }
      std::cout << "\n";
    }
    char buf[200];
    std::snprintf(buf, sizeof buf, "time: %.3f ms (first run, %d thread%s; model prepared in %.1f ms)\n", first_ms,
                  session.threads(), session.threads() == 1 ? "" : "s", prepare_ms);
    std::cout << buf;
    if (!times.empty()) {
      std::snprintf(buf, sizeof buf, "latency over %zu runs after warm-up: median %.3f ms, min %.3f ms, max %.3f ms\n",
                    times.size(), j["median_ms"].get<double>(), j["min_ms"].get<double>(), j["max_ms"].get<double>());
      std::cout << buf;
    }
    if (!prof.empty()) {
      double total = 0;
      for (const auto& [op, t] : prof) total += t.ms;
      std::cout << "time per op type (one run):\n";
      for (const auto& [op, t] : prof) {
        std::snprintf(buf, sizeof buf, "  %-24s %10.3f ms %5.1f %%  %d node%s\n", op.c_str(), t.ms,
                      total > 0 ? 100.0 * t.ms / total : 0.0, t.nodes, t.nodes == 1 ? "" : "s");
        std::cout << buf;
      }
    }
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto* sub = app.add_subcommand("run", "Run a model with qtool's interpreter and write its outputs as .npy");
  add_limit_options(*sub);
  auto a = std::make_shared<RunArgs>();
  sub->add_option("MODEL", a->model, "Path to an .onnx model")->required();
  sub->add_option("-i,--input", a->inputs,
                  "NAME=FILE (.npy, .npz with one array, .pb; a sequence input: a SequenceProto .pb), or an .npz keyed "
                  "by input name")
      ->take_all();
  sub->add_option("-o,--output-dir", a->output_dir, "Write each output to DIR/<output name>.npy (a sequence: DIR/<name>_0.npy, ...)");
  add_threads_option(*sub, a->threads, "Threads");
  add_device_option(*sub, a->device);
  sub->add_option("--repeat", a->repeat, "After a warm-up run, time N more runs (median, min, max)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--json", a->json, "Print one JSON object instead of the text report");
  sub->add_flag("--profile", a->profile, "After the runs, time one more run per op type");
  return [a]() -> int { return run_command(*a); };
}

}  // namespace qtool::cli
