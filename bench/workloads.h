// simba-bench's workloads: each returns one JSON line.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "simba/simba.h"

namespace simba::bench {

// Locker acquire + release, interleaved in blocks with the engine's bare primitive.
nlohmann::json cycle(const Client& client, const std::string& engine, std::size_t n);
// Release by the owner to the next owner's on_acquired.
nlohmann::json handover(const Client& client, const std::string& engine, std::size_t n);
// The owner vanishes without releasing; the waiter takes over once the lease runs out.
nlohmann::json takeover(const Client& client, const std::string& engine, std::size_t n);
// A `simba lock` process (the CLI beside this binary, on `uri`) SIGKILLed while it holds.
nlohmann::json kill(const Client& client, const std::string& uri, const std::string& engine, std::size_t n);
// One process holds `n` mutexes for `duration`.
nlohmann::json scale(const Client& client, const std::string& engine, std::size_t n, std::chrono::seconds duration);

// `threads` threads of one process take one mutex over and over: client.mutex() beside one
// Locker per thread, holds per second of each.
nlohmann::json contended(const Client& client, const std::string& engine, std::size_t threads,
                         std::chrono::milliseconds duration);
// `threads` threads of one process, one Client, each taking a mutex of its own over and over
// through a Locker: holds per second, and `scaling` against `one_thread_per_s` (a run with one
// thread; 0: not reported). Nothing is contended but what the lock manager shares.
nlohmann::json parallel(const Client& client, const std::string& engine, std::size_t threads,
                        std::chrono::milliseconds duration, double one_thread_per_s);
// `requests` concurrent lock_async over `names` mutexes, each with `timeout`: how many
// completed or timed out, and the most threads the process had meanwhile.
nlohmann::json async_requests(const Client& client, const std::string& engine, std::size_t requests, std::size_t names,
                              std::chrono::milliseconds timeout);

// Lock caching (caching.cc). A cached re-lock (lock + unlock) against a std::mutex's, per
// operation; two processes taking turns, handover with caching on and off; another process
// asking for a lease the first caches, from its request to its hold.
nlohmann::json relock(const Client& client, const std::string& engine, std::size_t n);
nlohmann::json pingpong(const Client& client, const std::string& uri, const std::string& engine, std::size_t n);
nlohmann::json remote_ask(const Client& client, const std::string& uri, const std::string& engine, std::size_t n);

// A semaphore of 4 permits: its acquire + release cycle against an uncached mutex's, the
// handover of its one permit to another process (on `uri`) against a mutex's, and 16 threads
// in each of 3 processes through 4 permits for `throughput_for` (semaphores.cc).
nlohmann::json semaphore(const Client& client, const std::string& uri, const std::string& engine, std::size_t n,
                         std::chrono::milliseconds throughput_for);
// A shared mutex: its write and read cycles against an uncached mutex's, and the write lock's
// handover to a writer in another process against a mutex's (semaphores.cc).
nlohmann::json rwlock(const Client& client, const std::string& uri, const std::string& engine, std::size_t n);

}  // namespace simba::bench
