// Opening the server's listening socket (TCP or Unix-domain) and naming endpoints;
// split from server.cc to keep that file about the sessions.

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

// <utility> above must precede every Boost header (Boost 1.74 Asio under g++ 12).
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "hpod/http/server_internal.h"

namespace hpod::http::internal {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A generic endpoint of family AF_INET/AF_INET6 as the TCP endpoint it holds.
tcp::endpoint ToTcp(const Protocol::endpoint& endpoint) {
  tcp::endpoint ip;
  std::memcpy(ip.data(), endpoint.data(), std::min(endpoint.size(), ip.capacity()));
  ip.resize(std::min(endpoint.size(), ip.capacity()));
  return ip;
}

std::string FormatTcp(const tcp::endpoint& endpoint) {
  const asio::ip::address& address = endpoint.address();
  std::string host = address.to_string();
  if (address.is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(endpoint.port());
}

}  // namespace

std::string FormatEndpoint(const Protocol::endpoint& endpoint) {
  if (endpoint.protocol().family() == AF_UNIX) return "unix";
  return FormatTcp(ToTcp(endpoint));
}

StatusOr<uint16_t> ListenTcp(const std::string& address_text, uint16_t port, int backlog,
                             Acceptor& acceptor) {
  boost::system::error_code ec;
  // Literal addresses only: a name lookup here would be a blocking call without a
  // timeout, and "localhost" is the only name worth accepting.
  std::string text = address_text == "localhost" ? "127.0.0.1" : address_text;
  asio::ip::address address = asio::ip::make_address(text, ec);
  if (ec) {
    return InvalidArgumentError("cannot listen on \"" + address_text + "\": not an IP address");
  }
  tcp::endpoint endpoint(address, port);
  std::string where = FormatTcp(endpoint);
  acceptor.open(Protocol(endpoint.protocol()), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(backlog, ec);
  if (ec) return UnavailableError("cannot listen on " + where + ": " + ec.message());
  Protocol::endpoint local = acceptor.local_endpoint(ec);
  if (ec) return UnavailableError("cannot listen on " + where + ": " + ec.message());
  return ToTcp(local).port();
}

StatusOr<ino_t> ListenUnix(const std::string& path, int backlog, Acceptor& acceptor) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return InvalidArgumentError("cannot listen on " + path + ": path longer than " +
                                std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  }
  // A socket file left by a previous run would make bind fail; anything else at that
  // path is not ours to remove.
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return InvalidArgumentError("cannot listen on " + path + ": exists and is not a socket");
    }
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return UnavailableError("cannot remove the stale socket " + path + ": " +
                              std::strerror(errno));
    }
  }
  asio::local::stream_protocol::endpoint endpoint(path);
  boost::system::error_code ec;
  acceptor.open(Protocol(endpoint.protocol()), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (ec) return UnavailableError("cannot listen on " + path + ": " + ec.message());
  // Only root (the node agents, hpodd) and the socket's group may connect.
  if (chmod(path.c_str(), 0660) != 0 || lstat(path.c_str(), &st) != 0) {
    int error = errno;
    unlink(path.c_str());
    return UnavailableError("cannot listen on " + path + ": " + std::strerror(error));
  }
  acceptor.listen(backlog, ec);
  if (ec) {
    unlink(path.c_str());
    return UnavailableError("cannot listen on " + path + ": " + ec.message());
  }
  return st.st_ino;
}

void RemoveUnixSocket(const std::string& path, ino_t inode) {
  // Only our own socket file: another server may have taken the path since.
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && st.st_ino == inode) unlink(path.c_str());
}

}  // namespace hpod::http::internal
