#include "quantize/accuracy_guard.h"

#include <omp.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <numeric>
#include <optional>
#include <set>

#include "analysis/metrics.h"
#include "core/error.h"
#include "quantize/guard_ranking.h"
#include "runtime/graph.h"
#include "runtime/session.h"

namespace qtool::quantize {
namespace {

bool same_declared_type(const runtime::ValueDecl& a, const runtime::ValueDecl& b) {
  if (a.dtype != b.dtype || a.dtype == DType::Undefined || !a.shape || !b.shape || a.shape->size() != b.shape->size())
    return false;
  for (size_t k = 0; k < a.shape->size(); ++k) {
    const auto &x = (*a.shape)[k], &y = (*b.shape)[k];
    if (x.value || y.value) {
      if (x.value != y.value) return false;
    } else if (x.param.empty() || x.param != y.param) {
      return false;
    }
  }
  return true;
}

// Declared alike where both say: same dtype and rank, and no dim both give differently (exporters often leave a
// state output's dims unnamed: Silero VAD v5 takes state [2, ?, 128] and returns stateN [?, ?, ?]).
bool compatible_declared_type(const runtime::ValueDecl& a, const runtime::ValueDecl& b) {
  if (a.dtype != b.dtype || a.dtype == DType::Undefined || !a.shape || !b.shape || a.shape->size() != b.shape->size())
    return false;
  for (size_t k = 0; k < a.shape->size(); ++k) {
    const auto &x = (*a.shape)[k], &y = (*b.shape)[k];
    if (x.value && y.value && x.value != y.value) return false;
    if (!x.value && !y.value && !x.param.empty() && !y.param.empty() && x.param != y.param) return false;
  }
  return true;
}

// sum((f - q)^2) over the elements where the float model's f is finite; inf when shapes differ, q is not finite
// where f is, or q differs from a non-finite f (NaN where f is NaN, the same infinity, count as exact: a model whose
// float outputs hold NaN, e.g. GridSample at a NaN coordinate, is judged on its other elements).
double squared_error(const Tensor& f, const Tensor& q) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (f.shape() != q.shape() || q.dtype() != DType::Float32) return kInf;
  const float* a = f.data<float>();
  const float* b = q.data<float>();
  double s = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    if (!std::isfinite(a[i])) {
      if (std::isnan(a[i]) ? !std::isnan(b[i]) : a[i] != b[i]) return kInf;
      continue;
    }
    const double d = static_cast<double>(a[i]) - b[i];
    s += d * d;
  }
  return std::isnan(s) ? kInf : s;
}

// sum(f^2) over the finite elements (the signal squared_error's noise is compared with).
double squared_sum(const Tensor& f) {
  const float* a = f.data<float>();
  double s = 0;
  for (int64_t i = 0; i < f.numel(); ++i)
    if (std::isfinite(a[i])) s += static_cast<double>(a[i]) * a[i];
  return s;
}

std::string fmt_db(double db) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f dB", db);
  return buf;
}

}  // namespace

std::string_view criterion_name(Criterion c) {
  switch (c) {
    case Criterion::Sqnr:
      return "sqnr";
    case Criterion::Kl:
      return "kl";
    case Criterion::Top1:
      return "top1";
    case Criterion::Sample:
      return "sample";
  }
  return "?";
}

double sqnr_db(double noise_ratio) {
  if (!(noise_ratio > 0)) return 200.0;
  return std::min(200.0, -10.0 * std::log10(noise_ratio));
}

