#pragma once

// hpodd's command line (flags → Options → Run), shared by the real daemon and the
// test-only daemon that swaps in the fake provider.

#include <functional>
#include <memory>

#include "hpod/base/clock.h"
#include "hpod/provider/provider.h"

namespace hpod::cmd {

// Makes the provider hpodd runs with; may return null (no provider).
using ProviderFactory = std::function<std::unique_ptr<provider::Provider>(const Clock&)>;

int HpoddMain(int argc, char** argv, const ProviderFactory& make_provider,
              const char* provider_description);

}  // namespace hpod::cmd
