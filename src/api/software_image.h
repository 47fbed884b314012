#pragma once

// The node software hpod names as an image (UpdateClusterSoftware, ImageId):
// the programs hpod puts on a node, each by the SHA-256 of its file. An image
// id has the model's ImageId pattern (`ami-` + 17 hex), made of those digests,
// so hpodd (from the files it ships) and an agent (from the files it runs)
// name the same software with the same id, with nothing to look up.
//
// Thread contract: free functions, pure; safe from any thread.

#include <map>
#include <string>
#include <vector>

namespace hpod::api {

// The programs of an image, by the name each has on a node.
inline const std::vector<std::string>& SoftwareNames() {
  static const std::vector<std::string> kNames = {"hpod-agent", "spank_hpod.so", "hpod-container",
                                                  "hpod-deep-check"};
  return kNames;
}

// name → lowercase hex SHA-256 of the file. Names outside SoftwareNames() are
// ignored, so an agent that reports more does not change the id.
using SoftwareDigests = std::map<std::string, std::string>;

// "ami-" + the first 17 hex of SHA-256 over "<name> <digest>\n" for each known
// name present, in name order; "" when none is present.
std::string ImageIdOf(const SoftwareDigests& digests);

}  // namespace hpod::api
