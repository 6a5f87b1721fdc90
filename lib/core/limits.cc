#include "core/limits.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <mutex>

namespace qtool {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

RuntimeLimits& limits_storage() {
  static RuntimeLimits limits = default_runtime_limits();
  return limits;
}
std::atomic<int64_t> g_live{0};
// Scoped single-tensor limit (0 = none) and its reason; set by ScopedTensorLimit from one thread at a time.
std::atomic<int64_t> g_scoped_max{0};
std::mutex g_reason_mutex;
std::string g_scoped_reason;

std::string memory_hint() {
  return "raise it with --max-memory (e.g. --max-memory 32G) if the model really needs it";
}

}  // namespace

RuntimeLimits default_runtime_limits() {
  RuntimeLimits r;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const int64_t half_ram = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 2 : 16 * kGiB;
  r.max_memory_bytes = std::min<int64_t>(half_ram, 16 * kGiB);
  r.max_loop_iterations = 1000000;
  return r;
}

const RuntimeLimits& runtime_limits() { return limits_storage(); }
void set_runtime_limits(const RuntimeLimits& limits) { limits_storage() = limits; }

int64_t live_tensor_bytes() { return g_live.load(std::memory_order_relaxed); }

bool tensor_allocation_fits(int64_t bytes) {
  const int64_t scoped = g_scoped_max.load(std::memory_order_relaxed);
  if (scoped > 0 && bytes > scoped) return false;
  const int64_t max = runtime_limits().max_memory_bytes;
  return max <= 0 || (bytes <= max && live_tensor_bytes() <= max - bytes);
}

void throw_tensor_limit(int64_t bytes, const std::string& what) {
  const int64_t scoped = g_scoped_max.load(std::memory_order_relaxed);
  if (scoped > 0 && bytes > scoped) {
    std::lock_guard<std::mutex> lock(g_reason_mutex);
    throw LimitError(what + " needs " + format_bytes(bytes) + ", over the " + format_bytes(scoped) + " limit " +
                     g_scoped_reason);
  }
  const int64_t max = runtime_limits().max_memory_bytes;
  if (bytes > max)
    throw LimitError(what + " needs " + format_bytes(bytes) + ", over the memory limit of " + format_bytes(max) +
                     " (--max-memory); " + memory_hint());
  throw LimitError(what + " needs " + format_bytes(bytes) + " while tensors already hold " +
                   format_bytes(live_tensor_bytes()) + ", over the memory limit of " + format_bytes(max) +
                   " (--max-memory); " + memory_hint());
}

void note_tensor_allocated(int64_t bytes) { g_live.fetch_add(bytes, std::memory_order_relaxed); }
void note_tensor_freed(int64_t bytes) { g_live.fetch_sub(bytes, std::memory_order_relaxed); }

void check_loop_iteration(int64_t iteration) {
  const int64_t max = runtime_limits().max_loop_iterations;
  if (max > 0 && iteration >= max)
    throw LimitError("Loop runs more than " + std::to_string(max) +
                     " iterations, the limit (--max-loop-iterations); raise it if the model really needs more");
}

ScopedTensorLimit::ScopedTensorLimit(int64_t max_bytes, std::string reason)
    : previous_(g_scoped_max.load()) {
  std::lock_guard<std::mutex> lock(g_reason_mutex);
  previous_reason_ = std::move(g_scoped_reason);
  g_scoped_reason = std::move(reason);
  g_scoped_max.store(max_bytes);
}

ScopedTensorLimit::~ScopedTensorLimit() {
  std::lock_guard<std::mutex> lock(g_reason_mutex);
  g_scoped_reason = std::move(previous_reason_);
  g_scoped_max.store(previous_);
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

int64_t parse_byte_size(const std::string& text) {
  auto bad = [&]() -> int64_t {
    throw UsageError("'" + text + "' is not a size: use bytes or a number with K, M, G or T (powers of 1024), e.g. 8G");
  };
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 18) return bad();
  int64_t n = std::stoll(text.substr(0, i));
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() == 2 && unit[1] == 'I') unit.pop_back();
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else return bad();
  if (n > (INT64_MAX >> shift)) return bad();
  n <<= shift;
  if (n <= 0) throw UsageError("a size must be positive, got '" + text + "'");
  return n;
}

}  // namespace qtool
