//===- GridBlocks.h - a matrix's blocks on a q x q grid, for tests -*- C++ -*-===//

#ifndef COLOSSAL_TEST_UNIT_RUNTIME_GRIDBLOCKS_H
#define COLOSSAL_TEST_UNIT_RUNTIME_GRIDBLOCKS_H

#include "colossal/runtime/kernels/HostTensor.h"

namespace colossal::rt::testing {

/// Block (i, j) of a matrix cut into q x q equal blocks: what grid rank
/// (i, j) holds.
inline host::Tensor gridBlock(const host::Tensor &t, int64_t i, int64_t j, int64_t q) {
  int64_t rows = t.shape[0] / q, columns = t.shape[1] / q;
  host::Tensor out = host::Tensor::zeros({rows, columns});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      out.floats[size_t(r * columns + c)] = t.floats[size_t((i * rows + r) * t.shape[1] + j * columns + c)];
  return out;
}

} // namespace colossal::rt::testing

#endif // COLOSSAL_TEST_UNIT_RUNTIME_GRIDBLOCKS_H
