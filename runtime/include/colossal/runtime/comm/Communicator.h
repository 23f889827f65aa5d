//===- Communicator.h - collectives over one group of ranks ------*- C++ -*-===//
//
// One interface for both backends (MPI on the host, NCCL on GPUs), so the
// emitted program and the conformance suite do not know which one runs. A
// communicator is one group: the world, or one group of a mesh axis.
//
// Buffers may be strided (blocks of contiguous elements a fixed stride
// apart, e.g. a column block of a row-major matrix); the base class packs
// them into a staging buffer, runs the contiguous collective and unpacks, so
// backends implement contiguous collectives only. It also checks the sizes
// (an all-gather's output is size() times its input) and records bytes in
// the counters.
//
// Every collective completes before it returns, or fails with an Error after
// the timeout; the error names the collective, the axis and its ranks, so a
// rank that stopped or took another path never makes its peers hang.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_COMMUNICATOR_H
#define COLOSSAL_RUNTIME_COMMUNICATOR_H

#include "colossal/runtime/comm/CommCounters.h"
#include "colossal/runtime/DType.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace colossal::rt {

enum class ReduceOp { Sum, Max };

/// `count` elements of `dtype`. Contiguous when `blockLength` is 0;
/// otherwise count / blockLength blocks of `blockLength` elements, the
/// starts of consecutive blocks `stride` elements apart.
struct Buffer {
  void *data = nullptr;
  DType dtype = DType::F32;
  int64_t count = 0;
  int64_t blockLength = 0;
  int64_t stride = 0;

  static Buffer of(void *data, DType dtype, int64_t count) { return {data, dtype, count, 0, 0}; }
  static Buffer strided(void *data, DType dtype, int64_t count, int64_t blockLength,
                        int64_t stride) {
    return {data, dtype, count, blockLength, stride};
  }
  bool contiguous() const { return blockLength == 0 || blockLength == stride || blockLength == count; }
  int64_t bytes() const { return count * bytesOf(dtype); }
};

struct PeerTransfer {
  enum Kind { Send, Recv } kind;
  int peer; // rank within this communicator
  Buffer buffer;
};

/// A send under way (postSend): its buffer must stay as it is until `wait`
/// returns. Destroying one waits for it.
class PendingSend {
public:
  virtual ~PendingSend();
  /// Completes the send, or fails with an Error after the timeout.
  virtual void wait() = 0;
  /// Whether the send has completed (its buffer is free), without waiting.
  virtual bool done() = 0;
};

class Communicator {
public:
  Communicator(std::string axis, std::vector<int> worldRanks, CommCounters *counters);
  virtual ~Communicator();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The mesh axis this group belongs to ("world" for all ranks).
  const std::string &axis() const { return axis_; }
  /// World ranks of the group, in group order.
  const std::vector<int> &worldRanks() const { return worldRanks_; }

  /// In place.
  void allReduce(Buffer buffer, ReduceOp op = ReduceOp::Sum);
  /// recv holds size() blocks of send.count, in rank order.
  void allGather(Buffer send, Buffer recv);
  /// send holds size() blocks of recv.count; rank r receives the reduced block r.
  void reduceScatter(Buffer send, Buffer recv, ReduceOp op = ReduceOp::Sum);
  /// send and recv hold size() equal blocks; block j of send goes to rank j.
  void allToAll(Buffer send, Buffer recv);
  void broadcast(Buffer buffer, int root);
  /// Sums (or maxes) every rank's buffer into `root`'s, in place there;
  /// the other ranks' buffers are only read (SUMMA's products are reduced
  /// to the rank that holds the block).
  void reduce(Buffer buffer, int root, ReduceOp op = ReduceOp::Sum);
  /// Sends and receives posted together (a ring step).
  void sendRecv(const std::vector<PeerTransfer> &transfers);
  /// Posts a send of a contiguous `buffer` to `peer` and returns at once: a
  /// pipeline stage sends its activations and goes on with its next task
  /// (were each send to wait for its receiver, two stages sending to each
  /// other would wait forever). Messages between two ranks are told apart
  /// by `tag` (0 to 32767), not by their order.
  std::unique_ptr<PendingSend> postSend(Buffer buffer, int peer, int tag);
  /// Receives a contiguous `buffer` sent by `peer` with `tag`, waiting for
  /// it under the timeout.
  void receive(Buffer buffer, int peer, int tag);
  void barrier();
  /// A barrier whose early ranks sleep between checks instead of polling:
  /// on a host whose cores share a clock, caches or a physical core, a
  /// polling rank slows the one it waits for, so a rank measured alone
  /// needs the others truly idle. Counted as a barrier.
  void idleBarrier();

  /// Seconds a collective may take before it is declared hung (default from
  /// COLOSSAL_COLLECTIVE_TIMEOUT, else 300).
  void setTimeout(double seconds) { timeoutSeconds_ = seconds; }
  double timeout() const { return timeoutSeconds_; }

  /// "all_reduce on axis tp (ranks 0,1,2,3)": what errors name.
  std::string describe(const char *collective) const;

protected:
  // Contiguous collectives; `bytes` of `dtype`.
  virtual void doAllReduce(void *data, DType dtype, int64_t count, ReduceOp op) = 0;
  virtual void doAllGather(const void *send, void *recv, DType dtype, int64_t count) = 0;
  virtual void doReduceScatter(const void *send, void *recv, DType dtype, int64_t count,
                               ReduceOp op) = 0;
  virtual void doAllToAll(const void *send, void *recv, DType dtype, int64_t countPerRank) = 0;
  virtual void doBroadcast(void *data, DType dtype, int64_t count, int root) = 0;
  virtual void doReduce(void *data, DType dtype, int64_t count, int root, ReduceOp op) = 0;
  virtual void doSendRecv(const std::vector<PeerTransfer> &transfers) = 0;
  /// Point-to-point with tags; backends without them refuse (the default).
  virtual std::unique_ptr<PendingSend> doPostSend(const void *data, DType dtype, int64_t count, int peer, int tag);
  virtual void doReceive(void *data, DType dtype, int64_t count, int peer, int tag);
  virtual void doBarrier() = 0;
  /// Backends that cannot wait without polling keep the plain barrier.
  virtual void doIdleBarrier() { doBarrier(); }

  // Staging for strided buffers; backends with device memory override.
  virtual void *allocateStaging(int64_t bytes);
  virtual void freeStaging(void *data);
  virtual void pack(const Buffer &from, void *to);
  virtual void unpack(const void *from, const Buffer &to);

  CommCounters *counters() const { return counters_; }

private:
  class Staged;
  /// Counts a completed collective, and keeps its span while the counters'
  /// timeline records.
  void record(CollectiveKind kind, int64_t bytes, std::chrono::steady_clock::time_point start);

  std::string axis_;
  std::vector<int> worldRanks_;
  CommCounters *counters_;
  double timeoutSeconds_;
};

/// The default collective timeout: COLOSSAL_COLLECTIVE_TIMEOUT or 300 s.
double defaultCollectiveTimeout();

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_COMMUNICATOR_H
