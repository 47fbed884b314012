#pragma once

// Help pages generated from the service model: the verbs, each verb's flags with
// their types, constraints, enum values and shorthand syntax (as awscli's
// ParamShorthandDocGen writes it), the waiters and the global options.
//
// Thread contract: pure functions.

#include <string>
#include <string_view>

#include "hpod/api/model.h"

namespace hpod::cli {

// `hpod help`.
std::string TopLevelHelp();
// `hpod <verb> help`.
std::string OperationHelp(const api::Operation& op);
// `hpod wait help` (waiter empty) and `hpod wait <waiter> help`.
std::string WaitHelp(std::string_view waiter);
// `hpod start-session help` and `hpod logs help`.
std::string StartSessionHelp();
std::string LogsHelp();
// `hpod inject-fault help`.
std::string InjectFaultHelp();
// `hpod create-join-token help`.
std::string CreateJoinTokenHelp();
std::string DescribeRecoveryHelp();
std::string DescribeJobGoodputHelp();

// awscli's shorthand example for a flag of shape `shape`, e.g.
// "SourceS3Uri=string,OnCreate=string,OnInitComplete=string"; empty when the shape
// has no shorthand form or is too deeply nested to show.
std::string ShorthandSyntax(const api::Shape& shape);

}  // namespace hpod::cli
