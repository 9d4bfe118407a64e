// simba/asio.h: the lock manager for standalone Asio (Debian's libasio-dev): any completion
// token, completion signature void(std::error_code, simba::Hold) for a mutex and
// void(std::error_code, simba::Permit) for a semaphore's permit.
//
//   asio::awaitable<void> work(simba::Mutex orders, simba::Semaphore payments) {
//     simba::Hold hold = co_await simba::async_lock(orders, 5s, asio::use_awaitable);
//     simba::Permit permit = co_await simba::async_acquire(payments, 5s, asio::use_awaitable);
//     ...  // each ends with its variable
//   }
//
// The completion runs on the handler's associated executor (never on a simba thread), like
// Vert.x returning a lock to the requester's context; the executor counts as having work
// while the request waits. Per-operation cancellation (asio::bind_cancellation_slot,
// asio::experimental::parallel_group, a coroutine's cancellation state) takes the request
// out of the queue and completes it with asio::error::operation_aborted. A timeout completes
// with simba::errc::timeout. No thread blocks while a request waits.
//
// Header-only on top of Mutex::enqueue/cancel and Semaphore::enqueue; include it only where
// Asio is available.
#pragma once

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>

#include "simba/mutex.h"
#include "simba/semaphore.h"

namespace simba {

namespace asio_detail {

// The handler and its executor (holding work) while a request waits: shared, because the
// request's callback must be copyable and an Asio handler may be move-only.
template <class Handler>
struct Pending {
  explicit Pending(Handler h)
      : handler(std::move(h)),
        work(asio::prefer(asio::get_associated_executor(handler), asio::execution::outstanding_work.tracked)) {}
  Handler handler;
  std::atomic<bool> cancelled{false};
  std::decay_t<decltype(asio::prefer(std::declval<asio::associated_executor_t<Handler>>(),
                                     asio::execution::outstanding_work.tracked))>
      work;
};

// On a simba thread: hands the outcome (a Hold or a Permit) to the handler's own executor.
template <class Operation, class Value>
void complete(const std::shared_ptr<Operation>& op, std::error_code error, Value value) {
  auto executor = op->work;
  asio::post(executor, [op, error, value = std::make_shared<Value>(std::move(value))]() mutable {
    asio::get_associated_cancellation_slot(op->handler).clear();
    std::move(op->handler)(error, std::move(*value));
  });
}

// A lock request: its ticket in the mutex's queue once queued.
template <class Handler>
struct Operation : Pending<Handler> {
  using Pending<Handler>::Pending;
  std::atomic<std::uint64_t> ticket{0};
};

struct Initiate {
  template <class Handler>
  void operator()(Handler&& handler, Mutex mutex, std::chrono::milliseconds timeout) const {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<Operation<std::decay_t<Handler>>>(std::forward<Handler>(handler));
    // The slot is ready before the request is queued: a cancellation in between is kept.
    if (slot.is_connected()) {
      slot.assign([op, mutex](asio::cancellation_type type) {
        if (type == asio::cancellation_type::none) return;
        op->cancelled.store(true);
        if (auto ticket = op->ticket.load()) mutex.cancel(ticket, asio::error::operation_aborted);
      });
    }
    std::uint64_t ticket =
        mutex.enqueue(timeout, [op](std::error_code error, Hold hold) { complete(op, error, std::move(hold)); });
    op->ticket.store(ticket);
    if (op->cancelled.load()) mutex.cancel(ticket, asio::error::operation_aborted);
  }
};

// A permit request: how to withdraw it once started.
template <class Handler>
struct PermitOperation : Pending<Handler> {
  using Pending<Handler>::Pending;
  std::mutex mutex;
  std::function<void()> withdraw;  // guarded by `mutex`; set once the request started

  void withdraw_if_started() {
    std::function<void()> started;
    {
      std::lock_guard lock(mutex);
      started = withdraw;
    }
    if (started) started();
  }
};

struct InitiateAcquire {
  template <class Handler>
  void operator()(Handler&& handler, Semaphore semaphore, std::chrono::milliseconds timeout) const {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto op = std::make_shared<PermitOperation<std::decay_t<Handler>>>(std::forward<Handler>(handler));
    if (slot.is_connected()) {
      slot.assign([op](asio::cancellation_type type) {
        if (type == asio::cancellation_type::none) return;
        op->cancelled.store(true);
        op->withdraw_if_started();
      });
    }
    auto withdraw = semaphore.enqueue(timeout, [op](std::error_code error, Permit permit) {
      if (error == std::errc::operation_canceled && op->cancelled.load()) error = asio::error::operation_aborted;
      complete(op, error, std::move(permit));
    });
    {
      std::lock_guard lock(op->mutex);
      op->withdraw = withdraw;
    }
    if (op->cancelled.load()) withdraw();
  }
};

}  // namespace asio_detail

// Takes `mutex`, waiting up to `timeout`; completes with (error, Hold).
template <class Rep, class Period, class CompletionToken>
auto async_lock(Mutex mutex, std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, Hold)>(
      asio_detail::Initiate{}, token, std::move(mutex), std::chrono::ceil<std::chrono::milliseconds>(timeout));
}

// Takes a permit of `semaphore`, waiting up to `timeout`; completes with (error, Permit). A
// cancelled request is withdrawn from every slot (a slot granted meanwhile is given back) and
// completes with asio::error::operation_aborted.
template <class Rep, class Period, class CompletionToken>
auto async_acquire(Semaphore semaphore, std::chrono::duration<Rep, Period> timeout, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::error_code, Permit)>(
      asio_detail::InitiateAcquire{}, token, std::move(semaphore),
      std::chrono::ceil<std::chrono::milliseconds>(timeout));
}

}  // namespace simba
