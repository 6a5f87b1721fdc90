// Resource limits for work driven by untrusted models: how many bytes of tensors the process may hold and how
// many iterations one Loop may run. A hostile model (Expand to [65536,65536], Range(0,1e10), a Loop with trip
// count 2^62) must fail fast with a message naming the limit and its flag, not exhaust memory or hang.
//
// The limits are process-wide, like the memory they guard: the CLI sets them once from --max-memory and
// --max-loop-iterations; library code that must stay small (constant folding) narrows them for a scope with
// ScopedTensorLimit. Every Tensor allocation (core/tensor.cc) is checked against them BEFORE memory is taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace qtool {

struct RuntimeLimits {
  int64_t max_memory_bytes = 0;        // total bytes of live tensors, and so the largest single tensor
  int64_t max_loop_iterations = 0;     // iterations of one Loop node
};

// A limit exceeded: a bad input (exit 2) whose message names the limit and the flag that raises it.
struct LimitError : BadInputError {
  explicit LimitError(const std::string& m) : BadInputError(m) {}
};

// min(physical memory / 2, 16 GiB) and 1,000,000 iterations.
RuntimeLimits default_runtime_limits();
const RuntimeLimits& runtime_limits();
void set_runtime_limits(const RuntimeLimits& limits);

// Bytes of tensor storage allocated and not yet freed, process-wide.
int64_t live_tensor_bytes();

// Called by the tensor allocator before it takes memory: whether `bytes` more fit the limits (and the scoped
// tensor limit). When not, throw_tensor_limit() throws the LimitError describing the tensor as `what`
// ("float tensor of shape [65536,65536]"). Split so the common case builds no message.
bool tensor_allocation_fits(int64_t bytes);
[[noreturn]] void throw_tensor_limit(int64_t bytes, const std::string& what);
// Both in one, for code that checks a size before allocating something else (buffers sized from a shape).
inline void check_tensor_allocation(int64_t bytes, const std::string& what) {
  if (!tensor_allocation_fits(bytes)) throw_tensor_limit(bytes, what);
}
// Allocation bookkeeping (tensor.cc): bytes taken and given back.
void note_tensor_allocated(int64_t bytes);
void note_tensor_freed(int64_t bytes);

// Throws LimitError once a Loop would start iteration `iteration` (0-based) beyond the limit.
void check_loop_iteration(int64_t iteration);

// Narrows the largest single tensor for the current thread while alive (constant folding: results larger than
// a few KiB are not folded, so computing them is wasted work); `reason` ends the message.
class ScopedTensorLimit {
 public:
  ScopedTensorLimit(int64_t max_bytes, std::string reason);
  ~ScopedTensorLimit();
  ScopedTensorLimit(const ScopedTensorLimit&) = delete;
  ScopedTensorLimit& operator=(const ScopedTensorLimit&) = delete;

 private:
  int64_t previous_;
  std::string previous_reason_;
};

// "1.5 GiB", "512 MiB", "100 B".
std::string format_bytes(int64_t bytes);
// "8G", "512M", "64k", "1000" (bytes), "2GiB": powers of 1024. Throws UsageError on anything else.
int64_t parse_byte_size(const std::string& text);

}  // namespace qtool