AccuracyEvaluator::AccuracyEvaluator(const onnx::ModelProto& float_model, std::vector<Sample> samples,
                                     const AccuracyGuardSettings& settings, int threads)
    : samples_(std::move(samples)), threads_(std::max(1, threads)) {
  const auto graph = runtime::Graph::from_model(float_model);
  auto declared = [](const std::vector<runtime::ValueDecl>& list, const std::string& name) {
    for (const auto& d : list)
      if (d.name == name) return &d;
    return static_cast<const runtime::ValueDecl*>(nullptr);
  };
  for (const auto& [out, in] : settings.state) {  // pairs the config names
    if (!declared(graph->outputs, out))
      throw BadInputError("accuracy_guard.state: the model has no graph output named '" + out + "'");
    if (!declared(graph->inputs, in))
      throw BadInputError("accuracy_guard.state: the model has no graph input named '" + in + "'");
  }
  // Where the declarations leave a state pair open (compatible, not identical), one run of the first sample says
  // whether the output comes back in the input's shape.
  std::optional<std::map<std::string, Tensor>> probe;
  const auto same_shape_on_first_sample = [&](const std::string& in, const std::string& out) {
    if (samples_.empty() || !samples_.front().count(in)) return false;
    if (!probe) probe = runtime::Session(graph, {.threads = threads_}).run(samples_.front());
    const auto it = probe->find(out);
    return it != probe->end() && it->second.shape() == samples_.front().at(in).shape();
  };
  std::set<std::string> paired;
  for (const auto& out : graph->outputs) {
    if (out.sequence_of) sequence_outputs_.push_back(out.name);
    if (!is_float(out.dtype)) continue;  // compared as float32 (a float16 model's outputs too); never a sequence
    OutputAccuracy o;
    o.output = out.name;
    std::string input;
    if (!settings.state.empty()) {
      if (auto it = settings.state.find(out.name); it != settings.state.end()) input = it->second;
    } else {
      // The input declared like it whose name shares the longest prefix with its name (state -> stateN, h0 -> hn):
      // declared alike, or compatibly and the same shape on the first sample.
      size_t best_len = 0;
      for (const auto& in : graph->inputs) {
        const size_t len = static_cast<size_t>(
            std::mismatch(in.name.begin(), in.name.end(), out.name.begin(), out.name.end()).first - in.name.begin());
        if (len > best_len && !paired.count(in.name) &&
            (same_declared_type(in, out) ||
             (compatible_declared_type(in, out) && same_shape_on_first_sample(in.name, out.name))))
          input = in.name, best_len = len;
      }
    }
    if (!input.empty()) {
      o.state = true;
      paired.insert(input);
      feedback_.emplace_back(input, out.name);
    }
    o.threshold_db = o.floor_db = o.state ? settings.state_min_sqnr_db : settings.min_sqnr_db;
    outputs_.push_back(o);
    allowed_.push_back(std::pow(10.0, -o.threshold_db / 10.0));
  }
  const auto runs = run(float_model);
  signal_.assign(outputs_.size(), 0.0);
  reference_.resize(runs.size());
  for (size_t s = 0; s < runs.size(); ++s)
    for (size_t o = 0; o < outputs_.size(); ++o) {
      const Tensor f = to_float32(runs[s].at(outputs_[o].output));
      reference_[s].push_back(f);
      signal_[o] += squared_sum(f);
    }
  // Class scores and token logits (not state): the reference compared with itself tells how analysis reads them.
  max_kl_ = settings.max_kl;
  per_sample_ = settings.per_sample_sqnr;
  clear_.resize(outputs_.size());
  for (size_t o = 0; o < outputs_.size() && (max_kl_ > 0 || settings.keep_clear_top1); ++o) {
    if (outputs_[o].state || reference_.empty()) continue;
    const Tensor& f = reference_.front()[o];
    const analysis::Distribution d = analysis::compare_tensors(f, f).distribution;
    outputs_[o].distribution = d != analysis::Distribution::None;
    outputs_[o].max_kl = outputs_[o].distribution ? max_kl_ : 0;
    if (!outputs_[o].distribution || !settings.keep_clear_top1) continue;
    outputs_[o].top1 = true;
    for (const auto& per_sample : reference_) {
      clear_[o].push_back(analysis::clear_rows(per_sample[o], d, allowed_[o]));
      outputs_[o].clear_rows += static_cast<int64_t>(clear_[o].back().row.size());
    }
  }
}

void AccuracyEvaluator::set_weights_only(const std::vector<double>& noise, double margin_db) {
  for (size_t o = 0; o < outputs_.size() && o < noise.size(); ++o) {
    OutputAccuracy& out = outputs_[o];
    out.weights_only = noise[o] > 0;
    out.weights_only_sqnr_db = sqnr_db(noise[o]);
    const double target = out.weights_only_sqnr_db - margin_db;
    out.threshold_db = out.weights_only && target > out.floor_db ? target : out.floor_db;
    allowed_[o] = std::pow(10.0, -out.threshold_db / 10.0);
  }
}

