// Paths and node names of the ZooKeeper latch.
#include "backends/zookeeper/latch_names.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <random>
#include <string>

namespace simba::zookeeper {
namespace {

constexpr std::string_view kLatch = "-latch-";
constexpr std::string_view kProtected = "_c_";

void percent(std::string& out, unsigned char byte) {
  constexpr char kHex[] = "0123456789ABCDEF";
  out += '%';
  out += kHex[byte >> 4];
  out += kHex[byte & 15];
}

// The length of the valid UTF-8 sequence at `in[i]` whose character ZooKeeper accepts in a
// path (a Java char outside U+0080..U+009F, U+D800..U+F8FF and U+FFF0..U+FFFF; characters
// beyond U+FFFF are surrogate pairs in Java, hence rejected too), or 0.
std::size_t accepted_sequence(std::string_view in, std::size_t i) {
  const auto lead = static_cast<unsigned char>(in[i]);
  std::size_t length;
  std::uint32_t code;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code = lead & 0x0F;
  } else {
    return 0;  // ASCII is handled by the caller; 4-byte sequences are beyond U+FFFF
  }
  if (i + length > in.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(in[i + k]);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3F);
  }
  if (length == 3 && code < 0x800) return 0;  // overlong
  if (code <= 0x9F) return 0;
  if (code >= 0xD800 && code <= 0xF8FF) return 0;
  if (code >= 0xFFF0) return 0;
  return length;
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<Lease> lease_of(std::string_view name, std::size_t latch) {
  // "_c_<32 hex>-<ttl>.<transition>" before "-latch-"
  if (name.substr(0, kProtected.size()) != kProtected) return std::nullopt;
  std::string_view middle = name.substr(kProtected.size(), latch - kProtected.size());
  if (middle.size() < 34 || middle[32] != '-') return std::nullopt;
  std::string_view lease = middle.substr(33);
  auto dot = lease.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view ttl = lease.substr(0, dot), transition = lease.substr(dot + 1);
  if (!all_digits(ttl) || !all_digits(transition) || ttl.size() > 12 || transition.size() > 12) return std::nullopt;
  return Lease{std::chrono::milliseconds(std::stoll(std::string(ttl))),
               std::chrono::milliseconds(std::stoll(std::string(transition)))};
}

}  // namespace

std::string encode_component(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  const bool dots_only = name == "." || name == "..";
  for (std::size_t i = 0; i < name.size();) {
    const auto byte = static_cast<unsigned char>(name[i]);
    if (byte < 0x80) {
      const bool plain = byte > 0x1F && byte != 0x7F && byte != '/' && byte != '%' && !(dots_only && byte == '.');
      if (plain) {
        out += static_cast<char>(byte);
      } else {
        percent(out, byte);
      }
      ++i;
    } else if (auto length = accepted_sequence(name, i)) {
      out.append(name.substr(i, length));
      i += length;
    } else {
      percent(out, byte);
      ++i;
    }
  }
  return out;
}

