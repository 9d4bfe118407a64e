// The runtime's pending timers: see timer_queue.h.
#include "runtime/timer_queue.h"

#include <limits>
#include <stdexcept>

namespace simba::internal {

TimerQueue::Id TimerQueue::add(Clock::time_point deadline, Task task) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (slots_.size() >= std::numeric_limits<std::uint32_t>::max()) throw std::length_error("too many timers");
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot].task = std::move(task);
  heap_.push_back(Entry{deadline, next_order_++, slot});
  slots_[slot].heap_index = static_cast<std::uint32_t>(heap_.size() - 1);
  sift_up(heap_.size() - 1);
  return (static_cast<Id>(slots_[slot].generation) << 32) | slot;
}

bool TimerQueue::cancel(Id id, Task* dropped) {
  const auto slot = static_cast<std::uint32_t>(id & 0xffffffffu);
  const auto generation = static_cast<std::uint32_t>(id >> 32);
  if (slot >= slots_.size() || slots_[slot].generation != generation) return false;
  const std::size_t index = slots_[slot].heap_index;
  // A free slot keeps the generation of its next timer, which no issued id carries yet; this
  // check is for ids never issued.
  if (index >= heap_.size() || heap_[index].slot != slot) return false;
  *dropped = remove(index);
  return true;
}

TimerQueue::Task TimerQueue::pop() { return remove(0); }

std::vector<TimerQueue::Task> TimerQueue::clear() {
  std::vector<Task> tasks;
  tasks.reserve(heap_.size());
  while (!heap_.empty()) tasks.push_back(remove(heap_.size() - 1));
  return tasks;
}

void TimerQueue::place(std::size_t index, Entry entry) {
  slots_[entry.slot].heap_index = static_cast<std::uint32_t>(index);
  heap_[index] = entry;
}

void TimerQueue::sift_up(std::size_t index) {
  const Entry entry = heap_[index];
  while (index > 0) {
    const std::size_t parent = (index - 1) / 2;
    if (!before(entry, heap_[parent])) break;
    place(index, heap_[parent]);
    index = parent;
  }
  place(index, entry);
}

void TimerQueue::sift_down(std::size_t index) {
  const Entry entry = heap_[index];
  const std::size_t size = heap_.size();
  for (;;) {
    std::size_t child = 2 * index + 1;
    if (child >= size) break;
    if (child + 1 < size && before(heap_[child + 1], heap_[child])) ++child;
    if (!before(heap_[child], entry)) break;
    place(index, heap_[child]);
    index = child;
  }
  place(index, entry);
}

TimerQueue::Task TimerQueue::remove(std::size_t index) {
  const std::uint32_t slot = heap_[index].slot;
  Task task = std::move(slots_[slot].task);
  slots_[slot].task = Task{};
  // The id of the timer it held is spent: the slot's next timer gets a new one.
  if (++slots_[slot].generation == 0) slots_[slot].generation = 1;
  free_slots_.push_back(slot);
  const std::size_t last = heap_.size() - 1;
  if (index != last) {
    place(index, heap_[last]);
    heap_.pop_back();
    if (index > 0 && before(heap_[index], heap_[(index - 1) / 2])) {
      sift_up(index);
    } else {
      sift_down(index);
    }
  } else {
    heap_.pop_back();
  }
  return task;
}

std::function<void()> runnable(TimerQueue::Task task) {
  if (auto* function = std::get_if<std::function<void()>>(&task)) return std::move(*function);
  auto call = std::get<TimerQueue::WeakCall>(std::move(task));
  return [call = std::move(call)] {
    if (auto target = call.target.lock()) call.fire(target.get(), call.arg);
  };
}

}  // namespace simba::internal
