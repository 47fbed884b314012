#pragma once

// Turning an image reference into a root filesystem with Debian's tools: skopeo
// (registries, archives, the Docker daemon → an OCI layout), umoci (the layout's
// layers → a directory, whiteouts applied), squashfs-tools (.sqsh ↔ directory).
// Why these: they are packaged in Debian 12, each does one documented step, and
// none needs a daemon; enroot's own importer is not packaged.
//
// Thread contract: free functions; each call works in its own directory.

#include <cstdint>
#include <string>

#include "hpod/base/status.h"
#include "hpod/container/image_ref.h"
#include "hpod/container/image_store.h"

namespace hpod::container {

// Unpacks `ref` into `work/rootfs` (created), using `work` for the layout; fills
// `config` from the image (or, for a .sqsh, from the files in it).
Status FetchRootfs(const ImageRef& ref, const std::string& work, const FetchOptions& options,
                   ImageConfig* config);

// What skopeo inspect says of a registry/daemon/archive image: its manifest
// digest (hex only) and the sum of its compressed layers (0 when not given).
struct RemoteImage {
  std::string digest;
  uint64_t layer_bytes = 0;
};
StatusOr<RemoteImage> InspectRemote(const ImageRef& ref, const FetchOptions& options);

// Records `config` in the rootfs: /etc/hpod-container/image.json, and the env in
// /etc/environment as enroot does (so enroot reads our images too).
Status WriteRootfsConfig(const std::string& rootfs, const ImageConfig& config);

// Bytes used under `path` (st_blocks, hard links once).
uint64_t DiskUsage(const std::string& path);

}  // namespace hpod::container
