#include "cli/connection.h"

#include <algorithm>
#include <iostream>

#include "backends/engine.h"
#include "core/uri.h"

namespace simba::cli {

Client BackendChoice::connect() const {
  if (!backend.empty() && !backend_file.empty()) {
    throw Error(errc::invalid_argument, "give --backend or --backend-file, not both");
  }
  std::string uri;
  if (!backend.empty()) {
    uri = backend;
    if (internal::parse_uri(uri).has_password) {
      std::cerr << "simba: warning: the password in --backend is visible to every user of this host (ps); "
                   "put the URI in $SIMBA_BACKEND or --backend-file, or the password in password_file=PATH\n";
    }
  } else if (!backend_file.empty()) {
    uri = internal::first_line_of(backend_file, "--backend-file");
  } else {
    uri = default_backend_uri();
  }
  ContendOptions options;
  auto opened = open_backend(uri, &options);
  if (!ttl.empty()) options.ttl = parse_duration(ttl);
  if (!transition.empty()) options.transition = parse_duration(transition);
  options.validate();
  return Client(opened, options);
}

std::string backends_footer() {
  std::string out =
      "Backends of this build (--backend URI), each with its own options; every one also takes\n"
      "ttl, transition, initial_delay, poll, backoff and password_file (URI?key=value&...):\n";
  for (const auto& slot : simba::internal::engine_table()) {
    if (!slot.engine) continue;
    out += "  " + slot.engine->uri_form + "\n";
    for (const auto& option : slot.engine->options) {
      std::string key = "    " + option.key;
      key.resize(std::max<std::size_t>(key.size() + 2, 24), ' ');
      out += key + option.help + "\n";
    }
  }
  return out;
}

void add_backend_options(CLI::App& command, BackendChoice& choice) {
  command.add_option("--backend", choice.backend,
                     "Backend URI (default: $SIMBA_BACKEND, else a SQLite file in the state folder); "
                     "a password here is visible in ps: prefer $SIMBA_BACKEND, --backend-file or password_file=PATH");
  command.add_option("--backend-file", choice.backend_file, "Read the backend URI from the first line of this file");
}

void add_lease_options(CLI::App& command, BackendChoice& choice) {
  command.add_option("--ttl", choice.ttl, "Lease length, e.g. 10s (default: the URI's, else 10s)");
  command.add_option("--transition", choice.transition, "Owner-only grace after the ttl (default: the URI's, else 6s)");
}

}  // namespace simba::cli
