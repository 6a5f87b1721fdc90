// The interpreter's second value kind: a sequence of tensors (ONNX seq(tensor(T))), beside the Tensor every other
// value is.
//
// Tensors stay the fast path: a value slot (Value) is a Tensor plus a null sequence pointer, kernels read tensors as
// before, and only kernels whose registry row says so (KernelDef::sequences) see sequences at all; any other kernel
// handed one fails with a BadInputError naming the node and the input. Sequences travel through Session values,
// If branches and Loop-carried values, and graph inputs and outputs (Session::run_values); the tap never sees them
// (calibration observes tensors: the elements are observed where a SequenceAt or ConcatFromSequence makes them
// tensors again).
//
// A sequence is immutable once a kernel has produced it: its element tensors share storage with the tensors they
// came from, and copying a sequence copies tensor handles, not data. A kernel may modify one in place only when it
// holds the only reference (KernelContext::take_sequence): the frame hands a value's last reader its reference, so a
// Loop body appending to a carried list appends in place instead of copying it every iteration (n inserts: O(n)
// handle moves, not O(n²)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qtool::runtime {

struct TensorSequence {
  DType elem_dtype = DType::Undefined;  // every element's dtype; known for an empty sequence too
  std::vector<Tensor> items;

  int64_t size() const { return static_cast<int64_t>(items.size()); }
  size_t nbytes() const;  // the elements' bytes
};
using SequenceRef = std::shared_ptr<TensorSequence>;

// Bookkeeping a sequence element costs beyond its data (the Tensor handle, its shape, the allocation's control block
// and alignment): checked against the memory limit (core/limits.h) before a kernel makes that many elements, so a
// SplitToSequence of a [1e9] tensor into 1-element parts is a LimitError instead of ~200 GB of handles.
inline constexpr int64_t kSequenceElementOverhead = 256;
// LimitError unless `count` more elements (their overhead, not their data) fit the memory limit.
void check_sequence_elements(int64_t count);

// One value slot: a tensor or a sequence (at most one of them set; both empty = no value).
struct Value {
  Tensor tensor;
  SequenceRef sequence;

  Value() = default;
  Value(Tensor t) : tensor(std::move(t)) {}         // NOLINT(google-explicit-constructor): a tensor is a value
  Value(SequenceRef s) : sequence(std::move(s)) {}  // NOLINT(google-explicit-constructor)

  bool empty() const { return tensor.empty() && !sequence; }
  bool is_sequence() const { return sequence != nullptr; }
  size_t nbytes() const { return sequence ? sequence->nbytes() : tensor.nbytes(); }
};

// "float [2,3]" for a tensor, "sequence of 3 float tensors" for a sequence (messages).
std::string describe_value(const Value& v);

}  // namespace qtool::runtime
