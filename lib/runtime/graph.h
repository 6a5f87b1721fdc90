// A prepared, runnable graph: the interpreter's view of an onnx::GraphProto.
//
// Preparation (Graph::from_model) decodes every node into a NodeInfo, folds Constant nodes and
// initializers into constants, sorts the nodes topologically, creates one kernel per node from the
// registry and computes, per value, how many nodes consume it (the executor frees a tensor after
// its last use). Values are numbered: the executor keeps one slot per value id.
//
// Subgraphs (If/Loop/Scan bodies) are Graphs too; names they use from enclosing scopes are listed in
// `captured` and resolved by name when the body runs. A node with subgraph attributes lists those
// outer names in `implicit_inputs`, so they stay alive until it has run.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "runtime/kernel.h"

namespace onnx {
class ModelProto;
class GraphProto;
}  // namespace onnx

namespace qtool::runtime {

// One dimension of a declared type: a fixed size, a symbolic name, or unknown.
struct DeclaredDim {
  std::optional<int64_t> value;  // set for dim_value
  std::string param;             // dim_param, may be empty
};

// A graph input or output as the model declares it.
struct ValueDecl {
  std::string name;
  int id = -1;                                    // value id in the graph
  DType dtype = DType::Undefined;                 // Undefined when the model does not say, or for a sequence
  std::optional<std::vector<DeclaredDim>> shape;  // nullopt when the rank is unknown, or for a sequence
  // Set for a sequence of tensors (seq(tensor(T))): T, Undefined when the model does not say. Code that knows only
  // tensors sees such a value as one of unknown type (dtype Undefined), as before sequences ran.
  std::optional<DType> sequence_of;
};

struct GraphNode {
  NodeInfo info;
  std::unique_ptr<Kernel> kernel;
  std::vector<int> inputs;           // value ids, -1 for an omitted optional input
  std::vector<int> outputs;          // value ids, -1 for an omitted optional output
  std::vector<int> implicit_inputs;  // outer-scope values read by this node's subgraphs
  bool sequences = false;            // its kernel takes or makes sequences (KernelDef::sequences)
};

// How much preparation may rewrite the main graph.
struct PrepareOptions {
  // Run written-out HardSwish, Gelu and RMSNorm as one op (runtime/fuse_hardswish.h, fuse_gelu.h,
  // fuse_rmsnorm.h), fold a zero Pad and a constant per-channel Mul/Add/BatchNormalization into the Conv around
  // them (runtime/fuse_conv.h), fold a constant scale, a constant bias and an added tensor into the MatMul before
  // them (runtime/fuse_matmul_epilogue.h, CPU only), then fold
  // activations into the Conv/Gemm/MatMul before them (runtime/fuse.h). The folded-away tensors
  // then never exist, so a tap cannot see them: only tensors named in `keep` (and graph outputs) are
  // guaranteed to stay.
  bool fuse = false;
  std::set<std::string> keep;
  // Which device's kernel rows come first (runtime/kernel.h find_kernel); nodes without a GPU row run on the CPU.
  device::DeviceKind device = device::DeviceKind::Cpu;
};

class Graph {
 public:
  // Prepares the model's main graph. Unsupported ops (no registry row for domain/op/opset), in the
  // graph or any subgraph, are collected and reported in one UnsupportedError naming each node.
  static std::shared_ptr<const Graph> from_model(const onnx::ModelProto& model, const PrepareOptions& options = {});

  std::string name;
  // Inputs the caller may feed: for the main graph the declared inputs that are not initializers,
  // then (in `optional_inputs`) initializers also listed as inputs (IR < 4), which keep their
  // initializer value unless fed. For a subgraph: its formal inputs in order.
  std::vector<ValueDecl> inputs;
  std::vector<ValueDecl> optional_inputs;
  std::vector<ValueDecl> outputs;
  std::vector<GraphNode> nodes;  // topological order

  // Value table.
  std::vector<std::string> value_names;  // id -> name
  std::unordered_map<std::string, int> value_ids;
  std::vector<int> use_counts;      // per id: number of node inputs (incl. implicit) reading it
  std::vector<bool> is_output;      // per id: a graph output (never freed during the run)
  std::map<int, Tensor> constants;  // initializers and folded Constant nodes, by id
  // Values defined in an enclosing scope: (local id, name), resolved when the subgraph runs.
  std::vector<std::pair<int, std::string>> captured;
  std::map<std::string, int> opsets;  // domain ("" = ai.onnx) -> version

  int id_of(const std::string& value_name) const;  // -1 when unknown
  int num_values() const { return static_cast<int>(value_names.size()); }
  // Number of nodes including those of subgraphs.
  size_t total_nodes() const;
};

}  // namespace qtool::runtime
