// The simba error category.
#include "simba/error.h"

namespace simba {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "simba"; }
  std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::invalid_argument: return "invalid argument";
      case errc::failed_precondition: return "failed precondition";
      case errc::unavailable: return "backend unavailable";
      case errc::timeout: return "timed out";
      case errc::unsupported: return "unsupported";
      case errc::permission_denied: return "permission denied";
      case errc::internal: return "internal error";
    }
    return "unknown simba error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

std::error_code make_error_code(errc code) noexcept { return {static_cast<int>(code), error_category()}; }

}  // namespace simba
