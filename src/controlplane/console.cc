#include "hpod/controlplane/console.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "hpod/base/file_util.h"

namespace hpod::controlplane {
namespace {

namespace fs = std::filesystem;

constexpr char kIndex[] = "index.html";
constexpr char kAssets[] = "assets";
constexpr char kAssetsRoute[] = "/assets/";

// `path` lies inside `root` (both canonical).
bool Inside(const fs::path& path, const fs::path& root) {
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return r == root.end() && p != path.end();
}

http::Response WithSecurityHeaders(http::Response r) {
  for (http::Header& h : Console::SecurityHeaders()) r.headers.push_back(std::move(h));
  return r;
}

http::Response Text(int status, std::string body) {
  http::Response r;
  r.status = status;
  r.headers.push_back({"Content-Type", "text/plain; charset=utf-8"});
  r.headers.push_back({"Cache-Control", "no-cache"});
  r.body = std::move(body);
  return WithSecurityHeaders(std::move(r));
}

}  // namespace

std::vector<http::Header> Console::SecurityHeaders() {
  return {{"Content-Security-Policy", kContentSecurityPolicy},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Frame-Options", "DENY"}};
}

std::string Console::ContentTypeFor(const std::string& name) {
  static const std::map<std::string, std::string> kTypes = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".woff2", "font/woff2"},
      {".woff", "font/woff"},
      {".txt", "text/plain; charset=utf-8"},
      {".wasm", "application/wasm"}};
  auto it = kTypes.find(fs::path(name).extension().string());
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

StatusOr<std::unique_ptr<Console>> Console::Load(const std::string& dir,
                                                 const ConsoleOptions& options) {
  std::error_code ec;
  fs::path root = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(root, ec)) {
    return NotFoundError("console directory " + dir + " does not exist");
  }
  std::unique_ptr<Console> c(new Console());
  c->dir_ = root.string();
  // Adds one file when it is a regular file inside the root; anything else
  // (a symlink out of it, a broken one, a socket) is skipped.
  auto add = [&](const fs::path& path, const std::string& key) -> Status {
    std::error_code e;
    fs::path real = fs::canonical(path, e);
    if (e || !Inside(real, root) || !fs::is_regular_file(real, e)) {
      return key == kIndex ? NotFoundError("console directory " + dir +
                                           " has no index.html (or it points outside it)")
                           : OkStatus();
    }
    if (c->files_.size() >= options.max_files) {
      return ResourceExhaustedError("console directory " + dir + " holds more than " +
                                    std::to_string(options.max_files) + " files");
    }
    uint64_t size = fs::file_size(real, e);
    if (e || c->total_bytes_ + size > options.max_total_bytes) {
      return ResourceExhaustedError("console directory " + dir + " holds more than " +
                                    std::to_string(options.max_total_bytes >> 20) + " MiB");
    }
    // Read with read(2) (base/file_util): a stream's istreambuf_iterator throws on
    // a read error, and no exception may leave Open.
    HPOD_ASSIGN_OR_RETURN(std::string content, ReadFile(real.string()));
    if (content.size() != size) return InternalError(real.string() + " changed while read");
    c->total_bytes_ += size;
    c->files_[key] = File{std::move(content), ContentTypeFor(key)};
    return OkStatus();
  };
  HPOD_RETURN_IF_ERROR(add(root / kIndex, kIndex));
  fs::path assets = root / kAssets;
  if (fs::is_directory(assets, ec)) {
    // Directory symlinks are not descended into (no cycles); the walk's own
    // errors (a directory removed meanwhile) end the load.
    fs::recursive_directory_iterator it(assets, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code type_error;  // a broken symlink: skipped by `add`
      if (it->is_directory(type_error)) continue;
      std::string key =
          (fs::path(kAssets) / it->path().lexically_relative(assets)).generic_string();
      HPOD_RETURN_IF_ERROR(add(it->path(), key));
    }
    if (ec) return InternalError("cannot list " + assets.string() + ": " + ec.message());
  }
  return c;
}

