#include "hpod/cli/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace hpod::cli {
namespace {

// A throwaway HOME with ~/.aws/config and ~/.aws/credentials.
class TempHome {
 public:
  TempHome() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hpod-cli-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
    std::filesystem::create_directories(path_ + "/.aws");
  }
  ~TempHome() { std::filesystem::remove_all(path_); }
  void Write(const std::string& relative, const std::string& text) const {
    std::ofstream(path_ + "/" + relative) << text;
  }
  const std::string& path() const { return path_; }
  Environment Env() const { return {{"HOME", path_}}; }

 private:
  std::string path_;
};

TEST(ParseIniTest, SectionsKeysCommentsContinuations) {
  StatusOr<IniFile> ini = ParseIni(
      "# comment\n[default]\nRegion = us-west-2\n; other\noutput: text\n\n"
      "[profile dev]\ns3 =\n  addressing_style = path\nendpoint_url=http://h:1 # kept\n");
  ASSERT_TRUE(ini.ok()) << ini.status().ToString();
  EXPECT_EQ((*ini)["default"]["region"], "us-west-2");
  EXPECT_EQ((*ini)["default"]["output"], "text");
  EXPECT_EQ((*ini)["profile dev"]["s3"], "\naddressing_style = path");
  // RawConfigParser does not strip inline comments; neither do we.
  EXPECT_EQ((*ini)["profile dev"]["endpoint_url"], "http://h:1 # kept");
  EXPECT_FALSE(ParseIni("key = value\n").ok());
}

TEST(ExpandPathTest, HomeAndVariables) {
  Environment env = {{"HOME", "/home/u"}, {"D", "dir"}};
  EXPECT_EQ(ExpandPath("~/.aws/config", env), "/home/u/.aws/config");
  EXPECT_EQ(ExpandPath("/x/$D/${D}/$NOPE", env), "/x/dir/dir/$NOPE");
  EXPECT_EQ(ExpandPath("rel/~x", env), "rel/~x");
}

TEST(ResolveSettingsTest, DefaultsWithoutFiles) {
  TempHome home;
  StatusOr<Settings> s = ResolveSettings({}, home.Env());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->profile, "default");
  EXPECT_EQ(s->region, "");
  EXPECT_EQ(s->output, "json");
  EXPECT_EQ(s->endpoint_url, "http://127.0.0.1:8450");
  EXPECT_EQ(s->max_attempts, 3);
}

TEST(ResolveSettingsTest, ProfileValuesAndPrecedence) {
  TempHome home;
  home.Write(".aws/config",
             "[default]\nregion = us-east-2\n"
             "[profile dev]\nregion = eu-west-1\noutput = table\nendpoint_url = http://dev:8450\n"
             "max_attempts = 5\n");
  Environment env = home.Env();
  StatusOr<Settings> s = ResolveSettings({}, env);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->region, "us-east-2");

  env["AWS_PROFILE"] = "dev";
  s = ResolveSettings({}, env);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->profile, "dev");
  EXPECT_EQ(s->region, "eu-west-1");
  EXPECT_EQ(s->output, "table");
  EXPECT_EQ(s->endpoint_url, "http://dev:8450");
  EXPECT_EQ(s->max_attempts, 5);

  env["AWS_DEFAULT_REGION"] = "ap-south-1";
  env["AWS_DEFAULT_OUTPUT"] = "text";
  env["HPOD_ENDPOINT_URL"] = "http://env:1";
  env["AWS_MAX_ATTEMPTS"] = "1";
  s = ResolveSettings({}, env);
  EXPECT_EQ(s->region, "ap-south-1");
  EXPECT_EQ(s->output, "text");
  EXPECT_EQ(s->endpoint_url, "http://env:1");
  EXPECT_EQ(s->max_attempts, 1);
  env["AWS_REGION"] = "us-west-1";  // AWS_REGION wins over AWS_DEFAULT_REGION
  EXPECT_EQ(ResolveSettings({}, env)->region, "us-west-1");

  ConfigFlags flags;
  flags.profile = "default";
  flags.region = "flag-region";
  flags.output = "json";
  flags.endpoint_url = "http://flag:2";
  s = ResolveSettings(flags, env);
  EXPECT_EQ(s->profile, "default");
  EXPECT_EQ(s->region, "flag-region");
  EXPECT_EQ(s->output, "json");
  EXPECT_EQ(s->endpoint_url, "http://flag:2");
}

