#include "hpod/cli/slurm_nodes.h"

#include <algorithm>
#include <map>

#include "hpod/api/model.h"

namespace hpod::cli {
namespace {

constexpr std::string_view kNone = "-";

std::string StringOr(const Json& object, const char* key, std::string_view fallback) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string() || it->get<std::string>().empty()) {
    return std::string(fallback);
  }
  return it->get<std::string>();
}

// "ip-10-77-0-11" of "ip-10-77-0-11.us-west-2.compute.internal"; "" when absent.
std::string ShortHostname(const Json& summary) {
  std::string dns = StringOr(summary, "PrivateDnsHostname", "");
  return dns.substr(0, dns.find('.'));
}

// One row per node, in the column order of kColumns.
constexpr const char* kColumns[] = {"InstanceGroupName", "InstanceId", "Hostname",
                                    "InstanceStatus",    "SlurmState", "SlurmReason"};
using Row = std::vector<std::string>;

// Rows must stay one line each in text output.
std::string OneLine(std::string v) {
  std::replace_if(
      v.begin(), v.end(), [](char c) { return c == '\n' || c == '\t'; }, ' ');
  return v;
}

std::vector<Row> Rows(const Json& joined) {
  std::vector<Row> rows;
  for (const Json& s : joined.value("ClusterNodeSummaries", Json::array())) {
    if (!s.is_object()) continue;
    const Json slurm = s.value("Slurm", Json());
    const bool in_slurm = slurm.is_object();
    const std::string host = ShortHostname(s);
    const Json status = s.value("InstanceStatus", Json::object());
    rows.push_back(
        {OneLine(StringOr(s, "InstanceGroupName", kNone)),
         OneLine(StringOr(s, "InstanceId", kNone)),
         OneLine(host.empty() ? std::string(kNone) : host),
         OneLine(status.is_object() ? StringOr(status, "Status", kNone) : std::string(kNone)),
         OneLine(in_slurm ? StringOr(slurm, "State", kNone) : std::string(kNone)),
         OneLine(in_slurm ? StringOr(slurm, "Reason", kNone) : std::string(kNone))});
  }
  return rows;
}

std::string FormatAligned(const std::vector<Row>& rows) {
  std::vector<size_t> widths;
  for (const char* c : kColumns) widths.push_back(std::string_view(c).size());
  for (const Row& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) widths[i] = std::max(widths[i], r[i].size());
  }
  auto line = [&](const Row& r) {
    std::string out;
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      // No trailing blanks after the last column.
      if (i + 1 < r.size()) out += std::string(widths[i] - r[i].size() + 2, ' ');
    }
    return out + "\n";
  };
  std::string out = line(Row(std::begin(kColumns), std::end(kColumns)));
  for (const Row& r : rows) out += line(r);
  return out;
}

std::string FormatTabs(const std::vector<Row>& rows) {
  std::string out;
  for (const Row& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) out += (i == 0 ? "" : "\t") + r[i];
    out += "\n";
  }
  return out;
}

}  // namespace

bool TakeWithSlurmFlag(std::vector<std::string>& words) {
  auto it = std::remove(words.begin(), words.end(), std::string(kWithSlurmFlag));
  const bool found = it != words.end();
  words.erase(it, words.end());
  return found;
}

Status CheckWithSlurm(const Invocation& inv) {
  if (inv.kind != Invocation::Kind::kOperation || !inv.with_slurm || inv.skeleton.has_value()) {
    return OkStatus();
  }
  if (!inv.paginate || inv.pagination.max_items.has_value() ||
      inv.pagination.starting_token.has_value()) {
    return InvalidArgumentError(
        "--with-slurm lists every node: it cannot be combined with --no-paginate, "
        "--next-token, --max-results, --starting-token or --max-items (--page-size is fine)");
  }
  return OkStatus();
}

