// hugepin.hpp: the C++ API of libhugepin, for C++ engines (C++17 or later).
//
// Header-only RAII classes over the C ABI of hugepin.h: the shared library exports C functions
// only, so any compiler and standard library can use it, and an exception never crosses it (the
// exceptions below are thrown here, in the caller's code). Every failure throws hugepin::Error,
// which carries the library's one-line message and its negative errno-style code. Read hugepin.h
// for what each call does; the classes here add ownership, spans and exceptions.
//
//   hugepin::Plan plan = hugepin::Plan::from_json(json);               // scheduler process
//   hugepin::SchedulerSession scheduler = hugepin::SchedulerSession::create("kv", plan);
//   hugepin_job_id job = scheduler.dispatch(HUGEPIN_STORE, chunks);
//
//   hugepin::WorkerSession worker = hugepin::WorkerSession::attach("kv", tp_rank, pp_rank);
//   worker.pin(device);                                                // each worker process
//   worker.set_device_kv(segments);
//   worker.store(job, pairs, stream);
//
// Thread-safety: as hugepin.h (one thread at a time per object). Objects are move-only.
#ifndef HUGEPIN_HUGEPIN_HPP
#define HUGEPIN_HUGEPIN_HPP

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hugepin/hugepin.h"

namespace hugepin {
// The public C++ API lives in an inline namespace of its own, so that it never clashes with the
// library's internal C++ names (which are hidden inside libhugepin.so).
inline namespace api_v0 {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  // The negative errno-style code the C call returned (-EINVAL, -ENOENT, ...).
  int code() const noexcept { return code_; }

 private:
  int code_;
};

// Throws Error with the calling thread's last message when `rc` is a failure.
inline void check(int rc) {
  if (rc < 0) throw Error(rc, hugepin_last_error());
}

// A span of T, without requiring C++20.
template <typename T>
struct View {
  const T* data = nullptr;
  size_t size = 0;
  View() = default;
  View(const T* d, size_t n) : data(d), size(n) {}
  View(const std::vector<T>& v) : data(v.data()), size(v.size()) {}  // NOLINT: implicit on purpose
  // For a braced list in a call: the list lives until the call returns.
  View(std::initializer_list<T> list) : data(list.begin()), size(list.size()) {}  // NOLINT
};

class Plan {
 public:
  static Plan from_json(std::string_view json) {
    hugepin_plan* plan = nullptr;
    check(hugepin_plan_from_json(json.data(), json.size(), &plan));
    return Plan(plan);
  }
  Plan(Plan&& other) noexcept : plan_(std::exchange(other.plan_, nullptr)) {}
  Plan& operator=(Plan&& other) noexcept {
    std::swap(plan_, other.plan_);
    return *this;
  }
  ~Plan() { hugepin_plan_free(plan_); }

  hugepin_plan_info info() const {
    hugepin_plan_info out{};
    check(hugepin_plan_get_info(plan_, &out));
    return out;
  }
  std::string json() const {
    size_t length = 0;
    int rc = hugepin_plan_to_json(plan_, nullptr, 0, &length);
    if (rc < 0 && length == 0) check(rc);
    std::string text(length + 1, '\0');
    check(hugepin_plan_to_json(plan_, text.data(), text.size(), &length));
    text.resize(length);
    return text;
  }
  const hugepin_plan* get() const { return plan_; }

 private:
  explicit Plan(hugepin_plan* plan) : plan_(plan) {}
  hugepin_plan* plan_;
};

inline hugepin_arena_info arena_info(const std::string& name) {
  hugepin_arena_info out{};
  check(hugepin_arena_get_info(name.c_str(), &out));
  return out;
}

inline void destroy_arena(const std::string& name) { check(hugepin_arena_destroy(name.c_str())); }

class WorkerSession {
 public:
  static WorkerSession attach(const std::string& arena, uint32_t tp_rank, uint32_t pp_rank,
                              const hugepin_worker_options* options = nullptr) {
    hugepin_worker* worker = nullptr;
    check(hugepin_worker_attach(arena.c_str(), tp_rank, pp_rank, options, &worker));
    return WorkerSession(worker);
  }
  WorkerSession(WorkerSession&& other) noexcept : worker_(std::exchange(other.worker_, nullptr)) {}
  WorkerSession& operator=(WorkerSession&& other) noexcept {
    std::swap(worker_, other.worker_);
    return *this;
  }
  // Detaches; a failure is dropped here (call detach() to see it).
  ~WorkerSession() { hugepin_worker_detach(worker_); }

