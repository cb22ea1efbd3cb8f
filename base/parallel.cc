#include "base/parallel.h"

#include <pthread.h>

#include <cstring>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace hugepin {

void name_this_thread(const char* name) {
  char kept[16] = {};
  std::strncpy(kept, name, sizeof kept - 1);  // the kernel's limit: longer names are refused
  (void)pthread_setname_np(pthread_self(), kept);
}

void run_on_threads(unsigned count, const std::function<void(unsigned index)>& work,
                    const std::function<void()>& on_new_thread) {
  std::vector<std::exception_ptr> failures(count);
  auto run = [&](unsigned index, bool own_thread) {
    try {
      if (own_thread && on_new_thread) on_new_thread();
      work(index);
    } catch (...) {
      failures[index] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(count);
  unsigned started = 0;
  for (; started < count; ++started) {
    try {
      threads.emplace_back(run, started, true);
    } catch (const std::system_error&) {
      break;
    }
  }
  for (unsigned index = started; index < count; ++index) run(index, false);
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& failure : failures) {
    if (failure) std::rethrow_exception(failure);
  }
}

Share share_of(uint64_t total, unsigned index, unsigned count) {
  return {total * index / count, total * (index + 1) / count};
}

}  // namespace hugepin
