#include "hpod/provider/provider.h"

namespace hpod::provider {

std::string_view NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kPending:
      return "Pending";
    case NodeState::kRunning:
      return "Running";
    case NodeState::kFailed:
      return "Failed";
    case NodeState::kTerminating:
      return "Terminating";
    case NodeState::kTerminated:
      return "Terminated";
  }
  return "?";
}

}  // namespace hpod::provider
