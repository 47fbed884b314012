#include "hpod/controlplane/response_cache.h"

namespace hpod::controlplane {

std::shared_ptr<const std::string> ResponseCache::Find(const std::string& key,
                                                       uint64_t generation) {
  MutexLock lock(mu_);
  if (generation == generation_) {
    if (auto it = bodies_.find(key); it != bodies_.end()) {
      ++hits_;
      return it->second;
    }
  }
  ++misses_;
  return nullptr;
}

void ResponseCache::Put(const std::string& key, uint64_t generation,
                        std::shared_ptr<const std::string> body) {
  MutexLock lock(mu_);
  if (generation < generation_) return;
  if (generation > generation_) {
    bodies_.clear();
    bytes_ = 0;
    generation_ = generation;
  }
  const size_t size = key.size() + body->size();
  if (bytes_ + size > max_bytes_) return;
  auto [it, inserted] = bodies_.try_emplace(key, std::move(body));
  if (inserted) bytes_ += size;
}

ResponseCache::Stats ResponseCache::GetStats() const {
  MutexLock lock(mu_);
  return Stats{hits_, misses_, bytes_, bodies_.size()};
}

}  // namespace hpod::controlplane
