// Backend URIs to backends, through the generated engine table: the one place that knows which
// engines this build has. Common options are parsed here, once, for every engine.
#include <cstdlib>
#include <filesystem>

#include "backends/engine.h"
#include "core/uri.h"
#include "simba/connect.h"
#include "simba/duration.h"
#include "simba/error.h"

namespace simba {
namespace internal {

std::chrono::milliseconds duration_option(const EngineQuery& query, const std::string& key,
                                          std::chrono::milliseconds fallback) {
  auto it = query.find(key);
  if (it == query.end()) return fallback;
  try {
    return parse_duration(it->second);
  } catch (const Error& e) {
    throw Error(errc::invalid_argument, "option '" + key + "': " + e.what());
  }
}

std::string text_option(const EngineQuery& query, const std::string& key, std::string fallback) {
  auto it = query.find(key);
  return it == query.end() ? fallback : it->second;
}

bool switch_option(const EngineQuery& query, const std::string& key, bool fallback) {
  auto it = query.find(key);
  if (it == query.end()) return fallback;
  if (it->second == "on") return true;
  if (it->second == "off") return false;
  throw Error(errc::invalid_argument, "option '" + key + "' is 'on' or 'off', not '" + it->second + "'");
}

}  // namespace internal

namespace {

using internal::EngineSlot;

constexpr const char* kCommonOptions = "ttl, transition, initial_delay, poll, backoff, password_file";

// "memory:, sqlite:///path/to/file.db, ...": the URI forms of the engines this build has.
std::string accepted_forms() {
  std::string out;
  for (const auto& slot : internal::engine_table()) {
    if (!slot.engine) continue;
    out += (out.empty() ? "" : ", ") + slot.engine->uri_form;
  }
  return out;
}

const EngineSlot* slot_for(const std::string& scheme) {
  for (const auto& slot : internal::engine_table()) {
    for (const auto& s : slot.schemes) {
      if (s == scheme) return &slot;
    }
  }
  return nullptr;
}

// `password_file=PATH` (any engine): the password is the file's first line, so it need not
// appear on a command line (where every user sees it through ps) or in a config value.
void take_password_file(internal::Uri& uri) {
  auto it = uri.query.find("password_file");
  if (it == uri.query.end()) return;
  const std::string path = it->second;
  uri.query.erase(it);
  if (uri.has_password) {
    throw Error(errc::invalid_argument, "'" + uri.redacted() + "' has both a password and password_file: give one");
  }
  const std::string line = internal::first_line_of(path, "password_file");
  uri.password = line;
  uri.has_password = true;
}

}  // namespace

std::shared_ptr<Backend> open_backend(std::string_view text, ContendOptions* timing) {
  internal::Uri uri = internal::parse_uri(text);
  const EngineSlot* slot = slot_for(uri.scheme);
  if (!slot) {
    throw Error(errc::invalid_argument, "unknown backend scheme '" + uri.scheme + "' in '" + uri.redacted() +
                                            "'; accepted: " + accepted_forms());
  }
  if (!slot->engine) {
    throw Error(errc::unsupported, "this build of simba has no " + slot->name + " engine (for '" + uri.redacted() +
                                       "'): it was left out (" + slot->left_out_because + "); rebuild with -D" +
                                       slot->cmake_option + "=ON");
  }
  take_password_file(uri);
  internal::EngineQuery query = uri.query;
  ContendOptions options;
  options.apply_query(query);  // takes the common options out of `query`
  options.validate();
  std::string accepted = kCommonOptions;
  for (const auto& option : slot->engine->options) {
    accepted += ", " + option.key;
  }
  for (const auto& [key, value] : query) {
    bool known = false;
    for (const auto& option : slot->engine->options) known = known || option.key == key;
    if (!known) {
      throw Error(errc::invalid_argument,
                  "unknown option '" + key + "' for " + uri.scheme + ": (accepted: " + accepted + ")");
    }
  }
  auto backend = slot->engine->open(uri, query);
  if (timing) *timing = options;
  return backend;
}

Client connect(std::string_view uri, std::shared_ptr<Runtime> runtime) {
  ContendOptions options;
  auto backend = open_backend(uri, &options);
  return Client(std::move(backend), options, std::move(runtime));
}

std::string default_backend_uri() {
  if (const char* env = std::getenv("SIMBA_BACKEND"); env && *env) return env;
  std::filesystem::path folder;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/') {
    folder = std::filesystem::path(state) / "simba";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    folder = std::filesystem::path(home) / ".local" / "state" / "simba";
  } else {
    throw Error(errc::invalid_argument, "no backend given: set --backend, SIMBA_BACKEND or HOME");
  }
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) throw Error(errc::unavailable, "cannot create state folder '" + folder.string() + "': " + ec.message());
  return "sqlite://" + (folder / "simba.db").string();
}

}  // namespace simba
