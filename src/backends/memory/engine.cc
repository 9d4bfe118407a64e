// "memory:" and "memory:NAME": every URI naming the same store of a process shares it.
#include <map>
#include <mutex>

#include "backends/engine.h"
#include "simba/error.h"
#include "simba/memory_backend.h"

namespace simba::internal {
namespace {

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery&) {
  if (uri.has_authority) throw Error(errc::invalid_argument, "memory backend URI is 'memory:' or 'memory:NAME'");
  // Every "memory:NAME" of a process is one shared store, so contenders in one process meet.
  // Stores live as long as the process (issue 15 asks for them to be freed).
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<Backend>> stores;
  std::lock_guard lock(mutex);
  auto& store = stores[uri.path];
  if (!store) store = make_memory_backend();
  return store;
}

}  // namespace

const Engine& memory_engine() {
  static const Engine engine{"memory: (or memory:NAME)", {}, &open};
  return engine;
}

}  // namespace simba::internal
