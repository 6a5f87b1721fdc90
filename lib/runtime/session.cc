#include "runtime/session.h"

#include <omp.h>

#if defined(__GLIBC__)
#endif

#include <algorithm>
#include <cstdlib>

#include "onnx/model_io.h"

namespace qtool::runtime {
namespace {

// One activation of a graph: a slot per value id. Implements SubgraphRunner for the nodes it runs,
// so a body sees this frame's values (and, through it, those of enclosing frames) by name.
class Frame final : public SubgraphRunner {
 public:
  // `tap_bodies`: subgraph frames report to `tap` too.
  Frame(const Graph& g, const Frame* parent, int threads, const TapFn* tap, bool tap_bodies = false)
      : g_(g),
        parent_(parent),
        threads_(threads),
        tap_(tap),
        tap_bodies_(tap_bodies),
        values_(g.value_names.size()),
        remaining_(g.use_counts) {
    for (const auto& [id, t] : g.constants) values_[id].tensor = t;
    for (const auto& [id, name] : g.captured) {
      const Value* v = parent_ ? parent_->lookup(name) : nullptr;
      if (!v) throw InternalError("subgraph value '" + name + "' from the enclosing scope is not available");
      values_[id] = *v;
    }
  }

  void bind(int id, Value v) {
    values_[id] = std::move(v);
    account(id, true);
  }
  void set_stats(RunStats* stats) { stats_ = stats; }
  const Value& value(int id) const { return values_[id]; }

  const Value* lookup(const std::string& name) const {
    const int id = g_.id_of(name);
    if (id >= 0 && !values_[id].empty()) return &values_[id];
    return parent_ ? parent_->lookup(name) : nullptr;
  }

  // The tap sees tensors only: a sequence is not an activation a calibrator could observe.
  void report(int id) const {
    if (tap_ && *tap_ && !values_[id].is_sequence()) (*tap_)(g_.value_names[id], values_[id].tensor);
  }

  // Releases inputs nobody reads (after binding and tapping them).
  void release_unused() {
    for (int id = 0; id < static_cast<int>(values_.size()); ++id)
      if (remaining_[id] == 0 && !g_.is_output[id]) release(id);
  }

  void run_nodes() {
    std::vector<const Tensor*> ins;
    std::vector<SequenceRef> seq_ins, seq_outs;
    for (const GraphNode& n : g_.nodes) {
      ins.assign(n.inputs.size(), nullptr);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const int id = n.inputs[i];
        if (id < 0) continue;
        if (values_[id].tensor.empty()) {
          check_sequence_input(n, id);  // a sequence (for a kernel that takes them) or an error
          continue;
        }
        ins[i] = &values_[id].tensor;
      }
      std::vector<Tensor> outs(n.outputs.size());
      KernelContext ctx{n.info, ins, outs, threads_, this};
      if (n.sequences) {
        bind_sequences(n, seq_ins, seq_outs);
        ctx.seq_inputs = seq_ins;
        ctx.seq_outputs = seq_outs;
      }
      try {
        n.kernel->run(ctx);
      } catch (const Error& e) {
        const std::string label = n.info.label();
        const std::string what = e.what();
        if (what.rfind(label, 0) == 0) throw;
        throw Error(e.kind(), label + ": " + what);
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception& e) {
        throw InternalError(n.info.label() + ": " + e.what());
      }
      if (n.sequences) seq_ins.clear();  // no reference may linger past the node (take_sequence counts them)
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        const int id = n.outputs[o];
        if (id < 0) continue;
        if (outs[o].empty()) {
          if (!n.sequences || !seq_outs[o])
            throw InternalError(n.info.label() + ": the kernel did not produce output " + std::to_string(o));
          values_[id] = Value(std::move(seq_outs[o]));
        } else {
          values_[id].tensor = std::move(outs[o]);  // the slot holds no sequence: ids are assigned once per run
        }
        account(id, true);
        report(id);
      }
      ins.clear();
      auto done = [&](int id) {
        if (id >= 0 && --remaining_[id] == 0 && !g_.is_output[id]) release(id);
      };
      for (int id : n.inputs) done(id);
      for (int id : n.implicit_inputs) done(id);
      for (int id : n.outputs)
        if (id >= 0 && remaining_[id] == 0 && !g_.is_output[id]) release(id);
      if (stats_) ++stats_->nodes_run;
    }
  }

  std::vector<Value> run_values(const Graph& body, std::vector<Value> inputs) override {
    if (inputs.size() != body.inputs.size())
      throw InternalError("subgraph '" + body.name + "' takes " + std::to_string(body.inputs.size()) + " inputs, got " +
                          std::to_string(inputs.size()));
    Frame sub(body, this, threads_, tap_bodies_ ? tap_ : nullptr, tap_bodies_);
    for (size_t i = 0; i < inputs.size(); ++i) {
      sub.bind(body.inputs[i].id, std::move(inputs[i]));
      sub.report(body.inputs[i].id);
    }
    inputs.clear();  // the body frame holds the only references now
    sub.run_nodes();
    std::vector<Value> outs;
    outs.reserve(body.outputs.size());
    for (const auto& o : body.outputs) {
      const Value& v = sub.value(o.id);
      if (v.empty()) throw InternalError("subgraph '" + body.name + "' output '" + o.name + "' has no value");
      outs.push_back(v);
    }
    return outs;  // `sub` goes first: a sequence output comes back with one reference
  }

