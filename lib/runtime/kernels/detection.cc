// Detection post-processing and region pooling, float32 (as ONNX Runtime's CPU kernels).
//
// NonMaxSuppression (opset 10/11): boxes [B, N, 4], scores [B, C, N]; optional max_output_boxes_per_class
//   (int64 scalar, default 0 = select nothing), iou_threshold (default 0, must lie in [0, 1]) and
//   score_threshold (a box is a candidate when its score is strictly greater). center_point_box 0: a box is
//   two opposite corners [y1, x1, y2, x2] in either order; 1: [x_center, y_center, width, height]. Per (batch,
//   class), candidates are visited by descending score (equal scores: lower box index first) and a candidate is
//   kept unless its IoU with a kept box is > iou_threshold (IoU of boxes with zero area or no overlap is 0).
//   Output selected_indices [num_selected, 3] int64 rows (batch, class, box), batches then classes in order,
//   each class in the order its boxes were kept.
// RoiAlign (opset 10, 16): X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2) in input coordinates, batch_indices
//   [R]; output [R, C, output_height, output_width]. Each ROI is scaled by spatial_scale and shifted by -0.5
//   (coordinate_transformation_mode half_pixel, the opset-16 default; opset 10 and output_half_pixel shift by 0
//   and make the ROI at least 1x1). Each output bin samples a grid of sampling_ratio² points (0: ceil(roi size /
//   output size) per axis) at the sub-cell centres; a sample is bilinear in X with coordinates clamped to the map
//   (a sample beyond [-1, H] x [-1, W] counts as 0). mode avg: mean of the samples; mode max: the largest of the
//   four weighted corner terms w_i·X_i over all samples, ONNX Runtime's definition (not the max of the
//   interpolated values).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/checked.h"
#include "core/limits.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

// ---------------------------------------------------------------------------------------------- NonMaxSuppression

struct Corners {
  float y1, x1, y2, x2;  // y1 <= y2, x1 <= x2
};

Corners corners(const float* b, bool center_point) {
  if (center_point) {
    const float hw = b[2] / 2, hh = b[3] / 2;
    return {b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// True when the IoU of a and b is above `threshold`; boxes of zero area or without overlap never suppress.
bool suppresses(const Corners& a, const Corners& b, float threshold) {
  const float ix1 = std::max(a.x1, b.x1), iy1 = std::max(a.y1, b.y1);
  const float ix2 = std::min(a.x2, b.x2), iy2 = std::min(a.y2, b.y2);
  const float inter = std::max(0.f, ix2 - ix1) * std::max(0.f, iy2 - iy1);
  if (inter <= 0) return false;
  const float area_a = (a.x2 - a.x1) * (a.y2 - a.y1), area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
  const float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

class NonMaxSuppressionKernel final : public Kernel {
 public:
  explicit NonMaxSuppressionKernel(const NodeInfo& n) {
    const int64_t c = n.attrs.get_int("center_point_box", 0);
    if (c != 0 && c != 1)
      throw BadInputError(n.label() + ": center_point_box must be 0 or 1, got " + std::to_string(c));
    center_point_ = c == 1;
  }
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& boxes = float_input(ctx, 0);
    const Tensor& scores = float_input(ctx, 1);
    if (boxes.rank() != 3 || boxes.dim(2) != 4)
      throw BadInputError(node.label() + ": boxes must be [batch, boxes, 4], got " + shape_str(boxes.shape()));
    if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
      throw BadInputError(node.label() + ": scores must be [batch, classes, boxes] = [" + std::to_string(boxes.dim(0)) +
                          ", C, " + std::to_string(boxes.dim(1)) + "], got " + shape_str(scores.shape()));
    int64_t max_out = 0;
    if (ctx.has_input(2) && ctx.input(2).numel() > 0)
      max_out = read_ints(ctx.input(2), node, "max_output_boxes_per_class").at(0);
    float iou = 0, score_min = -std::numeric_limits<float>::infinity();
    bool has_score_min = false;
    if (ctx.has_input(3) && ctx.input(3).numel() > 0) iou = static_cast<float>(read_scalar(ctx.input(3), node, "iou"));
    if (ctx.has_input(4) && ctx.input(4).numel() > 0) {
      score_min = static_cast<float>(read_scalar(ctx.input(4), node, "score_threshold"));
      has_score_min = true;
    }
    if (!(iou >= 0 && iou <= 1))
      throw BadInputError(node.label() + ": iou_threshold must be in [0, 1], got " + std::to_string(iou));
    const int64_t B = boxes.dim(0), N = boxes.dim(1), C = scores.dim(1);
    max_out = std::min(std::max<int64_t>(max_out, 0), N);

    std::vector<int64_t> selected;  // (batch, class, box) triples
    std::vector<int64_t> order(N), kept;
    std::vector<Corners> kept_boxes;
    for (int64_t b = 0; b < B && max_out > 0; ++b) {
      const float* bx = boxes.data<float>() + b * N * 4;
      for (int64_t c = 0; c < C; ++c) {
        const float* sc = scores.data<float>() + (b * C + c) * N;
        order.clear();
        for (int64_t i = 0; i < N; ++i)
          if (!has_score_min || sc[i] > score_min) order.push_back(i);
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return sc[x] > sc[y]; });
        kept_boxes.clear();
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept_boxes.size()) >= max_out) break;
          const Corners box = corners(bx + i * 4, center_point_);
          // IoU never exceeds 1: with iou_threshold 1 nothing is suppressed and the O(kept) scan is skipped.
          bool drop = false;
          if (iou < 1)
            for (const Corners& k : kept_boxes)
              if (suppresses(k, box, iou)) {
                drop = true;
                break;
              }
          if (drop) continue;
          kept_boxes.push_back(box);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    }
    Tensor out(DType::Int64, {static_cast<int64_t>(selected.size() / 3), 3});
    std::copy(selected.begin(), selected.end(), out.data<int64_t>());
    ctx.outputs[0] = std::move(out);
  }

 private:
  bool center_point_ = false;
};

