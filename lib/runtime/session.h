// The executor: runs a prepared Graph on named input tensors.
//
//   qtool::runtime::Session session(qtool::onnxio::load_model("model.onnx"), {.threads = 2});
//   auto outputs = session.run({{"input", tensor}});             // name -> Tensor, every tensor graph output
//   session.run(inputs, {.tap = [](const std::string& name, const Tensor& value) { ... }});
//
// Inputs are checked by name, dtype, rank and fixed dimensions against the model's declared input
// types (symbolic dimensions must agree across inputs); any mismatch is a BadInputError naming the
// input. Shapes are otherwise resolved at run time. Each intermediate tensor is released after its
// last consumer ran, so peak memory follows the live set. A session is immutable once built: run()
// may be called repeatedly (not concurrently from several threads on one session).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/graph.h"

namespace onnx {
class ModelProto;
}
namespace qtool::onnxio {
struct LoadedModel;
}

namespace qtool::runtime {

struct SessionOptions {
  int threads = 1;  // OpenMP threads kernels may use; 0 = all available (omp_get_max_threads)
  // The intermediate tensors a tap must see. Unset (the default): every one, so nothing is fused.
  // Set: activations are folded into the Conv/Gemm/MatMul before them (runtime/fuse.h) except where that
  // would hide a tensor in the set; an empty set (plain inference, `qtool run`) fuses freely.
  std::optional<std::set<std::string>> observed;
  // --device: GPU kernel rows first where there are some (runtime/kernel.h find_kernel).
  device::DeviceKind device = device::DeviceKind::Cpu;
};

// Most threads qtool starts for one job: more only oversubscribes, and tens of thousands make thread
// creation fail deep inside OpenMP or std::thread (std::terminate).
inline constexpr int kMaxThreads = 1024;
// A thread count as SessionOptions reads it: 0 = all available; UsageError when negative, BadInputError
// above kMaxThreads.
int resolve_threads(int requested);

// Sees every graph input (in declaration order, before any node runs), then every node output of
// the main graph right after the node produced it, in execution (topological) order; with
// SessionOptions::observed set, only those outputs that fusion left in the graph (every tensor in `observed` is
// among them). Constants and initializers are not reported; values inside If/Loop/Scan bodies only with
// RunOptions::tap_subgraphs (then every execution of a body reports its formal inputs and node outputs, by their
// names: a Loop or Scan body once per iteration). Sequence values (runtime/value.h) are not reported. The reference is
// valid only during the call: copy the Tensor (cheap, shares storage) to keep it.
using TapFn = std::function<void(const std::string& name, const Tensor& value)>;

// Filled by run() when RunOptions::stats is set.
struct RunStats {
  // Largest total size of the non-constant tensors the main graph held at once (graph inputs and node
  // outputs; a view such as Reshape's output is counted as a tensor of its own).
  size_t peak_live_bytes = 0;
  size_t nodes_run = 0;  // main-graph nodes
};

struct RunOptions {
  TapFn tap;                   // optional
  bool tap_subgraphs = false;  // the tap sees values inside If/Loop/Scan bodies too (calibration)
  RunStats* stats = nullptr;   // optional
};

class Session {
 public:
  explicit Session(const onnxio::LoadedModel& model, SessionOptions options = {});
  explicit Session(const onnx::ModelProto& model, SessionOptions options = {});
  explicit Session(std::shared_ptr<const Graph> graph, SessionOptions options = {});

  // Runs the graph and returns every graph output that is a tensor, by name: a sequence output (runtime/value.h) is
  // left out of the map, so code that knows only tensors (calibration, the accuracy guard) runs such models and reads
  // what it can compare.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs, const RunOptions& options = {}) const;
  // Tensors or sequences in (a sequence input must be declared one), every graph output out.
  std::map<std::string, Value> run_values(const std::map<std::string, Value>& inputs,
                                          const RunOptions& options = {}) const;

  const Graph& graph() const { return *graph_; }
  // Inputs the caller must feed (initializers listed as inputs are in graph().optional_inputs).
  const std::vector<ValueDecl>& inputs() const { return graph_->inputs; }
  const std::vector<ValueDecl>& outputs() const { return graph_->outputs; }
  int threads() const { return threads_; }

 private:
  std::shared_ptr<const Graph> graph_;
  int threads_ = 1;
};

// "float [N,3,224,224]", "a sequence of float tensors" for messages.
std::string describe_decl(const ValueDecl& d);

}  // namespace qtool::runtime
