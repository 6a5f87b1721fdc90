// ObservationPipeline: runs observation tasks on worker threads while the interpreter goes on with the next
// nodes, so a calibration pass takes about max(forward, observers) instead of their sum.
//
// Each task carries a key (the tensor it observes): tasks of one key run one at a time, in the order they were
// submitted, so order-dependent observers (PyTorch's histogram) see batches in the same order as when observed
// inline. Tasks of different keys run in any order on any worker.
//
// Memory stays bounded: submit() counts the bytes each pending task holds alive (the tensor it will read),
// and while they exceed `max_pending_bytes` the submitting thread runs pending tasks itself instead of
// waiting. That is also the balance between the two sides: when observers are the slower side, the forward
// thread lends a hand. A task that throws stops the pipeline: later submits and finish() rethrow its exception.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace qtool::calib {

class ObservationPipeline {
 public:
  // `workers` >= 1 threads; at least one task is always admitted, however large.
  ObservationPipeline(int workers, size_t max_pending_bytes);
  // Stops the workers; tasks not yet started are dropped (finish() is the way to complete them).
  ~ObservationPipeline();
  ObservationPipeline(const ObservationPipeline&) = delete;
  ObservationPipeline& operator=(const ObservationPipeline&) = delete;

  // Queues `task`. From one thread at a time (the interpreter's). `bytes`: what the task keeps alive.
  void submit(const void* key, size_t bytes, std::function<void()> task);
  // Runs every pending task (helping the workers) and waits for them; rethrows the first task exception.
  void finish();

  size_t peak_pending_bytes() const { return peak_pending_; }

 private:
  struct Task {
    const void* key;
    size_t bytes;
    std::function<void()> run;
  };
  // Takes the first pending task whose key is not running (lock held); false when there is none.
  bool take(Task& out);
  // Runs a taken task and records its end (takes the lock).
  void run_taken(Task& task);
  void worker_loop();
  void rethrow_if_failed();  // lock held

  const size_t max_pending_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // workers: a task may be takeable, or stop
  std::condition_variable done_cv_;  // submit/finish: a task ended
  std::deque<Task> queue_;
  std::set<const void*> running_;  // keys with a task running
  size_t pending_bytes_ = 0;       // of queued and running tasks
  size_t peak_pending_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

}  // namespace qtool::calib
