// A storage engine's entry in the URI table: how `connect()` opens it. Internal to simba.
//
// Each engine folder defines one `const Engine& <name>_engine()` (in its engine.cc) and
// declares its schemes in its CMakeLists.txt (simba_engine(... SCHEMES ...)); the build
// generates the table from the engines it compiled, and records the ones it left out with the
// reason, so a URI for those gets errc::unsupported naming the CMake option.
//
// The options every engine accepts (ttl, transition, initial_delay, poll, backoff) are parsed
// once, by the registry, into ContendOptions; an engine declares only its own, and its open
// function sees only keys it declared (the registry has refused any other).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/uri.h"
#include "simba/backend.h"

namespace simba::internal {

// An engine's own query options of one URI: key -> raw value.
using EngineQuery = std::map<std::string, std::string>;

struct EngineOption {
  std::string key;
  std::string help;  // one line for `simba --help` and messages
};

struct Engine {
  std::string uri_form;               // e.g. "redis://[user:password@]host:port[/db]"
  std::vector<EngineOption> options;  // its own query options, beside the common ones
  // Opens the backend. Throws Error(errc::invalid_argument) for a URI it cannot take,
  // errc::unavailable when the engine cannot be reached.
  std::shared_ptr<Backend> (*open)(const Uri& uri, const EngineQuery& query);
};

// Helpers for open functions.
// The value of `key` parsed as a duration ("500ms", "2s"), or `fallback` if absent; an
// Error(errc::invalid_argument) names the option.
std::chrono::milliseconds duration_option(const EngineQuery& query, const std::string& key,
                                          std::chrono::milliseconds fallback);
// The value of `key`, or `fallback` if absent.
std::string text_option(const EngineQuery& query, const std::string& key, std::string fallback = "");
// "on" -> true, "off" -> false, absent -> fallback; anything else is invalid_argument.
bool switch_option(const EngineQuery& query, const std::string& key, bool fallback);

// An engine's own options, each written once: its key, its help, and how its value lands in
// the engine's options struct. keys() goes to Engine::options (validation, --help); apply()
// fills an options struct from a URI's query, in the table's order (a setter may look at the
// query as a whole, e.g. for a default that depends on another key).
template <class Options>
class OptionTable {
 public:
  using Setter = std::function<void(const EngineQuery& query, const std::string& key, Options& options)>;

  OptionTable& custom(std::string key, std::string help, Setter set) {
    rows_.push_back({{std::move(key), std::move(help)}, std::move(set)});
    return *this;
  }
  // A duration ("500ms", "2s"); absent: the field keeps its default.
  OptionTable& duration(std::string key, std::string help, std::chrono::milliseconds Options::*field) {
    return custom(std::move(key), std::move(help),
                  [field](const EngineQuery& query, const std::string& key, Options& options) {
                    options.*field = duration_option(query, key, options.*field);
                  });
  }
  OptionTable& text(std::string key, std::string help, std::string Options::*field) {
    return custom(std::move(key), std::move(help),
                  [field](const EngineQuery& query, const std::string& key, Options& options) {
                    options.*field = text_option(query, key, options.*field);
                  });
  }
  // "on" or "off".
  OptionTable& on_off(std::string key, std::string help, bool Options::*field) {
    return custom(std::move(key), std::move(help),
                  [field](const EngineQuery& query, const std::string& key, Options& options) {
                    options.*field = switch_option(query, key, options.*field);
                  });
  }

  // Another table's options after these.
  OptionTable& append(const OptionTable& more) {
    rows_.insert(rows_.end(), more.rows_.begin(), more.rows_.end());
    return *this;
  }

  std::vector<EngineOption> keys() const {
    std::vector<EngineOption> out;
    for (const auto& row : rows_) out.push_back(row.option);
    return out;
  }
  void apply(const EngineQuery& query, Options& options) const {
    for (const auto& row : rows_) row.set(query, row.option.key, options);
  }

 private:
  struct Row {
    EngineOption option;
    Setter set;
  };
  std::vector<Row> rows_;
};

// One row of the generated table: an engine this build knows of, built or not.
struct EngineSlot {
  std::string name;                  // "redis"
  std::vector<std::string> schemes;  // "redis", "rediss"
  const Engine* engine;              // null: left out of this build
  std::string cmake_option;          // SIMBA_WITH_REDIS
  std::string left_out_because;      // empty when built
};

// Every engine of this build's source tree, in the order of src/backends/CMakeLists.txt.
const std::vector<EngineSlot>& engine_table();

}  // namespace simba::internal