Json JoinSlurmNodes(const Json& cluster_nodes, const Json& slurm_nodes) {
  // value() copies, so the list is kept here for the pointers into it.
  const Json reported = slurm_nodes.value("SlurmNodes", Json::array());
  std::map<std::string, const Json*> by_name;
  for (const Json& n : reported) {
    if (n.is_object()) by_name[StringOr(n, "NodeName", "")] = &n;
  }
  Json joined = Json::object();
  joined["ClusterNodeSummaries"] = Json::array();
  for (const Json& s : cluster_nodes.value("ClusterNodeSummaries", Json::array())) {
    if (!s.is_object()) continue;
    Json row = s;
    const std::string host = ShortHostname(s);
    auto it = host.empty() ? by_name.end() : by_name.find(host);
    if (it == by_name.end()) {
      row["Slurm"] = nullptr;
    } else {
      // All four members always, so scripts need not test for each.
      const Json& n = *it->second;
      row["Slurm"] = Json{{"NodeName", StringOr(n, "NodeName", "")},
                          {"State", StringOr(n, "State", "")},
                          {"Reason", StringOr(n, "Reason", "")},
                          {"SlurmdStartTime", StringOr(n, "SlurmdStartTime", "")}};
    }
    joined["ClusterNodeSummaries"].push_back(std::move(row));
  }
  auto available = slurm_nodes.find("Available");
  joined["SlurmAvailable"] =
      available != slurm_nodes.end() && available->is_boolean() && available->get<bool>();
  return joined;
}

std::string FormatNodesWithSlurm(const FormatRequest& request, const Json& joined) {
  if (request.query != nullptr) return FormatResponse(request, joined);
  switch (request.format) {
    case OutputFormat::kJson:
      return FormatJson(joined);
    case OutputFormat::kTable:
      return FormatAligned(Rows(joined));
    case OutputFormat::kText:
      return FormatTabs(Rows(joined));
  }
  return "";
}

Status ListClusterNodesWithSlurm(ApiClient& client, const Json& params,
                                 std::optional<int64_t> page_size, const FormatRequest& request,
                                 std::ostream& out, std::ostream& err) {
  const api::ServiceModel& model = api::ServiceModel::Get();
  const api::Operation* list = model.FindOperation("ListClusterNodes");
  const api::Operation* slurm = model.FindOperation("HpodListSlurmNodes");
  if (list == nullptr || slurm == nullptr) {
    return InternalError("the model lacks ListClusterNodes or HpodListSlurmNodes");
  }
  PaginationOptions every_page;
  every_page.page_size = page_size;
  HPOD_ASSIGN_OR_RETURN(PaginatedResult nodes, Paginate(client, *list, params, every_page));
  // Asked after the node list, so Slurm's view is at least as recent as the nodes
  // it is joined to.
  HPOD_ASSIGN_OR_RETURN(
      Json slurm_nodes,
      client.Call(*slurm, Json{{"ClusterName", params.value("ClusterName", "")}}));
  Json joined = JoinSlurmNodes(nodes.merged, slurm_nodes);
  if (!joined["SlurmAvailable"].get<bool>()) err << kSlurmUnavailableNote << "\n";
  out << FormatNodesWithSlurm(request, joined);
  return OkStatus();
}

std::string WithSlurmHelp() {
  return "  --with-slurm (boolean) hpod only\n"
         "      Also ask hpodd for Slurm's view of the nodes (HpodListSlurmNodes) and join\n"
         "      it to each node by hostname (the first label of PrivateDnsHostname is the\n"
         "      Slurm NodeName). json adds \"Slurm\": {NodeName, State, Reason,\n"
         "      SlurmdStartTime} (null for nodes Slurm does not know, such as the\n"
         "      controller) to each summary and \"SlurmAvailable\"; table and text print\n"
         "      InstanceGroupName, InstanceId, Hostname, InstanceStatus, SlurmState and\n"
         "      SlurmReason (\"-\" when absent). Lists every page, so it cannot be\n"
         "      combined with --no-paginate, --starting-token or --max-items.\n";
}

}  // namespace hpod::cli
