#include "calib/observation_pipeline.h"

#include <algorithm>

#include "core/error.h"

namespace qtool::calib {

ObservationPipeline::ObservationPipeline(int workers, size_t max_pending_bytes) : max_pending_(max_pending_bytes) {
  if (workers < 1) throw InternalError("observation pipeline: needs at least one worker");
  workers_.reserve(static_cast<size_t>(workers));
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ObservationPipeline::~ObservationPipeline() {
  std::deque<Task> dropped;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    dropped.swap(queue_);
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

bool ObservationPipeline::take(Task& out) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (running_.count(it->key)) continue;
    out = std::move(*it);
    queue_.erase(it);
    running_.insert(out.key);
    return true;
  }
  return false;
}

void ObservationPipeline::run_taken(Task& task) {
  std::exception_ptr error;
  try {
    task.run();
  } catch (...) {
    error = std::current_exception();
  }
  task.run = nullptr;  // release what the task holds before it stops counting as pending
  bool queued = false;
  {
    std::lock_guard lock(mu_);
    running_.erase(task.key);
    pending_bytes_ -= task.bytes;
    if (error && !error_) error_ = error;
    queued = !queue_.empty();
  }
  // A key came free (a queued task of it may now run; idle workers need no waking when nothing is queued) and
  // the pending bytes went down.
  if (queued) work_cv_.notify_all();
  done_cv_.notify_all();
}

void ObservationPipeline::worker_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stop_) return;
    Task task;
    if (!error_ && take(task)) {
      lock.unlock();
      run_taken(task);
      lock.lock();
      continue;
    }
    work_cv_.wait(lock);
  }
}

void ObservationPipeline::rethrow_if_failed() {
  if (error_) std::rethrow_exception(error_);
}

void ObservationPipeline::submit(const void* key, size_t bytes, std::function<void()> task) {
  std::unique_lock lock(mu_);
  rethrow_if_failed();
  queue_.push_back({key, bytes, std::move(task)});
  pending_bytes_ += bytes;
  peak_pending_ = std::max(peak_pending_, pending_bytes_);
  work_cv_.notify_one();
  // Over budget: run pending tasks here rather than wait for the workers.
  while (pending_bytes_ > max_pending_ && !error_) {
    Task mine;
    if (take(mine)) {
      lock.unlock();
      run_taken(mine);
      lock.lock();
    } else {
      done_cv_.wait(lock);  // every queued task waits on a running one of its key
    }
  }
  rethrow_if_failed();
}

void ObservationPipeline::finish() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (error_) break;
    Task mine;
    if (take(mine)) {
      lock.unlock();
      run_taken(mine);
      lock.lock();
      continue;
    }
    if (queue_.empty() && running_.empty()) break;
    done_cv_.wait(lock);
  }
  if (error_) {  // let running tasks end before the caller unwinds what they use
    done_cv_.wait(lock, [this] { return running_.empty(); });
    std::rethrow_exception(error_);
  }
}

}  // namespace qtool::calib