std::optional<std::string> decode_component(std::string_view component) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(component.size());
  for (std::size_t i = 0; i < component.size(); ++i) {
    if (component[i] != '%') {
      out += component[i];
      continue;
    }
    if (i + 2 >= component.size()) return std::nullopt;
    const int high = hex(component[i + 1]), low = hex(component[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  if (encode_component(out) != component) return std::nullopt;  // not how we would write it
  return out;
}

namespace {

constexpr std::string_view kDerivedRoot = "#derived";

// The '#' that splits "<primitive>#<rest>" (rest not empty), or npos for a name kept flat.
std::size_t nesting_hash(std::string_view mutex) {
  const auto hash = mutex.find('#');
  return hash == std::string_view::npos || hash + 1 == mutex.size() ? std::string_view::npos : hash;
}

}  // namespace

std::string derived_root(std::string_view name) {
  return std::string(kRoot) + "/" + encode_component(name.substr(0, name.find('#'))) + std::string(kDerivedRoot);
}

std::string parent_path(std::string_view path) { return std::string(path.substr(0, path.rfind('/'))); }

std::optional<std::string> primitive_of_derived_root(std::string_view component) {
  if (component.size() <= kDerivedRoot.size() || !component.ends_with(kDerivedRoot)) return std::nullopt;
  const auto primitive = component.substr(0, component.size() - kDerivedRoot.size());
  if (primitive.find('#') != std::string_view::npos) return std::nullopt;
  return decode_component(primitive);
}

std::string latch_path(std::string_view mutex) {
  const auto hash = nesting_hash(mutex);
  if (hash == std::string_view::npos) return std::string(kRoot) + "/" + encode_component(mutex);
  return derived_root(mutex) + "/" + encode_component(mutex.substr(hash + 1));
}

std::vector<std::string> derived_among(std::string_view name, const std::vector<std::string>& children) {
  const std::string_view primitive = name.substr(0, name.find('#'));
  std::vector<std::string> names;
  for (const auto& child : children) {
    auto rest = decode_component(child);
    if (!rest) continue;
    std::string full = std::string(primitive) + "#" + *rest;
    if (derived_from(name, full)) names.push_back(std::move(full));
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool derived_from(std::string_view name, std::string_view candidate) {
  return candidate.size() > name.size() && candidate.compare(0, name.size(), name) == 0 &&
         candidate[name.size()] == '#' && candidate.find('#', name.size() + 1) == std::string_view::npos;
}

std::uint64_t parse_token(const std::string& text) {
  try {
    return text.empty() ? 0 : std::stoull(text);
  } catch (const std::exception&) {
    return 0;  // not ours: someone else's data in the folder
  }
}

Lease capped_lease(std::chrono::milliseconds ttl, std::chrono::milliseconds transition, std::chrono::milliseconds cap) {
  Lease lease{ttl, transition};
  if (lease.total() <= cap || cap.count() <= 1) return lease;
  auto scaled = std::chrono::milliseconds(std::max<std::int64_t>(1, ttl.count() * cap.count() / lease.total().count()));
  return Lease{scaled, cap - scaled};
}

std::string node_prefix(const std::string& guid, const Lease& lease) {
  return std::string(kProtected) + guid + "-" + std::to_string(lease.ttl.count()) + "." +
         std::to_string(lease.transition.count()) + std::string(kLatch);
}

std::string new_guid() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  GuidBytes bytes;
  for (std::size_t half = 0; half < 2; ++half) {
    auto bits = rng();
    for (std::size_t k = 0; k < 8; ++k, bits >>= 8) bytes[half * 8 + k] = static_cast<std::uint8_t>(bits);
  }
  return guid_text(bytes);
}

namespace {
constexpr char kGuidHex[] = "0123456789abcdef";
}  // namespace

std::optional<GuidBytes> guid_bytes(std::string_view guid) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  GuidBytes bytes;
  if (guid.size() != 2 * bytes.size()) return std::nullopt;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int high = digit(guid[2 * i]), low = digit(guid[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes[i] = static_cast<std::uint8_t>(high * 16 + low);
  }
  return bytes;
}

std::string guid_text(const GuidBytes& bytes) {
  std::string text;
  text.reserve(2 * bytes.size());
  for (auto byte : bytes) {
    text += kGuidHex[byte >> 4];
    text += kGuidHex[byte & 15];
  }
  return text;
}

std::string node_name(const std::string& guid, const Lease& lease, std::int32_t sequence) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%010d", sequence);  // as ZooKeeper writes it
  return node_prefix(guid, lease) + digits;
}

std::int64_t sequence_of(std::string_view path) {
  auto latch = path.rfind(kLatch);
  if (latch == std::string_view::npos) return -1;
  std::string_view digits = path.substr(latch + kLatch.size());
  if (!all_digits(digits) || digits.size() > 18) return -1;
  return std::stoll(std::string(digits));
}

std::vector<LatchNode> latch_nodes(const std::vector<std::string>& children) {
  std::vector<LatchNode> nodes;
  nodes.reserve(children.size());
  for (const auto& child : children) {
    auto sequence = sequence_of(child);
    if (sequence < 0) continue;
    nodes.push_back({child, sequence, lease_of(child, child.rfind(kLatch))});
  }
  std::sort(nodes.begin(), nodes.end(), [](const LatchNode& a, const LatchNode& b) {
    return a.sequence != b.sequence ? a.sequence < b.sequence : a.name < b.name;
  });
  return nodes;
}

namespace {
const std::string kIdleMark("\0idle", 5);
}  // namespace

std::string node_data(const std::string& owner_id, bool idle) { return idle ? owner_id + kIdleMark : owner_id; }

NodeData parse_node_data(const std::string& data) {
  if (data.size() >= kIdleMark.size() &&
      data.compare(data.size() - kIdleMark.size(), kIdleMark.size(), kIdleMark) == 0) {
    return {data.substr(0, data.size() - kIdleMark.size()), true};
  }
  return {data, false};
}

}  // namespace simba::zookeeper
