// simba/contender.h: the objects that watch or contend for a mutex.
//
// A MutexRetriever is told about every change of owner of one mutex. A MutexContender also
// has an identity and, by default, routes changes that concern it to on_acquired/on_released.
// Callbacks run on the runtime's callback executor, one at a time and in order per service,
// never on a thread that talks to the backend. They should return promptly.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "simba/owner.h"

namespace simba {

class MutexRetriever {
 public:
  virtual ~MutexRetriever() = default;
  virtual const std::string& mutex() const = 0;
  virtual void notify_owner(const MutexState& state) = 0;
};

class MutexContender : public MutexRetriever {
 public:
  virtual const std::string& contender_id() const = 0;
  virtual void on_acquired(const MutexState& /*state*/) {}
  virtual void on_released(const MutexState& /*state*/) {}

  // Ignores unchanged states; on_acquired if this contender became owner, on_released if it
  // stopped being owner.
  void notify_owner(const MutexState& state) override {
    if (!state.changed()) return;
    if (state.acquired(contender_id())) on_acquired(state);
    if (state.released(contender_id())) on_released(state);
  }
};

// Contender ids. host(): "{counter}:{pid}@{host}" with a process-wide counter, so every call
// yields a new id. uuid(): 32 lower-case hex digits of a random (version 4) UUID.
namespace contender_id {
std::string host();
std::string uuid();
}  // namespace contender_id

// Throws Error(errc::invalid_argument) naming `what` if `name` is blank (empty or only
// whitespace) or holds a NUL byte. Contender ids additionally may not contain "@@".
void validate_mutex_name(const std::string& name);
void validate_contender_id(const std::string& id);

// A convenience base: stores and validates the mutex name and contender id.
class ContenderBase : public MutexContender {
 public:
  explicit ContenderBase(std::string mutex, std::string contender_id = contender_id::host());
  const std::string& mutex() const final { return mutex_; }
  const std::string& contender_id() const final { return contender_id_; }

 private:
  std::string mutex_;
  std::string contender_id_;
};

// A contender from two functions; either may be empty.
std::shared_ptr<MutexContender> make_contender(std::string mutex, std::function<void(const MutexState&)> on_acquired,
                                               std::function<void(const MutexState&)> on_released = {},
                                               std::string contender_id = contender_id::host());

// A retriever from one function.
std::shared_ptr<MutexRetriever> make_retriever(std::string mutex, std::function<void(const MutexState&)> on_change);

}  // namespace simba
