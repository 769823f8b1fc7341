// Whether the client of a request still waiting for its whole answer has gone away. httplib 0.11
// (Debian 12's) does not tell a handler; this finds the request's socket among the process's file
// descriptors by its two ports (and the peer's address) and polls it for the peer's hang-up, so a
// non-streaming request whose client disconnects frees its slot at once, as a stream's does.
// Linux only (/proc/self/fd, POLLRDHUP); where the socket is not found, gone() stays false.
#pragma once
#include <string>

namespace bdsl::serve {

class PeerWatch {
 public:
  PeerWatch(const std::string& remote_addr, int remote_port, int local_port);
  bool found() const { return fd_ >= 0; }
  // The peer closed its side of the connection, or the connection failed. The descriptor is
  // httplib's: valid while the handler runs, which is the only time this is asked.
  bool gone() const;

 private:
  int fd_ = -1;
};

}  // namespace bdsl::serve
