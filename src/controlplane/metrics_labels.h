#pragma once

// Label values of GET /metrics that come from node agents (metrics_state.h), kept
// bounded: an agent can send any check name, Slurm state or text, and every
// distinct value would be a new series in Prometheus, for ever. Values hpodd
// knows pass as they are; any other becomes kOtherLabel, so a misbehaving or
// newer agent costs one series, not thousands.
//
// Thread contract: pure functions.

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace hpod::controlplane {

inline constexpr std::string_view kOtherLabel = "other";

// Longest label value exported (bytes); BoundedLabelValue cuts longer ones.
inline constexpr size_t kMaxLabelValueBytes = 128;

// Distinct Slurm state labels exported per cluster (CapSlurmStates).
inline constexpr size_t kMaxSlurmStateLabels = 32;

// `value` as valid UTF-8 (an invalid byte becomes '?': Prometheus rejects a
// scrape with one) of at most kMaxLabelValueBytes, cut at a character boundary.
std::string BoundedLabelValue(std::string_view value);

// The `check` label of an agent's health check: one of the checks hpod's agents
// run (docs/node-health.md: disk:/, disk:/fsx, disk:/var/lib/hpod-agent (the
// agent's state directory), memory, slurm, network, flag_file, kernel_log, gpu),
// else kOtherLabel.
std::string HealthCheckLabel(std::string_view check);

// The `state` label of a node in the controller's Slurm table: scontrol's State=
// as Slurm writes it — a base state (IDLE, ALLOCATED, MIXED, DOWN, ERROR, FUTURE,
// UNKNOWN), then '+'-separated flags of Slurm's set (DRAIN, FAIL,
// NOT_RESPONDING, ...), each part optionally followed by '*' (older scontrol's
// "not responding") — kept whole as it is written ("DOWN+FAIL"); any other
// string, or one longer than kMaxLabelValueBytes, is kOtherLabel.
std::string SlurmStateLabel(std::string_view state);

// At most kMaxSlurmStateLabels labels: the most common states (ties by name) and
// kOtherLabel holding the rest's nodes. `nodes_by_state` maps labels to counts.
std::map<std::string, int> CapSlurmStates(std::map<std::string, int> nodes_by_state);

}  // namespace hpod::controlplane
