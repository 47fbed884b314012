// A test seam for nodes whose wall clock is not the host's (hpodd
// --fake-clock-skew, LocalProviderOptions::fake_clock_skew_s): the node's agent
// and everything it starts run under libfaketime (Debian's faketime package).
//
// libfaketime keeps a counter in a POSIX semaphore and shared-memory pair named
// by FAKETIME_SHARED, and a process that finds the variable unset makes its own
// pair, owned by its user, and exports it to its children. A child of another
// user (munged, after setpriv) or in another node (a task srun starts with the
// submitter's environment) then cannot open it and exits. So the provider makes
// one pair up front, open to every user, and every node points at it; nodes see
// the host's /dev/shm.
//
// Thread contract: free functions; EnsureFakeClockShared and
// RemoveFakeClockShared for one prefix are not called concurrently.

#ifndef HPOD_PROVIDER_LOCAL_FAKE_CLOCK_H_
#define HPOD_PROVIDER_LOCAL_FAKE_CLOCK_H_

#include <map>
#include <string>

#include "hpod/base/status.h"

namespace hpod::provider::local {

// Refuses skews of more than a day, an empty group, or a missing library
// (with what to install).
Status CheckFakeClockSkews(const std::map<std::string, int>& skews, const std::string& library);

// FAKETIME_SHARED's value for link prefix `prefix`:
// "/hpod-<prefix>-faketime-sem /hpod-<prefix>-faketime-shm".
std::string FakeClockShared(const std::string& prefix);

// Makes (or keeps) that pair.
Status EnsureFakeClockShared(const std::string& prefix);

// Unlinks the pair (processes that have it open keep it). Call only when no
// node of `prefix` remains: a node started later could not open it.
void RemoveFakeClockShared(const std::string& prefix);

// The environment that puts a node `seconds` off the host's wall clock (0: none).
std::map<std::string, std::string> FakeClockEnv(const std::string& library, int seconds,
                                                const std::string& shared);

}  // namespace hpod::provider::local

#endif  // HPOD_PROVIDER_LOCAL_FAKE_CLOCK_H_
