#include "serve/peer_watch.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace bdsl::serve {
namespace {

// The port of a socket address, and its host as httplib writes remote_addr (numeric).
bool port_and_host(const sockaddr_storage& a, socklen_t len, int& port, std::string& host) {
  char h[NI_MAXHOST], s[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof h, s, sizeof s, NI_NUMERICHOST | NI_NUMERICSERV))
    return false;
  port = std::atoi(s);
  host = h;
  return true;
}

}  // namespace

PeerWatch::PeerWatch(const std::string& remote_addr, int remote_port, int local_port) {
  if (remote_port <= 0 || local_port <= 0) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    char* end = nullptr;
    const long fd = std::strtol(entry.path().filename().c_str(), &end, 10);
    if (*end != '\0' || fd < 0) continue;
    struct stat st;
    if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer{}, self{};
    socklen_t peer_len = sizeof peer, self_len = sizeof self;
    if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
        getsockname(int(fd), reinterpret_cast<sockaddr*>(&self), &self_len) != 0)
      continue;
    int pport = 0, sport = 0;
    std::string phost, shost;
    if (!port_and_host(peer, peer_len, pport, phost) || !port_and_host(self, self_len, sport, shost)) continue;
    if (pport == remote_port && sport == local_port && phost == remote_addr) {
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
