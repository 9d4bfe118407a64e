// simba/connect.h: a Client from a backend URI.
//
//   memory:                         in-process (every "memory:" of a process shares one store;
//                                   "memory:NAME" is a separate named store; a store lasts
//                                   while a Client or backend uses it)
//   sqlite:///path/to/file.db       one host, many processes (the embedded default)
//
// Timing options ride on the query: ?ttl=10s&transition=6s&initial_delay=0ms&poll=25ms
// &backoff=100ms; SQLite also takes busy_timeout=5s.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "simba/client.h"

namespace simba {

// Throws Error(errc::invalid_argument) for a malformed URI, an unknown scheme or option
// (naming it and what is accepted), errc::unsupported for a known engine missing from this
// build, errc::unavailable if the engine cannot be reached.
Client connect(std::string_view uri, std::shared_ptr<Runtime> runtime = Runtime::shared());

// Only the backend, with the timing options of the URI stored in `options` if not null.
std::shared_ptr<Backend> open_backend(std::string_view uri, ContendOptions* options = nullptr);

// The backend used when none is named: $SIMBA_BACKEND, else a SQLite file in the user's
// state folder ($XDG_STATE_HOME/simba/simba.db, else ~/.local/state/simba/simba.db; the
// folder is created).
std::string default_backend_uri();

}  // namespace simba
