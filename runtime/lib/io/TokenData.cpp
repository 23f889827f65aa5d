//===- TokenData.cpp ------------------------------------------------------===//

#include "colossal/runtime/io/TokenData.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/Npy.h"
#include "colossal/runtime/kernels/Philox.h"

#include <cerrno>
#include <cstring>
#include <numeric>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace colossal::rt {

namespace {
bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
} // namespace

namespace {

/// Maps `path` read-only; a null pointer for an empty file.
std::shared_ptr<const unsigned char> mapFile(const std::string &path, const std::string &what, size_t &size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(what, std::strerror(errno));
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    int error = errno;
    ::close(fd);
    fail(what, S_ISREG(info.st_mode) ? std::strerror(error) : "not a regular file");
  }
  size = size_t(info.st_size);
  if (size == 0) {
    ::close(fd);
    return nullptr;
  }
  void *data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int error = errno;
  ::close(fd);
  if (data == MAP_FAILED)
    fail(what, std::string("cannot map the file: ") + std::strerror(error));
  // Batches visit samples in a shuffled order.
  madvise(data, size, MADV_RANDOM);
  return std::shared_ptr<const unsigned char>(static_cast<const unsigned char *>(data),
                                              [size](const unsigned char *p) { munmap(const_cast<unsigned char *>(p), size); });
}

} // namespace

TokenDataset TokenDataset::open(const std::string &path, TokenFormat format, int64_t vocab) {
  std::string what = "read tokens " + path;
  if (format == TokenFormat::Auto) {
    if (endsWith(path, ".npy"))
      format = TokenFormat::Npy;
    else if (endsWith(path, ".u32"))
      format = TokenFormat::U32;
    else if (endsWith(path, ".u16") || endsWith(path, ".bin"))
      format = TokenFormat::U16;
    else
      fail(what, "cannot tell the format from the name: use .npy, .u16/.bin (uint16) or .u32 (uint32)");
  }
  TokenDataset data;
  data.path_ = path;
  size_t size = 0;
  data.mapping_ = mapFile(path, what, size);
  const unsigned char *bytes = data.mapping_.get();
  if (format == TokenFormat::Npy) {
    NpyLayout layout = parseNpyLayout(bytes, size, path);
    if (layout.shape.size() != 1)
      fail(what, "expected a 1-D array of token ids, got shape " + std::to_string(layout.shape.size()) + "-D");
    switch (layout.dtype) {
    case DType::I64: data.width_ = layout.unsigned32 ? 4 : 8, data.signed_ = !layout.unsigned32; break;
    case DType::I32: data.width_ = 4, data.signed_ = true; break;
    case DType::U16: data.width_ = 2; break;
    case DType::U8: data.width_ = 1; break;
    default: fail(what, std::string("token ids must be integers, not ") + nameOf(layout.dtype));
    }
    data.ids_ = bytes + layout.dataOffset;
    data.count_ = layout.elements();
  } else {
    data.width_ = format == TokenFormat::U16 ? 2 : 4;
    if (size % size_t(data.width_))
      fail(what, std::to_string(size) + " bytes is not a whole number of " + std::to_string(data.width_ * 8) +
                     "-bit tokens");
    data.ids_ = bytes;
    data.count_ = int64_t(size) / data.width_;
  }
  // One pass over the file, so a bad id stops the run before it starts.
  for (int64_t i = 0; i < data.count_; ++i) {
    int64_t id = data.tokenAt(i);
    if (id < 0 || (vocab > 0 && id >= vocab))
      fail(what, "token " + std::to_string(i) + " is " + std::to_string(id) + ", outside the vocabulary of " +
                     std::to_string(vocab));
  }
  return data;
}

int64_t TokenDataset::tokenAt(int64_t i) const {
  const unsigned char *at = ids_ + size_t(i) * size_t(width_);
  switch (width_) {
  case 1: return *at;
  case 2: {
    uint16_t v;
    std::memcpy(&v, at, 2);
    return v;
  }
  case 4: {
    if (signed_) {
      int32_t v;
      std::memcpy(&v, at, 4);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, at, 4);
    return v;
  }
  default: {
    int64_t v;
    std::memcpy(&v, at, 8);
    return v;
  }
  }
}

int64_t TokenDataset::sampleAt(int64_t position, int64_t seq, uint64_t seed) {
  int64_t count = samples(seq);
  int64_t epoch = position / count;
  if (epoch != cachedEpoch_ || seq != cachedSeq_ || seed != cachedSeed_) {
    // Fisher-Yates driven by Philox keyed by (seed, epoch): the same order on
    // every rank and every machine.
    order_.resize(size_t(count));
    std::iota(order_.begin(), order_.end(), int64_t(0));
    for (int64_t i = count - 1; i > 0; --i) {
      PhiloxBlock r = philox4x32(uint32_t(i), uint32_t(uint64_t(i) >> 32), uint32_t(epoch),
                                 uint32_t(uint64_t(epoch) >> 32), uint32_t(seed), uint32_t(seed >> 32));
      uint64_t draw = (uint64_t(r.x[0]) << 32 | r.x[1]) % uint64_t(i + 1);
      std::swap(order_[size_t(i)], order_[size_t(draw)]);
    }
    cachedEpoch_ = epoch, cachedSeq_ = seq, cachedSeed_ = seed;
  }
  return order_[size_t(position % count)];
}

void TokenDataset::batch(int64_t step, int64_t globalBatch, int64_t seq, int64_t rowBegin, int64_t rowEnd,
                         uint64_t seed, int64_t *inputs, int64_t *labels) {
  if (samples(seq) < 1)
    fail("read tokens " + path_, std::to_string(tokens()) + " tokens are fewer than one sample of " +
                                     std::to_string(seq + 1));
  if (rowBegin < 0 || rowEnd > globalBatch || rowBegin > rowEnd)
    fail("read tokens " + path_, "rows [" + std::to_string(rowBegin) + ", " + std::to_string(rowEnd) +
                                     ") are outside the global batch of " + std::to_string(globalBatch));
  for (int64_t row = rowBegin; row < rowEnd; ++row) {
    int64_t start = sampleAt(step * globalBatch + row, seq, seed) * seq;
    int64_t *in = inputs + (row - rowBegin) * seq, *out = labels + (row - rowBegin) * seq;
    for (int64_t k = 0; k < seq; ++k) {
      in[k] = tokenAt(start + k);
      out[k] = tokenAt(start + k + 1);
    }
  }
}

} // namespace colossal::rt
