//===- SingleRankCommunicator.cpp -----------------------------------------===//

#include "colossal/runtime/comm/SingleRankCommunicator.h"

#include "colossal/runtime/Error.h"

#include <cstring>

namespace colossal::rt {

void SingleRankCommunicator::doAllGather(const void *send, void *recv, DType dtype, int64_t count) {
  if (send != recv)
    std::memmove(recv, send, size_t(count * bytesOf(dtype)));
}

void SingleRankCommunicator::doReduceScatter(const void *send, void *recv, DType dtype, int64_t count, ReduceOp) {
  if (send != recv)
    std::memmove(recv, send, size_t(count * bytesOf(dtype)));
}

void SingleRankCommunicator::doAllToAll(const void *send, void *recv, DType dtype, int64_t countPerRank) {
  if (send != recv)
    std::memmove(recv, send, size_t(countPerRank * bytesOf(dtype)));
}

void SingleRankCommunicator::doSendRecv(const std::vector<PeerTransfer> &transfers) {
  // Sends to oneself pair with receives from oneself, in order.
  std::vector<const PeerTransfer *> sends, receives;
  for (const PeerTransfer &t : transfers)
    (t.kind == PeerTransfer::Send ? sends : receives).push_back(&t);
  if (sends.size() != receives.size())
    fail(describe("send_recv"), "on one rank every send needs a matching receive");
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->buffer.bytes() != receives[i]->buffer.bytes())
      fail(describe("send_recv"), "send and receive sizes differ");
    std::memmove(receives[i]->buffer.data, sends[i]->buffer.data, size_t(sends[i]->buffer.bytes()));
  }
}

} // namespace colossal::rt
