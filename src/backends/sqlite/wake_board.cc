// Releases wake waiters of the same SQLite database across the processes of a host
// (wake_board.h).
#include "backends/sqlite/wake_board.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "base/log.h"

namespace simba::internal {
namespace {

std::atomic_ref<std::uint32_t> atomic(std::uint32_t* word) { return std::atomic_ref<std::uint32_t>(*word); }

// Not FUTEX_PRIVATE_FLAG: the word is in a shared file mapping, and waiters are in other
// processes too.
void futex_wake_all(std::uint32_t* word) noexcept {
  syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps while *word == expected, at most `timeout`.
void futex_wait(std::uint32_t* word, std::uint32_t expected, std::chrono::milliseconds timeout) noexcept {
  timespec relative{static_cast<time_t>(timeout.count() / 1000), static_cast<long>(timeout.count() % 1000) * 1'000'000};
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &relative, nullptr, 0);  // EAGAIN, EINTR, ETIMEDOUT: look again
}

}  // namespace

std::shared_ptr<WakeBoard> WakeBoard::open(const std::string& database_path) {
  if (database_path.empty() || database_path == ":memory:") return nullptr;  // no other process sees it
  // Beside the file itself, however this process named it (a symbolic link, a relative path).
  std::string real = database_path;
  if (char* resolved = realpath(database_path.c_str(), nullptr)) {
    real = resolved;
    std::free(resolved);
  }
  const std::string path = real + "-wake";
  auto warn = [&](const char* step) {
    log_warn("sqlite://" + database_path + ": cannot " + step + " '" + path + "' (" + std::strerror(errno) +
             "); waiters in other processes poll for releases");
  };
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    warn("open");
    return nullptr;
  }
  struct stat status {};
  // Never shrunk: another process may have it mapped. Extending fills with zeros.
  if (fstat(fd, &status) != 0 || (status.st_size < static_cast<off_t>(kBytes) && ftruncate(fd, kBytes) != 0)) {
    warn("size");
    ::close(fd);
    return nullptr;
  }
  void* map = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping stays
  if (map == MAP_FAILED) {
    warn("map");
    return nullptr;
  }
  return std::shared_ptr<WakeBoard>(new WakeBoard(map));
}

WakeBoard::~WakeBoard() {
  {
    MutexLock lock(mutex_);  // watches still counted (their handles outlive the board): uncounted
    for (const auto& [slot, watches] : watches_) {
      atomic(watches_of(slot)).fetch_sub(static_cast<std::uint32_t>(watches.watchers.size()));
    }
    watches_.clear();
  }
  stopping_.store(true);
  if (thread_.joinable()) {
    // Moves the count so that the listener cannot fall asleep on it, then wakes it (and, once,
    // the listeners of other processes, which find no slot moved).
    atomic(word(0)).fetch_add(1);
    futex_wake_all(word(0));
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // the last holder let go from inside a call: the thread ends by itself
    } else {
      thread_.join();
    }
  }
  munmap(map_, kBytes);
}

std::size_t WakeBoard::slot_of(const std::string& key) noexcept {
  // FNV-1a: the same in every process and every build (std::hash need not be).
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : key) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<std::size_t>(hash % kSlots);
}

void WakeBoard::ring(const std::string& key) noexcept {
  const std::size_t slot = slot_of(key);
  // A watch counts itself before its first look at the database, which comes after this
  // commit if this read misses it: then that look finds what was committed.
  if (atomic(watches_of(slot)).load() == 0) return;
  atomic(word(1 + slot)).fetch_add(1);
  atomic(word(0)).fetch_add(1);  // after the slot: a listener that sees the count sees the slot
  futex_wake_all(word(0));
}

std::unique_ptr<Subscription> WakeBoard::watch(const std::string& key, std::function<void(WatchEvent)> on_change) {
  auto watcher = std::make_shared<Watcher>(std::move(on_change));
  const std::size_t slot = slot_of(key);
  std::uint64_t id;
  {
    MutexLock lock(mutex_);
    id = ++next_id_;
    atomic(watches_of(slot)).fetch_add(1);
    auto [it, first] = watches_.try_emplace(slot);
    if (first) it->second.seen = atomic(word(1 + slot)).load();  // rings from now on
    it->second.watchers.emplace(id, watcher);
    if (!listening_) {
      listening_ = true;
      thread_ = std::thread([this] { listen(); });
    }
  }
  std::weak_ptr<WakeBoard> weak = shared_from_this();
  return watch_handle(watcher, [weak, slot, id] {
    if (auto board = weak.lock()) board->forget(slot, id);
  });
}

void WakeBoard::forget(std::size_t slot, std::uint64_t id) {
  MutexLock lock(mutex_);
  const auto it = watches_.find(slot);
  if (it == watches_.end() || it->second.watchers.erase(id) == 0) return;
  atomic(watches_of(slot)).fetch_sub(1);
  if (it->second.watchers.empty()) watches_.erase(it);
}

void WakeBoard::listen() {
  std::vector<std::shared_ptr<Watcher>> moved;
  while (!stopping_.load()) {
    const std::uint32_t count = atomic(word(0)).load();
    {
      MutexLock lock(mutex_);
      for (auto& [slot, watches] : watches_) {
        const std::uint32_t now = atomic(word(1 + slot)).load();
        if (now == watches.seen) continue;
        watches.seen = now;
        for (const auto& [id, watcher] : watches.watchers) moved.push_back(watcher);
      }
    }
    for (auto& watcher : moved) watcher->call(WatchEvent::released);  // outside the lock: a call may watch
    moved.clear();
    // Until the count moves (or a second passes: stopping_ is looked at again).
    futex_wait(word(0), count, std::chrono::milliseconds(1000));
  }
}

}  // namespace simba::internal
