#include "runtime/kernels/work_sharing.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace qtool::runtime::kernels {
namespace {

thread_local bool tl_in_loop = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// One loop at a time. Its chunks are claimed from `state_` = epoch << 32 | next chunk; `epoch_` counts loops and is
// what sleeping helpers wait on. A claim succeeds only while its loop's epoch is current and chunks are left, and the
// calling thread writes the next loop's fields only after closing the current one (next = kClosed), so a helper that
// woke late and read fields of another loop can never claim with them.
class Helpers {
 public:
  static Helpers& instance() {
    static Helpers h;
    return h;
  }

  ~Helpers() {
    stop_.store(true);
    epoch_.fetch_add(1);
    epoch_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // False when another thread is using the helpers (the caller then runs the loop alone).
  bool run(int64_t chunks, int threads, void (*body)(void*, int64_t), void* ctx) {
    std::unique_lock lock(busy_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    if (start < backoff_until_) return false;
    ensure(threads - 1);
    const uint32_t n = static_cast<uint32_t>(chunks);
    body_.store(body, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    chunks_.store(n, std::memory_order_relaxed);
    helpers_.store(threads - 1, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    const uint32_t e = epoch_.load(std::memory_order_relaxed) + 1;
    state_.store(uint64_t{e} << 32, std::memory_order_release);
    epoch_.store(e, std::memory_order_release);
    epoch_.notify_all();

    tl_in_loop = true;
    uint32_t c, own = 0;
    while (claim(e, n, c)) {
      body(ctx, c);
      done_.fetch_add(1, std::memory_order_acq_rel);
      ++own;
    }
    tl_in_loop = false;
    // Only chunks a helper has claimed are left: spin about 20 us for them, then sleep.
    const Clock::time_point own_end = Clock::now();
    bool slept = false;
    for (int spin = 0;; ++spin) {
      const uint32_t d = done_.load(std::memory_order_acquire);
      if (d == n) break;
      if (spin < 512) {
        cpu_relax();
      } else {
        slept = true;
        done_.wait(d, std::memory_order_acquire);
      }
    }
    state_.store(uint64_t{e} << 32 | kClosed, std::memory_order_release);
    // A helper preempted while it held a chunk (another process took its core) made the caller wait for a
    // scheduler slice, far longer than a chunk takes (the caller's own chunks are the yardstick). The cores are
    // contended, so loops run on the calling thread alone for the next kBackoff.
    if (slept) {
      const auto waited = Clock::now() - own_end;
      const auto per_chunk = own ? (own_end - start) / own : Clock::duration::zero();
      if (waited > 4 * per_chunk + std::chrono::microseconds(100)) {
        backoff_until_ = Clock::now() + kBackoff;
        spin_from_.store((backoff_until_ + kQuietBeforeSpin).time_since_epoch().count(), std::memory_order_relaxed);
      }
    }
    return true;
  }

 private:
  static constexpr uint32_t kClosed = 0xffffffffu;
  static constexpr std::chrono::milliseconds kBackoff{50};
  static constexpr std::chrono::microseconds kSpin{100};
  static constexpr std::chrono::seconds kQuietBeforeSpin{1};

  Helpers() = default;

  // Starts helpers until there are n (called with busy_ held).
  void ensure(int n) {
    while (static_cast<int>(threads_.size()) < n) {
      const int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index] { helper(index); });
    }
  }

  // Claims the next chunk of loop `e` (which has `n` chunks); false when none is left or the loop is over.
  bool claim(uint32_t e, uint32_t n, uint32_t& chunk) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(s >> 32) != e) return false;
      const uint32_t next = static_cast<uint32_t>(s);
      if (next >= n) return false;  // kClosed is above every chunk count
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        chunk = next;
        return true;
      }
    }
  }

  // Returns when the epoch is no longer `seen`. A helper looks for the next loop for kSpin before it sleeps, yielding
  // its core between looks: loops of one graph run follow each other within microseconds, and a sleeping helper
  // takes a futex wake-up to start, 10-15 us on one machine and 44-94 us on a VM (docs/benchmarks.md,
  // 2026-11-25), by which time the caller has done most of a small loop alone. The yield gives the core to
  // any other runnable thread (the caller's own, on a machine with fewer free cores than threads). Once run() has
  // seen contention (its back-off), helpers sleep at once until kQuietBeforeSpin after the back-off ends.
  // Measured unloaded at 2 threads on the VM: digits-vit 5.81 -> 5.39 ms, llama2c 3.32 -> 2.75.
  void wait_for_loop(uint32_t seen) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point now = Clock::now();
    if (now.time_since_epoch().count() < spin_from_.load(std::memory_order_relaxed)) {
      epoch_.wait(seen, std::memory_order_acquire);
      return;
    }
    const Clock::time_point until = now + kSpin;
    while (epoch_.load(std::memory_order_acquire) == seen) {
      for (int i = 0; i < 32; ++i) cpu_relax();
      if (epoch_.load(std::memory_order_acquire) != seen) return;
      std::this_thread::yield();
      if (Clock::now() > until) {
        epoch_.wait(seen, std::memory_order_acquire);
        return;
      }
    }
  }

  void helper(int index) {
    tl_in_loop = true;
    uint32_t seen = 0;
    for (;;) {
      wait_for_loop(seen);
      if (stop_.load()) return;
      seen = epoch_.load(std::memory_order_acquire);
      // The fields may already belong to a later loop; claim() then fails (see the class comment).
      if (index >= helpers_.load(std::memory_order_relaxed)) continue;
      auto* body = body_.load(std::memory_order_relaxed);
      void* ctx = ctx_.load(std::memory_order_relaxed);
      const uint32_t n = chunks_.load(std::memory_order_relaxed);
      uint32_t c;
      while (claim(seen, n, c)) {
        body(ctx, c);
        if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) done_.notify_one();
      }
    }
  }

  std::mutex busy_;
  std::chrono::steady_clock::time_point backoff_until_{};  // guarded by busy_
  std::vector<std::thread> threads_;
  std::atomic<uint32_t> epoch_{0};
  std::atomic<uint64_t> state_{kClosed};
  std::atomic<uint32_t> done_{0};
  std::atomic<void (*)(void*, int64_t)> body_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<uint32_t> chunks_{0};
  std::atomic<int> helpers_{0};
  std::atomic<bool> stop_{false};
  // Helpers spin (wait_for_loop) only from this steady_clock count on: contention seen by run() pushes it
  // kQuietBeforeSpin past the back-off.
  std::atomic<int64_t> spin_from_{0};
};

}  // namespace

bool inside_parallel_loop() { return tl_in_loop || omp_in_parallel(); }

void share_chunks(int64_t chunks, int threads, void (*body)(void*, int64_t), void* ctx) {
  if (chunks <= 0) return;
  if (threads <= 1 || chunks == 1 || inside_parallel_loop() || chunks >= int64_t{1} << 31 ||
      !Helpers::instance().run(chunks, threads, body, ctx))
    for (int64_t c = 0; c < chunks; ++c) body(ctx, c);
}

}  // namespace qtool::runtime::kernels