StatusOr<std::unique_ptr<Console>> Console::Open(const ConsoleOptions& options) {
  if (options.dir.empty()) {
    std::string why = "no console directory given";
    for (size_t i = 0; i < options.searched.size(); ++i) {
      why += (i == 0 ? "; no index.html in " : " or ") + options.searched[i];
    }
    spdlog::info("hpodd console: not served ({}); GET / says how to build it", why);
    return NotBuilt(std::move(why));
  }
  auto console = Load(options.dir, options);
  if (!console.ok()) {
    if (options.required) {
      return Status(console.status().code(), "--console-dir: " + console.status().message());
    }
    spdlog::warn("hpodd console: not served: {}", console.status().message());
    return NotBuilt(console.status().message());
  }
  spdlog::info("hpodd console: {} files ({} KiB) from {} served at /", (*console)->file_count(),
               ((*console)->total_bytes() + 1023) / 1024, (*console)->dir());
  return console;
}

std::unique_ptr<Console> Console::NotBuilt(std::string why) {
  std::unique_ptr<Console> c(new Console());
  c->why_ = std::move(why);
  return c;
}

http::Response Console::Serve(const http::Request& request) const {
  if (!built()) {
    return Text(404, "The hpod console is not built (" + why_ +
                         "): run `make` in the hpod source tree (it builds web/ into "
                         "build/web/dist), or start hpodd with --console-dir DIR.\n");
  }
  std::string_view path = request.Path();
  std::string key;
  if (path == "/" || path == "/index.html") {
    key = kIndex;
  } else if (path.rfind(kAssetsRoute, 0) == 0) {
    key = std::string(path.substr(1));
  }
  auto it = key.empty() ? files_.end() : files_.find(key);
  if (it == files_.end())
    return Text(404, "hpod console: no such file " + std::string(path) + "\n");
  http::Response r;
  r.headers.push_back({"Content-Type", it->second.content_type});
  // index.html names the current assets: always revalidated. An asset's name
  // changes with its content, so a cached copy is never stale.
  r.headers.push_back(
      {"Cache-Control", key == kIndex ? "no-cache" : "public, max-age=31536000, immutable"});
  r.body = it->second.content;
  return WithSecurityHeaders(std::move(r));
}

Status Console::AddRoutes(http::Router& router) const {
  auto serve = [this](const http::Request& r) { return Serve(r); };
  HPOD_RETURN_IF_ERROR(router.Add("GET", "/", http::AuthRule::kNone, serve));
  HPOD_RETURN_IF_ERROR(router.Add("GET", "/index.html", http::AuthRule::kNone, serve));
  return router.AddPrefix("GET", kAssetsRoute, http::AuthRule::kNone, serve);
}

std::vector<std::string> ConsoleDirCandidates(const std::string& exe) {
  if (!fs::path(exe).is_absolute()) return {};  // /proc/self/exe unreadable
  fs::path bin = fs::path(exe).parent_path();
  std::vector<std::string> out = {(bin.parent_path() / "share" / "hpod" / "console").string()};
  std::error_code ec;
  fs::path dir = bin;
  for (int up = 0; up <= 3 && !dir.empty(); ++up, dir = dir.parent_path()) {
    if (fs::exists(dir / "CMakeCache.txt", ec)) {
      out.push_back((dir / "web" / "dist").string());
      break;
    }
  }
  return out;
}

ConsoleOptions ResolveConsoleOptions(const std::string& flag, const std::string& exe) {
  ConsoleOptions o;
  if (!flag.empty()) {
    o.dir = flag;
    o.required = true;
    return o;
  }
  std::error_code ec;
  for (const std::string& candidate : ConsoleDirCandidates(exe)) {
    o.searched.push_back(candidate);
    if (fs::exists(fs::path(candidate) / kIndex, ec)) {
      o.dir = candidate;
      return o;
    }
  }
  return o;
}

}  // namespace hpod::controlplane
