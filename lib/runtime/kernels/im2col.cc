#include "runtime/kernels/im2col.h"

#include <algorithm>
#include <cstring>

#include "runtime/kernels/blas.h"

namespace qtool::runtime::kernels::compute {
namespace {
int64_t prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Spatial input offset of output position `o` for kernel tap `k` (multi-indices decoded from flat
// indices), or -1 when the tap lands in padding.
int64_t tap_offset(const ConvGeom& g, int64_t o, int64_t k) {
  const size_t nd = g.in.size();
  int64_t off = 0;
  for (size_t d = nd; d-- > 0;) {
    const int64_t od = o % g.out[d], kd = k % g.kernel[d];
    o /= g.out[d];
    k /= g.kernel[d];
    const int64_t id = od * g.strides[d] - g.pads[d] + kd * g.dilations[d];
    if (id < 0 || id >= g.in[d]) return -1;
    int64_t stride = 1;
    for (size_t e = d + 1; e < nd; ++e) stride *= g.in[e];
    off += id * stride;
  }
  return off;
}

// 2-D row of col for channel plane `im` and tap (kh, kw).
void im2col_row_2d(const ConvGeom& g, const float* im, int64_t kh, int64_t kw, float* dst) {
  const int64_t IH = g.in[0], IW = g.in[1], OH = g.out[0], OW = g.out[1];
  const int64_t sh = g.strides[0], sw = g.strides[1], ph = g.pads[0], pw = g.pads[1];
  const int64_t ih0 = kh * g.dilations[0] - ph, iw0 = kw * g.dilations[1] - pw;
  // Output columns whose input column is inside [0, IW).
  const int64_t ow_lo = std::min(OW, iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw);
  const int64_t ow_hi = std::max(ow_lo, std::min(OW, IW - iw0 > 0 ? (IW - iw0 + sw - 1) / sw : 0));
  for (int64_t oh = 0; oh < OH; ++oh, dst += OW) {
    const int64_t ih = oh * sh + ih0;
    if (ih < 0 || ih >= IH) {
      std::memset(dst, 0, sizeof(float) * OW);
      continue;
    }
    const float* src = im + ih * IW + iw0;
    for (int64_t ow = 0; ow < ow_lo; ++ow) dst[ow] = 0;
    if (sw == 1) {
      std::memcpy(dst + ow_lo, src + ow_lo, sizeof(float) * (ow_hi - ow_lo));
    } else {
      for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow * sw];
    }
    for (int64_t ow = ow_hi; ow < OW; ++ow) dst[ow] = 0;
  }
}
}  // namespace

int64_t ConvGeom::kernel_volume() const { return prod(kernel); }
int64_t ConvGeom::in_volume() const { return prod(in); }
int64_t ConvGeom::out_volume() const { return prod(out); }

void im2col_ref(const ConvGeom& g, const float* im, float* col) {
  const int64_t kv = g.kernel_volume(), iv = g.in_volume(), ov = g.out_volume();
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t k = 0; k < kv; ++k)
      for (int64_t o = 0; o < ov; ++o) {
        const int64_t off = tap_offset(g, o, k);
        col[(c * kv + k) * ov + o] = off < 0 ? 0.f : im[c * iv + off];
      }
}

void im2col(const ConvGeom& g, const float* im, float* col, int threads) {
  const int64_t kv = g.kernel_volume(), iv = g.in_volume(), ov = g.out_volume();
  const int64_t rows = g.channels * kv;
  const int t = threads_for(rows * ov, threads);
  if (g.in.size() == 2) {
    parallel_for(rows, t, [&](int64_t r) {
      const int64_t c = r / kv, k = r % kv;
      im2col_row_2d(g, im + c * iv, k / g.kernel[1], k % g.kernel[1], col + r * ov);
    });
    return;
  }
  parallel_for(rows, t, [&](int64_t r) {
    const int64_t c = r / kv, k = r % kv;
    float* dst = col + r * ov;
    for (int64_t o = 0; o < ov; ++o) {
      const int64_t off = tap_offset(g, o, k);
      dst[o] = off < 0 ? 0.f : im[c * iv + off];
    }
  });
}

void col2im_add(const ConvGeom& g, const float* col, float* im, int threads) {
  const int64_t kv = g.kernel_volume(), iv = g.in_volume(), ov = g.out_volume();
  // Parallel over channels: each channel's plane is written by one thread only.
  parallel_for(g.channels, threads_for(g.channels * kv * ov, threads), [&](int64_t c) {
    float* plane = im + c * iv;
    for (int64_t k = 0; k < kv; ++k) {
      const float* src = col + (c * kv + k) * ov;
      if (g.in.size() == 2) {
        const int64_t kh = k / g.kernel[1], kw = k % g.kernel[1];
        const int64_t IH = g.in[0], IW = g.in[1], OH = g.out[0], OW = g.out[1];
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t ih = oh * g.strides[0] - g.pads[0] + kh * g.dilations[0];
          if (ih < 0 || ih >= IH) continue;
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t iw = ow * g.strides[1] - g.pads[1] + kw * g.dilations[1];
            if (iw >= 0 && iw < IW) plane[ih * IW + iw] += src[oh * OW + ow];
          }
        }
        continue;
      }
      for (int64_t o = 0; o < ov; ++o) {
        const int64_t off = tap_offset(g, o, k);
        if (off >= 0) plane[off] += src[o];
      }
    }
  });
}

}  // namespace qtool::runtime::kernels::compute
