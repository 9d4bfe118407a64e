// Unit tests of SQLite's file handling (built with the SQLite engine).
#include <gtest/gtest.h>

#include <filesystem>

#include "kit.h"
#include "simba/sqlite_backend.h"

namespace simba {
namespace {

using namespace std::chrono_literals;

TEST(SqliteBackendTest, TwoConnectionsToOneFileShareTheLease) {
  auto path = std::filesystem::temp_directory_path() / ("simba-unit-" + std::to_string(getpid()) + ".db");
  std::filesystem::remove(path);
  SqliteOptions options;
  options.path = path.string();
  auto first = make_sqlite_backend(options);
  auto second = make_sqlite_backend(options);
  EXPECT_EQ(first->push(), nullptr);
  EXPECT_TRUE(first->capabilities().multi_process);
  const MutexOwner held = first->acquire("m", "a", 10s, 0ms).owner;
  EXPECT_EQ(held.owner_id, "a");
  EXPECT_GE(held.fencing_token, 1'000'000'000'000'000u);  // a new row's token starts at the clock (ms x 1000)
  EXPECT_EQ(second->acquire("m", "b", 10s, 0ms).owner.owner_id, "a");
  EXPECT_FALSE(second->release("m", "b"));
  EXPECT_TRUE(first->release("m", "a"));
  auto taken = second->acquire("m", "b", 10s, 0ms).owner;
  EXPECT_EQ(taken.owner_id, "b");
  EXPECT_EQ(taken.fencing_token, held.fencing_token + 1);
  EXPECT_EQ(second->watch("m", "", [](WatchEvent) {}), nullptr);
  first.reset();
  second.reset();
  for (auto suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
}

TEST(SqliteBackendTest, UnopenablePathIsUnavailableAndNamesThePath) {
  SqliteOptions options;
  options.path = "/nonexistent-simba-dir/sub/x.db";
  try {
    make_sqlite_backend(options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::unavailable);
    EXPECT_NE(std::string(e.what()).find(options.path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace simba
