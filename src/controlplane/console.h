#pragma once

// The web console's static files (the front end's build output: index.html and
// assets/ with content-hashed names, from web/), served by hpodd on its API
// listener. They hold no secrets: every API call the console makes is a
// SigV4-signed POST / by the browser, so these routes need no authentication
// (AuthRule::kNone).
//
// Everything is read into memory once, at start: a request never touches the
// filesystem, and a path is served only when it is exactly the name of a loaded
// file, so no request can reach a file outside the directory (no `..`, no
// decoding, and symlinks that point out of the directory are not loaded).
// Routes: GET (and HEAD) `/` and `/index.html` → index.html (`Cache-Control:
// no-cache`: a new build is seen at once); `/assets/<name>` → that file
// (cached for a year and immutable: its name changes with its content). Only
// index.html and assets/ are loaded: a front end keeps everything else it ships
// (icons, fonts) under assets/ too. Every response, 404s included, carries
// kContentSecurityPolicy and the other headers of SecurityHeaders(): no inline
// or foreign script can run in the console's origin.
//
// Without a console (none built, or none found) the same routes answer 404 with
// one line saying how to build it.
//
// Thread contract: immutable once Load/NotBuilt returns; Serve is safe for
// concurrent calls.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/http/message.h"
#include "hpod/http/router.h"

namespace hpod::controlplane {

// 'self' only: scripts, styles, fonts and API calls come from hpodd itself;
// images also from data: URLs; no plugins, no <base>, no framing.
inline constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

struct ConsoleOptions {
  // The directory holding index.html and assets/; empty: no console.
  std::string dir;
  // Whether a `dir` that does not load stops hpodd (the user named it with
  // --console-dir) or only leaves the console unserved (it was found by looking).
  bool required = false;
  // Where hpodd looked for a console when `dir` is empty (for the log and the 404).
  std::vector<std::string> searched;
  // Bounds on what is held in memory; a bigger directory does not load.
  size_t max_files = 2000;
  uint64_t max_total_bytes = 64ull << 20;
};

class Console {
 public:
  // Loads dir/index.html and every regular file under dir/assets/ (recursively;
  // symlinks are followed only when their target lies inside `dir`, others are
  // skipped). kNotFound when there is no index.html; kResourceExhausted past a
  // bound of `options`; kInternal when a file cannot be read.
  static StatusOr<std::unique_ptr<Console>> Load(const std::string& dir,
                                                 const ConsoleOptions& options = {});
  // What hpodd serves for `options` (see ResolveConsoleOptions), logging one line
  // saying where the console is served from or why it is not: the loaded
  // directory; NotBuilt when options.dir is empty, or when it does not load and
  // is not `required` (a half-built tree must not stop the API); the load's error
  // when it is required.
  static StatusOr<std::unique_ptr<Console>> Open(const ConsoleOptions& options);
  // A console with no files: every route answers 404 "not built" with `why`
  // (e.g. "no index.html in /x") and how to build one.
  static std::unique_ptr<Console> NotBuilt(std::string why);

  // Serves GET/HEAD of `/`, `/index.html` and `/assets/...`; anything else is 404.
  http::Response Serve(const http::Request& request) const;

  // Registers this console's routes (kNone) on `router`; it must outlive the router.
  Status AddRoutes(http::Router& router) const;

  bool built() const { return !files_.empty(); }
  size_t file_count() const { return files_.size(); }
  uint64_t total_bytes() const { return total_bytes_; }
  // The directory loaded (empty when not built), and why it is not built.
  const std::string& dir() const { return dir_; }
  const std::string& not_built_reason() const { return why_; }

  // Headers every console response carries: Content-Security-Policy,
  // X-Content-Type-Options, Referrer-Policy, X-Frame-Options.
  static std::vector<http::Header> SecurityHeaders();
  // The Content-Type for a file name, by extension ("text/javascript;
  // charset=utf-8" for .js and .mjs); application/octet-stream when unknown.
  static std::string ContentTypeFor(const std::string& name);

 private:
  struct File {
    std::string content;
    std::string content_type;
  };
  Console() = default;

  std::map<std::string, File> files_;  // "index.html", "assets/app-1a2b.js"
  uint64_t total_bytes_ = 0;
  std::string dir_;
  std::string why_;
};

// Where an hpodd at `exe` (its /proc/self/exe) looks for a console when no
// --console-dir is given, in order: installed beside it
// (<exe dir>/../share/hpod/console), then the build tree it was built in
// (<build>/web/dist, where <build> is the nearest of the exe's directory and its
// three parents holding CMakeCache.txt: build/cmd/hpodd/hpodd and
// build/tests/hpodd-fake both find build/).
std::vector<std::string> ConsoleDirCandidates(const std::string& exe);

// Fills `options` from an explicit --console-dir (`flag`, may be empty) or, without
// one, the first of ConsoleDirCandidates(exe) holding an index.html.
ConsoleOptions ResolveConsoleOptions(const std::string& flag, const std::string& exe);

}  // namespace hpod::controlplane
