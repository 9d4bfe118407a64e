// The fencing register: five numbers in a file, changed under an exclusive flock.
#include "fencing_register.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

namespace simba::tck {
namespace {

struct Record {
  FencingRegister::Summary summary;
  long inside = 0;
};

}  // namespace

FencingRegister::FencingRegister(std::string path) : path_(std::move(path)) {
  update([](Record&) {});
}

template <class F>
void FencingRegister::update(F&& change) const {
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open the fencing register " + path_);
  if (::flock(fd, LOCK_EX) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot lock the fencing register " + path_);
  }
  char text[256] = {};
  auto n = ::pread(fd, text, sizeof(text) - 1, 0);
  Record record;
  unsigned long long highest = 0;
  if (n > 0 && std::sscanf(text, "%llu %ld %ld %ld %ld", &highest, &record.summary.writes, &record.summary.overlaps,
                           &record.summary.stale, &record.inside) == 5) {
    record.summary.highest = highest;
  }
  change(record);
  int len = std::snprintf(text, sizeof(text), "%llu %ld %ld %ld %ld\n",
                          static_cast<unsigned long long>(record.summary.highest), record.summary.writes,
                          record.summary.overlaps, record.summary.stale, record.inside);
  bool ok = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, text, len, 0) == len;
  ::close(fd);  // also drops the flock
  if (!ok) throw std::runtime_error("cannot write the fencing register " + path_);
}

void FencingRegister::enter(std::uint64_t token) {
  update([&](Record& r) {
    if (r.inside > 0) ++r.summary.overlaps;
    if (token == 0 || token < r.summary.highest) ++r.summary.stale;
    if (token > r.summary.highest) r.summary.highest = token;
    ++r.summary.writes;
    ++r.inside;
  });
}

void FencingRegister::leave() {
  update([](Record& r) { --r.inside; });
}

FencingRegister::Summary FencingRegister::summary() const {
  Summary result;
  update([&](Record& r) { result = r.summary; });
  return result;
}

}  // namespace simba::tck
