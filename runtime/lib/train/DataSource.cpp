//===- DataSource.cpp -------------------------------------------------------===//

#include "DataSource.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/Npy.h"
#include "colossal/runtime/kernels/Philox.h"
#include "colossal/runtime/kernels/TensorIndexing.h"

#include <algorithm>
#include <unistd.h>

namespace colossal::rt::trainer {

DataSource::DataSource(const TrainingProgram &program, const Options &options, int rank, int ranks)
    : program_(program), options_(options), rank_(rank), ranks_(ranks) {
  microbatches_ = options.settings.microbatches;
  for (const ProgramInput &in : program.inputs)
    globalShapes_.push_back(globalShape(in));
  if (!options.feed.empty())
    loadFeeds();
  else if (!options.data.empty())
    openTokens();
}

std::vector<Tensor> DataSource::microbatch(int64_t step, int64_t m) {
  MemoryScope scope(MemoryCategory::Data);
  // The step's global batch is made (read, drawn or copied) once for all
  // its microbatches.
  if (step != cachedStep_) {
    cachedGlobal_.clear();
    for (size_t i = 0; i < program_.inputs.size(); ++i)
      cachedGlobal_.push_back(globalInput(i, step));
    cachedStep_ = step;
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const ProgramInput &in = program_.inputs[i];
    const Tensor &global = cachedGlobal_[i];
    // This rank's microbatch m is block rank * M + m of the global batch,
    // each block `rows` rows: contiguous.
    int64_t count = indexing::product(in.shape), begin = (rank_ * microbatches_ + m) * count;
    Tensor part = Tensor::zeros(in.shape, in.integer);
    if (in.integer)
      std::copy(global.ints.begin() + begin, global.ints.begin() + begin + count, part.ints.begin());
    else
      std::copy(global.floats.begin() + begin, global.floats.begin() + begin + count, part.floats.begin());
    inputs.push_back(std::move(part));
  }
  return inputs;
}

int64_t DataSource::tokensPerStep() const {
  for (size_t i = 0; i < program_.inputs.size(); ++i)
    if (program_.inputs[i].integer)
      return indexing::product(globalShapes_[i]);
  return globalShapes_.empty() || globalShapes_[0].empty() ? 1 : globalShapes_[0][0];
}

Shape DataSource::globalShape(const ProgramInput &in) const {
  Shape s = in.shape;
  if (!s.empty())
    s[0] *= microbatches_ * ranks_;
  return s;
}

void DataSource::loadFeeds() {
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const ProgramInput &in = program_.inputs[i];
    std::string path = options_.feed + "/" + in.name + ".npy";
    if (access(path.c_str(), R_OK) != 0)
      fail("--feed", "no file for graph input '" + in.name + "': " + path);
    NpyArray array = readNpy(path);
    bool integerFile = array.dtype == DType::I64 || array.dtype == DType::I32;
    if (in.integer != integerFile || (!in.integer && array.dtype != DType::F32))
      fail(path, std::string("holds ") + nameOf(array.dtype) + "; graph input '" + in.name + "' takes " +
                     (in.integer ? "int64 (or int32)" : "float32"));
    const Shape &want = globalShapes_[i];
    bool perStep =
        array.shape.size() == want.size() + 1 && std::equal(want.begin(), want.end(), array.shape.begin() + 1);
    if (array.shape != want && !perStep)
      fail(path, "has shape " + host::describe(array.shape) + "; graph input '" + in.name + "' takes " +
                     host::describe(want) + " per step (or [steps, ...] with one batch per step)");
    Feed feed;
    feed.batches = perStep ? array.shape[0] : 1;
    int64_t n = array.elements();
    if (in.integer) {
      feed.ints.resize(size_t(n));
      for (int64_t k = 0; k < n; ++k)
        feed.ints[size_t(k)] = array.dtype == DType::I64 ? array.as<int64_t>()[k] : array.as<int32_t>()[k];
    } else {
      feed.floats.assign(array.as<float>(), array.as<float>() + n);
    }
    feeds_.push_back(std::move(feed));
  }
}

void DataSource::openTokens() {
  std::vector<size_t> integers;
  for (size_t i = 0; i < program_.inputs.size(); ++i)
    if (program_.inputs[i].integer)
      integers.push_back(i);
  if (integers.size() != 2 || program_.inputs.size() != 2 || globalShapes_[0] != globalShapes_[1] ||
      globalShapes_[0].size() != 2)
    fail("--data", "token files feed models with two integer inputs (tokens and labels) of shape [batch, seq]; "
                   "use --feed for this model");
  tokens_.emplace(TokenDataset::open(options_.data, TokenFormat::Auto, program_.inputs[0].range));
}

Tensor DataSource::globalInput(size_t i, int64_t step) {
  const ProgramInput &in = program_.inputs[i];
  const Shape &shape = globalShapes_[i];
  Tensor t = Tensor::zeros(shape, in.integer);
  int64_t n = t.elements();
  if (!feeds_.empty()) {
    const Feed &f = feeds_[i];
    int64_t at = (step % f.batches) * n;
    if (in.integer)
      std::copy(f.ints.begin() + at, f.ints.begin() + at + n, t.ints.begin());
    else
      std::copy(f.floats.begin() + at, f.floats.begin() + at + n, t.floats.begin());
    return t;
  }
  if (tokens_) {
    Ints inputs(static_cast<size_t>(n)), labels(static_cast<size_t>(n));
    tokens_->batch(step, shape[0], shape[1], 0, shape[0], options_.seed, inputs.data(), labels.data());
    t.ints = std::move(i == 0 ? inputs : labels);
    return t;
  }
  // Synthetic: uniform in [-1, 1) or integers in [0, range), keyed by the
  // seed, the input and the step, so a resumed run sees the same data.
  for (int64_t k = 0; k < n; ++k) {
    float u = philoxUniform(options_.seed * 1000003u + i, uint64_t(step), uint64_t(k));
    if (in.integer)
      t.ints[size_t(k)] = std::min<int64_t>(in.range - 1, int64_t(u * float(in.range)));
    else
      t.floats[size_t(k)] = 2.0f * u - 1.0f;
  }
  return t;
}

} // namespace colossal::rt::trainer
