// hpod-node-init --config <node dir>/node-init.json
//
// PID 1 of a local-provider node (see src/provider/local/node_init.h). Exits with
// the status of the program it runs; 2 for a usage or config error.

#include <stdio.h>
#include <string.h>

#include <string>

#include "hpod/provider/local/node_init.h"

int main(int argc, char** argv) {
  std::string config;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else if (strncmp(argv[i], "--config=", 9) == 0) {
      config = argv[i] + 9;
    } else {
      fprintf(stderr, "usage: hpod-node-init --config FILE\n");
      return 2;
    }
  }
  if (config.empty()) {
    fprintf(stderr, "usage: hpod-node-init --config FILE\n");
    return 2;
  }
  auto c = hpod::provider::local::LoadNodeInitConfig(config);
  if (!c.ok()) {
    fprintf(stderr, "hpod-node-init: %s\n", c.status().ToString().c_str());
    return 2;
  }
  return hpod::provider::local::RunNodeInit(*c);
}
