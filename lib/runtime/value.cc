#include "runtime/value.h"

#include "core/checked.h"
#include "core/limits.h"

namespace qtool::runtime {

size_t TensorSequence::nbytes() const {
  size_t n = 0;
  for (const Tensor& t : items) n += t.nbytes();
  return n;
}

void check_sequence_elements(int64_t count) {
  const int64_t bytes = checked_mul(count, kSequenceElementOverhead, "sequence length");
  if (!tensor_allocation_fits(bytes))
    throw_tensor_limit(bytes, "a sequence of " + std::to_string(count) + " tensors (" +
                                  std::to_string(kSequenceElementOverhead) + " bytes of bookkeeping each)");
}

std::string describe_value(const Value& v) {
  if (v.is_sequence()) {
    const TensorSequence& s = *v.sequence;
    return "sequence of " + std::to_string(s.size()) + " " + std::string(dtype_name(s.elem_dtype)) + " tensor" +
           (s.size() == 1 ? "" : "s");
  }
  if (v.tensor.empty()) return "no value";
  return std::string(dtype_name(v.tensor.dtype())) + " " + shape_str(v.tensor.shape());
}

}  // namespace qtool::runtime
