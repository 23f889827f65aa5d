//===- ProgramFiles.h - files the compiler wrote beside the program -*- C++ -*-===//
//
// `colossal-compile -o DIR` writes the executable with its weights and
// (for large constants) constants.safetensors beside it; the program finds
// them next to itself, wherever it is started from.
//
//===----------------------------------------------------------------------===//
#ifndef COLOSSAL_RUNTIME_IO_PROGRAMFILES_H
#define COLOSSAL_RUNTIME_IO_PROGRAMFILES_H

#include <cstdint>
#include <string>
#include <vector>

namespace colossal::rt {

/// `file` in the directory of the running executable (`argv0`'s when
/// /proc/self/exe cannot be read).
std::string besideProgram(const std::string &file, const char *argv0 = "");

/// The compiler keeps constants larger than a few kilobytes out of the
/// emitted source (nvcc and c++ would compile them as literals): they are in
/// constants.safetensors beside the program, by name. The file is read and
/// checked once, on first use; a missing file or constant, or one of another
/// type or size, is an error naming the file and the constant.
const std::vector<float> &programFloats(const std::string &name, int64_t elements);
const std::vector<int64_t> &programInts(const std::string &name, int64_t elements);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_IO_PROGRAMFILES_H
