//===- SequenceParallel.cpp -----------------------------------------------===//

#include "colossal/runtime/SequenceParallel.h"

#include "colossal/runtime/Error.h"

namespace colossal::rt::host {

std::vector<Tensor> dropoutOfSlice(const Tensor &x, float ratio, const DropoutKey &key, int64_t dim,
                                   int64_t sliceIndex, int64_t slices) {
  if (x.integer || dim < 0 || size_t(dim) >= x.shape.size() || slices < 1 || sliceIndex < 0 || sliceIndex >= slices)
    fail("dropout (sequence slice)", "slice " + std::to_string(sliceIndex) + " of " + std::to_string(slices) +
                                         " along dimension " + std::to_string(dim) + " of " + describe(x.shape));
  int64_t outer = 1, inner = 1, size = x.shape[size_t(dim)];
  for (size_t d = 0; d < size_t(dim); ++d)
    outer *= x.shape[d];
  for (size_t d = size_t(dim) + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  Tensor out = Tensor::zeros(x.shape), mask = Tensor::zeros(x.shape, true);
  // Local element (o, i, k) is the whole tensor's (o, sliceIndex * size + i, k).
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < size; ++i)
      for (int64_t k = 0; k < inner; ++k) {
        size_t local = size_t((o * size + i) * inner + k);
        uint64_t whole = uint64_t((o * slices * size + sliceIndex * size + i) * inner + k);
        bool keep = ratio == 0 || dropoutKeeps(key.seed, key.step, key.firstIndex + whole, ratio);
        mask.ints[local] = keep;
        out.floats[local] = keep ? (ratio == 0 ? x.floats[local]
                                               : float(double(x.floats[local]) / (1.0 - double(ratio))))
                                 : 0.0f;
      }
  return {std::move(out), std::move(mask)};
}

} // namespace colossal::rt::host
