// Where a subcommand finds its backend (--backend, --backend-file, $SIMBA_BACKEND, the default
// SQLite file) and, for those that contend, its lease (--ttl, --transition).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "simba/simba.h"

namespace simba::cli {

struct BackendChoice {
  std::string backend;          // --backend URI
  std::string backend_file;     // --backend-file PATH: the URI is its first line
  std::string ttl, transition;  // only on subcommands that contend

  // The client. A password written in --backend is visible to every user of the host (ps):
  // simba warns once on stderr and says where else to put it.
  Client connect() const;
};

void add_backend_options(CLI::App& command, BackendChoice& choice);
// The backends of this build for --help: each engine's URI form and its own options with their
// help, from the engine table (src/backends/engine.h), so the help never lists what is not there.
std::string backends_footer();
void add_lease_options(CLI::App& command, BackendChoice& choice);

}  // namespace simba::cli
