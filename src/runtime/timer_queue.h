// The runtime's pending timers, earliest first. Internal; not thread-safe (the runtime's timer
// state guards it).
//
// A binary heap of (deadline, order, slot) over a slab of slots that hold the tasks: adding
// and cancelling cost O(log n) and no allocation once the vectors have grown, about 70 bytes
// a timer. Every held lease keeps one pending (its renewal); a std::map keyed by deadline
// with an index by id cost about 170, in three allocations.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <variant>
#include <vector>

namespace simba::internal {

class TimerQueue {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = std::uint64_t;  // never 0

  // A call of fire(target, arg) if `target` still lives when the timer fires. Unlike a
  // std::function that captures a weak_ptr, it needs no allocation of its own.
  struct WeakCall {
    std::weak_ptr<void> target;
    void (*fire)(void* target, std::uint64_t arg) = nullptr;
    std::uint64_t arg = 0;
  };
  using Task = std::variant<std::function<void()>, WeakCall>;

  // Adds a timer due at `deadline`. Of timers with one deadline, the one added first comes out first.
  Id add(Clock::time_point deadline, Task task);
  // Takes out the timer `id` if it is pending, its task into `*dropped` (for the caller to
  // destroy outside its lock). False if it fired or was cancelled already.
  bool cancel(Id id, Task* dropped);

  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  // The earliest deadline. Not empty().
  Clock::time_point next_deadline() const { return heap_.front().deadline; }
  // Takes out the earliest timer and returns its task. Not empty().
  Task pop();
  // Takes out every timer.
  std::vector<Task> clear();

 private:
  struct Entry {
    Clock::time_point deadline;
    std::uint32_t order;  // when added, wrapping: ties go in adding order
    std::uint32_t slot;
  };
  struct Slot {
    Task task;
    std::uint32_t heap_index = 0;
    std::uint32_t generation = 1;  // of the timer in it (or to come): the id's upper half
  };

  static bool before(const Entry& a, const Entry& b) {
    if (a.deadline != b.deadline) return a.deadline < b.deadline;
    return static_cast<std::int32_t>(a.order - b.order) < 0;
  }
  void place(std::size_t index, Entry entry);
  void sift_up(std::size_t index);
  void sift_down(std::size_t index);
  // Takes heap_[index] out of the heap and frees its slot; returns its task.
  Task remove(std::size_t index);

  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint32_t next_order_ = 0;
};

// What the I/O pool runs for a task that fired: a WeakCall locks its target first.
std::function<void()> runnable(TimerQueue::Task task);

}  // namespace simba::internal
