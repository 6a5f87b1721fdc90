#include "runtime/conv_fold.h"

namespace qtool::runtime::conv_fold {

std::optional<std::vector<int64_t>> pads_with_pad(std::span<const int64_t> pad_pads, std::vector<int64_t> conv_pads) {
  if (pad_pads.size() < 6 || pad_pads.size() % 2) return std::nullopt;  // N, C and at least one spatial axis
  const size_t rank = pad_pads.size() / 2, spatial = rank - 2;
  for (size_t a = 0; a < pad_pads.size(); ++a) {
    if (pad_pads[a] < 0) return std::nullopt;
    if (a % rank < 2 && pad_pads[a] != 0) return std::nullopt;  // batch or channel padding
  }
  if (conv_pads.empty()) conv_pads.assign(2 * spatial, 0);
  if (conv_pads.size() != 2 * spatial) return std::nullopt;
  for (size_t d = 0; d < spatial; ++d) {
    conv_pads[d] += pad_pads[2 + d];                   // begin of spatial axis d
    conv_pads[spatial + d] += pad_pads[rank + 2 + d];  // end
  }
  return conv_pads;
}

bool per_channel(const Shape& c, int64_t rank, int64_t channels) {
  const auto r = static_cast<int64_t>(c.size());
  if (r > rank) return false;
  for (int64_t j = 0; j < r; ++j) {
    const int64_t axis = rank - r + j;
    if (c[j] != 1 && !(axis == 1 && c[j] == channels)) return false;
  }
  return true;
}

void scale_channels(Tensor& w, int64_t axis, int64_t group, std::span<const float> s) {
  const int64_t per = w.dim(axis);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= w.dim(d);
  for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  const int64_t outer_per_group = outer / group;
  float* wd = w.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < per; ++c) {
      const float f = s[static_cast<size_t>((o / outer_per_group) * per + c)];
      for (int64_t k = 0; k < inner; ++k) wd[(o * per + c) * inner + k] *= f;
    }
}

}  // namespace qtool::runtime::conv_fold
