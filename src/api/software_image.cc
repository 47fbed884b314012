#include "hpod/api/software_image.h"

#include <algorithm>

#include "hpod/base/crypto.h"

namespace hpod::api {

std::string ImageIdOf(const SoftwareDigests& digests) {
  std::string text;
  for (const auto& [name, digest] : digests) {  // std::map: name order
    const auto& known = SoftwareNames();
    if (std::find(known.begin(), known.end(), name) == known.end()) continue;
    text += name + " " + digest + "\n";
  }
  if (text.empty()) return "";
  return "ami-" + HexEncode(Sha256(text)).substr(0, 17);
}

}  // namespace hpod::api
