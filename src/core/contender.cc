// Contender ids, name validation and the convenience contenders.
#include "simba/contender.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <random>

#include "simba/error.h"

namespace simba {
namespace contender_id {

std::string host() {
  static std::atomic<std::uint64_t> counter{0};
  static const std::string suffix = [] {
    std::array<char, 256> name{};
    if (gethostname(name.data(), name.size() - 1) != 0) return std::string("@localhost");
    return "@" + std::string(name.data());
  }();
  return std::to_string(counter.fetch_add(1)) + ":" + std::to_string(getpid()) + suffix;
}

std::string uuid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[i] = kHex[(hi >> (60 - 4 * i)) & 0xf];
    out[16 + i] = kHex[(lo >> (60 - 4 * i)) & 0xf];
  }
  return out;
}

}  // namespace contender_id

namespace {

void validate_name(const std::string& name, const char* what) {
  bool blank = std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isspace(c) != 0; });
  if (blank) throw Error(errc::invalid_argument, std::string(what) + " must not be blank");
  if (name.find('\0') != std::string::npos) {
    throw Error(errc::invalid_argument, std::string(what) + " must not contain a NUL byte");
  }
}

}  // namespace

void validate_mutex_name(const std::string& name) { validate_name(name, "mutex name"); }

void validate_contender_id(const std::string& id) {
  validate_name(id, "contender id");
  if (id.find("@@") != std::string::npos) {
    throw Error(errc::invalid_argument, "contender id must not contain \"@@\": '" + id + "'");
  }
}

ContenderBase::ContenderBase(std::string mutex, std::string contender_id)
    : mutex_(std::move(mutex)), contender_id_(std::move(contender_id)) {
  validate_mutex_name(mutex_);
  validate_contender_id(contender_id_);
}

namespace {

class FunctionContender final : public ContenderBase {
 public:
  FunctionContender(std::string mutex, std::string id, std::function<void(const MutexState&)> acquired,
                    std::function<void(const MutexState&)> released)
      : ContenderBase(std::move(mutex), std::move(id)),
        acquired_(std::move(acquired)),
        released_(std::move(released)) {}
  void on_acquired(const MutexState& state) override {
    if (acquired_) acquired_(state);
  }
  void on_released(const MutexState& state) override {
    if (released_) released_(state);
  }

 private:
  std::function<void(const MutexState&)> acquired_, released_;
};

class FunctionRetriever final : public MutexRetriever {
 public:
  FunctionRetriever(std::string mutex, std::function<void(const MutexState&)> on_change)
      : mutex_(std::move(mutex)), on_change_(std::move(on_change)) {
    validate_mutex_name(mutex_);
  }
  const std::string& mutex() const override { return mutex_; }
  void notify_owner(const MutexState& state) override {
    if (on_change_) on_change_(state);
  }

 private:
  std::string mutex_;
  std::function<void(const MutexState&)> on_change_;
};

}  // namespace

std::shared_ptr<MutexContender> make_contender(std::string mutex, std::function<void(const MutexState&)> on_acquired,
                                               std::function<void(const MutexState&)> on_released,
                                               std::string contender_id) {
  return std::make_shared<FunctionContender>(std::move(mutex), std::move(contender_id), std::move(on_acquired),
                                             std::move(on_released));
}

std::shared_ptr<MutexRetriever> make_retriever(std::string mutex, std::function<void(const MutexState&)> on_change) {
  return std::make_shared<FunctionRetriever>(std::move(mutex), std::move(on_change));
}

}  // namespace simba
