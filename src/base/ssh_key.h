#pragma once

// SSH host keys in OpenSSH's own formats, made in-process (no ssh-keygen needed
// where hpodd runs). hpodd keeps one key per node name of a cluster, so a
// replacement that takes over a NodeName presents its predecessor's key and
// clients never see "REMOTE HOST IDENTIFICATION HAS CHANGED" (issue 28).
//
// Thread contract: free functions; thread-safe (OpenSSL 3 and the OS CSPRNG).

#include <string>
#include <string_view>

#include "hpod/base/status.h"

namespace hpod {

struct SshKeyPair {
  // "-----BEGIN OPENSSH PRIVATE KEY-----" ... (openssh-key-v1, unencrypted), as
  // /etc/ssh/ssh_host_ed25519_key holds it.
  std::string private_key;
  // "ssh-ed25519 AAAA... comment", as the .pub file and known_hosts hold it.
  std::string public_key;
};

// A fresh Ed25519 key pair; `comment` goes into both (no newline in it).
StatusOr<SshKeyPair> GenerateEd25519SshKey(std::string_view comment);

// The "ssh-ed25519 AAAA..." part of an OpenSSH private key made by
// GenerateEd25519SshKey (without the comment): what a node's known_hosts line
// needs. kInvalidArgument for anything else.
StatusOr<std::string> SshPublicKeyOf(std::string_view private_key);

}  // namespace hpod
