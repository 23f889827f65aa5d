//===- BuildCache.h - built programs found again -----------------*- C++ -*-===//
//
// Recompiling the same step (the same source, compiler command and linked
// libraries) reuses the executable an earlier build made instead of running
// the C++ compiler again. Entries live in $COLOSSAL_BUILD_CACHE, else
// $XDG_CACHE_HOME/colossal-compile, else ~/.cache/colossal-compile;
// COLOSSAL_BUILD_CACHE=off turns the cache off. It keeps the newest 128
// builds. An entry is written whole
// (a temporary file renamed into place), so concurrent builds never read a
// partial one.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_CODEGEN_BUILDCACHE_H
#define COLOSSAL_CODEGEN_BUILDCACHE_H

#include <optional>
#include <string>
#include <vector>

namespace colossal::codegen {

/// The cache entry of the build `args` (the compiler and its arguments,
/// writing `output` from `source`): its key covers every argument, the
/// source's bytes and each input file's size and modification time. None
/// when the cache is off or has no directory.
std::optional<std::string> buildCacheEntry(const std::vector<std::string> &args, const std::string &source,
                                           const std::string &output);

/// Copies the entry's executable to `output`; false when there is none.
bool restoreBuild(const std::string &entry, const std::string &output);

/// Keeps `output` as the entry (failures to write the cache are ignored:
/// the build itself succeeded).
void storeBuild(const std::string &output, const std::string &entry);

} // namespace colossal::codegen

#endif // COLOSSAL_CODEGEN_BUILDCACHE_H
