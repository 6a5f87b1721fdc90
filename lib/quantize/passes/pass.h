// Preparation passes. Each is a small object: the op types it targets, a pure match, then the rewrite
// (STYLE.md point 5). run_pass() drives one pass over the main graph; the list and order of passes is
// in passes.cc (prepare_model).
#pragma once

#include <string_view>
#include <vector>

#include "quantize/graph.h"

namespace qtool::quantize {

class NodePass {
 public:
  virtual ~NodePass() = default;
  virtual std::string_view name() const = 0;
  virtual std::vector<std::string_view> op_types() const = 0;
  // Pure: decides from the graph whether node i can be rewritten.
  virtual bool match(const Graph& g, int i) const = 0;
  // Edits the graph: may change node i and its neighbours, mark nodes removed (Graph::remove_node),
  // queue insertions (Graph::insert_before) and add initializers. Node inputs and outputs change only through
  // Graph::set_input / set_inputs / set_output / set_outputs (they keep the indices current for the next match
  // without a reindex); must not touch node order directly.
  virtual void rewrite(Graph& g, int i) const = 0;
};

// Runs one pass over every targeted node; returns the number of rewrites. Nodes are matched against
// the graph as it was before the pass, then rewritten in graph order; the graph is compacted after.
int run_pass(Graph& g, const NodePass& pass);

}  // namespace qtool::quantize
