// The state a core last delivered, kept small (kept_state.h).
#include "core/kept_state.h"

namespace simba::internal {

KeptState::Times KeptState::times_of(const MutexOwner& owner) noexcept {
  return Times{owner.acquired_at, owner.ttl_at, owner.transition_at, owner.fencing_token};
}

MutexOwner KeptState::owner_of(const Times& times, std::string id, bool idle) {
  MutexOwner owner;
  owner.owner_id = std::move(id);
  owner.acquired_at = times.acquired_at;
  owner.ttl_at = times.ttl_at;
  owner.transition_at = times.transition_at;
  owner.fencing_token = times.fencing_token;
  owner.idle = idle;
  return owner;
}

void KeptState::keep(const MutexState& state, const std::string* own_id) {
  before_ours_ = own_id && state.before.is_owner(*own_id);
  after_ours_ = own_id && state.after.is_owner(*own_id);
  const std::string_view before_id = before_ours_ ? std::string_view() : std::string_view(state.before.owner_id);
  const std::string_view after_id = after_ours_ ? std::string_view() : std::string_view(state.after.owner_id);
  if (before_id.empty() && after_id.empty()) {
    std::string().swap(ids_);  // its storage too
  } else {
    ids_.assign(before_id);
    ids_.append(after_id);
  }
  before_size_ = static_cast<std::uint32_t>(before_id.size());
  before_ = times_of(state.before);
  after_ = times_of(state.after);
  before_idle_ = state.before.idle;
  after_idle_ = state.after.idle;
}

MutexOwner KeptState::after(const std::string* own_id) const {
  return owner_of(after_, after_ours_ ? *own_id : ids_.substr(before_size_), after_idle_);
}

MutexState KeptState::state(const std::string* own_id) const {
  return MutexState{owner_of(before_, before_ours_ ? *own_id : ids_.substr(0, before_size_), before_idle_),
                    after(own_id)};
}

}  // namespace simba::internal
