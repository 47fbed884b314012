#include "hpod/train/comm/gloo_communicator.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "fmt/format.h"
#include "hpod/train/comm/gloo_pair_watch.h"

namespace hpod::train::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Slots of our ring collectives: a prefix byte gloo's own collectives do not
// use, the op's tag, and the ring step (messages of one step match in order).
constexpr uint64_t kSlotPrefix = 0xA5ull << 56;
// The pair watch's slot: tag 0 at a step no ring reaches.
constexpr int kWatchStep = (1 << 24) - 1;
// A wait that the pair watch aborted (gloo's wait returned false).
struct WaitAborted {};
void Waited(bool completed) {
  if (!completed) throw WaitAborted{};
}

// After a failed collective, how long a rank waits for the others' reports to
// tell which rank went away first (neighbours of a dead rank fail within
// milliseconds; the ring's cascade takes one hop per rank).
constexpr Millis kBlameWait{1500};
// Reduce-scatter moves chunks in segments of this many floats, two in flight,
// so adding one segment overlaps receiving the next (and bounds the scratch).
constexpr int64_t kSegmentFloats = 256 * 1024;

bool IsTimeout(const std::string& m) { return m.find("Timed out") != std::string::npos; }

// gloo's rendezvous Store over ours. gloo reports store failures as
// exceptions: thrown here, caught in ConnectGloo, so none leaves this file.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(comm::Store& store, std::string prefix, Millis timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_.Set(PrefixedKey(prefix_, key), std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    auto v = store_.Get(PrefixedKey(prefix_, key), timeout_);
    if (!v.ok()) {
      missing_ = {key};
      Check(v.status());
    }
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const Millis& timeout) override {
    std::vector<std::string> prefixed, missing;
    for (const auto& k : keys) prefixed.push_back(PrefixedKey(prefix_, k));
    Status st = store_.Wait(prefixed, timeout.count() > 0 ? timeout : timeout_, &missing, "");
    if (!st.ok()) {
      missing_.clear();
      for (const auto& m : missing) missing_.push_back(m.substr(m.rfind('/') + 1));
      Check(st);
    }
  }

  // The unprefixed keys the failed wait was missing (gloo's keys are ranks).
  const std::vector<std::string>& missing() const { return missing_; }
  const Status& error() const { return error_; }

 private:
  void Check(const Status& st) {
    if (st.ok()) return;
    error_ = st;
    throw gloo::IoException(st.message());
  }

  comm::Store& store_;
  const std::string prefix_;
  const Millis timeout_;
  std::vector<std::string> missing_;
  Status error_;
};

