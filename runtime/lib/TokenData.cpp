//===- TokenData.cpp ------------------------------------------------------===//

#include "colossal/runtime/TokenData.h"

#include "colossal/runtime/AtomicFile.h"
#include "colossal/runtime/Error.h"
#include "colossal/runtime/Npy.h"
#include "colossal/runtime/Philox.h"

#include <cstring>
#include <numeric>

namespace colossal::rt {

namespace {
bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
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
  if (format == TokenFormat::Npy) {
    NpyArray array = readNpy(path);
    if (array.shape.size() != 1)
      fail(what, "expected a 1-D array of token ids, got shape " + std::to_string(array.shape.size()) + "-D");
    data.ids_.resize(size_t(array.elements()));
    for (int64_t i = 0; i < array.elements(); ++i) {
      switch (array.dtype) {
      case DType::I64: data.ids_[size_t(i)] = array.as<int64_t>()[i]; break;
      case DType::I32: data.ids_[size_t(i)] = array.as<int32_t>()[i]; break;
      case DType::U16: data.ids_[size_t(i)] = array.as<uint16_t>()[i]; break;
      case DType::U8: data.ids_[size_t(i)] = array.as<uint8_t>()[i]; break;
      default: fail(what, std::string("token ids must be integers, not ") + nameOf(array.dtype));
      }
    }
  } else {
    std::vector<unsigned char> bytes = readWholeFile(path);
    size_t width = format == TokenFormat::U16 ? 2 : 4;
    if (bytes.size() % width)
      fail(what, std::to_string(bytes.size()) + " bytes is not a whole number of " + std::to_string(width * 8) +
                     "-bit tokens");
    data.ids_.resize(bytes.size() / width);
    for (size_t i = 0; i < data.ids_.size(); ++i) {
      if (width == 2) {
        uint16_t v;
        std::memcpy(&v, bytes.data() + i * 2, 2);
        data.ids_[i] = v;
      } else {
        uint32_t v;
        std::memcpy(&v, bytes.data() + i * 4, 4);
        data.ids_[i] = v;
      }
    }
  }
  for (size_t i = 0; i < data.ids_.size(); ++i)
    if (data.ids_[i] < 0 || (vocab > 0 && data.ids_[i] >= vocab))
      fail(what, "token " + std::to_string(i) + " is " + std::to_string(data.ids_[i]) + ", outside the vocabulary of " +
                     std::to_string(vocab));
  return data;
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
    int64_t sample = sampleAt(step * globalBatch + row, seq, seed);
    const int64_t *start = ids_.data() + sample * seq;
    std::memcpy(inputs + (row - rowBegin) * seq, start, size_t(seq) * 8);
    std::memcpy(labels + (row - rowBegin) * seq, start + 1, size_t(seq) * 8);
  }
}

} // namespace colossal::rt
