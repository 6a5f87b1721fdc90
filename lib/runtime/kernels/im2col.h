// im2col / col2im for convolutions over NCHW data (one image, one channel group).
//
// col has shape [C * prod(kernel), prod(out)]: row (c, k...) holds, for every output position, the
// input value the kernel tap k reads for channel c (0 where the tap falls into padding). Conv is then
// W[M, C*prod(kernel)] x col; ConvTranspose computes col = W^T x X and col2im adds it back.
#pragma once

#include <cstdint>
#include <vector>

namespace qtool::runtime::kernels::compute {

struct ConvGeom {
  int64_t channels = 0;                                   // channels of this group
  std::vector<int64_t> in, out;                           // spatial sizes
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: begins then ends
  int64_t kernel_volume() const;
  int64_t in_volume() const;
  int64_t out_volume() const;
};

// Spatial input offset (within one channel) of output position `o` for kernel tap `k` (flat indices, decoded
// as multi-indices), or -1 when the tap lands in padding.
int64_t tap_offset(const ConvGeom& g, int64_t o, int64_t k);

// Fills col (channels*kvol x out_volume) from `im` (channels x in_volume). Any rank; 2-D has a fast path.
void im2col(const ConvGeom& g, const float* im, float* col, int threads);
// Single-threaded im2col of the output positions [p0, p1) only: col is (channels*kvol x (p1-p0)).
// For 2-D inputs p0 and p1 must be multiples of the output width (whole output rows).
void im2col_range(const ConvGeom& g, const float* im, float* col, int64_t p0, int64_t p1);
// Reference twin of im2col: one generic loop over every col element.
void im2col_ref(const ConvGeom& g, const float* im, float* col);
// im (channels x in_volume) += scatter of col; the transpose of im2col. `im` must be initialised.
void col2im_add(const ConvGeom& g, const float* col, float* im, int threads);

}  // namespace qtool::runtime::kernels::compute