 private:
  // Input `id` of node n holds no tensor: a sequence, which only a kernel that takes them may read.
  void check_sequence_input(const GraphNode& n, int id) const {
    if (!values_[id].is_sequence())
      throw InternalError(n.info.label() + ": input '" + g_.value_names[id] + "' has no value");
    if (!n.sequences)
      throw BadInputError(n.info.label() + ": input '" + g_.value_names[id] + "' is a " +
                          describe_value(values_[id]) + "; " + n.info.op_type + " takes tensors only");
  }

  // Fills seq_ins (one per input) and clears seq_outs (one per output) for a kernel that takes sequences. A value
  // this node reads for the last time, once, is moved in: a kernel holding the only reference may modify it.
  void bind_sequences(const GraphNode& n, std::vector<SequenceRef>& seq_ins, std::vector<SequenceRef>& seq_outs) {
    seq_ins.assign(n.inputs.size(), nullptr);
    seq_outs.assign(n.outputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int id = n.inputs[i];
      if (id < 0 || !values_[id].is_sequence()) continue;
      const bool last = remaining_[id] == 1 && !g_.is_output[id] &&
                        std::count(n.inputs.begin(), n.inputs.end(), id) == 1 &&
                        std::find(n.implicit_inputs.begin(), n.implicit_inputs.end(), id) == n.implicit_inputs.end();
      if (last) {
        account(id, false);
        seq_ins[i] = std::move(values_[id].sequence);
      } else {
        seq_ins[i] = values_[id].sequence;
      }
    }
  }

  void release(int id) {
    account(id, false);
    values_[id] = Value();
  }
  // Live-bytes bookkeeping for RunStats (constants are not counted).
  void account(int id, bool add) {
    if (!stats_ || g_.constants.count(id) || values_[id].empty()) return;
    if (add) {
      live_ += values_[id].nbytes();
      stats_->peak_live_bytes = std::max(stats_->peak_live_bytes, live_);
    } else {
      live_ -= values_[id].nbytes();
    }
  }

  const Graph& g_;
  const Frame* parent_;
  RunStats* stats_ = nullptr;
  size_t live_ = 0;
  int threads_;
  const TapFn* tap_;
  bool tap_bodies_;
  std::vector<Value> values_;
  std::vector<int> remaining_;
};

void check_input(const ValueDecl& d, const Tensor& t, std::map<std::string, int64_t>& symbols) {
  if (d.sequence_of)
    throw BadInputError("input '" + d.name + "' is a tensor (" + std::string(dtype_name(t.dtype())) + " " +
                        shape_str(t.shape()) + "), the model expects " + describe_decl(d));
  if (d.dtype != DType::Undefined && t.dtype() != d.dtype)
    throw BadInputError("input '" + d.name + "' has dtype " + std::string(dtype_name(t.dtype())) +
                        ", the model expects " + describe_decl(d));
  if (!d.shape) return;
  const auto& dims = *d.shape;
  if (t.rank() != static_cast<int64_t>(dims.size()))
    throw BadInputError("input '" + d.name + "' has shape " + shape_str(t.shape()) + " (rank " +
                        std::to_string(t.rank()) + "), the model expects " + describe_decl(d));
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t got = t.shape()[i];
    if (dims[i].value && *dims[i].value > 0 && *dims[i].value != got)
      throw BadInputError("input '" + d.name + "' has shape " + shape_str(t.shape()) + ", the model expects " +
                          describe_decl(d) + " (dimension " + std::to_string(i) + " must be " +
                          std::to_string(*dims[i].value) + ")");
    if (!dims[i].value && !dims[i].param.empty()) {
      auto [it, inserted] = symbols.emplace(dims[i].param, got);
      if (!inserted && it->second != got)
        throw BadInputError("input '" + d.name + "' has shape " + shape_str(t.shape()) + ": dimension '" +
                            dims[i].param + "' is " + std::to_string(got) + " here but " + std::to_string(it->second) +
                            " in another input");
    }
  }
}

// A sequence fed for input d: the model must declare a sequence there, of the same element type when it says one.
void check_input(const ValueDecl& d, const Value& v, std::map<std::string, int64_t>& symbols) {
  if (!v.is_sequence()) return check_input(d, v.tensor, symbols);
  const TensorSequence& s = *v.sequence;
  const bool expected = d.sequence_of || (d.dtype == DType::Undefined && !d.shape);
  if (!expected || (d.sequence_of && *d.sequence_of != DType::Undefined && *d.sequence_of != s.elem_dtype))
    throw BadInputError("input '" + d.name + "' is a " + describe_value(v) + ", the model expects " + describe_decl(d));
  for (const Tensor& t : s.items)
    if (t.dtype() != s.elem_dtype)
      throw BadInputError("input '" + d.name + "' is a sequence of " + std::string(dtype_name(s.elem_dtype)) +
                          " tensors holding a " + std::string(dtype_name(t.dtype())) + " tensor");
}

