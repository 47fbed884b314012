// hpod: the command line of a self-hosted SageMaker HyperPod (mirrors `aws sagemaker`).
// Everything lives in src/cli so that tests can run the command in-process.

#include "hpod/cli/main.h"

#include <iostream>

int main(int argc, char** argv, char** envp) {
  return hpod::cli::Main(argc, argv, envp, std::cout, std::cerr);
}
