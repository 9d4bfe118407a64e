// Records a primitive keeps beside its name.
#include "locks/derived_records.h"

#include <charconv>

#include "simba/error.h"

namespace simba::internal {

namespace {
constexpr std::string_view kInfix = "#";
constexpr char kReader = 'r';
constexpr std::string_view kLine = "wait";
constexpr std::size_t kReaderDigits = 8;

bool whole_number(std::string_view text, unsigned& out) {
  if (text.empty()) return false;
  const auto* last = text.data() + text.size();
  return std::from_chars(text.data(), last, out).ptr == last;
}
}  // namespace

std::string derived_prefix(const std::string& name) { return name + std::string(kInfix); }
std::string reader_prefix(const std::string& name) { return derived_prefix(name) + kReader; }
std::string line_name(const std::string& name) { return derived_prefix(name) + std::string(kLine); }

std::optional<DerivedRecord> derived_record(std::string_view name, std::string_view record) {
  if (record.size() <= name.size() + kInfix.size() || !record.starts_with(name) ||
      record.substr(name.size(), kInfix.size()) != kInfix) {
    return std::nullopt;
  }
  const auto tail = record.substr(name.size() + kInfix.size());
  if (tail == kLine) return DerivedRecord{DerivedRecord::Kind::line};
  if (tail.size() == 1 + kReaderDigits && tail.front() == kReader &&
      tail.find_first_not_of("0123456789abcdef", 1) == std::string_view::npos) {
    return DerivedRecord{DerivedRecord::Kind::reader};
  }
  const auto of = tail.find("of");
  DerivedRecord slot{DerivedRecord::Kind::slot};
  if (of == std::string_view::npos || !whole_number(tail.substr(0, of), slot.slot) ||
      !whole_number(tail.substr(of + 2), slot.permits) || slot.slot >= slot.permits) {
    return std::nullopt;
  }
  return slot;
}

void require_record_fits(const Backend& backend, const std::string& what, const std::string& record) {
  const auto capabilities = backend.capabilities();
  const auto most = capabilities.max_mutex_bytes;
  if (most == 0 || record.size() <= most) return;
  throw Error(errc::invalid_argument, what + ": its records ('" + record + "', " + std::to_string(record.size()) +
                                          " bytes) are longer than " + capabilities.engine + " accepts (" +
                                          std::to_string(most) + "): shorten the name by " +
                                          std::to_string(record.size() - most));
}

}  // namespace simba::internal
