// A thin editing layer over onnx::ModelProto for the preparation passes and the QDQ rewrite:
// producer/consumer indices, initializer lookup, attribute access, unique names, opset.
// A Graph edits one graph of the model: the main graph, or an If/Loop/Scan body (given with the Graph of its
// enclosing scope). Reads from inside bodies count as uses of the enclosing graph's tensors (used_by_subgraph),
// so nothing a body reads is removed or renamed; a body's Graph finds initializers of enclosing scopes too
// (ONNX scoping: a body may read outer names, never the reverse), and new names are unique across the model.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qtool::quantize {

class Graph {
 public:
  explicit Graph(onnx::ModelProto& model);
  // A subgraph `body` of `model`; `outer` is the Graph of the scope that holds the node owning it.
  Graph(onnx::ModelProto& model, onnx::GraphProto& body, const Graph& outer);

  onnx::ModelProto& model() { return model_; }
  const onnx::ModelProto& model() const { return model_; }
  onnx::GraphProto& proto() { return graph_; }
  const onnx::GraphProto& proto() const { return graph_; }
  const Graph* outer() const { return outer_; }

  // Default-domain opset version.
  int64_t opset() const;
  void set_opset(int64_t v);

  // Rebuild the indices; call after editing nodes directly through proto(). O(graph).
  void reindex();

  int node_count() const { return proto().node_size(); }
  onnx::NodeProto& node(int i) { return *proto().mutable_node(i); }
  const onnx::NodeProto& node(int i) const { return proto().node(i); }

  // Edits of a node's inputs and outputs. Each updates the producer/consumer indices for that node only (O(its
  // degree)), so a pass rewriting every node stays linear in the graph: passes edit inputs and outputs through
  // these, never through NodeProto directly (a full reindex() after each rewrite made the preparation passes
  // quadratic: 4,000 chained Divs took 208 s). k == input_size() (output_size()) appends.
  void set_input(int i, int k, const std::string& tensor);
  void set_inputs(int i, const std::vector<std::string>& tensors);
  void set_output(int i, int k, const std::string& tensor);
  void set_outputs(int i, const std::vector<std::string>& tensors);

  // -1 when the tensor is a graph input, an initializer or unknown.
  int producer(const std::string& tensor) const;
  // Node indices reading `tensor` (each node once), in graph order.
  const std::vector<int>& consumers(const std::string& tensor) const;
  bool is_graph_output(const std::string& tensor) const { return graph_outputs_.count(tensor) > 0; }
  bool is_graph_input(const std::string& tensor) const { return graph_inputs_.count(tensor) > 0; }
  bool used_by_subgraph(const std::string& tensor) const { return subgraph_reads_.count(tensor) > 0; }
  // Read by exactly one node and by nothing else (not a graph output, not read inside a subgraph): a pass may
  // fold the tensor into that node.
  bool has_single_reader(const std::string& tensor) const {
    return consumers(tensor).size() == 1 && !is_graph_output(tensor) && !used_by_subgraph(tensor);
  }

  // This graph's initializer, else (in a body) the nearest enclosing scope's.
  const onnx::TensorProto* initializer(const std::string& name) const;
  bool is_initializer(const std::string& name) const { return initializer(name) != nullptr; }
  // An initializer of dtype float32 (what weights, biases and foldable constants are).
  bool is_float_initializer(const std::string& name) const {
    const onnx::TensorProto* t = initializer(name);
    return t && t->data_type() == onnx::TensorProto::FLOAT;
  }
  // Decoded initializer (throws BadInputError for undecodable data).
  Tensor initializer_tensor(const std::string& name) const;
  // The value of a float32 initializer holding one element (any shape); nullopt for anything else.
  std::optional<float> scalar_float_initializer(const std::string& name) const;
  // Adds or replaces an initializer of this graph.
  void set_initializer(const std::string& name, const Tensor& t);
  // Adds or replaces an initializer given as a TensorProto (its name is set to `name`).
  void set_initializer(const std::string& name, onnx::TensorProto t);
  // Removes these initializers of this graph in one sweep (the others keep their order).
  void remove_initializers(const std::set<std::string>& names);

  // A name not used by any tensor or node yet: base, base_1, base_2 ...; reserved at once.
  std::string unique_name(const std::string& base);

  // Marks node i for removal: it leaves the producer/consumer indices at once; compact() drops it (keeping the
  // order of the rest) and reindexes.
  void remove_node(int i);
  bool is_removed(int i) const { return removed_.count(i) > 0; }
  // Queues `n` to be inserted right before node i (keeps the graph topologically sorted).
  void insert_before(int i, onnx::NodeProto n) { inserted_[i].push_back(std::move(n)); }
  void compact();

 private:
  // Node i's entries in producer_ and consumers_ (idempotent).
  void index_node(int i);
  void unindex_node(int i);
  void unlink_input(int i, const std::string& tensor);  // when node i no longer reads it anywhere
  void unlink_output(int i, const std::string& tensor);
  // Node i's inputs or outputs (`field`) become `tensors`.
  void replace_names(int i, google::protobuf::RepeatedPtrField<std::string>& field,
                     const std::vector<std::string>& tensors);

  onnx::ModelProto& model_;
  onnx::GraphProto& graph_;
  const Graph* outer_ = nullptr;
  std::map<std::string, int> producer_;
  std::map<std::string, std::vector<int>> consumers_;
  std::map<std::string, int> initializers_;
  std::set<std::string> graph_outputs_, graph_inputs_, subgraph_reads_, used_names_;
  std::map<std::string, int> next_suffix_;  // unique_name: the first suffix still worth probing for a base
  std::set<int> removed_;
  std::map<int, std::vector<onnx::NodeProto>> inserted_;
};

// Attribute helpers (nullptr / default when absent).
const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name);
int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t def);
float attr_float(const onnx::NodeProto& n, const std::string& name, float def);
std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name);
std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& def);
void set_attr_int(onnx::NodeProto& n, const std::string& name, int64_t v);
void remove_attr(onnx::NodeProto& n, const std::string& name);

// "Conv 'conv1'" for messages.
std::string describe(const onnx::NodeProto& n);

}  // namespace qtool::quantize
