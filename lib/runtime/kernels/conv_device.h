// The device code around the cuDNN Conv (cuda_kernels.cu), as per-thread grid-stride loops (device/portable.h)
// that tests/kernels/conv_cudnn_test.cc runs through the emulated launch grid:
//  - pad_planes: the explicit zero padding of an input whose ONNX pads cuDNN cannot take (conv_cudnn_plan.h);
//  - bias_activation: y = act(y + b[m]) over the [N, M, spatial] output cuDNN wrote, in place.
// Both are copies and single IEEE operations (plus the activation's formula, elementwise_device.h), so the device
// computes exactly what the emulation does.
#pragma once

#include <cstdint>

#include "device/portable.h"
#include "runtime/kernels/elementwise_device.h"

namespace qtool::runtime::kernels::device_conv {

using qtool::device::ThreadCoord;

// planes of [h, w] floats copied into planes of [h2, w2] at row `top`, column `left`; zeros around them.
struct PadPlanes {
  int64_t planes = 0, h = 0, w = 0, h2 = 0, w2 = 0, top = 0, left = 0;
  QTOOL_HD int64_t out_numel() const { return planes * h2 * w2; }
};

// One thread's share of the padded copy: y[p, r, c] = x[p, r - top, c - left] inside x, 0 outside.
QTOOL_HD inline void pad_planes_loop(ThreadCoord t, const PadPlanes& p, const float* x, float* y) {
  const int64_t n = p.out_numel();
  for (int64_t i = t.first(); i < n; i += t.stride()) {
    const int64_t c = i % p.w2 - p.left;
    const int64_t r = i / p.w2 % p.h2 - p.top;
    const int64_t plane = i / (p.w2 * p.h2);
    y[i] = r >= 0 && r < p.h && c >= 0 && c < p.w ? x[(plane * p.h + r) * p.w + c] : 0.f;
  }
}

// The epilogue over an output of `n` values laid out [outer, channels, inner]: y += b[channel] when b is not null,
// then y = act(y) when has_act.
struct BiasActivation {
  const float* b = nullptr;
  int64_t channels = 1, inner = 1;
  bool has_act = false;
  device_elementwise::UnaryOp act{device_elementwise::Unary::Relu};
};

QTOOL_HD inline void bias_activation_loop(ThreadCoord t, const BiasActivation& e, float* y, int64_t n) {
  for (int64_t i = t.first(); i < n; i += t.stride()) {
    float v = y[i];
    if (e.b) v = v + e.b[i / e.inner % e.channels];
    if (e.has_act) v = device_elementwise::apply(e.act, v);
    y[i] = v;
  }
}

}  // namespace qtool::runtime::kernels::device_conv
