// The contract between the interpreter and its kernels.
//
// A kernel is created once per node (KernelFactory), when the model is prepared: it reads and
// validates attributes there and may precompute from constant inputs (e.g. pack weights).
// run() is then called once per execution with the node's input values and fills its outputs.
// Kernels never talk to ONNX protobufs: the loader turns a NodeProto into a NodeInfo first.
//
// Threading is owned by the framework: kernels parallelise with OpenMP using ctx.threads and never call
// omp_set_num_threads, except kernels/conv_dnnl.cc around each oneDNN call (oneDNN reads it), restored after.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "device/device.h"
#include "runtime/value.h"

namespace qtool::runtime {

class Graph;  // runtime/graph.h

// One ONNX attribute, already decoded.
struct Attribute {
  enum class Kind { Float, Int, String, Tensor, Graph, Floats, Ints, Strings } kind = Kind::Int;
  float f = 0;
  int64_t i = 0;
  std::string s;
  qtool::Tensor t;
  std::shared_ptr<const Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
};

class NodeAttrs {
 public:
  std::map<std::string, Attribute, std::less<>> values;

  bool has(std::string_view name) const { return values.find(name) != values.end(); }
  const Attribute* find(std::string_view name) const;
  // Typed getters: the default is returned when absent; a present attribute of the wrong kind is a
  // BadInputError naming the attribute.
  int64_t get_int(std::string_view name, int64_t dflt) const;
  float get_float(std::string_view name, float dflt) const;
  std::string get_string(std::string_view name, std::string dflt) const;
  std::vector<int64_t> get_ints(std::string_view name, std::vector<int64_t> dflt = {}) const;
  std::vector<float> get_floats(std::string_view name, std::vector<float> dflt = {}) const;
  // Required attributes: BadInputError when missing.
  int64_t require_int(std::string_view name) const;
  const qtool::Tensor& require_tensor(std::string_view name) const;
  std::shared_ptr<const Graph> require_graph(std::string_view name) const;
};

// An activation that graph preparation (runtime/fuse.h) folded into a Conv, Gemm or MatMul node: the
// kernel applies it to every output value. Formulas as the standalone ops: Relu max(x, 0); Clip
// min(max(x, a), b); HardSigmoid max(0, min(1, a*x + b)); HardSwish x * max(0, min(1, x/6 + 0.5));
// Silu (Sigmoid then Mul with the same x) x * (1 / (1 + exp(-x))); Gelu (approximate "none", CPU sessions only: the
// GPU kernels have no Gelu epilogue) x/2 * (1 + erf(x/sqrt(2))); Softmax (MatMul only, CPU only: not elementwise) over
// the output's last axis.
struct FusedActivation {
  enum class Kind { None, Relu, Clip, HardSigmoid, HardSwish, Silu, Gelu, Softmax } kind = Kind::None;
  float a = 0, b = 0;
  // Conv only, CPU sessions only (runtime/fuse_conv.h fuse_conv_epilogue): after the activation, per output channel
  // m, y = min(max(y, lo[m]), hi[m]) * scale[m] + shift[m]. Null when the Conv has none.
  struct Channels {
    std::vector<float> lo, hi, scale, shift;
  };
  std::shared_ptr<const Channels> channels;
  bool any() const { return kind != Kind::None || channels; }
};

// What a kernel factory sees of its node.
struct NodeInfo {
  std::string name;  // node name (may be empty in the model; the loader fills "<op_type>_<index>")
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int opset = 0;       // opset version of the node's domain in this model
  NodeAttrs attrs;
  std::vector<std::string> inputs;  // "" for an omitted optional input
  std::vector<std::string> outputs;
  // Values of inputs that are initializers or Constant outputs, nullptr otherwise (same indexing as inputs).
  std::vector<const qtool::Tensor*> const_inputs;
  FusedActivation activation;  // set only by graph preparation's fusion, never by the model
  // MatMul only, set by graph preparation (runtime/fuse_matmul_epilogue.h): Y = matmul_alpha · A·B (+ input 2, a
  // constant bias [N], + input 3, a tensor broadcast to Y, when fusion gave the node those inputs).
  float matmul_alpha = 1.f;
  // Conv only, CPU sessions in builds with oneDNN, set by graph preparation (runtime/conv_layout.h): input 0 arrives,
  // output 0 leaves, in the channel-blocked layout [N, C/8, H, W, 8] of kernels/blocked_layout.h instead of NCHW.
  bool blocked_input = false;
  bool blocked_output = false;
  // With blocked_input where the blocked layout is NHWC: input 0 is a plain 4-D NHWC tensor [N, H, W, C] (the input
  // of a Transpose to NCHW that conv_layout.h folded away), read as the blocked [N, 1, H, W, C].
  bool nhwc_input = false;

