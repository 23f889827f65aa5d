//===- AtomicFile.cpp -----------------------------------------------------===//

#include "colossal/runtime/io/AtomicFile.h"

#include "colossal/runtime/Error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

namespace colossal::rt {

namespace {
std::string why() { return std::strerror(errno); }

std::string parentOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// A renamed or created entry survives a crash once its directory is synced.
void syncDirectory(const std::string &path) {
  int dir = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

int removeEntry(const char *path, const struct stat *, int, struct FTW *) { return ::remove(path) == 0 ? 0 : -1; }
} // namespace

void writeFileAtomically(const std::string &path, const std::vector<std::pair<const void *, int64_t>> &pieces) {
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    fail("write " + path, "cannot create " + temporary + ": " + why());
  for (const auto &[data, bytes] : pieces) {
    const char *p = static_cast<const char *>(data);
    int64_t left = bytes;
    while (left > 0) {
      ssize_t written = ::write(fd, p, size_t(std::min<int64_t>(left, 1 << 30)));
      if (written < 0 && errno == EINTR)
        continue;
      if (written <= 0) {
        std::string reason = why();
        ::close(fd);
        ::unlink(temporary.c_str());
        fail("write " + path, reason);
      }
      p += written;
      left -= written;
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string reason = why();
    ::unlink(temporary.c_str());
    fail("write " + path, "flushing to disk: " + reason);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    std::string reason = why();
    ::unlink(temporary.c_str());
    fail("write " + path, "renaming into place: " + reason);
  }
  syncDirectory(parentOf(path));
}

std::vector<unsigned char> readWholeFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("read " + path, why());
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail("read " + path, "not a regular file");
  }
  std::vector<unsigned char> data(size_t(info.st_size));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t got = ::read(fd, data.data() + done, data.size() - done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      ::close(fd);
      fail("read " + path, got == 0 ? "the file shrank while reading" : why());
    }
    done += size_t(got);
  }
  ::close(fd);
  return data;
}

void makeDirectories(const std::string &path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      partial = path.substr(0, i);
      if (!partial.empty() && ::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
        fail("mkdir " + partial, why());
    }
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    fail("mkdir " + path, "exists and is not a directory");
}

void removeTree(const std::string &path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0)
    return;
  // Depth first, not following links: a link is removed, not its target.
  if (::nftw(path.c_str(), removeEntry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    fail("remove " + path, why());
}

void publishDirectory(const std::string &staged, const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    if (::rename(staged.c_str(), path.c_str()) != 0)
      fail("publish " + path, "renaming " + staged + " into place: " + why());
  } else if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
    // `staged` now holds the old directory.
    syncDirectory(parentOf(path));
    removeTree(staged);
  } else {
    // Without an atomic exchange the old directory is moved aside first: a
    // crash between the two renames leaves it under `.old`, whole.
    std::string old = path + ".old";
    removeTree(old);
    if (::rename(path.c_str(), old.c_str()) != 0)
      fail("publish " + path, "moving the previous one aside: " + why());
    if (::rename(staged.c_str(), path.c_str()) != 0) {
      std::string reason = why();
      ::rename(old.c_str(), path.c_str());
      fail("publish " + path, "renaming " + staged + " into place: " + reason);
    }
    syncDirectory(parentOf(path));
    removeTree(old);
  }
  syncDirectory(parentOf(path));
}

} // namespace colossal::rt
