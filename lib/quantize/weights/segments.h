// Running a plain graph a piece at a time on many samples: nodes [a, b) as one session, fed with the values earlier
// pieces left for later nodes (kept per sample). The weight algorithms use it to look at (GPTQ's grouped
// Hessians) or change (bias correction of the quantized model) what a layer passes on before the next piece runs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/session.h"

namespace onnx {
class ModelProto;
class GraphProto;
}  // namespace onnx

namespace qtool::quantize {

// True when the graph can be cut into pieces: nodes in topological order and no If/Loop/Scan bodies (a body reads
// values of the outer graph that a piece would not declare).
bool segmentable(const onnx::GraphProto& g);

class SegmentRunner {
 public:
  // `model` (segmentable) and `samples` (one input map per run) must outlive the runner. `end`: nodes from `end` on
  // never run, so values only they read are not kept.
  SegmentRunner(const onnx::ModelProto& model, const std::vector<std::map<std::string, Tensor>>& samples, int threads,
                int end);

  // Runs nodes [done(), b) on every sample, in sample order; `tap` sees the graph inputs the piece reads when it is
  // the first, and every node output (runtime::TapFn). Then drops from each sample's values what no node from b on
  // reads.
  void run_to(int b, const runtime::TapFn& tap = {});
  // Back to the samples, before node 0.
  void restart();
  int done() const { return done_; }
  // Per sample: the values computed so far that nodes from done() on read (graph inputs included). A caller may
  // change them in place between pieces.
  std::vector<std::map<std::string, Tensor>>& values() { return values_; }

 private:
  const onnx::ModelProto& model_;
  const std::vector<std::map<std::string, Tensor>>& samples_;
  int threads_ = 1, end_ = 0, done_ = 0;
  std::map<std::string, int> last_use_;  // value -> last node below end_ that reads it
  std::vector<std::map<std::string, Tensor>> values_;
};

}  // namespace qtool::quantize
