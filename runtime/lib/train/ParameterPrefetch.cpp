//===- ParameterPrefetch.cpp ----------------------------------------------===//

#include "colossal/runtime/train/ParameterPrefetch.h"

#include "colossal/runtime/Error.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

namespace colossal::rt {

/// One gather: queued by the step's thread, done by the worker.
struct GatherPrefetcher::Job {
  size_t tensor = 0;
  GatheredTensor result;
  bool done = false;
  std::exception_ptr failure;
};

/// The communication thread: runs queued gathers in order.
class GatherPrefetcher::Worker {
public:
  explicit Worker(const Gather &gather) : gather_(gather), thread_([this] { run(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  void push(std::shared_ptr<Job> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(job));
    }
    changed_.notify_all();
  }

  /// Waits for `job`; rethrows its failure.
  void wait(Job &job) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return job.done; });
    if (job.failure)
      std::rethrow_exception(job.failure);
  }

  /// Waits until every queued gather has run.
  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      // Stopping without draining: the owner is unwinding from a failure.
      if (stopping_)
        return;
      std::shared_ptr<Job> job = queue_.front();
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      std::exception_ptr caught;
      try {
        gather_(job->tensor, job->result.values);
      } catch (...) {
        caught = std::current_exception();
      }
      lock.lock();
      job->failure = caught;
      job->done = true;
      busy_ = false;
      changed_.notify_all();
    }
  }

  const Gather &gather_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool busy_ = false, stopping_ = false;
  std::thread thread_; // last: starts once the rest is built
};

GatherPrefetcher::GatherPrefetcher(std::vector<int64_t> elements, int64_t budgetBytes, bool threaded, Gather gather)
    : elements_(std::move(elements)), budgetBytes_(budgetBytes), gather_(std::move(gather)),
      held_(elements_.size(), 0) {
  if (budgetBytes_ < 0)
    fail("ZeRO-3 prefetch", "a negative budget of " + std::to_string(budgetBytes_) + " bytes");
  if (threaded && budgetBytes_ > 0)
    worker_ = std::make_unique<Worker>(gather_);
}

GatherPrefetcher::~GatherPrefetcher() = default;

std::shared_ptr<GatherPrefetcher::Job> GatherPrefetcher::enqueue(size_t tensor) {
  auto job = std::make_shared<Job>();
  job->tensor = tensor;
  // Allocated when queued: the buffer exists from then on.
  job->result.values = buffer<float>(size_t(elements_[tensor]), MemoryCategory::Communication);
  worker_->push(job);
  return job;
}

void GatherPrefetcher::beginCall() {
  cursor_ = ahead_ = 0;
  diverged_ = false;
  fillAhead();
}

void GatherPrefetcher::fillAhead() {
  if (!worker_ || !learned_ || diverged_)
    return;
  ahead_ = std::max(ahead_, cursor_);
  while (ahead_ < order_.size()) {
    size_t next = order_[ahead_];
    // Still held: its next read comes after the step releases it.
    if (held_[next] || pending_.count(next))
      return;
    int64_t bytes = elements_[next] * int64_t(sizeof(float));
    if (pendingBytes_ > 0 && pendingBytes_ + bytes > budgetBytes_)
      return;
    pending_[next] = enqueue(next);
    pendingBytes_ += bytes;
    ++ahead_;
  }
}

GatheredTensor GatherPrefetcher::take(size_t tensor) {
  if (tensor >= elements_.size())
    fail("ZeRO-3 gather", "no tensor " + std::to_string(tensor) + " of " + std::to_string(elements_.size()));
  if (held_[tensor])
    fail("ZeRO-3 gather", "tensor " + std::to_string(tensor) + " is read again before its release");
  if (!learned_)
    order_.push_back(tensor);
  else if (!diverged_ && cursor_ < order_.size() && order_[cursor_] == tensor)
    ++cursor_;
  else
    diverged_ = true;
  ++gathers_;
  GatheredTensor whole;
  if (auto found = pending_.find(tensor); found != pending_.end()) {
    std::shared_ptr<Job> job = found->second;
    pending_.erase(found);
    pendingBytes_ -= elements_[tensor] * int64_t(sizeof(float));
    worker_->wait(*job);
    whole = std::move(job->result);
    ++prefetched_;
  } else if (worker_) {
    // Behind whatever is queued, so every rank's gathers keep one order.
    std::shared_ptr<Job> job = enqueue(tensor);
    worker_->wait(*job);
    whole = std::move(job->result);
  } else {
    whole.values = buffer<float>(size_t(elements_[tensor]), MemoryCategory::Communication);
    gather_(tensor, whole.values);
  }
  held_[tensor] = 1;
  fillAhead();
  return whole;
}

void GatherPrefetcher::released(size_t tensor) {
  if (tensor >= elements_.size() || !held_[tensor])
    fail("ZeRO-3 gather", "tensor " + std::to_string(tensor) + " released while not held");
  held_[tensor] = 0;
  fillAhead();
}

void GatherPrefetcher::finishCall() {
  if (worker_)
    worker_->drain();
  // Gathers no read took (the call departed from the order): every rank
  // made them alike; their buffers go.
  std::exception_ptr failure;
  for (auto &[tensor, job] : pending_)
    if (job->failure && !failure)
      failure = job->failure;
  pending_.clear();
  pendingBytes_ = 0;
  learned_ = true;
  if (failure)
    std::rethrow_exception(failure);
}

} // namespace colossal::rt
