#include "hpod/container/credentials.h"

#include <sstream>
#include <vector>

namespace hpod::container {

StatusOr<std::optional<Credential>> FindCredential(std::string_view netrc, std::string_view host) {
  // netrc is a token stream: "machine" starts an entry, "default" an entry for any
  // host; "login"/"password" fill the current one. '#' starts a comment line.
  std::vector<std::string> tokens;
  std::istringstream lines{std::string(netrc)};
  for (std::string line; std::getline(lines, line);) {
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '#') continue;
    std::istringstream words(line);
    for (std::string w; words >> w;) tokens.push_back(w);
  }
  std::optional<Credential> match, fallback;
  std::optional<Credential>* current = nullptr;
  std::optional<Credential> ignored;
  std::string current_host;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    const bool has_next = i + 1 < tokens.size();
    if (t == "machine" && has_next) {
      current_host = tokens[++i];
      current = current_host == host && !match ? &match : &ignored;
      ignored.reset();
      if (current == &match) match.emplace();
    } else if (t == "default") {
      current_host = "default";
      current = fallback ? &ignored : &fallback;
      current->emplace();
    } else if ((t == "login" || t == "password") && has_next && current != nullptr) {
      if (!current->has_value()) current->emplace();
      std::string v = tokens[++i];
      if (t == "password" && v.rfind("$(", 0) == 0 && current != &ignored) {
        return InvalidArgumentError("credentials for " + current_host +
                                    ": a $(command) password is not run by hpod; write the "
                                    "password itself, or use ~/.docker/config.json");
      }
      Credential& cred = **current;
      (t == "login" ? cred.login : cred.password) = v;
    }
  }
  if (match) return match;
  return fallback;
}

}  // namespace hpod::container
