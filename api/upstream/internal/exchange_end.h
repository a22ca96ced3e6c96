#pragma once

namespace switchyard::upstream_internal {

// How an exchange on an upstream connection ended besides its error and answer.
struct ExchangeEnd {
  // The exchange failed in transport (not by its timeout) on a connection that had served
  // an earlier one, before a byte of the answer arrived: the peer had closed it idle.
  bool stale = false;
  // No byte of the request was written (connect, lookup or handshake failed, or it was
  // still queued behind others when the connection ended).
  bool unsent = false;
  // Cut because of another exchange on the connection: one ahead of it failed or timed out,
  // or the peer closed the connection after answering one ahead of it.
  bool behind = false;
  // The peer ended the connection after answering one request while others were written
  // behind it: it may not take pipelined requests.
  bool pipeline_broken = false;
};

}  // namespace switchyard::upstream_internal
