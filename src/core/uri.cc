// Parsing backend URIs.
#include "core/uri.h"

#include <cctype>
#include <cstdio>
#include <fstream>

#include "simba/error.h"

namespace simba::internal {
namespace {

Error bad(const std::string& why) { return Error(errc::invalid_argument, "invalid backend URI: " + why); }

std::string decode(std::string_view in, bool plus_is_space) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
        throw bad("bad percent-escape");
      }
      out.push_back(static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else if (plus_is_space && in[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

}  // namespace

Uri parse_uri(std::string_view text) {
  Uri uri;
  // A control character is never part of a host, path or option (write it %-escaped where a
  // name needs one); found by fuzzing, where it passed on to the engine.
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", c);
      throw bad("control character " + std::string(hex) + " at byte " + std::to_string(i));
    }
  }
  auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    throw bad("'" + std::string(text.substr(0, 64)) + "' has no scheme (like sqlite:///path/file.db)");
  }
  if (!std::isalpha(static_cast<unsigned char>(text[0]))) throw bad("a scheme starts with a letter");
  for (char c : text.substr(0, colon)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      throw bad("scheme contains '" + std::string(1, c) + "'");
    }
    uri.scheme.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  std::string_view rest = text.substr(colon + 1);
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      auto amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      if (pair.empty()) continue;
      auto eq = pair.find('=');
      if (eq == std::string_view::npos || eq == 0) throw bad("query item '" + std::string(pair) + "' is not key=value");
      std::string key = decode(pair.substr(0, eq), true);
      if (uri.query.count(key)) throw bad("option '" + key + "' given twice");
      uri.query[key] = decode(pair.substr(eq + 1), true);
    }
  }
  if (rest.substr(0, 2) == "//") {
    uri.has_authority = true;
    rest = rest.substr(2);
    auto slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    uri.path = slash == std::string_view::npos ? "" : decode(rest.substr(slash), false);
    if (auto at = authority.rfind('@'); at != std::string_view::npos) {
      std::string_view userinfo = authority.substr(0, at);
      authority = authority.substr(at + 1);
      auto c = userinfo.find(':');
      uri.user = decode(userinfo.substr(0, c), false);
      if (c != std::string_view::npos) {
        uri.has_password = true;
        uri.password = decode(userinfo.substr(c + 1), false);
      }
    }
    // host[:port], with [v6] literals.
    std::string_view host = authority;
    std::string_view port;
    if (!host.empty() && host.front() == '[') {
      auto close = host.find(']');
      if (close == std::string_view::npos) throw bad("unclosed '[' in host");
      port = host.substr(close + 1);
      host = host.substr(1, close - 1);
      if (!port.empty() && port.front() != ':') throw bad("junk after ']' in host");
      if (!port.empty()) port = port.substr(1);
    } else if (auto c = host.rfind(':'); c != std::string_view::npos && host.find(',') == std::string_view::npos) {
      // (A host list, ZooKeeper's "h1:2181,h2:2181", stays whole, ports and all.)
      port = host.substr(c + 1);
      host = host.substr(0, c);
    }
    uri.host = decode(host, false);
    if (!port.empty()) {
      int value = 0;
      for (char c : port) {
        if (!std::isdigit(static_cast<unsigned char>(c)) || value > 65535)
          throw bad("port '" + std::string(port) + "' is not a number from 1 to 65535");
        value = value * 10 + (c - '0');
      }
      if (value < 1 || value > 65535) throw bad("port '" + std::string(port) + "' is not a number from 1 to 65535");
      uri.port = value;
    }
  } else {
    uri.path = decode(rest, false);
  }
  return uri;
}

std::string Uri::redacted() const {
  std::string out = scheme + ":";
  if (has_authority) {
    out += "//";
    if (!user.empty() || has_password) out += user + (has_password ? ":***" : "") + "@";
    const bool ipv6 = host.find(':') != std::string::npos && host.find(',') == std::string::npos;
    out += ipv6 ? "[" + host + "]" : host;
    if (port != 0) out += ":" + std::to_string(port);
  }
  out += path;
  return out;
}

std::string first_line_of(const std::string& path, const std::string& what) {
  std::ifstream file(path);
  if (!file) throw Error(errc::invalid_argument, what + " '" + path + "' cannot be read");
  std::string line;
  std::getline(file, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty()) throw Error(errc::invalid_argument, what + " '" + path + "' has an empty first line");
  return line;
}

}  // namespace simba::internal
