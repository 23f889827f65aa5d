//===- ProgramFiles.cpp - files the compiler wrote beside the program -----===//

#include "colossal/runtime/io/ProgramFiles.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/Safetensors.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unistd.h>

namespace colossal::rt {

std::string besideProgram(const std::string &file, const char *argv0) {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  std::string exe = n > 0 ? std::string(path, size_t(n)) : std::string(argv0);
  size_t slash = exe.rfind('/');
  return (slash == std::string::npos ? std::string(".") : exe.substr(0, slash)) + "/" + file;
}

namespace {

/// The constants file, read once; each constant converted once.
struct Constants {
  std::mutex mutex;
  std::unique_ptr<SafetensorsFile> file;
  std::map<std::string, std::vector<float>> floats;
  std::map<std::string, std::vector<int64_t>> ints;

  const TensorView &view(const std::string &name, DType dtype, int64_t elements) {
    if (!file)
      file = std::make_unique<SafetensorsFile>(SafetensorsFile::read(besideProgram("constants.safetensors")));
    const TensorView *tensor = file->find(name);
    if (!tensor)
      fail(file->path(), "no constant '" + name + "' (the file is from another compile of the program?)");
    if (tensor->dtype != dtype || tensor->bytes != elements * bytesOf(dtype))
      fail(file->path(), "constant '" + name + "' is not " + std::to_string(elements) + " values of " + nameOf(dtype) +
                             " (the file is from another compile of the program?)");
    return *tensor;
  }
};

Constants &constants() {
  static Constants c;
  return c;
}

template <typename T>
const std::vector<T> &load(std::map<std::string, std::vector<T>> &cache, const std::string &name, DType dtype,
                           int64_t elements) {
  Constants &c = constants();
  auto found = cache.find(name);
  if (found != cache.end())
    return found->second;
  const TensorView &tensor = c.view(name, dtype, elements);
  std::vector<T> values(static_cast<size_t>(elements));
  std::memcpy(values.data(), tensor.data, size_t(tensor.bytes));
  return cache.emplace(name, std::move(values)).first->second;
}

} // namespace

const std::vector<float> &programFloats(const std::string &name, int64_t elements) {
  std::lock_guard<std::mutex> lock(constants().mutex);
  return load(constants().floats, name, DType::F32, elements);
}

const std::vector<int64_t> &programInts(const std::string &name, int64_t elements) {
  std::lock_guard<std::mutex> lock(constants().mutex);
  return load(constants().ints, name, DType::I64, elements);
}

} // namespace colossal::rt
