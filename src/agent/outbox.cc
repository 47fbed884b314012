#include "hpod/agent/outbox.h"

#include <utility>

namespace hpod::agent {

void Outbox::Push(std::string frame, Kind kind, std::string type, uint64_t tag) {
  if (kind == Kind::kLatest) {
    for (Frame& f : frames_) {
      if (f.latest_type == type) {
        bytes_ = bytes_ - f.data.size() + frame.size();
        f.data = std::move(frame);
        f.tag = tag;
        return;
      }
    }
  }
  auto at = frames_.end();
  if (kind == Kind::kHeartbeat) {
    while (at != frames_.begin() && !std::prev(at)->latest_type.empty()) --at;
  }
  bytes_ += frame.size();
  frames_.insert(at, Frame{std::move(frame), kind == Kind::kLatest ? std::move(type) : "", tag});
  while (bytes_ > max_bytes_ && frames_.size() > 1) {
    bytes_ -= frames_.front().data.size();
    frames_.pop_front();
    ++dropped_;
  }
}

std::string Outbox::Pop(uint64_t* tag) {
  if (tag != nullptr) *tag = frames_.front().tag;
  std::string frame = std::move(frames_.front().data);
  frames_.pop_front();
  bytes_ -= frame.size();
  return frame;
}

void Outbox::PushFront(std::string frame) {
  bytes_ += frame.size();
  // Ordered: whatever it was, it was first in line, and stays so.
  frames_.push_front(Frame{std::move(frame), "", 0});
}

std::deque<std::string> Outbox::TakeAll() {
  std::deque<std::string> out;
  for (Frame& f : frames_) out.push_back(std::move(f.data));
  frames_.clear();
  bytes_ = 0;
  return out;
}

}  // namespace hpod::agent