bool undefined_value(const Tensor& t) { return t.empty(); }
bool undefined_value(const Value& v) { return v.empty(); }

// Session::run and run_values: checks and binds `inputs` (tensors or values by name), runs the graph.
template <class Map>
void run_graph(const Graph& g, const Map& inputs, Frame& frame) {
  auto known = [&](const std::string& n) -> const ValueDecl* {
    for (const auto& d : g.inputs)
      if (d.name == n) return &d;
    for (const auto& d : g.optional_inputs)
      if (d.name == n) return &d;
    return nullptr;
  };
  for (const auto& [name, v] : inputs) {
    if (!known(name)) {
      std::string list;
      for (const auto& d : g.inputs) list += (list.empty() ? "'" : ", '") + d.name + "'";
      throw BadInputError("unknown input '" + name + "': the model's inputs are " + (list.empty() ? "(none)" : list));
    }
    if (undefined_value(v)) throw BadInputError("input '" + name + "' is an empty (undefined) tensor");
  }
  for (const auto& d : g.inputs)
    if (!inputs.count(d.name)) throw BadInputError("missing input '" + d.name + "' (" + describe_decl(d) + ")");
  std::map<std::string, int64_t> symbols;
  for (const auto& d : g.inputs) check_input(d, inputs.at(d.name), symbols);
  for (const auto& d : g.optional_inputs)
    if (inputs.count(d.name)) check_input(d, inputs.at(d.name), symbols);

  for (const auto& d : g.inputs) {
    frame.bind(d.id, inputs.at(d.name));
    frame.report(d.id);
  }
  for (const auto& d : g.optional_inputs)
    if (inputs.count(d.name)) {
      frame.bind(d.id, inputs.at(d.name));
      frame.report(d.id);
    }
  frame.release_unused();
  frame.run_nodes();
}

}  // namespace

int resolve_threads(int requested) {
  if (requested < 0)
    throw UsageError("the thread count must be 0 (all cores) or positive, got " + std::to_string(requested));
  if (requested > kMaxThreads)
    throw BadInputError("--threads " + std::to_string(requested) + " is more than the " + std::to_string(kMaxThreads) +
                        " threads qtool supports; use 0 for all cores");
  return requested == 0 ? omp_get_max_threads() : requested;
}

std::string describe_decl(const ValueDecl& d) {
  if (d.sequence_of)
    return "a sequence of " +
           (*d.sequence_of == DType::Undefined ? std::string("tensors")
                                               : std::string(dtype_name(*d.sequence_of)) + " tensors");
  std::string s = d.dtype == DType::Undefined ? std::string("any") : std::string(dtype_name(d.dtype));
  if (!d.shape) return s + " [any shape]";
  s += " [";
  for (size_t i = 0; i < d.shape->size(); ++i) {
    const auto& dim = (*d.shape)[i];
    if (i) s += ',';
    s += dim.value ? std::to_string(*dim.value) : dim.param.empty() ? std::string("?") : dim.param;
  }
  return s + "]";
}

Session::Session(std::shared_ptr<const Graph> graph, SessionOptions options)
    : graph_(std::move(graph)), threads_(resolve_threads(options.threads)) {}

namespace {
PrepareOptions prepare_options(const SessionOptions& o) {
  PrepareOptions p;
  p.fuse = o.observed.has_value();
  if (o.observed) p.keep = *o.observed;
  p.device = o.device;
  return p;
}
}  // namespace

Session::Session(const onnx::ModelProto& model, SessionOptions options)
    : Session(Graph::from_model(model, prepare_options(options)), options) {}

Session::Session(const onnxio::LoadedModel& model, SessionOptions options) : Session(*model.proto, options) {}

std::map<std::string, Tensor> Session::run(const std::map<std::string, Tensor>& inputs,
                                           const RunOptions& options) const {
  const Graph& g = *graph_;
  Frame frame(g, nullptr, threads_, &options.tap, options.tap_subgraphs);
  if (options.stats) {
    *options.stats = RunStats{};
    frame.set_stats(options.stats);
  }
  run_graph(g, inputs, frame);
  std::map<std::string, Tensor> out;
  for (const auto& o : g.outputs) {
    const Value& v = frame.value(o.id);
    if (v.empty()) throw InternalError("graph output '" + o.name + "' has no value");
    if (!v.is_sequence()) out[o.name] = v.tensor;
  }
  return out;
}

std::map<std::string, Value> Session::run_values(const std::map<std::string, Value>& inputs,
                                                 const RunOptions& options) const {
  const Graph& g = *graph_;
  Frame frame(g, nullptr, threads_, &options.tap, options.tap_subgraphs);
  if (options.stats) {
    *options.stats = RunStats{};
    frame.set_stats(options.stats);
  }
  run_graph(g, inputs, frame);
  std::map<std::string, Value> out;
  for (const auto& o : g.outputs) {
    const Value& v = frame.value(o.id);
    if (v.empty()) throw InternalError("graph output '" + o.name + "' has no value");
    out[o.name] = v;
  }
  return out;
}

}  // namespace qtool::runtime
