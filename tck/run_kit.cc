// run_kit(): the kit's main(), for simba-tck and for a program that proves its own Backend.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cases.h"
#include "kit.h"

namespace simba::tck {

int run_kit(int argc, char** argv) {
  // Every case file, linked (their tests register as they load).
  int linked = link_batch_cases() + link_cache_cases() + link_connect_cases() + link_contend_cases() +
               link_locker_cases() + link_lock_cases() + link_records_cases() + link_semaphore_cases() +
               link_rwlock_cases();
#ifdef SIMBA_TCK_WITH_ASIO
  linked += link_lock_asio_cases();
#endif
  (void)linked;
  std::vector<char*> rest;
  std::string uri = backend_uri();  // empty while a factory is set
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      uri = argv[++i];
    } else if (std::strncmp(argv[i], "--backend=", 10) == 0) {
      uri = argv[i] + 10;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  rest.push_back(nullptr);  // argv[argc] must be null: GoogleTest reads it when it drops its flags
  ::testing::InitGoogleTest(&rest_argc, rest.data());
  if (!uri.empty()) set_backend_uri(uri);
  std::string what;
  try {
    what = make_backend()->describe();
  } catch (const std::exception& e) {
    std::cerr << "simba-tck: " << e.what() << "\n";
    return 2;
  }
  std::cout << "simba-tck: backend " << what << "\n";
  return RUN_ALL_TESTS();
}

int run_kit(int argc, char** argv, BackendFactory factory) {
  set_backend_factory(std::move(factory));
  return run_kit(argc, argv);
}

}  // namespace simba::tck
