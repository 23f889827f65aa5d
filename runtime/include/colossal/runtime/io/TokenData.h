//===- TokenData.h - language-model batches from a token file -----*- C++ -*-===//
//
// A token file is a flat stream of token ids: raw uint16 (".u16", ".bin")
// or uint32 (".u32") little-endian, or a 1-D .npy. It is cut into samples of
// seq + 1 tokens (inputs and the next-token labels) that do not overlap.
// Each epoch visits the samples in a shuffled order that depends only on the
// seed and the epoch, so every rank computes the same global order without
// talking; global batch t takes the next `globalBatch` samples, and each
// data-parallel rank reads only its own rows.
//
// The file is mapped, not read: a corpus of tens of gigabytes costs address
// space and the page cache, not the trainer's memory, and tokens keep their
// stored width until a batch copies them out.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_TOKENDATA_H
#define COLOSSAL_RUNTIME_TOKENDATA_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace colossal::rt {

enum class TokenFormat { Auto, U16, U32, Npy };

class TokenDataset {
public:
  /// Opens `path`; with `vocab` > 0 every id is checked against it (an error
  /// names the position of the first bad id).
  static TokenDataset open(const std::string &path, TokenFormat format = TokenFormat::Auto, int64_t vocab = 0);

  int64_t tokens() const { return count_; }
  /// Token `i` (0 <= i < tokens()).
  int64_t tokenAt(int64_t i) const;
  int64_t samples(int64_t seq) const { return seq > 0 ? (tokens() - 1) / seq : 0; }

  /// Rows [rowBegin, rowEnd) of global batch `step` (0-based): inputs and
  /// labels, each (rowEnd - rowBegin) x seq, row-major.
  void batch(int64_t step, int64_t globalBatch, int64_t seq, int64_t rowBegin, int64_t rowEnd, uint64_t seed,
             int64_t *inputs, int64_t *labels);

  /// The sample index at position `position` of the global order.
  int64_t sampleAt(int64_t position, int64_t seq, uint64_t seed);

private:
  std::string path_;
  /// The mapped file (unmapped with the last copy of the dataset).
  std::shared_ptr<const unsigned char> mapping_;
  const unsigned char *ids_ = nullptr; // the first token's bytes
  int64_t count_ = 0;
  int width_ = 2;         // bytes per stored token
  bool signed_ = false;   // i32 and i64 .npy files
  // The current epoch's permutation, cached.
  int64_t cachedEpoch_ = -1, cachedSeq_ = 0;
  uint64_t cachedSeed_ = 0;
  std::vector<int64_t> order_;
};

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_TOKENDATA_H
