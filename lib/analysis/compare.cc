#include "analysis/compare.h"

#include <algorithm>
#include <numeric>

#include "analysis/qdq_bypass.h"
#include "core/error.h"
#include "quantize/accuracy_guard.h"
#include "runtime/graph.h"
#include "runtime/session.h"

namespace qtool::analysis {
namespace {

const runtime::ValueDecl* find(const std::vector<runtime::ValueDecl>& list, const std::string& name) {
  for (const auto& d : list)
    if (d.name == name) return &d;
  return nullptr;
}

std::string names(const std::vector<runtime::ValueDecl>& list) {
  std::string s;
  for (const auto& d : list) s += (s.empty() ? "'" : ", '") + d.name + "'";
  return s.empty() ? "none" : s;
}

// Declared types conflict when dtypes are both known and differ, or ranks are both known and differ, or a dim
// fixed in both differs.
bool declared_conflict(const runtime::ValueDecl& a, const runtime::ValueDecl& b) {
  if (a.dtype != DType::Undefined && b.dtype != DType::Undefined && a.dtype != b.dtype) return true;
  if (!a.shape || !b.shape) return false;
  if (a.shape->size() != b.shape->size()) return true;
  for (size_t k = 0; k < a.shape->size(); ++k)
    if ((*a.shape)[k].value && (*b.shape)[k].value && *(*a.shape)[k].value != *(*b.shape)[k].value) return true;
  return false;
}

// Same graph inputs and outputs by name, declared alike.
void check_interfaces(const runtime::Graph& q, const runtime::Graph& f, const CompareOptions& o) {
  const std::pair<const std::vector<runtime::ValueDecl>*, const std::vector<runtime::ValueDecl>*> lists[] = {
      {&q.inputs, &f.inputs}, {&q.outputs, &f.outputs}};
  for (int k = 0; k < 2; ++k) {
    const char* what = k == 0 ? "input" : "output";
    const auto& [ql, fl] = lists[k];
    for (const auto& d : *ql)
      if (!find(*fl, d.name))
        throw BadInputError(std::string(what) + " '" + d.name + "' of " + o.quant_label + " is not an " + what +
                            " of " + o.float_label + " (its " + what + "s: " + names(*fl) + ")");
    for (const auto& d : *fl)
      if (!find(*ql, d.name))
        throw BadInputError(std::string(what) + " '" + d.name + "' of " + o.float_label + " is not an " + what +
                            " of " + o.quant_label + " (its " + what + "s: " + names(*ql) + ")");
  }
  for (int k = 0; k < 2; ++k)
    for (const auto& d : *lists[k].first) {
      const auto* fd = find(*lists[k].second, d.name);
      if (declared_conflict(d, *fd))
        throw BadInputError(std::string(k == 0 ? "input '" : "output '") + d.name + "' is declared " +
                            runtime::describe_decl(d) + " in " + o.quant_label + " but " + runtime::describe_decl(*fd) +
                            " in " + o.float_label);
    }
}

}  // namespace

CompareReport compare_models(const onnx::ModelProto& quant, const onnx::ModelProto& float_model,
                             std::vector<std::map<std::string, Tensor>> samples, const CompareOptions& options) {
  auto say = [&](const std::string& s) {
    if (options.log) options.log(s);
  };
  const auto qgraph = runtime::Graph::from_model(quant);
  const auto fgraph = runtime::Graph::from_model(float_model);
  check_interfaces(*qgraph, *fgraph, options);

  CompareReport r;
  r.samples = static_cast<int64_t>(samples.size());
  const quantize::AccuracyEvaluator eval(float_model, std::move(samples), quantize::AccuracyGuardSettings{},
                                         options.threads);
  for (const auto& d : fgraph->outputs) {
    const bool compared = std::any_of(eval.outputs().begin(), eval.outputs().end(),
                                      [&](const quantize::OutputAccuracy& a) { return a.output == d.name; });
    if (!compared) r.skipped_outputs.push_back(d.name);
  }

  // Per output over all samples.
  const auto runs = eval.run(quant);
  const auto& reference = eval.reference();
  std::vector<MetricsAccumulator> acc(eval.outputs().size());
  for (size_t s = 0; s < runs.size(); ++s)
    for (size_t o = 0; o < acc.size(); ++o) {
      const std::string& name = eval.outputs()[o].output;
      const Tensor& f = reference[s][o];
      const Tensor q = is_float(runs[s].at(name).dtype()) ? to_float32(runs[s].at(name)) : runs[s].at(name);
      if (q.dtype() != DType::Float32 || q.shape() != f.shape())
        throw BadInputError("output '" + name + "' is " + std::string(dtype_name(q.dtype())) + " " +
                            shape_str(q.shape()) + " in " + options.quant_label + " but " +
                            std::string(dtype_name(f.dtype())) + " " + shape_str(f.shape()) + " in " +
                            options.float_label + " (sample " + std::to_string(s) + ")");
      acc[o].add(f, q);
    }
  for (size_t o = 0; o < acc.size(); ++o) {
    OutputComparison c{eval.outputs()[o].output, eval.outputs()[o].state, acc[o].result()};
    if (c.state) {  // recurrent state is not class scores: no argmax, no KL
      c.metrics.argmax_agreement.reset();
      c.metrics.kl_divergence.reset();
      c.metrics.distribution = Distribution::None;
    }
    r.outputs.push_back(std::move(c));
  }
  if (!options.sensitivity || r.outputs.empty()) return r;

  // Sensitivity: each activation kept float alone.
  r.sensitivity_ran = true;
  const std::vector<std::string> acts = quantized_activations(quant);
  say("sensitivity: " + std::to_string(acts.size()) + " quantized activations, one run over " +
      std::to_string(r.samples) + " samples each");
  for (const std::string& t : acts) {
    const std::vector<double> ratios = eval.noise_ratios(keep_float(quant, t));
    TensorSensitivity ts;
    ts.tensor = t;
    for (size_t o = 0; o < ratios.size(); ++o) {
      const double db = quantize::sqnr_db(ratios[o]);
      ts.kept_float_sqnr_db.push_back(db);
      const double gain = db - r.outputs[o].metrics.sqnr_db;
      if (o == 0 || gain > ts.gain_db) ts.gain_db = gain, ts.output = r.outputs[o].output;
    }
    r.sensitivity.push_back(std::move(ts));
  }
  std::stable_sort(r.sensitivity.begin(), r.sensitivity.end(),
                   [](const TensorSensitivity& a, const TensorSensitivity& b) { return a.gain_db > b.gain_db; });
  return r;
}

}  // namespace qtool::analysis
