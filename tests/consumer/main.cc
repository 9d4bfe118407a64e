// A user's program: locks a mutex on every engine it is given a URI for (memory: and a SQLite
// file by default) and prints what it held. Exits non-zero on any failure.
#include <simba/simba.h>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  std::vector<std::string> uris = {"memory:"};
  for (int i = 1; i < argc; ++i) uris.push_back(argv[i]);
  try {
    for (const auto& uri : uris) {
      simba::Client client =
          simba::connect(uri + (uri.find('?') == std::string::npos ? "?" : "&") + "ttl=2s&transition=1s");
      simba::Locker locker("consumer", client);
      locker.acquire(std::chrono::seconds(5));
      std::cout << "simba " << simba::kVersion << ": held 'consumer' on " << client.describe() << " with fencing token "
                << locker.fencing_token() << "\n";
      locker.close();
    }
  } catch (const simba::Error& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
