//===- AtomicFile.h - files that are either whole or absent --------*- C++ -*-===//
//
// A checkpoint interrupted by a crash must not leave a half-written file
// under the final name. Files are written to a temporary name in the same
// directory, flushed to the disk (fsync), renamed over the final name (atomic
// on POSIX file systems) and the directory entry is synced too.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_RUNTIME_ATOMICFILE_H
#define COLOSSAL_RUNTIME_ATOMICFILE_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace colossal::rt {

/// Writes the concatenation of `pieces` (pointer, bytes) to `path` atomically.
void writeFileAtomically(const std::string &path, const std::vector<std::pair<const void *, int64_t>> &pieces);

/// The whole file; an error names the path and the reason.
std::vector<unsigned char> readWholeFile(const std::string &path);

/// Creates `path` and its parents when missing.
void makeDirectories(const std::string &path);

/// Deletes `path` and everything under it; nothing when it does not exist.
void removeTree(const std::string &path);

/// Puts the complete directory `staged` at `path` in one step: an existing
/// `path` is exchanged atomically where the file system can (Linux's
/// RENAME_EXCHANGE), else moved aside first; the old one is then deleted.
void publishDirectory(const std::string &staged, const std::string &path);

} // namespace colossal::rt

#endif // COLOSSAL_RUNTIME_ATOMICFILE_H
