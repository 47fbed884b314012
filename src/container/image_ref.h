#pragma once

// Image references as enroot and pyxis users write them.
//
//   /fsx/images/x.sqsh, ./x.sqsh        a squashfs file (enroot's image format)
//   docker://[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]
//   [USER@][REGISTRY#]IMAGE[:TAG]        (srun --container-image: docker:// implied)
//   dockerd://IMAGE[:TAG]                from the Docker daemon on the node
//   docker-archive:FILE, oci-archive:FILE  (enroot import only)
//
// enroot separates the registry from the image with '#', so that
// "nvcr.io#nvidia/pytorch:24.01-py3" is never mistaken for a Docker Hub image
// named "nvcr.io/nvidia/pytorch". Without a registry the image is Docker Hub's,
// and a one-part name is an official image ("ubuntu" → "library/ubuntu").
//
// Thread contract: plain values and pure functions.

#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod::container {

struct ImageRef {
  enum class Kind { kSquashfs, kDocker, kDockerd, kDockerArchive, kOciArchive };
  Kind kind = Kind::kSquashfs;
  std::string path;      // kSquashfs, kDockerArchive, kOciArchive
  std::string user;      // kDocker: the USER@ part (credentials for that login)
  std::string registry;  // kDocker: host[:port]; "docker.io" when none was given
  std::string image;     // kDocker, kDockerd: repository path
  std::string tag;       // kDocker, kDockerd: "latest" when neither tag nor digest
  std::string digest;    // kDocker: sha256:... when pinned

  // The reference as skopeo's source transport takes it.
  std::string SkopeoSource() const;
  // The reference in enroot's syntax, as a user would type it again.
  std::string ToString() const;
};

// Parses an `hpod-container import` URI: a scheme is required for everything but a
// path to a squashfs file. kInvalidArgument says what is wrong and what is expected.
StatusOr<ImageRef> ParseImportUri(std::string_view uri);

// Parses `--container-image`: as above, and a bare IMAGE is a docker:// one (pyxis).
// A value starting with '/' or '.' is a squashfs file.
StatusOr<ImageRef> ParseContainerImage(std::string_view value);

}  // namespace hpod::container
