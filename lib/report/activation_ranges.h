// The quantization an activation got in a QDQ model, read back from its QuantizeLinear: dtype, scale, zero point and
// the range they represent, [scale·(qmin − zp), scale·(qmax − zp)]. What the report draws over the histogram.
#pragma once

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

#include "calib/observer.h"
#include "core/dtype.h"

namespace qtool::report {

struct ActivationQuant {
  std::string tensor;
  // Absent when the QuantizeLinear's scale or zero point is not a scalar initializer (per-axis, or computed).
  std::optional<DType> dtype;
  float scale = 0;
  int64_t zero_point = 0;
  std::optional<calib::Range> range;  // the representable range
};

// Every activation with its own Q/DQ (analysis::quantized_activations), in node order.
std::vector<ActivationQuant> activation_quants(const onnx::ModelProto& model);

}  // namespace qtool::report
