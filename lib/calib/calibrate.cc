#include "calib/calibrate.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "calib/calibration_data.h"
#include "calib/observation_pipeline.h"
#include "calib/sha256.h"
#include "calib/softmax_inputs.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/json_parse.h"
#include "onnx/body_names.h"
#include "onnx/model_io.h"
#include "runtime/session.h"

namespace qtool::calib {

namespace fs = std::filesystem;

std::vector<InputSpec> input_specs(const runtime::Session& session) {
  std::set<std::string> batch_symbols;
  for (const runtime::ValueDecl& d : session.inputs())
    if (d.shape && !d.shape->empty() && !(*d.shape)[0].value && !(*d.shape)[0].param.empty())
      batch_symbols.insert((*d.shape)[0].param);
  std::vector<InputSpec> specs;
  for (const runtime::ValueDecl& d : session.inputs()) {
    if (d.sequence_of)  // samples are tensors: --data and --random make nothing else
      throw UnsupportedError("input '" + d.name + "' is " + runtime::describe_decl(d) +
                             ": calibration samples are tensors (sequences inside the model run; `qtool run` feeds "
                             "a sequence input from a SequenceProto .pb)");
    InputSpec in;
    in.name = d.name;
    in.dtype = d.dtype;
    in.declared = runtime::describe_decl(d);
    if (d.shape) {
      in.dims.emplace();
      for (const runtime::DeclaredDim& dim : *d.shape) {
        in.dims->push_back(dim.value);
        in.symbols.push_back(dim.value ? std::string() : dim.param);
      }
      if (!d.shape->empty() && (*d.shape)[0].value && *(*d.shape)[0].value != 1)
        for (size_t i = 1; i < d.shape->size(); ++i)
          if (batch_symbols.count((*d.shape)[i].param)) {
            in.batch_axis = static_cast<int64_t>(i);
            break;
          }
    }
    specs.push_back(std::move(in));
  }
  return specs;
}

QuantTarget target_from_qconfig(const fs::path& config) {
  const std::string text = fileio::read_file(config, "config");
  const nlohmann::json doc = parse_json_limited(text, config.string());
  QuantTarget t;
  const nlohmann::json* act = nullptr;
  if (doc.is_object() && doc.contains("global") && doc["global"].is_object() && doc["global"].contains("activation"))
    act = &doc["global"]["activation"];
  if (!act || act->is_null()) return t;
  if (!act->is_object()) throw BadInputError(config.string() + ": global.activation: expected an object");
  if (act->contains("dtype")) {
    const auto& v = (*act)["dtype"];
    const auto dt = v.is_string() ? dtype_from_name(v.get<std::string>()) : std::nullopt;
    if (!dt)
      throw BadInputError(config.string() + ": global.activation.dtype: expected a dtype name such as \"uint8\"");
    t.dtype = *dt;
  }
  if (act->contains("symmetric")) {
    const auto& v = (*act)["symmetric"];
    if (!v.is_boolean()) throw BadInputError(config.string() + ": global.activation.symmetric: expected true or false");
    t.symmetric = v.get<bool>();
  }
  return t;
}

std::unique_ptr<SampleSource> open_samples(const CalibrateOptions& options, const std::vector<InputSpec>& inputs,
                                           const onnx::ModelProto& model) {
  if (options.random_samples) return open_random(inputs, *options.random_samples, options.seed, options.shapes, &model);
  if (options.data_dir) return open_data_dir(inputs, *options.data_dir);
  std::map<std::string, fs::path> files = options.data_files;
  if (auto it = files.find(""); it != files.end()) {  // --data FILE without a name: only for one input
    if (inputs.size() != 1)
      throw UsageError("--data " + it->second.string() + ": the model has " + std::to_string(inputs.size()) +
                       " inputs, name each with --data NAME=FILE");
    const fs::path path = it->second;
    files.erase(it);
    files.emplace(inputs.front().name, path);
  }
  return open_array_files(inputs, files);
}

// What observation may lag behind the interpreter: the tensors queued for observers (kept alive until observed).
// Past this, the interpreter's thread observes too. 32 MiB keeps peak memory near that of inline observation
// while letting observers absorb the interpreter's uneven pace across nodes.
constexpr size_t kMaxPendingObservationBytes = size_t{32} << 20;

ThreadPlan plan_threads(int threads, int observer_threads, const RangeMethods& methods) {
  const int total = std::max(runtime::resolve_threads(threads), 1);
  const bool histogram = records_any_histogram(methods);
  ThreadPlan plan;
  // Automatic: observers get threads in proportion to their cost. With a histogram they cost about as much CPU
  // per value as the interpreter (ppocrv4-det), so half; min/max alone costs ~15 % of it, so an eighth (at least
  // one: on 2 threads a worker beside a 1-thread interpreter measured +7 % to +20 % against +30 % to +40 %
  // for inline observers on both threads).
  if (observer_threads > runtime::kMaxThreads)
    throw BadInputError("--observer-threads " + std::to_string(observer_threads) + " is more than the " +
                        std::to_string(runtime::kMaxThreads) + " threads qtool supports");
  if (observer_threads >= 0)
    plan.observers = observer_threads;
  else if (total >= 2)
    plan.observers = histogram ? total / 2 : std::max(1, total / 8);
  plan.forward = plan.observers == 0 ? total : std::max(1, total - plan.observers);
  return plan;
}

int64_t observe_samples(const runtime::Session& session, SampleSource& source, int64_t batch, Calibrator& calibrator,
                        const ThreadPlan& plan, const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t total = source.samples();
  int64_t runs = 0;
  runtime::RunOptions run;
  run.tap_subgraphs = true;  // activations inside If/Loop/Scan bodies are quantized too (docs/subgraphs.md)
  std::optional<ObservationPipeline> pipeline;
  if (plan.observers > 0) {
    pipeline.emplace(plan.observers, kMaxPendingObservationBytes);
    ExecContext one = calibrator.options().exec;  // each worker observes one tensor at a time, single-threaded
    one.threads = 1;
    run.tap = [&, one](const std::string& name, const Tensor& value) {
      if (Calibrator::TensorState* s = calibrator.slot(name, value))
        pipeline->submit(s, value.nbytes(), [&calibrator, s, value, one] { calibrator.observe_slot(*s, value, one); });
    };
  } else {
    run.tap = [&](const std::string& name, const Tensor& value) { calibrator.observe(name, value); };
  }
  for (int64_t first = 0; first < total; first += batch) {
    const int64_t count = std::min(batch, total - first);
    session.run(source.batch(first, count), run);
    ++runs;
    if (progress) progress(first + count, total);
  }
  if (pipeline) pipeline->finish();
  return runs;
}

CalibrateResult calibrate_model(const fs::path& model_path, const CalibrateOptions& options) {
  const onnxio::LoadedModel model = onnxio::load_model(model_path);
  return calibrate_model(*model.proto, model_path.filename().string(), sha256_file(model_path), options);
}

namespace {

CalibrateResult calibrate_scoped(const onnx::ModelProto& model, const std::string& name, const std::string& sha256,
                                 const CalibrateOptions& options) {
  const int sources =
      (options.data_files.empty() ? 0 : 1) + (options.data_dir ? 1 : 0) + (options.random_samples ? 1 : 0);
  if (sources != 1)
    throw UsageError("give the calibration data one way: --data NAME=FILE ..., --data DIR or --random N");
  if (options.batch_size < 1) throw UsageError("--batch-size must be at least 1");

  CalibrateResult result;
  const ThreadPlan plan = plan_threads(options.threads, options.observer_threads, options.methods);
  const runtime::Session session(model, {.threads = plan.forward, .device = options.device});
  const std::vector<InputSpec> inputs = input_specs(session);

  std::unique_ptr<SampleSource> source = open_samples(options, inputs, model);
  result.data = source->describe();
  result.details = source->details();

  // A batch axis the model fixes to 1 runs one sample at a time.
  int64_t batch = options.batch_size;
  for (const InputSpec& in : inputs)
    if (in.dims && in.batch_axis < static_cast<int64_t>(in.dims->size())) {
      const auto& d = (*in.dims)[static_cast<size_t>(in.batch_axis)];
      if (d && *d == 1 && batch != 1) {
        result.notes.push_back("input '" + in.name + "' is " + in.declared + ": running one sample per batch");
        batch = 1;
      }
    }

  CalibratorOptions copt;
  copt.methods = options.methods;
  copt.histogram_bins = options.histogram_bins;
  copt.percentile = options.percentile;
  copt.target = options.target;
  copt.exec.backend =
      &observer_backend(options.device == device::DeviceKind::Cuda ? BackendKind::Cuda : BackendKind::Cpu);
  copt.exec.threads = plan.forward + plan.observers;  // for finish(), and inline observers when no workers
  copt.softmax_inputs = find_softmax_inputs(model);
  Calibrator calibrator(copt);

  const auto t0 = std::chrono::steady_clock::now();
  const int64_t total = source->samples();
  result.runs = observe_samples(session, *source, batch, calibrator, plan, options.progress);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  result.table = calibrator.finish();
  result.table.model = name;
  result.table.model_sha256 = sha256;
  result.table.samples = total;
  result.table.batch_size = batch;
  result.non_finite = calibrator.non_finite();
  return result;
}

}  // namespace

CalibrateResult calibrate_model(const onnx::ModelProto& model, const std::string& name, const std::string& sha256,
                                const CalibrateOptions& options) {
  // Tensors of If/Loop/Scan bodies are recorded under the names qtool quantize gives them (onnx/body_names.h).
  if (onnxio::body_names_clash(model)) {
    onnx::ModelProto scoped = model;
    onnxio::scope_body_names(scoped);
    return calibrate_scoped(scoped, name, sha256, options);
  }
  return calibrate_scoped(model, name, sha256, options);
}

}  // namespace qtool::calib
