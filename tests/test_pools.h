// SPDX-License-Identifier: Apache-2.0
//
// Thread pools written the way an embedder would write them, for the tests
// of opts->parallel (pool_test, oom_test): a pool of real threads, pools that
// run every task on the calling thread (in order, or in reverse), and a
// checking wrapper that holds the library to the contract of
// hwyattn_parallel: n >= 1 and <= num_workers, never called from inside a
// task, every task run exactly once. Header-only, no library internals: the
// tests use them through the C ABI alone.
#ifndef HWYATTN_TESTS_TEST_POOLS_H_
#define HWYATTN_TESTS_TEST_POOLS_H_

#include <stdint.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hwyattn.h"

namespace hwyattn_test {

// A fixed set of worker threads (std::thread: pthreads here) that run the
// tasks of one parallel_for at a time while the caller waits, as an
// inference engine's pool does. Tasks are claimed one by one under the
// mutex, so a thread that wakes late can never run a task of an older job.
// parallel_for allocates nothing (the steady-state test counts operator new).
class WorkerThreads {
 public:
  explicit WorkerThreads(int threads) {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { Loop(); });
  }
  ~WorkerThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  void ParallelFor(int64_t n, hwyattn_task_fn task, void* ctx) {
    std::lock_guard<std::mutex> one_job(call_mu_);  // callers from several threads take turns
    std::unique_lock<std::mutex> lock(mu_);
    n_ = n;
    task_ = task;
    ctx_ = ctx;
    next_ = 0;
    finished_ = 0;
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [&] { return finished_ == n_; });
  }

 private:
  void Loop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      while (next_ < n_) {
        const int64_t i = next_++;
        hwyattn_task_fn task = task_;
        void* ctx = ctx_;
        lock.unlock();
        task(ctx, i);
        lock.lock();
        if (++finished_ == n_) done_.notify_all();
      }
    }
  }

  std::mutex call_mu_, mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  int64_t n_ = 0, next_ = 0, finished_ = 0;
  hwyattn_task_fn task_ = nullptr;
  void* ctx_ = nullptr;
};

// How a TestPool runs the tasks of a parallel_for.
enum class PoolKind {
  kThreads,  // on WorkerThreads, concurrently
  kInline,   // on the calling thread, 0, 1, ..., n - 1
  kReverse,  // on the calling thread, n - 1, ..., 0
};

// The calling thread is inside a task of some TestPool.
inline thread_local bool t_in_task = false;

// A pool plus the checks of the contract. Violations are counted and
// described (not asserted: a gtest assertion on a pool thread would not stop
// the call); the test reads them after the call.
class TestPool {
 public:
  // `threads` is the number of WorkerThreads (kThreads only); `claimed` is
  // the num_workers the pool announces, which may differ from it (16
  // claimed on 2 threads: more than any phase has work items).
  TestPool(PoolKind kind, int threads, int32_t claimed)
      : kind_(kind), workers_(kind == PoolKind::kThreads ? new WorkerThreads(threads) : nullptr) {
    hwyattn_parallel_init(&parallel_);
    parallel_.num_workers = claimed;
    parallel_.pool = this;
    parallel_.parallel_for = &TestPool::Run;
    calls_.reserve(kMaxCalls);  // no allocation in a call (oom_test counts them)
  }
  ~TestPool() { delete workers_; }
  TestPool(const TestPool&) = delete;
  TestPool& operator=(const TestPool&) = delete;

  const hwyattn_parallel* parallel() const { return &parallel_; }

  // What the library asked for since the last Reset (the n of each call; the
  // first kMaxCalls). One calling thread at a time.
  const std::vector<int64_t>& calls() const { return calls_; }
  int64_t MaxTasks() const {
    int64_t m = 0;
    for (int64_t n : calls_) m = n > m ? n : m;
    return m;
  }
  // "" if every call kept the contract, else the first violation.
  const std::string& violation() const { return violation_; }
  void Reset() {
    calls_.clear();
    violation_.clear();
  }

 private:
  static constexpr int64_t kMaxTasks = 4096;
  static constexpr size_t kMaxCalls = 4096;  // between two Resets, without allocating

  struct Job {
    TestPool* pool;
    hwyattn_task_fn task;
    void* ctx;
  };

  void Violation(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (violation_.empty()) violation_ = what;
  }

  // Every task runs through here: marks the thread as inside a task (a
  // parallel_for from it is nesting) and counts the index.
  static void Task(void* job_ptr, int64_t i) {
    Job* job = static_cast<Job*>(job_ptr);
    const bool outer = t_in_task;
    t_in_task = true;
    job->pool->counts_[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
    job->task(job->ctx, i);
    t_in_task = outer;
  }

  static void Run(void* pool_ptr, int64_t n, hwyattn_task_fn task, void* ctx) {
    TestPool* pool = static_cast<TestPool*>(pool_ptr);
    if (t_in_task) pool->Violation("parallel_for called from inside a task");
    if (pool->active_.fetch_add(1) != 0) {
      pool->Violation("parallel_for called while another call of the same pool runs");
    }
    if (n < 1 || n > pool->parallel_.num_workers || n > kMaxTasks) {
      pool->Violation("parallel_for with n = " + std::to_string(n) + " (num_workers " +
                      std::to_string(pool->parallel_.num_workers) + ")");
      if (n < 1 || n > kMaxTasks) {
        pool->active_.fetch_sub(1);
        return;
      }
    }
    {
      std::lock_guard<std::mutex> lock(pool->mu_);
      if (pool->calls_.size() < kMaxCalls) pool->calls_.push_back(n);
    }
    for (int64_t i = 0; i < n; ++i) pool->counts_[static_cast<size_t>(i)].store(0);
    Job job{pool, task, ctx};
    switch (pool->kind_) {
      case PoolKind::kThreads: pool->workers_->ParallelFor(n, &TestPool::Task, &job); break;
      case PoolKind::kInline:
        for (int64_t i = 0; i < n; ++i) Task(&job, i);
        break;
      case PoolKind::kReverse:
        for (int64_t i = n - 1; i >= 0; --i) Task(&job, i);
        break;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int runs = pool->counts_[static_cast<size_t>(i)].load();
      if (runs != 1) {
        pool->Violation("task " + std::to_string(i) + " of " + std::to_string(n) + " ran " +
                        std::to_string(runs) + " times");
      }
    }
    pool->active_.fetch_sub(1);
  }

  PoolKind kind_;
  WorkerThreads* workers_;
  hwyattn_parallel parallel_;
  std::unique_ptr<std::atomic<int>[]> counts_ { new std::atomic<int>[ kMaxTasks ]() };
  std::atomic<int> active_{0};
  std::mutex mu_;
  std::vector<int64_t> calls_;
  std::string violation_;
};

}  // namespace hwyattn_test

#endif  // HWYATTN_TESTS_TEST_POOLS_H_
