#include "hpod/slurm/spank/options.h"

namespace hpod::spank {

std::string AutoResumeError(std::string_view value) {
  return "[Auto Resume] Error: --auto-resume=" + std::string(value) +
         ": expected the number of retries (0, 1, 2, ...)";
}

StatusOr<int> ParseAutoResume(std::string_view value) {
  if (value.empty()) return InvalidArgumentError(AutoResumeError(value));
  long n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return InvalidArgumentError(AutoResumeError(value));
    n = n * 10 + (c - '0');
    // Checked per digit so that a long string of digits cannot overflow.
    if (n > kMaxAutoResume) {
      return InvalidArgumentError("[Auto Resume] Error: --auto-resume=" + std::string(value) +
                                  ": at most " + std::to_string(kMaxAutoResume) + " retries");
    }
  }
  return static_cast<int>(n);
}

}  // namespace hpod::spank
