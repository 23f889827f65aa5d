//===- BuildCache.cpp -------------------------------------------------------===//

#include "BuildCache.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cstdlib>
#include <unistd.h>

namespace colossal::codegen {

namespace {

std::optional<std::string> cacheDirectory() {
  if (const char *dir = std::getenv("COLOSSAL_BUILD_CACHE"))
    return std::string(dir) == "off" || !*dir ? std::nullopt : std::optional<std::string>(dir);
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/colossal-compile";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/colossal-compile";
  return std::nullopt;
}

} // namespace

std::optional<std::string> buildCacheEntry(const std::vector<std::string> &args, const std::string &source,
                                           const std::string &output) {
  std::optional<std::string> dir = cacheDirectory();
  auto text = llvm::MemoryBuffer::getFile(source);
  if (!dir || !text)
    return std::nullopt;
  std::string key;
  for (const std::string &arg : args) {
    // Where the source and the output lie is not part of what is built.
    key += (arg == output ? std::string("<output>") : arg == source ? std::string("<source>") : arg) + '\0';
    llvm::sys::fs::file_status status;
    if (arg != source && arg != output && !llvm::sys::fs::status(arg, status) && llvm::sys::fs::is_regular_file(status))
      key += std::to_string(status.getSize()) + ":" +
             std::to_string(status.getLastModificationTime().time_since_epoch().count()) + '\0';
  }
  key += (*text)->getBuffer().str();
  llvm::XXH128_hash_t hash = llvm::xxh3_128bits(llvm::arrayRefFromStringRef(key));
  return *dir + "/" + llvm::utohexstr(hash.high64, true, 16) + llvm::utohexstr(hash.low64, true, 16);
}

bool restoreBuild(const std::string &entry, const std::string &output) {
  if (!llvm::sys::fs::exists(entry))
    return false;
  llvm::sys::fs::remove(output);
  if (llvm::sys::fs::copy_file(entry, output))
    return false;
  llvm::sys::fs::setPermissions(output, llvm::sys::fs::all_read | llvm::sys::fs::all_exe | llvm::sys::fs::owner_write);
  return true;
}

void storeBuild(const std::string &output, const std::string &entry) {
  std::string dir = llvm::sys::path::parent_path(entry).str();
  if (llvm::sys::fs::create_directories(dir))
    return;
  std::string temporary = entry + ".tmp" + std::to_string(getpid());
  if (llvm::sys::fs::copy_file(output, temporary) || llvm::sys::fs::rename(temporary, entry))
    llvm::sys::fs::remove(temporary);
  // The cache keeps the newest kEntries builds.
  constexpr size_t kEntries = 128;
  std::vector<std::pair<llvm::sys::TimePoint<>, std::string>> entries;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    llvm::sys::fs::file_status status;
    if (!llvm::sys::fs::status(it->path(), status) && llvm::sys::fs::is_regular_file(status) &&
        it->path().find(".tmp") == std::string::npos)
      entries.emplace_back(status.getLastModificationTime(), it->path());
  }
  if (entries.size() <= kEntries)
    return;
  std::sort(entries.begin(), entries.end());
  for (size_t i = 0; i + kEntries < entries.size(); ++i)
    llvm::sys::fs::remove(entries[i].second);
}

} // namespace colossal::codegen
