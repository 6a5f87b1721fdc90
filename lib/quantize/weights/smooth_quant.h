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

// The tensors X of the main graph that smoothing can rescale: X is the first input of at least one MatMul or Gemm
// (transA = 0) with a constant float weight only that reader reads (its "weight readers"). Where X has no other
// reader, is no graph output, and channel j of X's last axis can be divided by any s_j > 0 by editing constants of
// X's producers alone, 1/s goes there (folded): a norm's scale (and bias), written out as Mul / Add by constants or
// fused (LayerNormalization, RMSNormalization, ORT's [Skip]SimplifiedLayerNormalization and
// SkipLayerNormalization), or the output columns of a constant-weight MatMul reached through an elementwise
// product (SwiGLU's up projection: silu(x W1) * (x W3) scales with W3's columns); between those producers and X
// there may be ops that pick, pool or move rows without mixing channels (a head reading the class token, the EOT
// token or the mean over positions; Swin's window partition), checked against the shapes the samples show.
// Elsewhere (a post-norm encoder's norm output that the residual Add reads too, a GELU or ReLU output, an
// attention product, a graph output) 1/s is divided out by a Mul inserted before the weight readers (divided).
std::vector<std::string> smoothable_inputs(const Graph& g);

// The doc_string of a Mul that smoothing inserted to divide X by s before its weight readers. The QDQ rewrite keeps
// it float whatever the config says: its constant 1/s spans the channels' spread, which one per-tensor grid would
// round away (and its input would take a rounding of its own before it); its output gets its readers' Q/DQ.
inline constexpr const char* kSmoothingDivisor =
    "qtool smoothing: x / s per channel, s folded into the weights read next";
// A divided site costs a float pass over X, and the estimate of its gain leaves out what the rewrite adds (the
// saturation-safe weight grids, the percentile range of the divided tensor, the error of the layers before): sites
// estimated at 1.2-1.8 dB lost 0.1-0.75 dB measured on held-out inputs (docs/weight-algorithms.md). So a divided site
// is smoothed only when its readers' estimated error falls by at least a factor of two, on at least kDividedMinRows
// held-out rows: s is fitted to the channel maxima of the other rows, and a new row exceeds a maximum fitted on R
// rows with probability 1 / (R + 1); a pooled head has one row per sample (a CNN's classifier on 4 calibration
// samples: estimated -5 dB, measured +2 dB on 64 held-out inputs).
inline constexpr double kDividedMinGainDb = 3.0;
inline constexpr int64_t kDividedMinRows = 32;

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
// Bytes of held-out rows smoothing_statistics keeps over all tensors.
inline constexpr int64_t kSmoothingRowBytes = int64_t{256} << 20;
std::map<std::string, SmoothingStats> smoothing_statistics(const onnx::ModelProto& model,
                                                           const std::vector<std::string>& tensors,
                                                           const std::vector<std::map<std::string, Tensor>>& samples,
                                                           int threads, int64_t max_rows = 2048);

// For every tensor of `stats` that smoothable_inputs finds: s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) (max |W_j|
// over row j of every weight reader's weight; s_j = 1 where either is 0). It is applied (channel j of X divided by
// s_j, folded or by an inserted Mul, row j of the weights multiplied by it) only when it lowers the readers' output
// error on held-out rows (a divided site: by kDividedMinGainDb), with s and
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
    bool divided = false;  // no producer takes 1/s: a Mul(x, 1/s) before its weight readers (kSmoothingDivisor)
  };
  std::vector<Entry> tensors;  // every candidate with statistics, in graph order
  int applied = 0;
  int divided = 0;  // of applied: Muls inserted
};
SmoothingReport smooth_activations(Graph& g, const std::map<std::string, SmoothingStats>& stats, double alpha);

}  // namespace qtool::quantize
