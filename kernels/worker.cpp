// The worker thread behind asynchronous collectives: FIFO, so every rank runs them in call order.
#include "worker.h"

#include <stdexcept>

namespace gt {

void Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool Work::done() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = error;
  }
  cv_.notify_all();
}

Worker::Worker() : thread_([this] { loop(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<Work> Worker::submit(std::function<void()> task) {
  auto work = std::make_shared<Work>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(std::move(task), work);
  }
  wake_.notify_one();
  return work;
}

void Worker::drain() {
  if (on_worker_thread()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

namespace {
thread_local bool t_worker = false;
}  // namespace

bool on_a_worker_thread() { return t_worker; }

void Worker::loop() {
  t_worker = true;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) {  // the owner is going away: what is still queued never starts
      for (auto& item : queue_)
        item.second->finish(std::make_exception_ptr(std::runtime_error("the group was destroyed first")));
      queue_.clear();
      idle_.notify_all();
      return;
    }
    auto [task, work] = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    work->finish(error);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace gt
