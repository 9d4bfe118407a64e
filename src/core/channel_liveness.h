// Where the contenders of one Client hear that the backend's push channel was lost. Internal.
//
// On an engine whose contenders open their watch only once they wait
// (Capabilities::watch_when_waiting) and whose push channel can be lost (PostgreSQL's LISTEN,
// MariaDB's monitor), an owner has no watch of its own: it hears the loss (the server may have
// forgotten its lease) through one Backend::watch_channel() per Client, opened by the first
// contender's start(). Each running contender is linked here (two pointers in its core, not a
// watch of about 400 bytes); a lost channel is told to every one of them, on the I/O pool.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "base/thread_annotations.h"
#include "simba/backend.h"
#include "simba/runtime.h"

namespace simba::internal {

class ServiceCore;

// A core's place in a ChannelLiveness's list (guarded by that list's lock; ServiceCore keeps
// one, and lets ChannelLiveness reach it).
struct LivenessLink {
  ServiceCore* prev = nullptr;
  ServiceCore* next = nullptr;
};

class ChannelLiveness {
 public:
  ChannelLiveness(Backend& backend, Runtime& runtime) : backend_(backend), runtime_(runtime) {}
  ~ChannelLiveness();
  ChannelLiveness(const ChannelLiveness&) = delete;
  ChannelLiveness& operator=(const ChannelLiveness&) = delete;

  // Opens the channel's watch if it is not open yet (blocks for it: Backend::watch_channel),
  // then links `core`, which from now on hears ServiceCore::on_channel_lost(). Linked
  // already: nothing. False if the backend offers no such watch, or it could not be opened
  // (logged; tried again at the next join): `core` is not linked.
  bool join(ServiceCore& core);
  // Unlinks `core` (not linked: nothing).
  void leave(ServiceCore& core) noexcept;
  // Whether the backend offers a channel watch: opens it if it is not open yet (as join()
  // does); false once it answered that it has none (memory, SQLite: an owner there has no
  // channel whose loss it must hear). True if it could not be opened (logged).
  bool offered();

 private:
  // The channel's event: a loss is told to every linked core, on an I/O thread.
  void on_event(WatchEvent event);
  bool linked_locked(ServiceCore& core) const REQUIRES(mutex_);
  // Opens the channel's watch if it is not open yet; true if it is open.
  bool open_locked() REQUIRES(open_mutex_);

  Backend& backend_;
  Runtime& runtime_;
  // Held while the watch is opened (one opener; the others wait for it).
  internal::AnnotatedMutex open_mutex_ ACQUIRED_BEFORE(mutex_);
  std::unique_ptr<Subscription> subscription_ GUARDED_BY(open_mutex_);
  std::atomic<bool> none_{false};  // the backend offers no channel watch (set once, under open_mutex_)
  internal::AnnotatedMutex mutex_;
  ServiceCore* first_ GUARDED_BY(mutex_) = nullptr;
};

}  // namespace simba::internal