// One session per thread, one sample per run: every sample's outputs are computed single-threaded, so they do not
// depend on the thread count. With recurrent state, the samples are one stream, run in order: each run after the
// first reads the state this model returned on the previous one.
std::vector<std::map<std::string, Tensor>> AccuracyEvaluator::run(const onnx::ModelProto& model) const {
  const auto graph = runtime::Graph::from_model(model);
  std::vector<std::map<std::string, Tensor>> outs(samples_.size());
  if (!feedback_.empty()) {
    const runtime::Session session(graph, {.threads = 1});
    for (size_t s = 0; s < samples_.size(); ++s) {
      Sample in = samples_[s];
      if (s > 0)
        for (const auto& [input, output] : feedback_) in[input] = outs[s - 1].at(output);
      outs[s] = session.run(in);
    }
    return outs;
  }
  // A sample's error leaves the parallel region as it was thrown: a bad input found while running the model (a
  // kernel's BadInputError, a LimitError) stays a bad input (exit 2), not an internal error.
  std::vector<std::exception_ptr> errors(samples_.size());
  const int64_t n = static_cast<int64_t>(samples_.size());
#pragma omp parallel num_threads(threads_)
  {
    const runtime::Session session(graph, {.threads = 1});
#pragma omp for schedule(dynamic, 1)
    for (int64_t s = 0; s < n; ++s) {
      try {
        outs[s] = session.run(samples_[s]);
      } catch (...) {
        errors[s] = std::current_exception();
      }
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return outs;
}

std::vector<double> AccuracyEvaluator::noise_ratios(const onnx::ModelProto& candidate) const {
  const auto runs = run(candidate);
  std::vector<double> noise(outputs_.size(), 0.0);
  for (size_t s = 0; s < runs.size(); ++s)
    for (size_t o = 0; o < outputs_.size(); ++o)
      noise[o] += squared_error(reference_[s][o], to_float32(runs[s].at(outputs_[o].output)));
  for (size_t o = 0; o < noise.size(); ++o)
    noise[o] = noise[o] == 0 ? 0 : signal_[o] > 0 ? noise[o] / signal_[o] : std::numeric_limits<double>::infinity();
  return noise;
}

AccuracyEvaluator::Measurement AccuracyEvaluator::measure(const onnx::ModelProto& candidate) const {
  const auto runs = run(candidate);
  Measurement m;
  m.noise.assign(outputs_.size(), 0.0);
  m.kl.assign(outputs_.size(), 0.0);
  m.flips.assign(outputs_.size(), 0);
  m.worst_sample.assign(outputs_.size(), 0.0);
  std::vector<analysis::MetricsAccumulator> acc(outputs_.size());
  for (size_t s = 0; s < runs.size(); ++s)
    for (size_t o = 0; o < outputs_.size(); ++o) {
      const Tensor q = to_float32(runs[s].at(outputs_[o].output));
      const double e = squared_error(reference_[s][o], q), f = squared_sum(reference_[s][o]);
      m.noise[o] += e;
      if (!outputs_[o].state && e > 0)
        m.worst_sample[o] = std::max(m.worst_sample[o], f > 0 ? e / f : std::numeric_limits<double>::infinity());
      if (outputs_[o].distribution && q.shape() == reference_[s][o].shape()) acc[o].add(reference_[s][o], q);
      if (outputs_[o].top1) m.flips[o] += analysis::clear_top1_flips(clear_[o][s], q);
    }
  for (size_t o = 0; o < outputs_.size(); ++o) {
    m.noise[o] = m.noise[o] == 0                ? 0
                 : signal_[o] > 0               ? m.noise[o] / signal_[o]
                                                : std::numeric_limits<double>::infinity();
    if (outputs_[o].distribution) {
      const auto kl = acc[o].result().kl_divergence;
      m.kl[o] = kl && std::isfinite(*kl) ? *kl : std::numeric_limits<double>::infinity();
    }
  }
  return m;
}

AccuracyEvaluator::Worst AccuracyEvaluator::worst(const Measurement& m) const {
  Worst w;
  auto consider = [&](double score, size_t o, Criterion c) {
    if (score > w.score) w = {score, o, c};
  };
  for (size_t o = 0; o < outputs_.size(); ++o) {
    consider(m.noise[o] / allowed_[o], o, Criterion::Sqnr);
    if (per_sample_) consider(m.worst_sample[o] / allowed_[o], o, Criterion::Sample);
    if (outputs_[o].distribution && max_kl_ > 0) consider(m.kl[o] / max_kl_, o, Criterion::Kl);
    if (outputs_[o].top1 && m.flips[o] > 0)
      consider(1.0 + static_cast<double>(m.flips[o]) / static_cast<double>(outputs_[o].clear_rows), o, Criterion::Top1);
  }
  return w;
}

double AccuracyEvaluator::score(const std::vector<double>& ratios) const {
  double worst = 0;
  for (size_t o = 0; o < ratios.size(); ++o) worst = std::max(worst, ratios[o] / allowed_[o]);
  return worst;
}

GuardReport guard_accuracy(AccuracyEvaluator& eval, const Candidate& initial, const Requantize& requantize,
                           const AccuracyGuardSettings& settings, std::vector<std::string>& float_tensors,
                           const std::function<void(const std::string&)>& log, AccuracyEvaluator* scan,
                           const GuardBudget& budget) {
  const auto t0 = std::chrono::steady_clock::now();
  auto say = [&](const std::string& s) {
    if (log) log(s);
  };
  GuardReport r;
  r.ran = true;
  r.samples = eval.samples();
  float_tensors.clear();
  auto measure = [&](const onnx::ModelProto& m) {
    ++r.evaluations;
    return eval.measure(m);
  };
  // The relative target: what the weights alone cost sets how much the activations may add.
  if (settings.weights_only_margin_db > 0 && !initial.weight_tensors.empty()) {
    const AccuracyEvaluator::Measurement w = measure(*requantize(initial.activation_tensors).model);
    eval.set_weights_only(w.noise, settings.weights_only_margin_db);
    if (scan) scan->set_weights_only(w.noise, settings.weights_only_margin_db);
  }
  r.outputs = eval.outputs();
  r.sequence_outputs = eval.sequence_outputs();
  auto finish = [&](const AccuracyEvaluator::Measurement& ratios) {
    for (size_t o = 0; o < r.outputs.size(); ++o) {
      r.outputs[o].final_sqnr_db = sqnr_db(ratios.noise[o]);
      r.outputs[o].final_worst_sample_sqnr_db = sqnr_db(ratios.worst_sample[o]);
      r.outputs[o].final_kl = ratios.kl[o];
      r.outputs[o].final_flips = ratios.flips[o];
    }
    r.met = eval.score(ratios) <= 1.0;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };

  const AccuracyEvaluator::Measurement start = measure(*initial.model);
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    r.outputs[o].sqnr_db = sqnr_db(start.noise[o]);
    r.outputs[o].worst_sample_sqnr_db = sqnr_db(start.worst_sample[o]);
    r.outputs[o].kl = start.kl[o];
    r.outputs[o].flips = start.flips[o];
  }
  if (eval.score(start) <= 1.0) {
    r.note = "every output meets its threshold";
    return finish(start);
  }

  // Units, in rewrite order, each once. A weight goes back to float together with the activation inputs of the node
  // that reads it: ONNX Runtime (1.2x, WeightBiasQuantization) quantizes a float weight itself, per tensor, when
  // the node's input comes from a DequantizeLinear, so a float weight is float only on a float input.
  struct Unit {
    std::string tensor;
    bool weight;
    double score = 0, isolated_db = 0;
    std::string worst;
    Criterion criterion = Criterion::Sqnr;
    std::string missed_output;  // set when it goes back (step 2)
    Criterion missed = Criterion::Sqnr;
  };
  std::vector<Unit> units;
  std::set<std::string> seen;
  for (const auto& t : initial.activation_tensors)
    if (seen.insert(t).second) units.push_back({t, false});
  for (const auto& t : initial.weight_tensors)
    if (seen.insert(t).second) units.push_back({t, true});
  // Tensors to keep float for the units in `chosen`.
  auto float_names = [&](const std::vector<size_t>& chosen) {
    std::vector<std::string> names;
    std::set<std::string> in;
    auto add = [&](const std::string& t) {
      if (in.insert(t).second) names.push_back(t);
    };
    for (size_t c : chosen) {
      add(units[c].tensor);
      if (auto it = initial.weight_inputs.find(units[c].tensor); it != initial.weight_inputs.end())
        for (const auto& t : it->second) add(t);
    }
    return names;
  };

  // The time budget: checked between evaluations; past it the search stops and keeps the best state measured.
  const bool timed = budget.seconds > 0;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto out_of_time = [&] { return timed && elapsed() >= budget.seconds; };
  auto secs = [](double s) {  // "600 s", "0.5 s"
    char buf[32];
    std::snprintf(buf, sizeof buf, s >= 10 ? "%.0f s" : "%.2g s", s);
    return std::string(buf);
  };

  // 1. Ranking, best first (guard_ranking.h), on the scan evaluator's samples when there is one: it only ranks.
  AccuracyEvaluator& ranker = scan ? *scan : eval;
  say("accuracy guard: an output misses its threshold; ranking " + std::to_string(units.size()) +
      " quantized tensors by their cost alone on " + std::to_string(ranker.samples()) + " samples" +
      (timed ? " (time budget " + secs(budget.seconds) + ")" : ""));
  auto cost = [&](size_t begin, size_t end) {  // the model with only units [begin, end) quantized
    std::vector<std::string> others;
    for (size_t j = 0; j < units.size(); ++j)
      if (j < begin || j >= end) others.push_back(units[j].tensor);
    ++r.evaluations;
    const auto m = ranker.measure(*requantize(others).model);
    const AccuracyEvaluator::Worst w = ranker.worst(m);
    if (end == begin + 1) {  // the unit alone: what the report says about it
      Unit& u = units[begin];
      u.score = w.score;
      u.worst = r.outputs[w.output].output;
      u.criterion = w.criterion;
      u.isolated_db = sqnr_db(m.noise[w.output]);
    }
    return w.score;
  };
  BestFirstRanking ranking(units.size(), cost);
  auto next_unit = [&] { return ranking.next(out_of_time); };

  // 2. Most sensitive first, until every output meets its threshold. The best state measured is kept for a
  // search cut short by the time budget.
  std::vector<size_t> chosen, best_chosen;
  AccuracyEvaluator::Measurement ratios = start, best = start;
  const size_t cap = static_cast<size_t>(settings.max_float_tensors);
  std::string stopped;  // the step the time budget cut short
  while (chosen.size() < cap && eval.score(ratios) > 1.0) {
    if (out_of_time()) {
      stopped = "while sending tensors back to float";
      break;
    }
    const std::optional<size_t> k = next_unit();
    if (!k) {
      if (out_of_time()) stopped = "while ranking tensors";
      break;
    }
    const AccuracyEvaluator::Worst missed = eval.worst(ratios);
    units[*k].missed_output = r.outputs[missed.output].output;
    units[*k].missed = missed.criterion;
    chosen.push_back(*k);
    ratios = measure(*requantize(float_names(chosen)).model);
    const AccuracyEvaluator::Worst now = eval.worst(ratios);
    say("accuracy guard: " + std::to_string(chosen.size()) + " kept float (" + units[*k].tensor + "); worst " +
        r.outputs[now.output].output + " " + std::string(criterion_name(now.criterion)) + " at " +
        std::to_string(now.score).substr(0, 5) + "x its limit; " + std::to_string(r.evaluations) +
        " evaluations, " + secs(elapsed()));
    if (eval.score(ratios) < eval.score(best)) best = ratios, best_chosen = chosen;
  }
  if (!stopped.empty()) ratios = best, chosen = best_chosen;
  // 3. Back to quantized where the thresholds still hold, least sensitive first.
  if (eval.score(ratios) <= 1.0)
    for (size_t k = chosen.size(); k-- > 0;) {
      if (out_of_time()) {
        stopped = "while trying tensors back in quantized (the model meets its thresholds)";
        break;
      }
      std::vector<size_t> rest = chosen;
      rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(k));
      const auto trial = measure(*requantize(float_names(rest)).model);
      if (eval.score(trial) <= 1.0) {
        chosen.erase(chosen.begin() + static_cast<std::ptrdiff_t>(k));
        ratios = trial;
      }
    }
  float_tensors = float_names(chosen);
  for (size_t c : chosen)
    r.kept_float.push_back({units[c].tensor, units[c].weight, units[c].isolated_db, units[c].worst, units[c].criterion,
                            units[c].missed_output, units[c].missed});
  finish(ratios);
  r.timed_out = !stopped.empty();
  r.note = std::to_string(chosen.size()) + " of " + std::to_string(units.size()) + " quantized tensors kept float" +
           (r.timed_out ? "; time budget of " + secs(budget.seconds) + " reached " + stopped +
                              (r.met ? "" : ": an output still misses its threshold")
            : r.met     ? "; every output meets its threshold"
            : chosen.size() >= cap
                ? "; an output still misses its threshold (max_float_tensors " + std::to_string(cap) + " reached)"
                : "; an output still misses its threshold with every quantized tensor tried");
  for (const auto& o : r.outputs)
    say("accuracy guard: " + o.output + (o.state ? " (state)" : "") + " " + fmt_db(o.sqnr_db) + " -> " +
        fmt_db(o.final_sqnr_db) + ", threshold " + fmt_db(o.threshold_db) +
        (o.top1 ? "; clear top-1 flips " + std::to_string(o.flips) + " -> " + std::to_string(o.final_flips) + " of " +
                      std::to_string(o.clear_rows)
                : ""));
  return r;
}

}  // namespace qtool::quantize
