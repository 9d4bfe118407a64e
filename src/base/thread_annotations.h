// Clang's thread-safety analysis (-Wthread-safety): the macros, and a mutex and its locks that
// the analysis understands (std::mutex and std::lock_guard of libstdc++ carry no
// annotations). Under GCC the macros are empty and the types are thin wrappers.
//
//   internal::AnnotatedMutex mutex_;
//   int count_ GUARDED_BY(mutex_);
//   void bump_locked() REQUIRES(mutex_);
//   ...
//   internal::MutexLock lock(mutex_);          // std::lock_guard
//   internal::UniqueMutexLock lock(mutex_);    // std::unique_lock; .native() for a condition_variable
//
// The build with clang (scripts/test's asan stage) checks with -Wthread-safety -Werror.
#pragma once

#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define SIMBA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SIMBA_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) SIMBA_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY SIMBA_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) SIMBA_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SIMBA_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) SIMBA_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) SIMBA_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) SIMBA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) SIMBA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) SIMBA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) SIMBA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SIMBA_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SIMBA_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SIMBA_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define EXCLUDES(...) SIMBA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define RETURN_CAPABILITY(x) SIMBA_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS SIMBA_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace simba::internal {

class CAPABILITY("mutex") AnnotatedMutex {
 public:
  void lock() ACQUIRE() { mutex_.lock(); }
  void unlock() RELEASE() { mutex_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mutex_.try_lock(); }
  // For std::unique_lock and condition variables (UniqueMutexLock::native()).
  std::mutex& native() { return mutex_; }

 private:
  std::mutex mutex_;
};

// std::lock_guard.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(AnnotatedMutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~MutexLock() RELEASE() { mutex_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  AnnotatedMutex& mutex_;
};

// std::unique_lock: may unlock and lock again inside its scope; native() for a
// std::condition_variable's wait (the analysis takes the mutex as held across the wait, as
// it is when the wait returns).
class SCOPED_CAPABILITY UniqueMutexLock {
 public:
  explicit UniqueMutexLock(AnnotatedMutex& mutex) ACQUIRE(mutex) : lock_(mutex.native()) {}
  ~UniqueMutexLock() RELEASE() {}
  UniqueMutexLock(const UniqueMutexLock&) = delete;
  UniqueMutexLock& operator=(const UniqueMutexLock&) = delete;

  void lock() ACQUIRE() { lock_.lock(); }
  void unlock() RELEASE() { lock_.unlock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

// std::shared_mutex, with its writer and reader locks.
class CAPABILITY("shared mutex") AnnotatedSharedMutex {
 public:
  void lock() ACQUIRE() { mutex_.lock(); }
  void unlock() RELEASE() { mutex_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mutex_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mutex_.unlock_shared(); }

 private:
  std::shared_mutex mutex_;
};

class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(AnnotatedSharedMutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~WriterLock() RELEASE() { mutex_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  AnnotatedSharedMutex& mutex_;
};

class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(AnnotatedSharedMutex& mutex) ACQUIRE_SHARED(mutex) : mutex_(mutex) { mutex_.lock_shared(); }
  ~ReaderLock() RELEASE() { mutex_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  AnnotatedSharedMutex& mutex_;
};

}  // namespace simba::internal
