#pragma once

namespace switchyard {

// Whether an idle keep-alive connection (a connected socket with no exchange in flight) may
// be used again: false when the peer has closed it (a FIN or a reset is waiting) or has sent
// bytes nobody asked for. One non-blocking peek; nothing is consumed.
bool IdleSocketIsOpen(int fd);

}  // namespace switchyard
