// Round to nearest: the scale of each group (tensor, channel or block) maps its min/max (symmetric: its max |w|)
// onto the integer range, and every weight is rounded to the nearest code. It minimises nothing beyond each
// element's own rounding error for that fixed scale; clip_search.cc and gptq.cc improve on it.
#include "quantize/weights/weight_quantizer.h"

namespace qtool::quantize {

WeightResult quantize_rtn(const WeightInput& in) {
  WeightResult r;
  r.params = weight_params(in.w, in.settings, in.axis, in.pair_sums, in.threads);
  r.codes = quantize_tensor(in.w, r.params, in.settings.rounding, in.threads);
  r.error = weight_sse(in.w, r.codes, r.params, in.threads);
  return r;
}

}  // namespace qtool::quantize
