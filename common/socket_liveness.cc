#include "common/socket_liveness.h"

#include <sys/socket.h>

#include <cerrno>

namespace switchyard {

bool IdleSocketIsOpen(int fd) {
  if (fd < 0) return false;
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  return false;  // 0: the peer closed it; > 0: an answer to nothing
}

}  // namespace switchyard
