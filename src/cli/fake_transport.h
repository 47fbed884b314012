#pragma once

// Test doubles for the CLI's seams: a scripted SageMaker endpoint (FakeTransport)
// and a Sleeper that advances a FakeClock instead of sleeping.
//
// Thread contract: not thread-safe; a test drives them from one thread.

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/clock.h"
#include "hpod/cli/client.h"
#include "hpod/cli/main.h"

namespace hpod::cli {

inline http::Response JsonResponse(int status, const nlohmann::ordered_json& body) {
  http::Response r;
  r.status = status;
  r.headers = {{"Content-Type", "application/x-amz-json-1.1"}};
  r.body = body.dump();
  return r;
}

inline http::Response ErrorResponse(int status, const std::string& type,
                                    const std::string& message) {
  return JsonResponse(status, {{"__type", type}, {"Message", message}});
}

class FakeTransport final : public Transport {
 public:
  struct Call {
    std::string url;
    std::string operation;  // from X-Amz-Target, "DescribeCluster"
    nlohmann::ordered_json body;
    http::Request request;
  };
  using Handler = std::function<StatusOr<http::Response>(const nlohmann::ordered_json& body)>;

  // Answers `operation` with `handler` (replacing any queued responses).
  void On(const std::string& operation, Handler handler) {
    handlers_[operation] = std::move(handler);
  }
  // Answers the next calls of `operation` with these results in order; the last
  // one repeats.
  void Queue(const std::string& operation, std::vector<StatusOr<http::Response>> results) {
    auto queue =
        std::make_shared<std::deque<StatusOr<http::Response>>>(results.begin(), results.end());
    handlers_[operation] = [queue](const nlohmann::ordered_json&) {
      StatusOr<http::Response> next = queue->front();
      if (queue->size() > 1) queue->pop_front();
      return next;
    };
  }

  StatusOr<http::Response> Send(const std::string& url, const http::Request& request) override {
    std::string target(request.HeaderValue("X-Amz-Target"));
    std::string op = target.substr(target.find('.') + 1);
    nlohmann::ordered_json body = nlohmann::ordered_json::parse(request.body, nullptr, false);
    calls.push_back({url, op, body, request});
    auto it = handlers_.find(op);
    if (it == handlers_.end()) return JsonResponse(200, nlohmann::ordered_json::object());
    return it->second(body);
  }

  size_t CountCalls(const std::string& operation) const {
    size_t n = 0;
    for (const auto& c : calls) n += c.operation == operation ? 1 : 0;
    return n;
  }

  std::vector<Call> calls;

 private:
  std::map<std::string, Handler> handlers_;
};

// Lends a FakeTransport to code that wants to own its Transport.
class BorrowedTransport final : public Transport {
 public:
  explicit BorrowedTransport(Transport& target) : target_(target) {}
  StatusOr<http::Response> Send(const std::string& url, const http::Request& request) override {
    return target_.Send(url, request);
  }

 private:
  Transport& target_;
};

class FakeSleeper final : public Sleeper {
 public:
  explicit FakeSleeper(FakeClock& clock) : clock_(clock) {}
  void SleepFor(std::chrono::milliseconds d) override {
    sleeps.push_back(d);
    clock_.AdvanceTime(d);
  }
  std::vector<std::chrono::milliseconds> sleeps;

 private:
  FakeClock& clock_;
};

// A Runtime for cli::Run in tests: fixed credentials (no profile is read), the
// fake transport, clock and sleeper, and output captured in `out` / `err`.
inline Runtime FakeRuntime(FakeTransport& transport, FakeClock& clock, Sleeper& sleeper,
                           std::ostream& out, std::ostream& err) {
  Runtime rt;
  rt.env = {{"AWS_ACCESS_KEY_ID", "AKID"},
            {"AWS_SECRET_ACCESS_KEY", "secret"},
            {"AWS_REGION", "us-west-2"},
            {"AWS_MAX_ATTEMPTS", "1"},
            {"HOME", "/nonexistent/hpod-cli-test"}};
  rt.out = &out;
  rt.err = &err;
  rt.make_transport = [&transport](const http::ClientOptions&) {
    return std::make_unique<BorrowedTransport>(transport);
  };
  rt.clock = &clock;
  rt.sleeper = &sleeper;
  return rt;
}

}  // namespace hpod::cli