// ------------------------------------------------------------------------------------------------------ RoiAlign

// One bilinear sample: four flat positions in an H x W plane and their weights (all 0 outside the map).
struct Sample {
  int64_t p[4] = {0, 0, 0, 0};
  float w[4] = {0, 0, 0, 0};
};

Sample bilinear_sample(float y, float x, int64_t H, int64_t W) {
  Sample s;
  if (y < -1.f || y > static_cast<float>(H) || x < -1.f || x > static_cast<float>(W)) return s;
  y = std::max(y, 0.f);
  x = std::max(x, 0.f);
  int64_t y_lo = static_cast<int64_t>(y), x_lo = static_cast<int64_t>(x), y_hi, x_hi;
  if (y_lo >= H - 1) {
    y_hi = y_lo = H - 1;
    y = static_cast<float>(y_lo);
  } else {
    y_hi = y_lo + 1;
  }
  if (x_lo >= W - 1) {
    x_hi = x_lo = W - 1;
    x = static_cast<float>(x_lo);
  } else {
    x_hi = x_lo + 1;
  }
  const float ly = y - static_cast<float>(y_lo), lx = x - static_cast<float>(x_lo), hy = 1 - ly, hx = 1 - lx;
  s.p[0] = y_lo * W + x_lo;
  s.p[1] = y_lo * W + x_hi;
  s.p[2] = y_hi * W + x_lo;
  s.p[3] = y_hi * W + x_hi;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

// The sample indices i in [0, n) whose coordinate start + (i + 0.5) * step can lie in [-1, limit]: samples outside
// contribute 0, so a huge ROI costs the samples over the map, not its own size.
std::pair<int64_t, int64_t> samples_on_map(double start, double step, int64_t n, double limit) {
  if (step <= 0) return {0, n};
  const double lo = std::ceil((-1 - start) / step - 0.5) - 1, hi = std::floor((limit - start) / step - 0.5) + 1;
  const int64_t b = static_cast<int64_t>(std::clamp(lo, 0.0, static_cast<double>(n)));
  const int64_t e = static_cast<int64_t>(std::clamp(hi + 1, 0.0, static_cast<double>(n)));
  return {b, std::max(b, e)};
}

class RoiAlignKernel final : public Kernel {
 public:
  explicit RoiAlignKernel(const NodeInfo& n)
      : out_h_(n.attrs.get_int("output_height", 1)),
        out_w_(n.attrs.get_int("output_width", 1)),
        sampling_ratio_(n.attrs.get_int("sampling_ratio", 0)),
        spatial_scale_(n.attrs.get_float("spatial_scale", 1.f)) {
    const std::string mode = n.attrs.get_string("mode", "avg");
    if (mode != "avg" && mode != "max")
      throw BadInputError(n.label() + ": mode must be \"avg\" or \"max\", got \"" + mode + "\"");
    max_ = mode == "max";
    const std::string ctm =
        n.attrs.get_string("coordinate_transformation_mode", n.opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      throw BadInputError(n.label() +
                          ": coordinate_transformation_mode must be \"half_pixel\" or "
                          "\"output_half_pixel\", got \"" +
                          ctm + "\"");
    half_pixel_ = ctm == "half_pixel";
    if (out_h_ < 1 || out_w_ < 1)
      throw BadInputError(n.label() + ": output_height and output_width must be >= 1, got " + std::to_string(out_h_) +
                          " and " + std::to_string(out_w_));
    if (sampling_ratio_ < 0)
      throw BadInputError(n.label() + ": sampling_ratio must be >= 0, got " + std::to_string(sampling_ratio_));
    if (!std::isfinite(spatial_scale_)) throw BadInputError(n.label() + ": spatial_scale must be finite");
  }
  void run(KernelContext& ctx) override {
    const NodeInfo& node = ctx.node;
    const Tensor& X = float_input(ctx, 0);
    const Tensor& rois = float_input(ctx, 1);
    const Tensor& bi = ctx.input(2);
    if (X.rank() != 4) throw BadInputError(node.label() + ": X must be [N, C, H, W], got " + shape_str(X.shape()));
    if (rois.rank() != 2 || rois.dim(1) != 4)
      throw BadInputError(node.label() + ": rois must be [num_rois, 4], got " + shape_str(rois.shape()));
    const int64_t R = rois.dim(0);
    const std::vector<int64_t> batch = read_ints(bi, node, "batch_indices");
    if (static_cast<int64_t>(batch.size()) != R)
      throw BadInputError(node.label() + ": batch_indices has " + std::to_string(batch.size()) + " values for " +
                          std::to_string(R) + " rois");
    const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3);
    for (int64_t r = 0; r < R; ++r) {
      if (batch[r] < 0 || batch[r] >= N)
        throw BadInputError(node.label() + ": batch_indices[" + std::to_string(r) + "] = " + std::to_string(batch[r]) +
                            " is outside [0, " + std::to_string(N) + ")");
      for (int k = 0; k < 4; ++k)
        if (!std::isfinite(rois.data<float>()[r * 4 + k]))
          throw BadInputError(node.label() + ": roi " + std::to_string(r) + " has a coordinate that is not finite");
    }
    const int64_t bins = checked_mul(out_h_, out_w_, "RoiAlign output bins");
    if (sampling_ratio_ > 0) {
      // Each (roi, channel) visits bins·sampling_ratio² samples over the map, which ONNX Runtime precomputes as a
      // table (pre_calc). qtool keeps none, but refuses a grid whose table would not fit --max-memory: sampling_ratio
      // 2^31 would otherwise run for centuries instead of failing like ORT's allocation.
      const int64_t grid =
          checked_mul(bins, checked_mul(sampling_ratio_, sampling_ratio_, "sampling grid"), "sampling grid");
      check_tensor_allocation(checked_mul(grid, int64_t{sizeof(Sample)}, "sampling grid"),
                              "sampling grid of " + std::to_string(grid) + " samples per roi (output_height · " +
                                  "output_width · sampling_ratio²; lower sampling_ratio or use 0, adaptive)");
    }
    Tensor Y(DType::Float32, {R, C, out_h_, out_w_});
    if (Y.numel() == 0 || H == 0 || W == 0) {
      std::fill_n(Y.data<float>(), Y.numel(), 0.f);
      ctx.outputs[0] = std::move(Y);
      return;
    }
    const float* x = X.data<float>();
    float* y = Y.data<float>();
    parallel_for(R * C, threads_for(Y.numel() * 16, ctx.threads), [&](int64_t rc) {
      const int64_t r = rc / C, c = rc % C;
      const float* roi = rois.data<float>() + r * 4;
      const float* plane = x + (batch[r] * C + c) * H * W;
      // Float arithmetic as ONNX Runtime's kernel; the sample counts in double (a huge ROI's count is only used
      // through samples_on_map).
      const float off = half_pixel_ ? 0.5f : 0.f;
      const float x1 = roi[0] * spatial_scale_ - off, y1 = roi[1] * spatial_scale_ - off;
      float rw = roi[2] * spatial_scale_ - off - x1, rh = roi[3] * spatial_scale_ - off - y1;
      if (!half_pixel_) {
        rw = std::max(rw, 1.f);
        rh = std::max(rh, 1.f);
      }
      const float bin_h = rh / static_cast<float>(out_h_), bin_w = rw / static_cast<float>(out_w_);
      const double gh = sampling_ratio_ > 0 ? static_cast<double>(sampling_ratio_) : std::ceil(double{rh} / out_h_);
      const double gw = sampling_ratio_ > 0 ? static_cast<double>(sampling_ratio_) : std::ceil(double{rw} / out_w_);
      const double count = std::max(gh * gw, 1.0);
      const int64_t ngh = static_cast<int64_t>(std::min(std::max(gh, 0.0), 9e15));
      const int64_t ngw = static_cast<int64_t>(std::min(std::max(gw, 0.0), 9e15));
      float* out = y + rc * bins;
      for (int64_t ph = 0; ph < out_h_; ++ph)
        for (int64_t pw = 0; pw < out_w_; ++pw) {
          const float sy = y1 + static_cast<float>(ph) * bin_h, sx = x1 + static_cast<float>(pw) * bin_w;
          const auto [iy0, iy1] = samples_on_map(sy, ngh ? bin_h / gh : 0, ngh, static_cast<double>(H));
          const auto [ix0, ix1] = samples_on_map(sx, ngw ? bin_w / gw : 0, ngw, static_cast<double>(W));
          // Samples outside the map give 0: in max mode they take part in the maximum as 0.
          // (iy1 - iy0)·(ix1 - ix0) < ngh·ngw without the product, which overflows for counts near 9e15.
          const bool some_off_map = ngh > 0 && ngw > 0 && (iy1 - iy0 < ngh || ix1 - ix0 < ngw);
          float acc = 0, best = some_off_map ? 0.f : std::numeric_limits<float>::lowest();
          bool any = some_off_map;
          for (int64_t iy = iy0; iy < iy1; ++iy) {
            const float yy = sy + static_cast<float>(iy + 0.5) * bin_h / static_cast<float>(gh);
            for (int64_t ix = ix0; ix < ix1; ++ix) {
              const float xx = sx + static_cast<float>(ix + 0.5) * bin_w / static_cast<float>(gw);
              const Sample s = bilinear_sample(yy, xx, H, W);
              if (max_) {
                float v = s.w[0] * plane[s.p[0]];
                for (int k = 1; k < 4; ++k) v = std::max(v, s.w[k] * plane[s.p[k]]);
                best = any ? std::max(best, v) : v;
                any = true;
              } else {
                acc +=
                    s.w[0] * plane[s.p[0]] + s.w[1] * plane[s.p[1]] + s.w[2] * plane[s.p[2]] + s.w[3] * plane[s.p[3]];
              }
            }
          }
          out[ph * out_w_ + pw] = max_ ? (any ? best : 0.f) : static_cast<float>(acc / count);
        }
    });
    ctx.outputs[0] = std::move(Y);
  }

 private:
  int64_t out_h_, out_w_, sampling_ratio_;
  float spatial_scale_;
  bool max_ = false, half_pixel_ = true;
};

}  // namespace

std::unique_ptr<Kernel> make_non_max_suppression(const NodeInfo& n) {
  return std::make_unique<NonMaxSuppressionKernel>(n);
}
std::unique_ptr<Kernel> make_roi_align(const NodeInfo& n) { return std::make_unique<RoiAlignKernel>(n); }

}  // namespace qtool::runtime::kernels
