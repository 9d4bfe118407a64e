// "memory:" and "memory:NAME": every URI naming the same store of a process shares it.
#include <map>
#include <mutex>

#include "backends/engine.h"
#include "backends/memory/memory_store.h"
#include "base/thread_annotations.h"
#include "simba/error.h"
#include "simba/memory_backend.h"

namespace simba::internal {
namespace {

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery&) {
  if (uri.has_authority) throw Error(errc::invalid_argument, "memory backend URI is 'memory:' or 'memory:NAME'");
  // Every "memory:NAME" of a process is one shared store while anyone uses it, so contenders
  // in one process meet; a store goes when its last user does. All stores take their tokens
  // from one process-wide counter: a store made again never repeats a token.
  static internal::AnnotatedMutex mutex;
  static std::map<std::string, std::weak_ptr<Backend>> stores;
  static auto tokens = std::make_shared<std::atomic<std::uint64_t>>(0);
  internal::MutexLock lock(mutex);
  std::erase_if(stores, [](const auto& item) { return item.second.expired(); });
  auto& slot = stores[uri.path];
  auto store = slot.lock();
  if (!store) {
    store = make_memory_store(tokens);
    slot = store;
  }
  return store;
}

}  // namespace

const Engine& memory_engine() {
  static const Engine engine{"memory: (or memory:NAME)", {}, &open};
  return engine;
}

}  // namespace simba::internal