// The CA bundle an https:// endpoint is verified against, in botocore's order:
// --ca-bundle, AWS_CA_BUNDLE, the profile's ca_bundle (which `hpodd init` writes
// for an https:// endpoint); none means the system's CAs.
TEST(ResolveSettingsTest, CaBundleFromFlagEnvironmentOrProfile) {
  TempHome home;
  Environment env = home.Env();
  EXPECT_EQ(ResolveSettings({}, env)->ca_bundle, "");
  home.Write(".aws/config", "[default]\nca_bundle = ~/hpodd/ca.pem\n");
  EXPECT_EQ(ResolveSettings({}, env)->ca_bundle, home.path() + "/hpodd/ca.pem");
  env["AWS_CA_BUNDLE"] = "/etc/env-ca.pem";
  EXPECT_EQ(ResolveSettings({}, env)->ca_bundle, "/etc/env-ca.pem");
  ConfigFlags flags;
  flags.ca_bundle = "/etc/flag-ca.pem";
  EXPECT_EQ(ResolveSettings(flags, env)->ca_bundle, "/etc/flag-ca.pem");
}

// `hpodd init` writes [profile hpod] (region, endpoint_url) and [hpod] credentials:
// a bare `hpod` command uses them, before AWS's [default]; anything chosen by name
// (flag or environment) still wins.
TEST(ResolveSettingsTest, HpodProfileIsTheDefaultWhenPresent) {
  TempHome home;
  home.Write(".aws/config",
             "[default]\nregion = us-east-2\n"
             "[profile hpod]\nregion = us-west-2\nendpoint_url = http://127.0.0.1:8451\n");
  home.Write(".aws/credentials", "[hpod]\naws_access_key_id = A\naws_secret_access_key = S\n");
  Environment env = home.Env();
  StatusOr<Settings> s = ResolveSettings({}, env);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->profile, "hpod");
  EXPECT_EQ(s->region, "us-west-2");
  EXPECT_EQ(s->endpoint_url, "http://127.0.0.1:8451");
  StatusOr<ResolvedCredentials> c = ResolveCredentials(*s, false, env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials.access_key_id, "A");

  env["AWS_PROFILE"] = "default";
  EXPECT_EQ(ResolveSettings({}, env)->region, "us-east-2");
  env.erase("AWS_PROFILE");
  env["HPOD_PROFILE"] = "default";
  EXPECT_EQ(ResolveSettings({}, env)->profile, "default");
  env.erase("HPOD_PROFILE");
  ConfigFlags flags;
  flags.profile = "default";
  EXPECT_EQ(ResolveSettings(flags, env)->region, "us-east-2");

  // Only in the credentials file is enough, as for a named profile.
  TempHome creds_only;
  creds_only.Write(".aws/credentials",
                   "[hpod]\naws_access_key_id = B\naws_secret_access_key = T\n");
  EXPECT_EQ(ResolveSettings({}, creds_only.Env())->profile, "hpod");
}

TEST(ResolveSettingsTest, UnknownNamedProfileFails) {
  TempHome home;
  Environment env = home.Env();
  env["AWS_PROFILE"] = "nope";
  StatusOr<Settings> s = ResolveSettings({}, env);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(), "The config profile (nope) could not be found");
  // A profile that exists only in the credentials file is fine.
  home.Write(".aws/credentials", "[nope]\naws_access_key_id = A\naws_secret_access_key = S\n");
  EXPECT_TRUE(ResolveSettings({}, env).ok());
}

