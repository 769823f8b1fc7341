#include "serve/peer_watch.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace bdsl::serve {
namespace {

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

// The host of a socket address as httplib writes remote_addr (numeric).
std::string host_of(const sockaddr_storage& a, socklen_t len) {
  char h[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof h, nullptr, 0, NI_NUMERICHOST)) return {};
  return h;
}

}  // namespace

PeerWatch::PeerWatch(const std::string& remote_addr, int remote_port, int local_port) {
  if (remote_port <= 0 || local_port <= 0) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();  // alive while `end` points into it
    char* end = nullptr;
    const long fd = std::strtol(name.c_str(), &end, 10);
    if (name.empty() || *end != '\0' || fd < 0) continue;
    // The ports first (one call each, failing at once for what is not a socket), the host last.
    sockaddr_storage self{}, peer{};
    socklen_t self_len = sizeof self, peer_len = sizeof peer;
    if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&self), &self_len) != 0 || port_of(self) != local_port) continue;
    if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 || port_of(peer) != remote_port) continue;
    if (host_of(peer, peer_len) == remote_addr) {
      fd_ = int(fd);
      return;
    }
  }
}

bool PeerWatch::gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace bdsl::serve
