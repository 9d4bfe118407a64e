#include "backends/etcd/names.h"

#include <charconv>
#include <cstdio>

namespace simba::etcd {
namespace {

bool needs_escape(unsigned char c) { return c <= 0x20 || c == 0x7f || c == '/' || c == '%'; }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lower case is not what encode_name writes: not an encoding
}

}  // namespace

std::string encode_name(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (needs_escape(c)) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::optional<std::string> decode_name(std::string_view component) {
  std::string out;
  out.reserve(component.size());
  for (std::size_t i = 0; i < component.size(); ++i) {
    const char ch = component[i];
    if (ch == '/') return std::nullopt;
    if (ch != '%') {
      if (needs_escape(static_cast<unsigned char>(ch))) return std::nullopt;
      out += ch;
      continue;
    }
    if (i + 2 >= component.size()) return std::nullopt;
    const int high = hex_digit(component[i + 1]);
    const int low = hex_digit(component[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    const auto c = static_cast<unsigned char>(high * 16 + low);
    if (!needs_escape(c)) return std::nullopt;  // not how encode_name writes it
    out += static_cast<char>(c);
    i += 2;
  }
  return out;
}

std::string MutexKeys::contender(std::int64_t lease) const { return contended + lease_hex(lease); }

MutexKeys mutex_keys(std::string_view prefix, std::string_view name) {
  MutexKeys keys;
  keys.record = std::string(prefix) + "/" + encode_name(name);
  keys.contended = keys.record + "/";
  keys.end = prefix_end(keys.contended);
  return keys;
}

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

std::string lease_hex(std::int64_t lease) {
  char buffer[17];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, static_cast<std::uint64_t>(lease), 16);
  (void)ec;
  return std::string(buffer, end);
}

std::string contender_value(const std::string& id, bool idle) { return idle ? id + std::string("\0idle", 5) : id; }

KeyValue parse_contender(std::string_view value, std::int64_t lease) {
  KeyValue out;
  if (value.empty()) {
    out.owner_id = "lease:" + lease_hex(lease);
    return out;
  }
  static constexpr std::string_view kIdle("\0idle", 5);
  if (value.ends_with(kIdle)) {
    out.idle = true;
    value.remove_suffix(kIdle.size());
  }
  out.owner_id = std::string(value);
  return out;
}

std::string record_value(const Record& record) {
  return std::to_string(record.token) + " " + std::to_string(record.released_at);
}

Record parse_record(std::string_view value) {
  Record out;
  const auto space = value.find(' ');
  const std::string_view token = value.substr(0, space);
  std::from_chars(token.data(), token.data() + token.size(), out.token);
  if (space != std::string_view::npos) {
    const std::string_view at = value.substr(space + 1);
    std::from_chars(at.data(), at.data() + at.size(), out.released_at);
  }
  return out;
}

}  // namespace simba::etcd
