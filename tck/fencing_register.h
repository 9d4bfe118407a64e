// A stand-in for the storage a lock protects: it keeps the highest fencing token written and
// counts what a broken lock would cause: two holders inside at once, and writes with a token
// lower than one already seen. A file under flock(2), so threads and processes share it.
#pragma once

#include <cstdint>
#include <string>

namespace simba::tck {

class FencingRegister {
 public:
  struct Summary {
    std::uint64_t highest = 0;  // highest token written
    long writes = 0;
    long overlaps = 0;  // an enter() while another holder was inside
    long stale = 0;     // an enter() with a token below `highest`, or 0
  };

  // A register in `path` (created empty if missing).
  explicit FencingRegister(std::string path);

  // A holder with `token` enters the critical section, and leaves it.
  void enter(std::uint64_t token);
  void leave();
  Summary summary() const;
  const std::string& path() const { return path_; }

 private:
  template <class F>
  void update(F&& change) const;

  std::string path_;
};

}  // namespace simba::tck