class GlooCommunicator : public Communicator {
 public:
  // Throws as gloo does (the watch posts its receives).
  GlooCommunicator(std::shared_ptr<gloo::rendezvous::Context> ctx, GlooOptions o)
      : ctx_(std::move(ctx)),
        o_(std::move(o)),
        watch_(std::make_unique<GlooPairWatch>(ctx_, GlooRingSlot(0, kWatchStep))) {}

  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }
  std::string backend() const override { return "gloo (tcp)"; }

  Status AllReduceSum(float* data, int64_t n, const CollectiveOptions& o) override {
    if (o_.size == 1 || n == 0) return OkStatus();
    try {
      gloo::AllreduceOptions opts(ctx_);
      opts.setOutput(data, static_cast<size_t>(n));
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(NextTag());
      opts.setTimeout(Timeout(o));
      gloo::allreduce(opts);
    } catch (const std::exception& e) {
      return GlooFailure("allreduce", o, GlooMessage(e));
    }
    return OkStatus();
  }

  Status ReduceScatterSum(float* data, std::span<const int64_t> counts,
                          const CollectiveOptions& o) override;
  Status AllGather(float* data, std::span<const int64_t> counts,
                   const CollectiveOptions& o) override {
    std::vector<size_t> offsets, bytes;
    HPOD_RETURN_IF_ERROR(CheckCounts(counts, "allgather"));
    size_t off = 0;
    for (int64_t c : counts) {
      offsets.push_back(off * 4);
      bytes.push_back(static_cast<size_t>(c) * 4);
      off += static_cast<size_t>(c);
    }
    return RingAllGather(reinterpret_cast<char*>(data), offsets, bytes, "allgather", o);
  }

  StatusOr<std::vector<std::string>> AllGatherBytes(const std::string& mine,
                                                    const CollectiveOptions& o) override {
    std::vector<int64_t> sizes(o_.size, 0);
    sizes[o_.rank] = static_cast<int64_t>(mine.size());
    std::vector<size_t> offsets(o_.size), eight(o_.size, 8);
    for (int r = 0; r < o_.size; ++r) offsets[r] = static_cast<size_t>(r) * 8;
    HPOD_RETURN_IF_ERROR(
        RingAllGather(reinterpret_cast<char*>(sizes.data()), offsets, eight, "allgather", o));
    std::vector<size_t> bytes(o_.size);
    size_t total = 0;
    for (int r = 0; r < o_.size; ++r) {
      if (sizes[r] < 0 || sizes[r] > (int64_t{1} << 34)) {
        return InternalError(fmt::format("allgather: {} sent a size of {}", Peer(r), sizes[r]));
      }
      offsets[r] = total;
      bytes[r] = static_cast<size_t>(sizes[r]);
      total += bytes[r];
    }
    std::string all(total, '\0');
    std::memcpy(all.data() + offsets[o_.rank], mine.data(), mine.size());
    HPOD_RETURN_IF_ERROR(RingAllGather(all.data(), offsets, bytes, "allgather", o));
    std::vector<std::string> out(o_.size);
    for (int r = 0; r < o_.size; ++r) out[r] = all.substr(offsets[r], bytes[r]);
    return out;
  }

  Status Broadcast(void* data, int64_t bytes, int root, const CollectiveOptions& o) override {
    if (o_.size == 1 || bytes == 0) return OkStatus();
    try {
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(static_cast<uint8_t*>(data), static_cast<size_t>(bytes));
      opts.setRoot(root);
      opts.setTag(NextTag());
      opts.setTimeout(Timeout(o));
      gloo::broadcast(opts);
    } catch (const std::exception& e) {
      return GlooFailure("broadcast", o, GlooMessage(e));
    }
    return OkStatus();
  }

  Status Barrier(const CollectiveOptions& o) override {
    // A ring allgather of one byte: nobody leaves before everyone arrived,
    // and a missing rank is named like in every other collective.
    return AllGatherBytes(std::string(1, '\0'), o).status();
  }

 private:
  Millis Timeout(const CollectiveOptions& o) const {
    return o.timeout.count() > 0 ? o.timeout : o_.timeout;
  }
  uint32_t NextTag() { return tag_++; }

  std::string Peer(int r) const {
    return r < static_cast<int>(o_.peer_names.size()) ? o_.peer_names[r]
                                                      : fmt::format("rank {}", r);
  }
  std::string What(std::string_view op, const CollectiveOptions& o) const {
    return o.what.empty() ? std::string(op) : fmt::format("{} of {}", op, o.what);
  }

  // A failed wait on a known peer: the one line the trainer prints, naming
  // the rank that went away first when other ranks' reports tell.
  Status PeerFailure(std::string_view op, const CollectiveOptions& o, int peer, bool receiving,
                     const std::string& detail) const {
    const bool timeout = IsTimeout(detail);
    const std::string seen = timeout ? fmt::format("{} {} within {:g} s",
                                                   receiving ? "no data from" : "could not send to",
                                                   Peer(peer), Timeout(o).count() / 1000.0)
                                     : fmt::format("lost {}: {}", Peer(peer), detail);
    std::string blamed = Blame(peer, seen);
    const std::string m = fmt::format("{} failed: {}", What(op, o), blamed.empty() ? seen : blamed);
    return timeout ? DeadlineExceededError(m) : UnavailableError(m);
  }

  // A wait the pair watch aborted: a connection broke, maybe not the waited
  // peer's (a rank learns of any rank's death at once, not only through
  // its neighbours giving up); named as gloo would have named it.
  Status WatchFailure(std::string_view op, const CollectiveOptions& o, int peer, bool receiving) {
    if (auto lost = watch_->BrokenPeer(peer)) {
      return PeerFailure(op, o, lost->rank, receiving, lost->detail);
    }
    return PeerFailure(op, o, peer, receiving, "a connection of the mesh broke");
  }

  // Records what this rank saw and looks, for a little while, for the rank
  // that others lost too but that never reported; "" when there is none (or
  // no store): then this rank's own observation is the best there is.
  std::string Blame(int peer, const std::string& seen) const {
    Store* store = o_.failure_store;
    if (store == nullptr) return "";
    auto key = [&](int r) { return PrefixedKey(o_.prefix, "failed/" + std::to_string(r)); };
    const nlohmann::json mine = {{"peer", peer}, {"seen", seen}};
    if (!store->Set(key(o_.rank), mine.dump()).ok()) return "";
    const auto deadline = Clock::now() + kBlameWait;
    for (;;) {
      std::map<int, nlohmann::json> reports;
      for (int r = 0; r < o_.size; ++r) {
        auto has = store->Check(key(r));
        if (!has.ok()) return "";  // the store went with rank 0
        if (!*has) continue;
        auto v = store->Get(key(r), Millis(100));
        if (v.ok()) reports[r] = nlohmann::json::parse(*v, nullptr, false);
      }
      // Named as lost by someone, never heard from itself.
      std::map<int, int> suspects;  // suspect -> a rank that lost it
      for (const auto& [r, rep] : reports) {
        const int p = rep.is_object() ? rep.value("peer", -1) : -1;
        if (p >= 0 && p < o_.size && reports.count(p) == 0) suspects.emplace(p, r);
      }
      if (suspects.size() == 1) {
        const auto [gone, witness] = *suspects.begin();
        if (gone == peer) return "";  // this rank saw it first hand
        return fmt::format("{} went away first ({} saw: {}); this rank then lost {}", Peer(gone),
                           Peer(witness), reports[witness].value("seen", std::string("?")),
                           Peer(peer));
      }
      if (Clock::now() >= deadline) return "";
      std::this_thread::sleep_for(Millis(20));
    }
  }
  Status GlooFailure(std::string_view op, const CollectiveOptions& o,
                     const std::string& detail) const {
    std::string m = fmt::format("{} failed: {}", What(op, o), detail);
    return IsTimeout(detail) ? DeadlineExceededError(m) : UnavailableError(m);
  }

  Status CheckCounts(std::span<const int64_t> counts, std::string_view op) const {
    if (static_cast<int>(counts.size()) != o_.size) {
      return InvalidArgumentError(
          fmt::format("{}: {} counts for a world of {}", op, counts.size(), o_.size));
    }
    for (int64_t c : counts) {
      if (c < 0) return InvalidArgumentError(fmt::format("{}: negative count {}", op, c));
    }
    return OkStatus();
  }

  // The ring allgather: at step i rank r passes chunk r-i to rank r+1 and
  // receives chunk r-i-1 from rank r-1, straight into place.
  Status RingAllGather(char* base, const std::vector<size_t>& offsets,
                       const std::vector<size_t>& bytes, std::string_view op,
                       const CollectiveOptions& o) {
    const int n = o_.size, r = o_.rank;
    if (n == 1) return OkStatus();
    size_t total = 0;
    for (int c = 0; c < n; ++c) total = std::max(total, offsets[c] + bytes[c]);
    if (total == 0) return OkStatus();
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    const uint32_t tag = NextTag();
    const auto deadline = Clock::now() + Timeout(o);
    // gloo throws from posting as well as from waiting (a pair already
    // closed): one handler, told which peer the current call involves.
    int peer = right;
    bool receiving = false;
    try {
      auto buf = ctx_->createUnboundBuffer(base, total);
      GlooPairWatch::Scope watched(*watch_, {buf.get()});
      for (int i = 0; i < n - 1; ++i) {
        const int send_c = (r - i + n) % n, recv_c = (r - i - 1 + 2 * n) % n;
        const uint64_t slot = GlooRingSlot(tag, i);
        peer = right, receiving = false;
        if (bytes[send_c] > 0) buf->send(right, slot, offsets[send_c], bytes[send_c]);
        peer = left, receiving = true;
        if (bytes[recv_c] > 0) buf->recv(left, slot, offsets[recv_c], bytes[recv_c]);
        if (bytes[recv_c] > 0) Waited(buf->waitRecv(nullptr, Left(deadline)));
        peer = right, receiving = false;
        if (bytes[send_c] > 0) Waited(buf->waitSend(nullptr, Left(deadline)));
      }
    } catch (const WaitAborted&) {
      return WatchFailure(op, o, peer, receiving);
    } catch (const std::exception& e) {
      return PeerFailure(op, o, peer, receiving, GlooMessage(e));
    }
    return OkStatus();
  }

  static Millis Left(Clock::time_point deadline) {
    return std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
  }

  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  const GlooOptions o_;
  const std::unique_ptr<GlooPairWatch> watch_;  // after ctx_: destroyed first
  uint32_t tag_ = 1;
  std::vector<float> scratch_;  // two reduce-scatter segments, kept across calls
};

