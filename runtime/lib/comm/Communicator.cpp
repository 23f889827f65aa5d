//===- Communicator.cpp - checks, staging and counters for every backend --===//

#include "colossal/runtime/comm/Communicator.h"
#include "colossal/runtime/comm/CommTimeline.h"

#include "colossal/runtime/Error.h"

#include <cstdlib>
#include <cstring>

namespace colossal::rt {

double defaultCollectiveTimeout() {
  if (const char *text = std::getenv("COLOSSAL_COLLECTIVE_TIMEOUT")) {
    char *end = nullptr;
    double seconds = std::strtod(text, &end);
    if (end != text && *end == '\0' && seconds > 0)
      return seconds;
    fail("COLOSSAL_COLLECTIVE_TIMEOUT", std::string("\"") + text + "\" is not a positive number of seconds");
  }
  return 300.0;
}

Communicator::Communicator(std::string axis, std::vector<int> worldRanks, CommCounters *counters)
    : axis_(std::move(axis)), worldRanks_(std::move(worldRanks)), counters_(counters),
      timeoutSeconds_(defaultCollectiveTimeout()) {}

Communicator::~Communicator() = default;

std::string Communicator::describe(const char *collective) const {
  std::string ranks;
  for (size_t i = 0; i < worldRanks_.size() && i < 16; ++i)
    ranks += (i ? "," : "") + std::to_string(worldRanks_[i]);
  if (worldRanks_.size() > 16)
    ranks += ",... (" + std::to_string(worldRanks_.size()) + " ranks)";
  return std::string(collective) + " on axis " + axis_ + " (ranks " + ranks + ")";
}

void Communicator::record(CollectiveKind kind, int64_t bytes, std::chrono::steady_clock::time_point start) {
  if (!counters_)
    return;
  counters_->record(kind, axis_, bytes);
  if (CommTimeline *timeline = counters_->timeline(); timeline && timeline->recording())
    timeline->add(kind, axis_, bytes, start, std::chrono::steady_clock::now());
}

void *Communicator::allocateStaging(int64_t bytes) {
  void *data = std::malloc(size_t(bytes > 0 ? bytes : 1));
  if (!data)
    fail("staging", "cannot allocate " + std::to_string(bytes) + " bytes");
  return data;
}

void Communicator::freeStaging(void *data) { std::free(data); }

void Communicator::pack(const Buffer &from, void *to) {
  int64_t element = bytesOf(from.dtype);
  int64_t blocks = from.count / from.blockLength;
  for (int64_t b = 0; b < blocks; ++b)
    std::memcpy(static_cast<char *>(to) + b * from.blockLength * element,
                static_cast<const char *>(from.data) + b * from.stride * element,
                size_t(from.blockLength * element));
}

void Communicator::unpack(const void *from, const Buffer &to) {
  int64_t element = bytesOf(to.dtype);
  int64_t blocks = to.count / to.blockLength;
  for (int64_t b = 0; b < blocks; ++b)
    std::memcpy(static_cast<char *>(to.data) + b * to.stride * element,
                static_cast<const char *>(from) + b * to.blockLength * element,
                size_t(to.blockLength * element));
}

/// A contiguous view of a buffer for the duration of one collective: the
/// buffer itself when it is contiguous, else a staging copy (packed on entry
/// when it is read, unpacked on exit when it is written).
class Communicator::Staged {
public:
  Staged(Communicator &comm, const Buffer &buffer, bool read, bool written, const char *what)
      : comm_(comm), buffer_(buffer), written_(written) {
    if (buffer.count < 0)
      fail(what, "negative element count " + std::to_string(buffer.count));
    if (buffer.count > 0 && !buffer.data)
      fail(what, "null buffer");
    if (buffer.contiguous()) {
      data_ = buffer.data;
      return;
    }
    if (buffer.blockLength < 0 || buffer.stride < buffer.blockLength ||
        buffer.count % buffer.blockLength != 0)
      fail(what, "a strided buffer needs count (" + std::to_string(buffer.count) +
                     ") a multiple of its block length (" + std::to_string(buffer.blockLength) +
                     ") and a stride (" + std::to_string(buffer.stride) + ") at least the block");
    data_ = comm.allocateStaging(buffer.bytes());
    owned_ = true;
    if (read)
      comm.pack(buffer, data_);
  }
  ~Staged() {
    if (owned_)
      comm_.freeStaging(data_);
  }
  void finish() {
    if (owned_ && written_)
      comm_.unpack(data_, buffer_);
  }
  void *data() const { return data_; }

private:
  Communicator &comm_;
  Buffer buffer_;
  bool written_;
  bool owned_ = false;
  void *data_ = nullptr;
};

namespace {
void requireSameType(const Buffer &a, const Buffer &b, const std::string &what) {
  if (a.dtype != b.dtype)
    fail(what, std::string("send is ") + nameOf(a.dtype) + " but receive is " + nameOf(b.dtype));
}
} // namespace

void Communicator::allReduce(Buffer buffer, ReduceOp op) {
  auto start = std::chrono::steady_clock::now();
  std::string what = describe("all_reduce");
  Staged data(*this, buffer, true, true, what.c_str());
  doAllReduce(data.data(), buffer.dtype, buffer.count, op);
  data.finish();
  record(CollectiveKind::AllReduce, buffer.bytes(), start);
}

void Communicator::allGather(Buffer send, Buffer recv) {
  auto start = std::chrono::steady_clock::now();
  std::string what = describe("all_gather");
  requireSameType(send, recv, what);
  if (recv.count != send.count * size())
    fail(what, "receive holds " + std::to_string(recv.count) + " elements, expected " +
                   std::to_string(size()) + " x " + std::to_string(send.count));
  Staged in(*this, send, true, false, what.c_str());
  Staged out(*this, recv, false, true, what.c_str());
  doAllGather(in.data(), out.data(), send.dtype, send.count);
  out.finish();
  record(CollectiveKind::AllGather, recv.bytes(), start);
}

void Communicator::reduceScatter(Buffer send, Buffer recv, ReduceOp op) {
  auto start = std::chrono::steady_clock::now();
  std::string what = describe("reduce_scatter");
  requireSameType(send, recv, what);
  if (send.count != recv.count * size())
    fail(what, "send holds " + std::to_string(send.count) + " elements, expected " +
                   std::to_string(size()) + " x " + std::to_string(recv.count));
  Staged in(*this, send, true, false, what.c_str());
  Staged out(*this, recv, false, true, what.c_str());
  doReduceScatter(in.data(), out.data(), send.dtype, recv.count, op);
  out.finish();
  record(CollectiveKind::ReduceScatter, send.bytes(), start);
}

void Communicator::allToAll(Buffer send, Buffer recv) {
  auto start = std::chrono::steady_clock::now();
  std::string what = describe("all_to_all");
  requireSameType(send, recv, what);
  if (send.count != recv.count || send.count % size() != 0)
    fail(what, "send and receive need the same count, a multiple of " + std::to_string(size()) +
                   " (got " + std::to_string(send.count) + " and " + std::to_string(recv.count) + ")");
  Staged in(*this, send, true, false, what.c_str());
  Staged out(*this, recv, false, true, what.c_str());
  doAllToAll(in.data(), out.data(), send.dtype, send.count / size());
  out.finish();
  record(CollectiveKind::AllToAll, send.bytes(), start);
}

void Communicator::broadcast(Buffer buffer, int root) {
  auto start = std::chrono::steady_clock::now();
  std::string what = describe("broadcast");
  if (root < 0 || root >= size())
    fail(what, "root " + std::to_string(root) + " is outside the group of " + std::to_string(size()));
  Staged data(*this, buffer, rank() == root, rank() != root, what.c_str());
  doBroadcast(data.data(), buffer.dtype, buffer.count, root);
  data.finish();
  record(CollectiveKind::Broadcast, buffer.bytes(), start);
}

void Communicator::reduce(Buffer buffer, int root, ReduceOp op) {
  auto start = std::chrono::steady_clock::now();
  std::string what = describe("reduce");
  if (root < 0 || root >= size())
    fail(what, "root " + std::to_string(root) + " is outside the group of " + std::to_string(size()));
  Staged data(*this, buffer, true, rank() == root, what.c_str());
  doReduce(data.data(), buffer.dtype, buffer.count, root, op);
  data.finish();
  record(CollectiveKind::Reduce, buffer.bytes(), start);
}

PendingSend::~PendingSend() = default;

namespace {

void checkPeer(const Communicator &c, const std::string &what, const Buffer &buffer, int peer, int tag) {
  if (peer < 0 || peer >= c.size())
    fail(what, "peer " + std::to_string(peer) + " is outside the group of " + std::to_string(c.size()));
  if (tag < 0 || tag > 32767)
    fail(what, "tag " + std::to_string(tag) + " is outside 0 to 32767");
  if (!buffer.contiguous())
    fail(what, "point-to-point transfers take contiguous buffers");
}

} // namespace

std::unique_ptr<PendingSend> Communicator::postSend(Buffer buffer, int peer, int tag) {
  auto start = std::chrono::steady_clock::now();
  std::string what = describe("send");
  checkPeer(*this, what, buffer, peer, tag);
  std::unique_ptr<PendingSend> pending = doPostSend(buffer.data, buffer.dtype, buffer.count, peer, tag);
  record(CollectiveKind::SendRecv, buffer.bytes(), start);
  return pending;
}

void Communicator::receive(Buffer buffer, int peer, int tag) {
  std::string what = describe("receive");
  checkPeer(*this, what, buffer, peer, tag);
  doReceive(buffer.data, buffer.dtype, buffer.count, peer, tag);
}

std::unique_ptr<PendingSend> Communicator::doPostSend(const void *, DType, int64_t, int, int) {
  fail(describe("send"), "this communicator has no tagged point-to-point transfers");
}

void Communicator::doReceive(void *, DType, int64_t, int, int) {
  fail(describe("receive"), "this communicator has no tagged point-to-point transfers");
}

void Communicator::sendRecv(const std::vector<PeerTransfer> &transfers) {
  auto start = std::chrono::steady_clock::now();
  std::string what = describe("send_recv");
  std::vector<std::unique_ptr<Staged>> staged;
  std::vector<PeerTransfer> contiguous;
  int64_t sent = 0;
  for (const PeerTransfer &t : transfers) {
    if (t.peer < 0 || t.peer >= size())
      fail(what, "peer " + std::to_string(t.peer) + " is outside the group of " + std::to_string(size()));
    bool isSend = t.kind == PeerTransfer::Send;
    staged.push_back(std::make_unique<Staged>(*this, t.buffer, isSend, !isSend, what.c_str()));
    PeerTransfer c = t;
    c.buffer = Buffer::of(staged.back()->data(), t.buffer.dtype, t.buffer.count);
    contiguous.push_back(c);
    if (isSend)
      sent += t.buffer.bytes();
  }
  doSendRecv(contiguous);
  for (auto &s : staged)
    s->finish();
  record(CollectiveKind::SendRecv, sent, start);
}

void Communicator::barrier() {
  auto start = std::chrono::steady_clock::now();
  doBarrier();
  record(CollectiveKind::Barrier, 0, start);
}

void Communicator::idleBarrier() {
  auto start = std::chrono::steady_clock::now();
  doIdleBarrier();
  record(CollectiveKind::Barrier, 0, start);
}

} // namespace colossal::rt
