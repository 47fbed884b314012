#pragma once

// Request and response values checked and shaped against the service model, the
// way botocore does it between the AWS CLI's argument parser and the wire:
//
//   ValidateParams   botocore/validate.py: required members, types, `min` length
//                    and value, unknown members, unions. Like botocore it does not
//                    check `max`, patterns or enums: the server owns those.
//   SerializeRequest the JSON body in model member order, timestamps as epoch
//                    seconds, nulls dropped.
//   ParseResponse    the response as botocore's JSON parser returns it: model member
//                    order, unknown and null members dropped, timestamps rendered
//                    as ISO 8601 in UTC (as AWS CLI v2 does, see README.md).
//   Skeleton         --generate-cli-skeleton templates (botocore ArgumentGenerator).
//
// Thread contract: pure functions over immutable model shapes.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "hpod/api/model.h"
#include "hpod/base/status.h"

namespace hpod::cli {

using Json = nlohmann::ordered_json;

// Returns kInvalidArgument "Parameter validation failed:\n<one line per problem>"
// with botocore's wording, e.g.
//   Missing required parameter in InstanceGroups[0]: "ExecutionRole"
//   Invalid length for parameter ClusterName, value: 0, valid min length: 1
Status ValidateParams(const api::Shape& input, const Json& params);

// The wire body for validated `params`. Timestamps given as ISO 8601 text, a date or
// epoch seconds become epoch seconds.
Json SerializeRequest(const api::Shape& input, const Json& params);

// The response `body` shaped by the output shape (see above). Non-object bodies
// are returned unchanged.
Json ParseResponse(const api::Shape& output, const Json& body);

// Input (`for_output` false) or output skeleton of `shape`: strings "" (enums: the
// first value; output: the member name), numbers 0, booleans true, lists of one
// element, maps {"KeyName": ...}, timestamps 1970-01-01T00:00:00 (input) or epoch 0
// (output, so that ParseResponse renders it like any response).
Json Skeleton(const api::Shape& shape, bool for_output);

// Seconds since the epoch for a JSON number, a numeric string, or an ISO 8601
// string ("2023-11-26", "2023-11-26T15:20:11Z", "2023-11-26 15:20:11.5+01:00";
// no zone means UTC, as botocore assumes). nullopt when it is none of those.
std::optional<double> ParseTimestamp(const Json& value);

// Python's datetime.isoformat() of the UTC instant: "2023-11-26T15:20:11.123000+00:00",
// without the fraction when it is zero (microseconds rounded half-even, as CPython).
std::string FormatIsoTimestamp(double epoch_seconds);

// Python's str() of a parsed JSON value: strings bare, True/False/None, floats in
// repr form, containers in repr form (['a', 1], {'k': 'v'}). The AWS CLI's text and
// table output and its error messages print values this way.
std::string PyStr(const Json& value);
// Python's repr(): like PyStr but strings are quoted ('x').
std::string PyRepr(const Json& value);

}  // namespace hpod::cli
