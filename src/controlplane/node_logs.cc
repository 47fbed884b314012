#include "hpod/controlplane/node_logs.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hpod::controlplane {
namespace {

namespace fs = std::filesystem;

// A stream is a sequence of bytes numbered from 0 since its first write. The
// token is such a byte number. `<stream>.base` holds the number of the first byte
// of `<stream>.log.1` (the older kept file); `<stream>.log` follows it directly.
std::optional<uint64_t> Decode(const std::string& token) {
  if (token.empty() || token.size() > 20 ||
      token.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoull(token);
}

uint64_t ReadBase(const fs::path& p) {
  std::ifstream in(p);
  uint64_t r = 0;
  in >> r;
  return r;
}

uint64_t FileSize(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

std::string ReadRange(const fs::path& p, uint64_t offset, size_t limit) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return "";
  in.seekg(static_cast<std::streamoff>(offset));
  std::string out(limit, '\0');
  in.read(out.data(), static_cast<std::streamsize>(limit));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

}  // namespace

NodeLogs::NodeLogs(NodeLogsOptions options) : options_(std::move(options)) {}

bool NodeLogs::ValidStream(const std::string& stream) {
  return stream == "LifecycleConfig" || stream == "Agent";
}

Status NodeLogs::RemoveCluster(const std::string& cluster_id) {
  if (cluster_id.empty() || cluster_id.find('/') != std::string::npos || cluster_id[0] == '.') {
    return InvalidArgumentError("bad cluster id '" + cluster_id + "'");
  }
  // Moved aside under the lock (an append never sees half a tree), removed
  // outside it, so a large cluster's logs do not hold up every agent's appends.
  const fs::path dir = fs::path(options_.root) / cluster_id;
  const fs::path doomed = fs::path(options_.root) / (".removing-" + cluster_id);
  std::error_code ec;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fs::exists(dir, ec)) fs::rename(dir, doomed, ec);
  }
  if (!ec) fs::remove_all(doomed, ec);
  if (ec) {
    return InternalError("cannot remove the logs of cluster " + cluster_id + ": " + ec.message());
  }
  return OkStatus();
}

std::string NodeLogs::Dir(const std::string& cluster_id, const std::string& instance_id) const {
  return options_.root + "/" + cluster_id + "/" + instance_id;
}

Status NodeLogs::Append(const std::string& cluster_id, const std::string& instance_id,
                        const std::string& stream, std::string_view data) {
  if (!ValidStream(stream)) return InvalidArgumentError("unknown log stream '" + stream + "'");
  // Ids come from the store (validated shapes), never from a path the agent chose.
  std::lock_guard<std::mutex> lock(mu_);
  fs::path dir = Dir(cluster_id, instance_id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InternalError("cannot create log dir " + dir.string() + ": " + ec.message());
  fs::path file = dir / (stream + ".log");
  if (FileSize(file) + data.size() > options_.max_file_bytes && FileSize(file) > 0) {
    // The old .log.1 is dropped: the base moves past its bytes.
    fs::path older = dir / (stream + ".log.1");
    uint64_t base = ReadBase(dir / (stream + ".base")) + FileSize(older);
    std::ofstream(dir / (stream + ".base"), std::ios::trunc) << base;
    fs::rename(file, older, ec);
    if (ec) return InternalError("cannot rotate " + file.string() + ": " + ec.message());
  }
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return InternalError("cannot open " + file.string());
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) {
      ::close(fd);
      return InternalError("cannot write " + file.string());
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return OkStatus();
}

StatusOr<LogChunk> NodeLogs::Read(const std::string& cluster_id, const std::string& instance_id,
                                  const std::string& stream, const std::string& token,
                                  size_t limit) {
  if (!ValidStream(stream)) return InvalidArgumentError("unknown log stream '" + stream + "'");
  std::lock_guard<std::mutex> lock(mu_);
  fs::path dir = Dir(cluster_id, instance_id);
  fs::path file = dir / (stream + ".log");
  fs::path older = dir / (stream + ".log.1");
  if (!fs::exists(file) && !fs::exists(older)) {
    return NotFoundError("no " + stream + " log for node " + instance_id + " yet");
  }
  const uint64_t base = ReadBase(dir / (stream + ".base"));
  const uint64_t older_size = FileSize(older);
  uint64_t pos = base;
  if (!token.empty()) {
    auto p = Decode(token);
    if (!p || *p > base + older_size + FileSize(file)) {
      return InvalidArgumentError("invalid NextToken for logs");
    }
    pos = *p;
  }
  LogChunk out;
  if (pos < base) {
    out.data = "[... older log data was rotated away ...]\n";
    pos = base;
  }
  if (pos < base + older_size) {
    std::string part = ReadRange(older, pos - base, limit);
    pos += part.size();
    out.data += part;
  }
  if (pos >= base + older_size && out.data.size() < limit) {
    std::string part = ReadRange(file, pos - base - older_size, limit - out.data.size());
    pos += part.size();
    out.data += part;
  }
  out.next_token = std::to_string(pos);
  return out;
}

Status PurgeExpiredClusters(store::Store& store, NodeLogs& logs, const Clock& clock,
                            std::chrono::seconds retention) {
  const double before = clock.NowEpochSeconds() - static_cast<double>(retention.count());
  std::vector<store::DeletedClusterRecord> expired;
  HPOD_RETURN_IF_ERROR(store.Read([&](store::ReadTx& tx) -> Status {
    HPOD_ASSIGN_OR_RETURN(expired, tx.ListDeletedClusters(before));
    return OkStatus();
  }));
  Status first = OkStatus();
  for (const auto& gone : expired) {
    Status s = logs.RemoveCluster(gone.id);
    if (s.ok())
      s = store.Write([&](store::WriteTx& tx) { return tx.PurgeDeletedCluster(gone.id); });
    if (!s.ok()) {
      if (first.ok()) first = s.Annotate("cluster " + gone.name + " (" + gone.id + ")");
      continue;
    }
    spdlog::info("cluster {} ({}), deleted at {}: its events and node logs are removed", gone.name,
                 gone.id, FormatUtc(gone.deleted));
  }
  return first;
}

}  // namespace hpod::controlplane
