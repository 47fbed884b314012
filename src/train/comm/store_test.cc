#include "hpod/train/comm/store.h"

#include <gtest/gtest.h>

#include <thread>

namespace hpod::train::comm {
namespace {

using namespace std::chrono_literals;

TEST(HashStoreTest, SetGetWaitAddCheck) {
  HashStore s;
  ASSERT_TRUE(s.Set("a", "1").ok());
  EXPECT_EQ(*s.Get("a", 10ms), "1");
  EXPECT_TRUE(*s.Check("a"));
  EXPECT_FALSE(*s.Check("b"));
  EXPECT_EQ(*s.Add("n", 2), 2);
  EXPECT_EQ(*s.Add("n", 3), 5);
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    (void)s.Set("b", "x");
  });
  EXPECT_TRUE(s.Wait({"a", "b"}, 5s, nullptr, "").ok());
  t.join();
}

TEST(HashStoreTest, WaitNamesWhatIsMissing) {
  HashStore s;
  ASSERT_TRUE(s.Set("rank/0", "").ok());
  std::vector<std::string> missing;
  Status st = s.Wait({"rank/0", "rank/1", "rank/2"}, 20ms, &missing, "");
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(missing, (std::vector<std::string>{"rank/1", "rank/2"}));
  EXPECT_EQ(s.Get("nope", 10ms).status().code(), StatusCode::kDeadlineExceeded);
}

TEST(HashStoreTest, AnAbortKeyEndsTheWaitWithItsValue) {
  HashStore s;
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    (void)s.Set("abort", "rank 0 gave up: rank 2 never arrived");
  });
  Status st = s.Wait({"never"}, 10s, nullptr, "abort");
  t.join();
  EXPECT_EQ(st.code(), StatusCode::kAborted);
  EXPECT_EQ(st.message(), "rank 0 gave up: rank 2 never arrived");
}

TEST(HashStoreTest, CloseWakesWaiters) {
  HashStore s;
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    s.Close();
  });
  EXPECT_EQ(s.Get("never", 10s).status().code(), StatusCode::kUnavailable);
  t.join();
}

TEST(TcpStoreTest, RoundTripsOverTcp) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto a = TcpStore::Connect("127.0.0.1", (*server)->port(), 5s, "rank 0");
  auto b = TcpStore::Connect("localhost", (*server)->port(), 5s, "rank 0");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string blob(100000, 'z');  // larger than a socket buffer
  ASSERT_TRUE((*a)->Set("k", blob).ok());
  EXPECT_EQ(*(*b)->Get("k", 1s), blob);
  EXPECT_EQ(*(*b)->Add("count", 7), 7);
  EXPECT_EQ(*(*a)->Add("count", -2), 5);
  EXPECT_TRUE(*(*a)->Check("k"));
  // A blocking get on one client is answered when another client sets.
  std::thread t([&] {
    std::this_thread::sleep_for(30ms);
    (void)(*a)->Set("late", "v");
  });
  EXPECT_EQ(*(*b)->Get("late", 5s), "v");
  t.join();
  std::vector<std::string> missing;
  Status st = (*b)->Wait({"k", "absent"}, 30ms, &missing, "");
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(missing, std::vector<std::string>{"absent"});
  // A wait ends when its abort key is set, by another client.
  std::thread t2([&] {
    std::this_thread::sleep_for(30ms);
    (void)(*a)->Set("stop", "why");
  });
  st = (*b)->Wait({"absent"}, 10s, nullptr, "stop");
  t2.join();
  EXPECT_EQ(st.code(), StatusCode::kAborted);
  EXPECT_EQ(st.message(), "why");
}

TEST(TcpStoreTest, ServerGoingAwayIsUnavailable) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto c = TcpStore::Connect("127.0.0.1", (*server)->port(), 5s, "rank 0 (here)");
  ASSERT_TRUE(c.ok());
  std::thread t([&] {
    std::this_thread::sleep_for(30ms);
    server->reset();  // a blocked request wakes, the connection closes
  });
  auto got = (*c)->Get("never", 30s);
  t.join();
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("rank 0 (here)"), std::string::npos);
  EXPECT_EQ((*c)->Set("x", "y").code(), StatusCode::kUnavailable);
}

TEST(TcpStoreTest, ConnectGivesUpWithAOneLineError) {
  // Take a free port, then close it: nobody listens there.
  uint16_t port = 0;
  {
    auto s = TcpStoreServer::Start("127.0.0.1", 0);
    ASSERT_TRUE(s.ok());
    port = (*s)->port();
  }
  auto c = TcpStore::Connect("127.0.0.1", port, 200ms, "rank 0 (ip-10-77-1-11)");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(
      c.status().message().find("cannot reach the rendezvous store of rank 0 (ip-10-77-1-11)"),
      std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("Connection refused"), std::string::npos);
}

TEST(TcpStoreTest, TakenPortIsAClearError) {
  auto a = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(a.ok());
  auto b = TcpStoreServer::Start("127.0.0.1", (*a)->port());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("--master-port"), std::string::npos);
}

}  // namespace
}  // namespace hpod::train::comm
