// Backend URIs: scheme://[user[:password]@]host[:port][/path][?key=value&...]; "host" may be
// a list "h1:2181,h2" (ZooKeeper), kept whole with its ports (`port` is then 0).
// Internal to simba. Every part is percent-decoded; the password never appears in redacted().
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace simba::internal {

struct Uri {
  std::string scheme;
  bool has_authority = false;  // "//" followed the scheme
  std::string user;
  std::string password;
  bool has_password = false;
  std::string host;
  int port = 0;      // 0: none given
  std::string path;  // With its leading '/', if any; for "memory:NAME" it is "NAME".
  std::map<std::string, std::string> query;

  // The URI with the password replaced by "***"; safe for messages and logs.
  std::string redacted() const;
};

// The first line of a file (a password or a URI kept off the command line), without its line
// end. Error(errc::invalid_argument) naming `what` and the path if it cannot be read or the
// line is empty.
std::string first_line_of(const std::string& path, const std::string& what);

// Throws Error(errc::invalid_argument) naming what is malformed (never echoing a password).
Uri parse_uri(std::string_view text);

}  // namespace simba::internal
