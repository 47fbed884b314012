// hpodd: the control plane. Providers are chosen here and only here.

#include "hpodd_main.h"

int main(int argc, char** argv) {
  // The local (namespace) provider lands with the nodes issue; until then hpodd
  // runs without one and says so in every FailureMessage.
  return hpod::cmd::HpoddMain(
      argc, argv, [](const hpod::Clock&) { return std::unique_ptr<hpod::provider::Provider>(); },
      "none configured");
}
