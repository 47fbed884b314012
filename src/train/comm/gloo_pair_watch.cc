#include "hpod/train/comm/gloo_pair_watch.h"

#include <chrono>
#include <exception>

namespace hpod::train::comm {
namespace {

// gloo waits take a timeout, and one that expires closes every connection of
// the context: the watch waits "forever", until its destructor aborts it.
constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365 * 10);

}  // namespace

std::string GlooMessage(const std::exception& e) {
  std::string m = e.what();
  if (!m.empty() && m[0] == '[') {
    if (size_t close = m.find("] "); close != std::string::npos) m = m.substr(close + 2);
  }
  return m;
}

GlooPairWatch::GlooPairWatch(std::shared_ptr<gloo::rendezvous::Context> ctx, uint64_t slot)
    : ctx_(std::move(ctx)), slot_(slot), watch_(ctx_->createUnboundBuffer(&byte_, 1)) {
  if (ctx_->size == 1) return;
  for (int p = 0; p < ctx_->size; ++p) {
    if (p != ctx_->rank) watch_->recv(p, slot_, 0, 0);
  }
  thread_ = std::thread([this] { Run(); });
}

GlooPairWatch::~GlooPairWatch() {
  watch_->abortWaitRecv();  // kept until the thread waits, if it does not yet
  if (thread_.joinable()) thread_.join();
}

void GlooPairWatch::Run() {
  try {
    watch_->waitRecv(nullptr, kForever);
    return;  // aborted by the destructor (nobody sends on the slot)
  } catch (const std::exception&) {
    // A connection broke: gloo failed the receive posted on it.
  }
  MutexLock l(mu_);
  broken_ = true;
  for (auto* b : active_) {
    b->abortWaitSend();
    b->abortWaitRecv();
  }
}

std::optional<GlooPairWatch::Lost> GlooPairWatch::BrokenPeer(int first) {
  auto probe = ctx_->createUnboundBuffer(&byte_, 1);
  auto broken = [&](int p) -> std::optional<Lost> {
    if (p < 0 || p >= ctx_->size || p == ctx_->rank) return std::nullopt;
    try {
      probe->recv(p, slot_, 0, 0);  // gloo rethrows a broken pair's error on posting
    } catch (const std::exception& e) {
      return Lost{p, GlooMessage(e)};
    }
    return std::nullopt;
  };
  if (auto lost = broken(first)) return lost;
  for (int p = 0; p < ctx_->size; ++p) {
    if (p == first) continue;
    if (auto lost = broken(p)) return lost;
  }
  return std::nullopt;
}

GlooPairWatch::Scope::Scope(GlooPairWatch& watch,
                            std::vector<gloo::transport::UnboundBuffer*> buffers)
    : watch_(watch) {
  MutexLock l(watch_.mu_);
  watch_.active_ = std::move(buffers);
  if (!watch_.broken_) return;
  for (auto* b : watch_.active_) {  // broke between collectives: fail at the first wait
    b->abortWaitSend();
    b->abortWaitRecv();
  }
}

GlooPairWatch::Scope::~Scope() {
  MutexLock l(watch_.mu_);
  watch_.active_.clear();
}

}  // namespace hpod::train::comm
