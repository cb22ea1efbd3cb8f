// One polite iteration of a spin loop, for every spinning wait (the rings, the copy-completion
// watcher): the x86 `pause` instruction, AArch64's `yield`.
#pragma once

namespace hugepin {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace hugepin
