// simba-tck: runs the conformance kit against one backend.
//   simba-tck --backend URI [GoogleTest flags...]
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>

#include "kit.h"

int main(int argc, char** argv) {
  std::vector<char*> rest;
  std::string uri = "memory:";
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
  try {
    simba::open_backend(uri);
  } catch (const std::exception& e) {
    std::cerr << "simba-tck: " << e.what() << "\n";
    return 2;
  }
  simba::tck::set_backend_uri(uri);
  std::cout << "simba-tck: backend " << uri << "\n";
  return RUN_ALL_TESTS();
}