  void detach() {
    hugepin_worker* worker = std::exchange(worker_, nullptr);
    check(hugepin_worker_detach(worker));
  }
  void pin(int device) { check(hugepin_worker_pin(worker_, device)); }
  hugepin_region_info region() const {
    hugepin_region_info out{};
    check(hugepin_worker_get_region(worker_, &out));
    return out;
  }
  hugepin_segment_info segment(uint32_t index) const {
    hugepin_segment_info out{};
    check(hugepin_worker_get_segment(worker_, index, &out));
    return out;
  }
  void set_device_kv(View<hugepin_device_segment> segments, hugepin_backend backend = HUGEPIN_BACKEND_AUTO) {
    check(hugepin_worker_set_device_kv(worker_, segments.data, segments.size, backend));
  }
  void store(hugepin_job_id job, View<hugepin_block_pair> pairs, void* stream = nullptr) {
    check(hugepin_worker_store(worker_, job, pairs.data, pairs.size, stream));
  }
  void load(hugepin_job_id job, View<hugepin_block_pair> pairs, void* stream = nullptr) {
    check(hugepin_worker_load(worker_, job, pairs.data, pairs.size, stream));
  }
  void release(hugepin_epoch epoch, void* stream = nullptr) { check(hugepin_worker_release(worker_, epoch, stream)); }
  void heartbeat() { check(hugepin_worker_heartbeat(worker_)); }
  // Jobs whose copies landed since the last call, oldest first.
  std::vector<hugepin_job_result> finished() {
    std::vector<hugepin_job_result> out;
    hugepin_job_result buffer[64];
    for (size_t n = 64; n == 64;) {
      check(hugepin_worker_finished(worker_, buffer, 64, &n));
      out.insert(out.end(), buffer, buffer + n);
    }
    return out;
  }
  // True once `job` landed; false when timeout_ns (negative: no limit) passed first.
  bool wait(hugepin_job_id job, int64_t timeout_ns = -1) {
    const int rc = hugepin_worker_wait(worker_, job, timeout_ns);
    if (rc == -ETIMEDOUT) return false;
    check(rc);
    return true;
  }
  int completion_fd() {
    int fd = -1;
    check(hugepin_worker_completion_fd(worker_, &fd));
    return fd;
  }
  hugepin_worker* get() const { return worker_; }

 private:
  explicit WorkerSession(hugepin_worker* worker) : worker_(worker) {}
  hugepin_worker* worker_;
};

class SchedulerSession {
 public:
  static SchedulerSession create(const std::string& arena, const Plan& plan,
                                 const hugepin_arena_options* arena_options = nullptr,
                                 const hugepin_scheduler_options* options = nullptr) {
    hugepin_scheduler* scheduler = nullptr;
    check(hugepin_scheduler_create(arena.c_str(), plan.get(), arena_options, options, &scheduler));
    return SchedulerSession(scheduler);
  }
  static SchedulerSession adopt(const std::string& arena, const hugepin_scheduler_options* options = nullptr) {
    hugepin_scheduler* scheduler = nullptr;
    check(hugepin_scheduler_adopt(arena.c_str(), options, &scheduler));
    return SchedulerSession(scheduler);
  }
  SchedulerSession(SchedulerSession&& other) noexcept : scheduler_(std::exchange(other.scheduler_, nullptr)) {}
  SchedulerSession& operator=(SchedulerSession&& other) noexcept {
    std::swap(scheduler_, other.scheduler_);
    return *this;
  }
  ~SchedulerSession() { hugepin_scheduler_close(scheduler_); }

  hugepin_arena_info info() const {
    hugepin_arena_info out{};
    check(hugepin_scheduler_get_info(scheduler_, &out));
    return out;
  }
  hugepin_job_id dispatch(hugepin_job_kind kind, View<hugepin_chunk_id> chunks) {
    hugepin_job_id job = 0;
    check(hugepin_scheduler_dispatch(scheduler_, kind, chunks.data, chunks.size, &job));
    return job;
  }
  // Reports applied; 0 when timeout_ns passed with none.
  size_t drain(int64_t timeout_ns) {
    size_t applied = 0;
    check(hugepin_scheduler_drain(scheduler_, timeout_ns, &applied));
    return applied;
  }
  std::vector<hugepin_job_id> completed() { return take<hugepin_job_id>(hugepin_scheduler_completed); }
  std::vector<hugepin_failed_job> failed() { return take<hugepin_failed_job>(hugepin_scheduler_failed); }
  std::vector<hugepin_chunk_id> reusable() { return take<hugepin_chunk_id>(hugepin_scheduler_reusable); }
  void retire(hugepin_chunk_id chunk) { check(hugepin_scheduler_retire(scheduler_, chunk)); }
  hugepin_epoch begin_epoch() {
    hugepin_epoch epoch = 0;
    check(hugepin_scheduler_begin_epoch(scheduler_, &epoch));
    return epoch;
  }
  hugepin_scheduler_figures figures() const {
    hugepin_scheduler_figures out{};
    check(hugepin_scheduler_get_figures(scheduler_, &out));
    return out;
  }
  hugepin_scheduler* get() const { return scheduler_; }

 private:
  explicit SchedulerSession(hugepin_scheduler* scheduler) : scheduler_(scheduler) {}

  template <typename T, typename Take>
  std::vector<T> take(Take call) {
    std::vector<T> out;
    T buffer[64];
    for (size_t n = 64; n == 64;) {
      check(call(scheduler_, buffer, 64, &n));
      out.insert(out.end(), buffer, buffer + n);
    }
    return out;
  }

  hugepin_scheduler* scheduler_;
};

}  // namespace api_v0
}  // namespace hugepin

#endif  // HUGEPIN_HUGEPIN_HPP
