#pragma once

// Profiles, credentials and settings resolved the way the AWS CLI (botocore) does,
// from the process environment and the shared files, so that an existing
// ~/.aws setup works unchanged:
//
//   profile      --profile, else HPOD_PROFILE, else AWS_DEFAULT_PROFILE, else
//                AWS_PROFILE, else "hpod" when that profile exists (`hpodd init`
//                writes it), else "default". A named profile must exist in the
//                config or credentials file. (The differences from the AWS CLI's
//                order: HPOD_PROFILE, and hpodd's profile before AWS's [default],
//                because `hpod` talks to hpodd.)
//   credentials  AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN] (skipped
//                when --profile is given, as botocore does), then the credentials
//                file's [name] section, then the config file's profile section.
//   region       --region, AWS_REGION, AWS_DEFAULT_REGION, profile `region`.
//   output       --output, AWS_DEFAULT_OUTPUT, profile `output`, "json".
//   endpoint     --endpoint-url, HPOD_ENDPOINT_URL, AWS_ENDPOINT_URL_SAGEMAKER,
//                AWS_ENDPOINT_URL, profile `endpoint_url`, http://127.0.0.1:8450.
//   max attempts AWS_MAX_ATTEMPTS, profile `max_attempts`, 3 (standard retry mode).
//   CA bundle    --ca-bundle, AWS_CA_BUNDLE, profile `ca_bundle` (`hpodd init` writes
//                it for an https:// endpoint: hpodd's own CA), else the system's CAs;
//                the certificates an https:// endpoint must chain to.
//
// Files: AWS_CONFIG_FILE (~/.aws/config; sections "[default]" and "[profile name]")
// and AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials; sections "[name]"). `~` and
// $VARS in those paths expand against the given environment. Missing files are
// fine; SSO, assume-role, credential_process and instance metadata are not
// supported (see README.md).
//
// Thread contract: pure functions over their arguments (they read files).

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "hpod/auth/sigv4.h"
#include "hpod/base/status.h"

namespace hpod::cli {

// The profile `hpodd init` writes, used when none is chosen (see above).
inline constexpr char kHpodProfile[] = "hpod";

// The process environment as a value, so that tests need no setenv.
using Environment = std::map<std::string, std::string>;

// Looks up `name`; nullopt when unset. An empty value counts as unset, as the
// AWS CLI treats it for the variables above.
std::optional<std::string> GetEnv(const Environment& env, std::string_view name);

// Expands a leading "~" (HOME) and $NAME / ${NAME} in `path`.
std::string ExpandPath(std::string_view path, const Environment& env);

// An INI file as botocore's RawConfigParser reads it: section -> key -> value,
// keys lower-cased, values trimmed, '#'/';' comment lines, indented continuation
// lines appended to the previous value.
using IniFile = std::map<std::string, std::map<std::string, std::string>>;
StatusOr<IniFile> ParseIni(std::string_view text);

// What the command line said about configuration (unset = not given).
struct ConfigFlags {
  std::optional<std::string> profile;
  std::optional<std::string> region;
  std::optional<std::string> output;
  std::optional<std::string> endpoint_url;
  std::optional<std::string> ca_bundle;
};

struct Settings {
  std::string profile;  // "default" unless chosen
  std::string region;   // empty when none is configured
  std::string output = "json";
  std::string endpoint_url;
  // PEM file of the CAs an https:// endpoint is verified against (`~` and $VARS
  // expanded); empty: the system's CA store.
  std::string ca_bundle;
  int max_attempts = 3;
  // Values of the profile (config file), e.g. cli_read_timeout; for --debug.
  std::map<std::string, std::string> profile_config;
  std::string config_file;  // expanded paths, for --debug
  std::string credentials_file;
};

// Resolves everything but credentials. Errors (kFailedPrecondition, AWS wording):
//   The config profile (name) could not be found
//   Unable to parse config file: <path>
StatusOr<Settings> ResolveSettings(const ConfigFlags& flags, const Environment& env);

struct ResolvedCredentials {
  auth::Credentials credentials;
  std::string source;  // "env", "shared-credentials-file", "config-file"
};

// Finds credentials for `settings.profile`. kUnauthenticated with
//   Unable to locate credentials. You can configure credentials by running "aws configure".
// when there are none. `explicit_profile` is true when --profile was given.
StatusOr<ResolvedCredentials> ResolveCredentials(const Settings& settings, bool explicit_profile,
                                                 const Environment& env);

}  // namespace hpod::cli
