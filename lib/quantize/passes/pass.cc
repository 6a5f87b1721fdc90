#include "quantize/passes/pass.h"

#include <algorithm>

namespace qtool::quantize {

int run_pass(Graph& g, const NodePass& pass) {
  const auto ops = pass.op_types();
  std::vector<int> matched;
  for (int i = 0; i < g.node_count(); ++i) {
    const auto& n = g.node(i);
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    if (std::find(ops.begin(), ops.end(), n.op_type()) == ops.end()) continue;
    if (pass.match(g, i)) matched.push_back(i);
  }
  // Rewrites may depend on earlier ones (a BatchNormalization after a folded one): re-match each
  // against the current graph before rewriting it.
  int count = 0;
  for (int i : matched) {
    if (!pass.match(g, i)) continue;
    pass.rewrite(g, i);  // keeps the indices current (Graph::set_input ...): no reindex per rewrite
    ++count;
  }
  g.compact();
  return count;
}

}  // namespace qtool::quantize
