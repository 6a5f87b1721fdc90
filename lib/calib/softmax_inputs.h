// Which tensors of a model are normalised by a Softmax / LogSoftmax, so calibration can record their row maxima
// (calib/calibration_table.h: SoftmaxRows).
#pragma once

#include <map>
#include <string>

#include "calib/calibrator.h"

namespace onnx {
class ModelProto;
}

namespace qtool::calib {

// Tensors read only by Softmax / LogSoftmax nodes of the main graph (as input 0, all with the same axis), directly or
// through Cast / Identity or a Flatten (then over the flattened dimensions), besides Shape / Size readers, and not
// graph outputs; with the axis those nodes normalise along (opset < 13: the flattened trailing dimensions from
// `axis` on).
std::map<std::string, SoftmaxAxis> find_softmax_inputs(const onnx::ModelProto& model);

}  // namespace qtool::calib