// The ring reduce-scatter. Rank r ends with chunk r summed over all ranks: at
// step s it sends its partial sum of chunk r-1-s to rank r+1 and adds what
// rank r-1 sends of chunk r-2-s into its own copy (after N-1 steps, chunk r
// has passed through every rank). Each chunk moves in segments; receives are
// posted two ahead into a double buffer, so a segment is added while the
// next one arrives. Both sides split a chunk alike, so sizes always match.
Status GlooCommunicator::ReduceScatterSum(float* data, std::span<const int64_t> counts,
                                          const CollectiveOptions& o) {
  HPOD_RETURN_IF_ERROR(CheckCounts(counts, "reduce-scatter"));
  const int n = o_.size, r = o_.rank;
  if (n == 1) return OkStatus();
  std::vector<int64_t> offsets(n + 1, 0);
  for (int c = 0; c < n; ++c) offsets[c + 1] = offsets[c] + counts[c];
  if (offsets[n] == 0) return OkStatus();
  const int64_t seg =
      std::min<int64_t>(kSegmentFloats, *std::max_element(counts.begin(), counts.end()));
  if (static_cast<int64_t>(scratch_.size()) < 2 * seg) scratch_.assign(2 * seg, 0.0f);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const uint32_t tag = NextTag();
  const auto deadline = Clock::now() + Timeout(o);
  const char* op = "reduce-scatter";
  auto segments = [&](int c) { return (counts[c] + seg - 1) / seg; };
  auto seg_len = [&](int c, int64_t j) { return std::min(seg, counts[c] - j * seg); };
  // gloo throws from posting as well as from waiting: one handler, told which
  // peer the current call involves.
  int peer = right;
  bool receiving = false;
  try {
    auto buf = ctx_->createUnboundBuffer(data, static_cast<size_t>(offsets[n]) * 4);
    auto tmp = ctx_->createUnboundBuffer(scratch_.data(), static_cast<size_t>(2 * seg) * 4);
    GlooPairWatch::Scope watched(*watch_, {buf.get(), tmp.get()});
    for (int s = 0; s < n - 1; ++s) {
      const int send_c = (r - 1 - s + 2 * n) % n, recv_c = (r - 2 - s + 2 * n) % n;
      const uint64_t slot = GlooRingSlot(tag, s);
      const int64_t nsend = segments(send_c), nrecv = segments(recv_c);
      peer = right, receiving = false;
      for (int64_t j = 0; j < nsend; ++j) {
        buf->send(right, slot, static_cast<size_t>(offsets[send_c] + j * seg) * 4,
                  static_cast<size_t>(seg_len(send_c, j)) * 4);
      }
      auto post = [&](int64_t j) {
        tmp->recv(left, slot, static_cast<size_t>((j % 2) * seg) * 4,
                  static_cast<size_t>(seg_len(recv_c, j)) * 4);
      };
      peer = left, receiving = true;
      for (int64_t j = 0; j < std::min<int64_t>(2, nrecv); ++j) post(j);
      for (int64_t j = 0; j < nrecv; ++j) {
        Waited(tmp->waitRecv(nullptr, Left(deadline)));
        float* dst = data + offsets[recv_c] + j * seg;
        const float* src = scratch_.data() + (j % 2) * seg;
        const int64_t len = seg_len(recv_c, j);
        for (int64_t i = 0; i < len; ++i) dst[i] += src[i];
        if (j + 2 < nrecv) post(j + 2);
      }
      peer = right, receiving = false;
      for (int64_t j = 0; j < nsend; ++j) Waited(buf->waitSend(nullptr, Left(deadline)));
    }
  } catch (const WaitAborted&) {
    return WatchFailure(op, o, peer, receiving);
  } catch (const std::exception& e) {
    return PeerFailure(op, o, peer, receiving, GlooMessage(e));
  }
  return OkStatus();
}

}  // namespace

