// One thread that runs queued tasks in order; a Work reports one task's completion.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace gt {

// Completion of one queued task: wait() blocks until it ran and rethrows its error.
class Work {
 public:
  void wait();
  bool done();

 private:
  friend class Worker;
  void finish(std::exception_ptr error);
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// True on any Worker's thread (asynchronous collectives), false on the threads of the program.
bool on_a_worker_thread();

class Worker {
 public:
  Worker();
  ~Worker();  // lets the running task finish, fails the queued ones, joins
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  std::shared_ptr<Work> submit(std::function<void()> task);
  void drain();  // until every submitted task has run; a no-op on the worker thread itself
  bool on_worker_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<Work>>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gt