TEST(ResolveSettingsTest, ConfigFileFromEnvironment) {
  TempHome home;
  home.Write("elsewhere.ini", "[profile x]\nregion = r-x\n");
  Environment env = home.Env();
  env["AWS_CONFIG_FILE"] = "~/elsewhere.ini";
  ConfigFlags flags;
  flags.profile = "x";
  StatusOr<Settings> s = ResolveSettings(flags, env);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->region, "r-x");
  EXPECT_EQ(s->config_file, home.path() + "/elsewhere.ini");
  home.Write("elsewhere.ini", "region = no-section\n");
  EXPECT_EQ(ResolveSettings(flags, env).status().message(),
            "Unable to parse config file: " + home.path() + "/elsewhere.ini");
}

TEST(ResolveCredentialsTest, EnvironmentFirst) {
  TempHome home;
  home.Write(".aws/credentials",
             "[default]\naws_access_key_id = FILE\naws_secret_access_key = FS\n");
  Environment env = home.Env();
  env["AWS_ACCESS_KEY_ID"] = "ENV";
  env["AWS_SECRET_ACCESS_KEY"] = "ES";
  env["AWS_SESSION_TOKEN"] = "TOK";
  StatusOr<Settings> s = ResolveSettings({}, env);
  ASSERT_TRUE(s.ok());
  StatusOr<ResolvedCredentials> c = ResolveCredentials(*s, false, env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->credentials.access_key_id, "ENV");
  EXPECT_EQ(c->credentials.secret_access_key, "ES");
  EXPECT_EQ(c->credentials.session_token, "TOK");
  EXPECT_EQ(c->source, "env");
  // An explicit --profile skips the environment, as botocore does.
  c = ResolveCredentials(*s, true, env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->credentials.access_key_id, "FILE");
  EXPECT_EQ(c->source, "shared-credentials-file");
}

TEST(ResolveCredentialsTest, CredentialsFileThenConfigFile) {
  TempHome home;
  home.Write(".aws/credentials",
             "[dev]\naws_access_key_id = DEV\naws_secret_access_key = DS\naws_session_token = T\n");
  home.Write(".aws/config",
             "[profile dev]\nregion = r\n[profile cfg]\naws_access_key_id = CFG\n"
             "aws_secret_access_key = CS\n");
  Environment env = home.Env();
  env["AWS_SHARED_CREDENTIALS_FILE"] = home.path() + "/.aws/credentials";
  ConfigFlags flags;
  flags.profile = "dev";
  StatusOr<ResolvedCredentials> c = ResolveCredentials(*ResolveSettings(flags, env), true, env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->credentials.access_key_id, "DEV");
  EXPECT_EQ(c->credentials.session_token, "T");
  flags.profile = "cfg";
  c = ResolveCredentials(*ResolveSettings(flags, env), true, env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->credentials.access_key_id, "CFG");
  EXPECT_EQ(c->source, "config-file");
}

TEST(ResolveCredentialsTest, MissingAndPartial) {
  TempHome home;
  Environment env = home.Env();
  StatusOr<ResolvedCredentials> c = ResolveCredentials(*ResolveSettings({}, env), false, env);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "Unable to locate credentials. You can configure credentials by running \"aws "
            "configure\".");
  env["AWS_ACCESS_KEY_ID"] = "ONLY";
  c = ResolveCredentials(*ResolveSettings({}, env), false, env);
  EXPECT_EQ(c.status().message(),
            "Partial credentials found in env, missing: AWS_SECRET_ACCESS_KEY");
  env.erase("AWS_ACCESS_KEY_ID");
  home.Write(".aws/credentials", "[default]\naws_access_key_id = A\n");
  c = ResolveCredentials(*ResolveSettings({}, env), false, env);
  EXPECT_EQ(c.status().message(),
            "Partial credentials found in shared-credentials-file, missing: aws_secret_access_key");
}

}  // namespace
}  // namespace hpod::cli
