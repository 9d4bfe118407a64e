// "sqlite:///abs/file.db" (also sqlite://localhost/abs/file.db, sqlite:rel.db, sqlite://rel.db).
#include "backends/engine.h"
#include "backends/common/sweep.h"
#include "simba/error.h"
#include "simba/sqlite_backend.h"

namespace simba::internal {
namespace {

using Options = SqliteOptions;

const OptionTable<Options>& options_table() {
  static const auto table =
      OptionTable<Options>()
          .duration("busy_timeout", "how long SQLite waits for another process's write lock (default 5s)",
                    &Options::busy_timeout)
          .duration(kSweepIdleKey, kSweepIdleHelp, &Options::sweep_idle);
  return table;
}

std::shared_ptr<Backend> open(const Uri& uri, const EngineQuery& query) {
  Options options;
  options_table().apply(query, options);
  if (!uri.user.empty() || uri.has_password || uri.port != 0) {
    throw Error(errc::invalid_argument, "sqlite URI takes a file path, like sqlite:///var/lib/app/simba.db");
  }
  options.path = uri.host == "localhost" ? uri.path : uri.host + uri.path;
  if (options.path.empty()) {
    throw Error(errc::invalid_argument, "sqlite URI has no file path (like sqlite:///tmp/simba.db)");
  }
  return make_sqlite_backend(options);
}

}  // namespace

const Engine& sqlite_engine() {
  static const Engine engine{"sqlite:///path/to/file.db", options_table().keys(), &open};
  return engine;
}

}  // namespace simba::internal
