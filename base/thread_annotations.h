// Clang's thread-safety attributes (-Wthread-safety), spelled so that other compilers ignore
// them: lock rules written where the compiler can check them, not only in comments.
//
//   HUGEPIN_GUARDED_BY(m)        a member read and written only with m held
//   HUGEPIN_REQUIRES_LOCK(m)     a function called only with m held
//   HUGEPIN_EXCLUDES(m)          a function called only without m (it takes m itself, or makes
//                                calls that must not run under it)
//   HUGEPIN_ACQUIRE(m) / HUGEPIN_RELEASE(m)   a function that returns with m held / released
//   HUGEPIN_CAPABILITY(name), HUGEPIN_SCOPED_CAPABILITY   for lock types (base/mutex.h)
//   HUGEPIN_NO_THREAD_ANALYSIS   a function the analysis cannot follow (say why beside it)
//
// The shim's sources are compiled with clang++ -Wthread-safety -Werror by a test
// (shim/thread_safety_check.sh) wherever clang is installed; g++ builds ignore the attributes.
#pragma once

#if defined(__clang__)
#define HUGEPIN_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define HUGEPIN_THREAD_ANNOTATION(x)
#endif

#define HUGEPIN_CAPABILITY(name) HUGEPIN_THREAD_ANNOTATION(capability(name))
#define HUGEPIN_SCOPED_CAPABILITY HUGEPIN_THREAD_ANNOTATION(scoped_lockable)
#define HUGEPIN_GUARDED_BY(m) HUGEPIN_THREAD_ANNOTATION(guarded_by(m))
#define HUGEPIN_REQUIRES_LOCK(...) HUGEPIN_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define HUGEPIN_EXCLUDES(...) HUGEPIN_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define HUGEPIN_ACQUIRE(...) HUGEPIN_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define HUGEPIN_RELEASE(...) HUGEPIN_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define HUGEPIN_NO_THREAD_ANALYSIS HUGEPIN_THREAD_ANNOTATION(no_thread_safety_analysis)