uint64_t GlooRingSlot(uint32_t tag, int step) {
  return kSlotPrefix | (static_cast<uint64_t>(tag) << 24) | static_cast<uint64_t>(step);
}

StatusOr<std::unique_ptr<Communicator>> ConnectGloo(Store& store, const GlooOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgumentError(
        fmt::format("rank {} is outside a world of {}", options.rank, options.size));
  }
  GlooStore gloo_store(store, PrefixedKey(options.prefix, "gloo"), options.timeout);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    ctx->setTimeout(options.timeout);
    ctx->connectFullMesh(gloo_store, device);
    return std::unique_ptr<Communicator>(new GlooCommunicator(std::move(ctx), options));
  } catch (const std::exception& e) {
    if (!gloo_store.missing().empty()) {
      std::string ranks;
      for (const auto& k : gloo_store.missing()) ranks += (ranks.empty() ? "" : ", ") + k;
      return DeadlineExceededError(fmt::format(
          "connecting to the other ranks: rank(s) {} never published an address within {:g} s",
          ranks, options.timeout.count() / 1000.0));
    }
    if (!gloo_store.error().ok()) return gloo_store.error();
    return UnavailableError(fmt::format("connecting rank {} ({}) to the other ranks: {}",
                                        options.rank, options.hostname, GlooMessage(e)));
  }
}

}  // namespace hpod::train::comm
