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

// Output columns [lo, hi) whose input column ow*stride + offset lies inside [0, in).
void inside_range(int64_t in, int64_t out, int64_t stride, int64_t offset, int64_t& lo, int64_t& hi) {
  lo = std::min(out, offset >= 0 ? 0 : (-offset + stride - 1) / stride);
  hi = std::max(lo, std::min(out, in - offset > 0 ? (in - offset + stride - 1) / stride : 0));
}

// 2-D row of col for channel plane `im` and tap (kh, kw), output rows [oh0, oh1).
void im2col_row_2d(const ConvGeom& g, const float* im, int64_t kh, int64_t kw, float* dst, int64_t oh0, int64_t oh1) {
  const int64_t IH = g.in[0], IW = g.in[1], OW = g.out[1];
  const int64_t sh = g.strides[0], sw = g.strides[1], ph = g.pads[0], pw = g.pads[1];
  const int64_t ih0 = kh * g.dilations[0] - ph, iw0 = kw * g.dilations[1] - pw;
  int64_t ow_lo, ow_hi;
  inside_range(IW, OW, sw, iw0, ow_lo, ow_hi);
  for (int64_t oh = oh0; oh < oh1; ++oh, dst += OW) {
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
      im2col_row_2d(g, im + c * iv, k / g.kernel[1], k % g.kernel[1], col + r * ov, 0, g.out[0]);
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

void im2col_range(const ConvGeom& g, const float* im, float* col, int64_t p0, int64_t p1) {
  const int64_t kv = g.kernel_volume(), iv = g.in_volume(), n = p1 - p0;
  for (int64_t r = 0; r < g.channels * kv; ++r) {
    const int64_t c = r / kv, k = r % kv;
    if (g.in.size() == 2) {
      im2col_row_2d(g, im + c * iv, k / g.kernel[1], k % g.kernel[1], col + r * n, p0 / g.out[1], p1 / g.out[1]);
      continue;
    }
    for (int64_t o = p0; o < p1; ++o) {
      const int64_t off = tap_offset(g, o, k);
      col[r * n + o - p0] = off < 0 ? 0.f : im[c * iv + off];
    }
  }
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
          const int64_t sw = g.strides[1], off = kw * g.dilations[1] - g.pads[1];
          int64_t lo, hi;
          inside_range(IW, OW, sw, off, lo, hi);
          float* dst = plane + ih * IW + off;
          const float* s = src + oh * OW;
          if (sw == 1) {
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += s[ow];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow * sw] += s[ow];
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
