// Activation-to-weight scale migration (Xiao et al. 2023, "SmoothQuant: Accurate and Efficient Post-Training
// Quantization for Large Language Models", section 4). Reads per-channel activation ranges from the calibration
// samples; exact in float.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "quantize/graph.h"

namespace qtool::quantize {

// The tensors X of the main graph that smoothing can rescale: every reader is a MatMul (X as its first input) or
// a Gemm (transA = 0) with a constant float weight only it reads, and channel j of X's last axis can be divided by
// any s_j > 0 by editing constants of X's producers alone: a norm's scale (and bias), written out as Mul / Add by
// constants or fused (LayerNormalization, RMSNormalization, ORT's [Skip]SimplifiedLayerNormalization and
// SkipLayerNormalization), or the output columns of a constant-weight MatMul reached through an elementwise
// product (SwiGLU's up projection: silu(x W1) * (x W3) scales with W3's columns); between those producers and X
// there may be ops that pick, pool or move rows without mixing channels (a head reading the class token, the EOT
// token or the mean over positions; Swin's window partition), checked against the shapes the samples show.
std::vector<std::string> smoothable_inputs(const Graph& g);

// What smoothing_statistics must observe: the smoothable inputs and the quantized activations between them and the
// constants smoothing edits (SwiGLU's up projection output and its partner), whose rounding it also changes.
std::vector<std::string> smoothing_tensors(const Graph& g);

// What smoothing reads of one tensor X (channels on its last axis). Smoothing fits s to the channel maxima of the
// samples it sees, so whether it helps is judged on others: the even-numbered samples fit (per-channel min/max: s
// and the grid), up to `max_rows` rows of the odd-numbered ones score (with one sample, it does both).
struct SmoothingStats {
  std::vector<double> abs_max;           // per channel, every sample (the s applied)
  std::vector<double> fit_min, fit_max;  // per channel, the fitting samples
  std::vector<float> rows;               // held-out rows [rows.size() / abs_max.size(), K]
  int64_t rank = 0;                      // the tensor's rank in every sample (-1: it varied)
};
std::map<std::string, SmoothingStats> smoothing_statistics(const onnx::ModelProto& model,
                                                           const std::vector<std::string>& tensors,
                                                           const std::vector<std::map<std::string, Tensor>>& samples,
                                                           int threads, int64_t max_rows = 2048);

// For every tensor of `stats` that smoothable_inputs finds: s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) (max |W_j|
// over row j of every reader's weight; s_j = 1 where either is 0). It is applied (channel j of X divided by s_j,
// row j of the weights multiplied by it) only when it lowers the readers' output error on held-out rows, with s and
// the grids fitted on the other samples: X and the factor that produces it (smoothing_tensors) each on one
// per-tensor uint8 grid (their fitted min/max, values beyond it clipped) and each weight column on its own symmetric
// int8 grid. The error smoothing is for, measured out of sample rather than assumed: on transformers whose channels
// are already even, channel ranges fitted to a few samples leave less room for the next ones and the error rises.
// `stats` holds smoothing_tensors' statistics.
// alpha in (0, 1].
struct SmoothingReport {
  struct Entry {
    std::string name;
    double error_before = 0, error_after = 0;  // estimated relative output error of its readers, without / with
    bool applied = false;
  };
  std::vector<Entry> tensors;  // every candidate with statistics, in graph order
  int applied = 0;
};
SmoothingReport smooth_activations(Graph& g, const std::map<std::string, SmoothingStats>& stats, double alpha);

}  // namespace qtool::quantize
