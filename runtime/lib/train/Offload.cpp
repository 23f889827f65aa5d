//===- Offload.cpp --------------------------------------------------------===//

#include "colossal/runtime/train/Offload.h"

#include "colossal/runtime/Error.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace colossal::rt {

CopyEngine::~CopyEngine() = default;

namespace {

class HostCopyEngine : public CopyEngine {
public:
  HostCopyEngine() : worker_([this] { run(); }) {}
  ~HostCopyEngine() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  void toHost(void *host, const void *device, int64_t bytes) override {
    toHost_ += bytes;
    enqueue([=] { std::memcpy(host, device, size_t(bytes)); });
  }
  void toDevice(void *device, const void *host, int64_t bytes) override {
    toDevice_ += bytes;
    enqueue([=] { std::memcpy(device, host, size_t(bytes)); });
  }
  void synchronize() override {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
    if (failure_) {
      std::exception_ptr failure = failure_;
      failure_ = nullptr;
      std::rethrow_exception(failure);
    }
  }

private:
  void enqueue(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(job));
    }
    wake_.notify_one();
  }
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty() && stopping_)
        return;
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      try {
        job();
      } catch (...) {
        std::lock_guard<std::mutex> relock(mutex_);
        failure_ = std::current_exception();
      }
      lock.lock();
      busy_ = false;
      if (queue_.empty())
        idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stopping_ = false;
  std::exception_ptr failure_;
  std::thread worker_;
};

} // namespace

std::unique_ptr<CopyEngine> makeHostCopyEngine() { return std::make_unique<HostCopyEngine>(); }

} // namespace colossal::rt
