#include "limit_options.h"

#include <string>

#include "core/file_io.h"
#include "core/limits.h"

namespace qtool::cli {

void add_limit_options(CLI::App& sub) {
  const RuntimeLimits defaults = default_runtime_limits();
  sub.add_option_function<std::string>(
         "--max-memory",
         [](const std::string& text) {
           RuntimeLimits l = runtime_limits();
           try {
             l.max_memory_bytes = parse_byte_size(text);
           } catch (const Error& e) {
             throw CLI::ValidationError("--max-memory", e.what());
           }
           set_runtime_limits(l);
         },
         "Most memory the interpreter's tensors may hold in all, and so the largest one (bytes, or with K/M/G/T; "
         "default " + format_bytes(defaults.max_memory_bytes) + ": half the RAM, at most 16 GiB)")
      ->type_name("SIZE");
  sub.add_option_function<int64_t>(
         "--max-loop-iterations",
         [](int64_t n) {
           if (n <= 0) throw CLI::ValidationError("--max-loop-iterations", "must be a positive count, got " + std::to_string(n));
           RuntimeLimits l = runtime_limits();
           l.max_loop_iterations = n;
           set_runtime_limits(l);
         },
         "Most iterations one Loop node may run (default " + std::to_string(defaults.max_loop_iterations) + ")")
      ->type_name("N");
  sub.add_option_function<std::string>(
         "--max-tensor-bytes",
         [](const std::string& text) {
           try {
             fileio::set_max_tensor_bytes(parse_byte_size(text));
           } catch (const Error& e) {
             throw CLI::ValidationError("--max-tensor-bytes", e.what());
           }
         },
         "Largest tensor file, .npy shape or .npz member read, and the most bytes inflated from one .npz; more is "
         "refused before reading (bytes, or with K/M/G/T; default " +
             format_bytes(fileio::kDefaultMaxTensorBytes) + ")")
      ->type_name("SIZE");
}

}  // namespace qtool::cli
