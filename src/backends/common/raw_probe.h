// For simba-bench only: the engine's bare primitive run on the backend's own connection, so a
// lock cycle and its baseline share the connection (and the server process or thread behind
// it). Internal; a backend offers it by also deriving from RawProbe.
#pragma once

namespace simba::internal {

class RawProbe {
 public:
  virtual ~RawProbe() = default;
  // Runs the primitive once (SQL engines: two one-row UPDATEs of a private row of simba_mutex,
  // each its own transaction) and returns how long it took, in microseconds.
  virtual double raw_once() = 0;
};

}  // namespace simba::internal
