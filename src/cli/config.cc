#include "hpod/cli/config.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace hpod::cli {
namespace {

constexpr char kDefaultEndpoint[] = "http://127.0.0.1:8450";

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Reads `path`; nullopt when it does not exist or cannot be opened (the AWS CLI
// treats an unreadable shared file like a missing one).
std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// The sections of the config file that describe profiles: "[default]",
// "[profile default]" and "[profile name]" (botocore's build_profile_map).
std::map<std::string, std::map<std::string, std::string>> ConfigProfiles(const IniFile& ini) {
  std::map<std::string, std::map<std::string, std::string>> profiles;
  for (const auto& [section, values] : ini) {
    if (section == "default") {
      // "[profile default]" wins over "[default]" when both exist.
      profiles.try_emplace("default", values);
      continue;
    }
    if (section.rfind("profile", 0) != 0) continue;
    std::string rest = Trim(std::string_view(section).substr(7));
    if (rest.empty() || section.size() == 7 ||
        !std::isspace(static_cast<unsigned char>(section[7]))) {
      continue;
    }
    if (rest.size() >= 2 && (rest.front() == '"' || rest.front() == '\'') &&
        rest.back() == rest.front()) {
      rest = rest.substr(1, rest.size() - 2);
    }
    profiles[rest] = values;
  }
  return profiles;
}

StatusOr<IniFile> LoadIni(const std::string& path) {
  std::optional<std::string> text = ReadFile(path);
  if (!text.has_value()) return IniFile{};
  StatusOr<IniFile> ini = ParseIni(*text);
  if (!ini.ok()) return FailedPreconditionError("Unable to parse config file: " + path);
  return ini;
}

std::optional<std::string> Lookup(const std::map<std::string, std::string>& m,
                                  const std::string& key) {
  auto it = m.find(key);
  if (it == m.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// botocore's PartialCredentialsError wording.
Status PartialCredentials(std::string_view provider, std::string_view missing) {
  return UnauthenticatedError("Partial credentials found in " + std::string(provider) +
                              ", missing: " + std::string(missing));
}

}  // namespace

std::optional<std::string> GetEnv(const Environment& env, std::string_view name) {
  auto it = env.find(std::string(name));
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::string ExpandPath(std::string_view path, const Environment& env) {
  std::string p(path);
  if (!p.empty() && p[0] == '~' && (p.size() == 1 || p[1] == '/')) {
    std::optional<std::string> home = GetEnv(env, "HOME");
    if (home.has_value()) p = *home + p.substr(1);
  }
  std::string out;
  for (size_t i = 0; i < p.size();) {
    if (p[i] != '$') {
      out += p[i++];
      continue;
    }
    size_t start = i + 1;
    bool braced = start < p.size() && p[start] == '{';
    if (braced) ++start;
    size_t end = start;
    while (end < p.size() && (std::isalnum(static_cast<unsigned char>(p[end])) || p[end] == '_')) {
      ++end;
    }
    if (end == start || (braced && (end >= p.size() || p[end] != '}'))) {
      out += p[i++];  // not a variable reference: keep the '$' (os.path.expandvars does)
      continue;
    }
    std::string name = p.substr(start, end - start);
    auto it = env.find(name);
    size_t next = braced ? end + 1 : end;
    out += it != env.end() ? it->second : p.substr(i, next - i);
    i = next;
  }
  return out;
}

StatusOr<IniFile> ParseIni(std::string_view text) {
  IniFile ini;
  std::map<std::string, std::string>* section = nullptr;
  std::string* last_value = nullptr;
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string stripped = Trim(line);
    if (stripped.empty() || stripped[0] == '#' || stripped[0] == ';') continue;
    bool indented = std::isspace(static_cast<unsigned char>(line[0]));
    if (indented && last_value != nullptr) {
      // A continuation line (botocore reads these as nested settings such as
      // "s3 =\n  addressing_style = path"; hpod keeps them as text).
      *last_value += "\n" + stripped;
      continue;
    }
    if (stripped.front() == '[' && stripped.back() == ']') {
      section = &ini[Trim(stripped.substr(1, stripped.size() - 2))];
      last_value = nullptr;
      continue;
    }
    if (section == nullptr) {
      return InvalidArgumentError("line " + std::to_string(line_no) + ": no section header");
    }
    size_t delim = stripped.find_first_of("=:");
    if (delim == std::string::npos) {
      return InvalidArgumentError("line " + std::to_string(line_no) + ": expected key = value");
    }
    std::string key = Lower(Trim(stripped.substr(0, delim)));
    (*section)[key] = Trim(stripped.substr(delim + 1));
    last_value = &(*section)[key];
  }
  return ini;
}

StatusOr<Settings> ResolveSettings(const ConfigFlags& flags, const Environment& env) {
  Settings s;
  std::optional<std::string> chosen = flags.profile;
  if (!chosen) chosen = GetEnv(env, "HPOD_PROFILE");
  if (!chosen) chosen = GetEnv(env, "AWS_DEFAULT_PROFILE");
  if (!chosen) chosen = GetEnv(env, "AWS_PROFILE");
  s.config_file = ExpandPath(GetEnv(env, "AWS_CONFIG_FILE").value_or("~/.aws/config"), env);
  s.credentials_file =
      ExpandPath(GetEnv(env, "AWS_SHARED_CREDENTIALS_FILE").value_or("~/.aws/credentials"), env);
  HPOD_ASSIGN_OR_RETURN(IniFile config, LoadIni(s.config_file));
  HPOD_ASSIGN_OR_RETURN(IniFile credentials, LoadIni(s.credentials_file));
  auto profiles = ConfigProfiles(config);
  const bool named = chosen.has_value();
  if (named) {
    s.profile = *chosen;
  } else if (profiles.count(kHpodProfile) || credentials.count(kHpodProfile)) {
    // What `hpodd init` writes: with it, a bare `hpod list-clusters` reaches that
    // hpodd (its region and endpoint_url) rather than AWS's [default], which
    // belongs to the user's real AWS account.
    s.profile = kHpodProfile;
  } else {
    s.profile = "default";
  }
  auto it = profiles.find(s.profile);
  if (it != profiles.end()) s.profile_config = it->second;
  // botocore only insists on a profile that was asked for by name (even
  // "default"); the credentials file alone is enough for it to exist.
  if (named && it == profiles.end() && credentials.find(s.profile) == credentials.end()) {
    return FailedPreconditionError("The config profile (" + s.profile + ") could not be found");
  }
  const auto& pc = s.profile_config;

  if (flags.region.has_value()) {
    s.region = *flags.region;
  } else {
    s.region =
        GetEnv(env, "AWS_REGION")
            .value_or(
                GetEnv(env, "AWS_DEFAULT_REGION").value_or(Lookup(pc, "region").value_or("")));
  }
  if (flags.output.has_value()) {
    s.output = *flags.output;
  } else {
    s.output = GetEnv(env, "AWS_DEFAULT_OUTPUT").value_or(Lookup(pc, "output").value_or("json"));
  }
  if (flags.endpoint_url.has_value()) {
    s.endpoint_url = *flags.endpoint_url;
  } else {
    std::optional<std::string> e = GetEnv(env, "HPOD_ENDPOINT_URL");
    if (!e) e = GetEnv(env, "AWS_ENDPOINT_URL_SAGEMAKER");
    if (!e) e = GetEnv(env, "AWS_ENDPOINT_URL");
    if (!e) e = Lookup(pc, "endpoint_url");
    s.endpoint_url = e.value_or(kDefaultEndpoint);
  }
  // botocore's order for the CA bundle: the flag, AWS_CA_BUNDLE, the profile.
  std::optional<std::string> ca = flags.ca_bundle;
  if (!ca) ca = GetEnv(env, "AWS_CA_BUNDLE");
  if (!ca) ca = Lookup(pc, "ca_bundle");
  if (ca.has_value() && !ca->empty()) s.ca_bundle = ExpandPath(*ca, env);
  std::optional<std::string> attempts = GetEnv(env, "AWS_MAX_ATTEMPTS");
  if (!attempts) attempts = Lookup(pc, "max_attempts");
  if (attempts.has_value()) {
    int n = 0;
    const char* end = attempts->data() + attempts->size();
    auto [ptr, ec] = std::from_chars(attempts->data(), end, n);
    if (ec != std::errc() || ptr != end || n < 1) {
      return FailedPreconditionError("Invalid value for max_attempts: " + *attempts +
                                     " (expected a positive integer)");
    }
    s.max_attempts = n;
  }
  return s;
}

StatusOr<ResolvedCredentials> ResolveCredentials(const Settings& settings, bool explicit_profile,
                                                 const Environment& env) {
  if (!explicit_profile) {
    std::optional<std::string> key = GetEnv(env, "AWS_ACCESS_KEY_ID");
    std::optional<std::string> secret = GetEnv(env, "AWS_SECRET_ACCESS_KEY");
    if (key.has_value() && !secret.has_value()) {
      return PartialCredentials("env", "AWS_SECRET_ACCESS_KEY");
    }
    if (!key.has_value() && secret.has_value())
      return PartialCredentials("env", "AWS_ACCESS_KEY_ID");
    if (key.has_value()) {
      std::optional<std::string> token = GetEnv(env, "AWS_SESSION_TOKEN");
      if (!token) token = GetEnv(env, "AWS_SECURITY_TOKEN");
      return ResolvedCredentials{{*key, *secret, token.value_or("")}, "env"};
    }
  }
  auto from_section =
      [](const std::map<std::string, std::string>& values,
         std::string_view provider) -> StatusOr<std::optional<ResolvedCredentials>> {
    std::optional<std::string> key = Lookup(values, "aws_access_key_id");
    std::optional<std::string> secret = Lookup(values, "aws_secret_access_key");
    if (!key && !secret) return std::optional<ResolvedCredentials>();
    if (!secret) return PartialCredentials(provider, "aws_secret_access_key");
    if (!key) return PartialCredentials(provider, "aws_access_key_id");
    std::optional<std::string> token = Lookup(values, "aws_session_token");
    if (!token) token = Lookup(values, "aws_security_token");
    return std::optional<ResolvedCredentials>(
        ResolvedCredentials{{*key, *secret, token.value_or("")}, std::string(provider)});
  };
  HPOD_ASSIGN_OR_RETURN(IniFile credentials, LoadIni(settings.credentials_file));
  auto section = credentials.find(settings.profile);
  if (section != credentials.end()) {
    HPOD_ASSIGN_OR_RETURN(auto found, from_section(section->second, "shared-credentials-file"));
    if (found.has_value()) return *found;
  }
  HPOD_ASSIGN_OR_RETURN(auto found, from_section(settings.profile_config, "config-file"));
  if (found.has_value()) return *found;
  return UnauthenticatedError(
      "Unable to locate credentials. You can configure credentials by running \"aws "
      "configure\".");
}

}  // namespace hpod::cli
