#include "hpod/container/image_ref.h"

#include <cctype>

namespace hpod::container {
namespace {

bool ValidRepoChar(char c) {
  return std::islower(static_cast<unsigned char>(c)) ||
         std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
         c == '/';
}

StatusOr<ImageRef> ParseDocker(std::string_view s, std::string_view original) {
  ImageRef r;
  r.kind = ImageRef::Kind::kDocker;
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("image " + std::string(original) + ": " + why +
                                " (expected [USER@][REGISTRY#]IMAGE[:TAG], e.g. "
                                "nvcr.io#nvidia/pytorch:24.01-py3)");
  };
  // USER@ comes first; an '@' that starts a digest ("@sha256:...") is not one.
  if (size_t at = s.find('@');
      at != std::string_view::npos && s.substr(at + 1).rfind("sha256:", 0) != 0) {
    r.user = std::string(s.substr(0, at));
    s.remove_prefix(at + 1);
    if (r.user.empty()) return bad("empty user before '@'");
  }
  if (size_t hash = s.find('#'); hash != std::string_view::npos) {
    r.registry = std::string(s.substr(0, hash));
    s.remove_prefix(hash + 1);
    if (r.registry.empty()) return bad("empty registry before '#'");
    for (char c : r.registry) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':')) {
        return bad("registry '" + r.registry + "' is not a host[:port]");
      }
    }
  }
  if (size_t at = s.find('@'); at != std::string_view::npos) {
    r.digest = std::string(s.substr(at + 1));
    s = s.substr(0, at);
    if (r.digest.rfind("sha256:", 0) != 0 || r.digest.size() != 7 + 64) {
      return bad("digest '" + r.digest + "' is not sha256:<64 hex digits>");
    }
  } else if (size_t colon = s.rfind(':');
             colon != std::string_view::npos && s.find('/', colon) == std::string_view::npos) {
    r.tag = std::string(s.substr(colon + 1));
    s = s.substr(0, colon);
    if (r.tag.empty()) return bad("empty tag after ':'");
  }
  r.image = std::string(s);
  if (r.image.empty()) return bad("no image name");
  for (char c : r.image) {
    if (!ValidRepoChar(c)) return bad("'" + r.image + "' is not a repository name (lowercase)");
  }
  if (r.registry.empty()) {
    if (r.image.find('/') != std::string::npos &&
        r.image.substr(0, r.image.find('/')).find('.') != std::string::npos) {
      return bad("'" + r.image.substr(0, r.image.find('/')) +
                 "' looks like a registry: separate it with '#', not '/'");
    }
    r.registry = "docker.io";
    if (r.image.find('/') == std::string::npos) r.image = "library/" + r.image;
  }
  if (r.tag.empty() && r.digest.empty()) r.tag = "latest";
  return r;
}

}  // namespace

std::string ImageRef::SkopeoSource() const {
  switch (kind) {
    case Kind::kDocker:
      return "docker://" + registry + "/" + image + (digest.empty() ? ":" + tag : "@" + digest);
    case Kind::kDockerd:
      return "docker-daemon:" + image + ":" + tag;
    case Kind::kDockerArchive:
      return "docker-archive:" + path;
    case Kind::kOciArchive:
      return "oci-archive:" + path;
    case Kind::kSquashfs:
      break;
  }
  return path;
}

std::string ImageRef::ToString() const {
  switch (kind) {
    case Kind::kDocker:
      return "docker://" + (user.empty() ? "" : user + "@") + registry + "#" + image +
             (digest.empty() ? ":" + tag : "@" + digest);
    case Kind::kDockerd:
      return "dockerd://" + image + ":" + tag;
    case Kind::kDockerArchive:
      return "docker-archive:" + path;
    case Kind::kOciArchive:
      return "oci-archive:" + path;
    case Kind::kSquashfs:
      break;
  }
  return path;
}

StatusOr<ImageRef> ParseImportUri(std::string_view uri) {
  if (uri.rfind("docker://", 0) == 0) return ParseDocker(uri.substr(9), uri);
  if (uri.rfind("dockerd://", 0) == 0 || uri.rfind("podman://", 0) == 0) {
    if (uri.rfind("podman://", 0) == 0) {
      return InvalidArgumentError("image " + std::string(uri) +
                                  ": podman:// is not supported; use dockerd:// or docker://");
    }
    auto r = ParseDocker(uri.substr(10), uri);
    if (!r.ok()) return r.status();
    ImageRef d = *r;
    if (d.registry != "docker.io" || !d.user.empty() || !d.digest.empty()) {
      return InvalidArgumentError("image " + std::string(uri) +
                                  ": dockerd:// takes IMAGE[:TAG] as `docker images` lists it");
    }
    d.kind = ImageRef::Kind::kDockerd;
    d.registry.clear();
    if (d.image.rfind("library/", 0) == 0) d.image = d.image.substr(8);
    return d;
  }
  for (auto [prefix, kind] : {std::pair{"docker-archive:", ImageRef::Kind::kDockerArchive},
                              std::pair{"oci-archive:", ImageRef::Kind::kOciArchive}}) {
    std::string_view p = prefix;
    if (uri.rfind(p, 0) == 0) {
      ImageRef r;
      r.kind = kind;
      r.path = std::string(uri.substr(p.size()));
      if (r.path.empty()) {
        return InvalidArgumentError("image " + std::string(uri) + ": no file after " +
                                    std::string(p));
      }
      return r;
    }
  }
  if (!uri.empty() && (uri[0] == '/' || uri[0] == '.')) {
    ImageRef r;
    r.path = std::string(uri);
    return r;
  }
  return InvalidArgumentError(
      "image " + std::string(uri) +
      ": expected docker://[USER@][REGISTRY#]IMAGE[:TAG], dockerd://IMAGE[:TAG], "
      "docker-archive:FILE, oci-archive:FILE or a path to a .sqsh file");
}

StatusOr<ImageRef> ParseContainerImage(std::string_view value) {
  if (value.empty()) return InvalidArgumentError("--container-image: empty value");
  if (value[0] == '/' || value[0] == '.' || value.find("://") != std::string_view::npos) {
    if (value.rfind("docker-archive:", 0) == 0 || value.rfind("oci-archive:", 0) == 0) {
      return InvalidArgumentError("--container-image " + std::string(value) +
                                  ": import archives with `hpod-container import` first");
    }
    return ParseImportUri(value);
  }
  return ParseDocker(value, value);
}

}  // namespace hpod::container