  // "Conv 'conv1'" for messages.
  std::string label() const { return op_type + " '" + name + "'"; }
};

// Runs a subgraph (If/Loop/Scan/SequenceMap body). `inputs` bind to the subgraph's formal inputs in order (moved in:
// a sequence handed over with its only reference can be appended to in place, runtime/value.h); names from enclosing
// scopes are visible through the runner. Returns the body's outputs in order.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual std::vector<Value> run_values(const Graph& body, std::vector<Value> inputs) = 0;
  // Tensors in and out (Scan): a body output that is a sequence is a BadInputError.
  std::vector<qtool::Tensor> run(const Graph& body, std::span<const qtool::Tensor> inputs);
};

struct KernelContext {
  const NodeInfo& node;
  // One entry per node input; nullptr for an omitted optional input.
  std::span<const qtool::Tensor* const> inputs;
  // Sized to the node's output count; the kernel assigns each produced output.
  std::span<qtool::Tensor> outputs;
  int threads = 1;
  SubgraphRunner* subgraphs = nullptr;  // set for nodes with graph attributes
  // Kernels whose registry row takes sequences (KernelDef::sequences) only; empty spans for every other kernel.
  // seq_inputs: per input, the sequence it holds (null for a tensor or an omitted input; inputs[i] is then null for
  // a sequence). The frame moves a value's reference in here when this node is its last reader, so a kernel holding
  // the only reference may modify it (take_sequence). seq_outputs: per output, a sequence the kernel produced instead
  // of a tensor (it leaves outputs[i] empty then).
  std::span<SequenceRef> seq_inputs = {};
  std::span<SequenceRef> seq_outputs = {};

  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  // BadInputError naming the node and input index when missing (or a sequence: "input 1 is a sequence, expected a
  // tensor").
  const qtool::Tensor& input(size_t i) const;
  bool is_sequence(size_t i) const { return i < seq_inputs.size() && seq_inputs[i] != nullptr; }
  // BadInputError naming the node and input index when input i is missing or a tensor.
  const TensorSequence& sequence(size_t i) const;
  // Input i as a sequence this kernel may modify and return: the input's own when this node holds its only
  // reference (sequence(i) is then no longer available), else a copy (element tensors shared either way).
  SequenceRef take_sequence(size_t i);
  // Input i (tensor or sequence) as a Value, or an empty Value when omitted.
  Value value(size_t i) const;
  // Sets output i to a tensor or a sequence.
  void set_output(size_t i, Value v);
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(KernelContext& ctx) = 0;
};

using KernelFactory = std::unique_ptr<Kernel> (*)(const NodeInfo& node);

// One row of the kernel registry (runtime/kernels/registry.cc holds the whole list).
struct KernelDef {
  std::string_view domain;  // "" = ai.onnx
  std::string_view op_type;
  int since_version;  // first opset this kernel implements
  int until_version;  // last opset (inclusive) this kernel implements
  KernelFactory make;
  // The kernel takes or produces sequences (runtime/value.h): the frame fills KernelContext::seq_inputs/seq_outputs
  // for it. Any other kernel handed a sequence is a BadInputError naming the node.
  bool sequences = false;
};

// The explicit list of every kernel, in one file.
std::span<const KernelDef> registered_kernels();
// The GPU rows (same file; empty in builds without CUDA).
std::span<const KernelDef> registered_cuda_kernels();
// nullptr when no kernel matches domain/op/opset. With device Cuda, the GPU row when there is one, else the CPU row.
const KernelDef* find_kernel(std::string_view domain, std::string_view op_type, int opset,
                             device::DeviceKind device = device::DeviceKind::Cpu);
// True for a row of registered_cuda_kernels().
bool is_gpu_row(const KernelDef* def);
// "<node label>: <why>; runs on the CPU" at -v: a node under --device cuda without a GPU row, or a GPU kernel
// handing inputs it has no GPU path for to its CPU kernel.
void log_cpu_fallback(const NodeInfo& node, std::string_view why);

// Helper for kernels that need no per-node state: wraps a plain function.
template <void (*Fn)(KernelContext&)>
class FunctionKernel final : public Kernel {
 public:
  void run(KernelContext& ctx) override { Fn(ctx); }
};
template <void (*Fn)(KernelContext&)>
std::unique_ptr<Kernel> make_function_kernel(const NodeInfo&) {
  return std::make_unique<FunctionKernel<Fn>>();
}

}  // namespace qtool::runtime
