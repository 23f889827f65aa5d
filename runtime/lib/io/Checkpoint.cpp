//===- Checkpoint.cpp -----------------------------------------------------===//

#include "colossal/runtime/io/Checkpoint.h"

#include "colossal/runtime/Error.h"
#include "colossal/runtime/io/AtomicFile.h"
#include "colossal/runtime/kernels/TensorIndexing.h"
#include "colossal/support/Json.h"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <unistd.h>

namespace colossal::rt {

using support::Json;

namespace {

constexpr const char *kFormat = "colossal-checkpoint/1";

Json shapeJson(const std::vector<int64_t> &shape) {
  Json::Array array;
  for (int64_t d : shape)
    array.push_back(Json(d));
  return Json(array);
}

std::string hex(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

/// Every rank's string, on every rank (lengths first, then padded bytes).
std::vector<std::string> allGatherStrings(Communicator &world, const std::string &mine) {
  int n = world.size();
  int64_t length = int64_t(mine.size());
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  world.allGather(Buffer::of(&length, DType::I64, 1), Buffer::of(lengths.data(), DType::I64, n));
  int64_t longest = 0;
  for (int64_t l : lengths)
    longest = std::max(longest, l);
  std::string padded = mine;
  padded.resize(size_t(longest), ' ');
  std::string all(size_t(longest * n), ' ');
  world.allGather(Buffer::of(padded.data(), DType::U8, longest), Buffer::of(all.data(), DType::U8, longest * n));
  std::vector<std::string> result;
  for (int r = 0; r < n; ++r)
    result.push_back(all.substr(size_t(r * longest), size_t(lengths[size_t(r)])));
  return result;
}

/// Rethrows this rank's failure, or fails because another rank failed, so
/// that all ranks leave together.
struct Failure {
  std::string call, reason;
  void capture(const std::string &what) {
    try {
      throw;
    } catch (const Error &e) {
      call = e.call(), reason = e.reason();
    } catch (const std::exception &e) {
      call = what, reason = e.what();
    }
  }
};

std::vector<int64_t> shapeOf(const Json *value, const std::string &what) {
  if (!value || !value->isArray())
    fail(what, "index.json: a shape is not a list");
  std::vector<int64_t> shape;
  for (const Json &d : value->asArray()) {
    if (!d.isNumber() || d.asNumber() < 0)
      fail(what, "index.json: a shape holds something other than a size");
    shape.push_back(int64_t(d.asNumber()));
  }
  return shape;
}

int64_t numberOr(const Json &object, const char *key, int64_t otherwise) {
  const Json *value = object.find(key);
  return value && value->isNumber() ? int64_t(value->asNumber()) : otherwise;
}

/// The shape without the padding rows: what the model itself holds.
std::vector<int64_t> unpadded(std::vector<int64_t> shape, int64_t padding, int64_t dim) {
  if (padding > 0 && dim >= 0 && size_t(dim) < shape.size())
    shape[size_t(dim)] -= padding;
  return shape;
}

/// A test of what a killed rank leaves: COLOSSAL_FAULT_KILL_IN_SAVE=R makes
/// rank R die (SIGKILL) once its file of a save is written.
void dieHereIfAsked(int rank) {
  const char *victim = std::getenv("COLOSSAL_FAULT_KILL_IN_SAVE");
  if (victim && *victim && std::atoi(victim) == rank)
    std::raise(SIGKILL);
}

void agreeOnFailure(Communicator &world, const std::string &what, const Failure &mine) {
  std::vector<std::string> errors = allGatherStrings(world, mine.reason);
  if (!mine.reason.empty())
    throw Error(errorRank(), mine.call, mine.reason).agreedBy(world.size());
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty())
      throw Error(errorRank(), what, "rank " + std::to_string(r) + " failed: " + errors[r]).agreedBy(world.size());
}

} // namespace

std::string checkpointFileName(int rank, int worldSize) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d-of-%05d.safetensors", rank, worldSize);
  return name;
}

/// One tensor of the index: its dtype, global shape and padding, and where
/// each rank's part of it lies.
struct IndexedTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t padding = 0, paddingDim = -1;
  struct Part {
    int rank = 0;
    std::vector<int64_t> offsets, shape;
    int64_t groups = 1, groupDim = -1;
  };
  std::vector<Part> parts;
};

void onEveryRankOrNone(Communicator &world, const std::string &what, const std::function<void()> &body) {
  Failure error;
  try {
    body();
  } catch (...) {
    error.capture(what);
  }
  agreeOnFailure(world, what, error);
}

namespace {

void saveStaged(const std::string &directory, const std::string &staged, Communicator &world, int64_t step,
                const std::vector<Shard> &shards, const std::map<std::string, std::string> &info) {
  std::string what = "save checkpoint " + directory;
  std::string file = checkpointFileName(world.rank(), world.size());
  std::string description;
  onEveryRankOrNone(world, what, [&] {
    makeDirectories(staged);
    std::vector<TensorView> views;
    Json::Object tensors;
    for (const Shard &s : shards) {
      if (s.globalShape.size() != s.view.shape.size() || s.offsets.size() != s.view.shape.size())
        fail(what, "shard " + s.view.name + ": shape, global shape and offsets need the same rank");
      bool grouped = s.groups > 1;
      if (grouped && (s.groupDim < 0 || size_t(s.groupDim) >= s.offsets.size() ||
                      s.view.shape[size_t(s.groupDim)] % s.groups || s.globalShape[size_t(s.groupDim)] % s.groups))
        fail(what, "shard " + s.view.name + ": " + std::to_string(s.groups) + " groups along dimension " +
                       std::to_string(s.groupDim) + " do not divide it");
      if (s.padding < 0 || (s.padding > 0 && (s.paddingDim < 0 || size_t(s.paddingDim) >= s.globalShape.size() ||
                                              s.padding > s.globalShape[size_t(s.paddingDim)])))
        fail(what, "shard " + s.view.name + ": padding of " + std::to_string(s.padding) + " along dimension " +
                       std::to_string(s.paddingDim) + " does not fit " + shapeString(s.globalShape));
      for (size_t d = 0; d < s.offsets.size(); ++d) {
        // A grouped dimension: each part inside its group.
        int64_t parts = grouped && int64_t(d) == s.groupDim ? s.groups : 1;
        if (s.offsets[d] < 0 || s.offsets[d] + s.view.shape[d] / parts > s.globalShape[d] / parts)
          fail(what, "shard " + s.view.name + " at offsets " + shapeString(s.offsets) + " of shape " +
                         shapeString(s.view.shape) + " exceeds the global shape " + shapeString(s.globalShape));
      }
      views.push_back(s.view);
      Json::Object entry{{"dtype", safetensorsName(s.view.dtype)},
                         {"shape", shapeJson(s.view.shape)},
                         {"global_shape", shapeJson(s.globalShape)},
                         {"offsets", shapeJson(s.offsets)}};
      if (grouped)
        entry["groups"] = Json(s.groups), entry["group_dim"] = Json(s.groupDim);
      if (s.padding > 0)
        entry["padding"] = Json(s.padding), entry["padding_dim"] = Json(s.paddingDim);
      tensors[s.view.name] = Json(std::move(entry));
    }
    WrittenFile written = writeSafetensors(staged + "/" + file, views,
                                           {{"format", kFormat},
                                            {"step", std::to_string(step)},
                                            {"rank", std::to_string(world.rank())},
                                            {"world_size", std::to_string(world.size())}});
    dieHereIfAsked(world.rank());
    description = Json(Json::Object{{"file", file},
                                    {"bytes", Json(written.bytes)},
                                    {"crc32", hex(written.crc)},
                                    {"tensors", Json(tensors)}})
                      .dump(0);
  });

  std::vector<std::string> descriptions = allGatherStrings(world, description);
  onEveryRankOrNone(world, what, [&] {
    if (world.rank() != 0)
      return;
    Json::Array files;
    Json::Object tensors;
    for (size_t r = 0; r < descriptions.size(); ++r) {
      std::string parseError;
      std::optional<Json> d = Json::parse(descriptions[r], parseError);
      if (!d)
        fail(what, "rank " + std::to_string(r) + " sent an unreadable description: " + parseError);
      files.push_back(Json(Json::Object{{"rank", Json(int64_t(r))},
                                        {"file", *d->find("file")},
                                        {"bytes", *d->find("bytes")},
                                        {"crc32", *d->find("crc32")}}));
      for (const auto &[name, t] : d->find("tensors")->asObject()) {
        Json &entry = tensors[name];
        if (entry.isNull()) {
          Json::Object fresh{
              {"dtype", *t.find("dtype")}, {"global_shape", *t.find("global_shape")}, {"shards", Json(Json::Array{})}};
          for (const char *key : {"padding", "padding_dim"})
            if (const Json *value = t.find(key))
              fresh[key] = *value;
          entry = Json(std::move(fresh));
        }
        Json::Object shard{{"rank", Json(int64_t(r))}, {"offsets", *t.find("offsets")}, {"shape", *t.find("shape")}};
        for (const char *key : {"groups", "group_dim"})
          if (const Json *value = t.find(key))
            shard[key] = *value;
        entry.asObject()["shards"].asArray().push_back(Json(std::move(shard)));
      }
    }
    Json::Object infoJson;
    for (const auto &[key, value] : info)
      infoJson[key] = Json(value);
    std::string index = Json(Json::Object{{"format", kFormat},
                                          {"step", Json(step)},
                                          {"world_size", Json(int64_t(world.size()))},
                                          {"info", Json(infoJson)},
                                          {"files", Json(files)},
                                          {"tensors", Json(tensors)}})
                            .dump(2) +
                        "\n";
    writeFileAtomically(staged + "/index.json", {{index.data(), int64_t(index.size())}});
    // The commit point: the whole checkpoint appears at `directory` at once.
    publishDirectory(staged, directory);
  });
}

std::string stepDirectoryName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

/// The folder's complete checkpoints (those with an index), oldest first.
std::vector<std::string> checkpointsIn(const std::string &folder) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(folder.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("step-", 0) == 0 && name.find('.') == std::string::npos &&
          ::access((folder + "/" + name + "/index.json").c_str(), R_OK) == 0)
        names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

bool canHoldCheckpoint(const std::string &path, bool folder) {
  DIR *d = ::opendir(path.c_str());
  if (!d)
    return ::access(path.c_str(), F_OK) != 0;
  bool ours = true;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    if (folder) {
      ours = ours && (name.rfind("step-", 0) == 0 || name.rfind("latest", 0) == 0);
      continue;
    }
    bool index = name.rfind("index.json", 0) == 0;
    bool shard = name.rfind("rank-", 0) == 0 && name.find(".safetensors") != std::string::npos;
    ours = ours && (index || shard);
  }
  ::closedir(d);
  return ours;
}

void saveCheckpoint(const std::string &directory, Communicator &world, int64_t step, const std::vector<Shard> &shards,
                    const std::map<std::string, std::string> &info) {
  // Staged beside the final directory (same file system, so publishing it is
  // a rename); a stale stage of a killed save is cleared first, and a failed
  // save's after it.
  std::string staged = directory + ".saving";
  onEveryRankOrNone(world, "save checkpoint " + directory, [&] {
    if (world.rank() != 0)
      return;
    // Publishing replaces `directory`: only an earlier checkpoint or an
    // empty directory may be there.
    if (!canHoldCheckpoint(directory, /*folder=*/false))
      fail("save checkpoint " + directory,
           "it exists and holds other files than a checkpoint; give --save a new directory or an earlier checkpoint's");
    removeTree(staged);
  });
  try {
    saveStaged(directory, staged, world, step, shards, info);
  } catch (...) {
    if (world.rank() == 0) {
      try {
        removeTree(staged);
      } catch (...) {
        // The save's own failure is the one to report.
      }
    }
    throw;
  }
}

void saveCheckpointInFolder(const std::string &folder, Communicator &world, int64_t step,
                            const std::vector<Shard> &shards, const std::map<std::string, std::string> &info,
                            int64_t keep) {
  std::string name = stepDirectoryName(step);
  saveCheckpoint(folder + "/" + name, world, step, shards, info);
  onEveryRankOrNone(world, "save checkpoint " + folder, [&] {
    if (world.rank() != 0)
      return;
    std::string latest = name + "\n";
    writeFileAtomically(folder + "/latest", {{latest.data(), int64_t(latest.size())}});
    std::vector<std::string> all = checkpointsIn(folder);
    for (size_t i = 0; keep > 0 && i + size_t(keep) < all.size(); ++i)
      if (all[i] != name)
        removeTree(folder + "/" + all[i]);
  });
}

LoadedCheckpoint LoadedCheckpoint::load(const std::string &directory, Communicator &world) {
  std::string what = "load checkpoint " + directory;
  LoadedCheckpoint checkpoint;
  auto tensors = std::make_shared<std::map<std::string, IndexedTensor>>();
  onEveryRankOrNone(world, what, [&] {
    // A folder of checkpoints: the one `latest` names.
    checkpoint.directory_ = directory;
    if (::access((directory + "/index.json").c_str(), F_OK) != 0 &&
        ::access((directory + "/latest").c_str(), F_OK) == 0) {
      std::vector<unsigned char> latest = readWholeFile(directory + "/latest");
      std::string name(latest.begin(), latest.end());
      while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
        name.pop_back();
      if (name.empty() || name.find('/') != std::string::npos)
        fail(what, "latest does not name a checkpoint of the folder");
      checkpoint.directory_ = directory + "/" + name;
    }
    if (::access((checkpoint.directory_ + "/index.json").c_str(), F_OK) != 0)
      fail(what, checkpoint.directory_ + " has no index.json: not a checkpoint (nor a folder of them with `latest`), "
                                         "or a save that did not finish");
    std::vector<unsigned char> bytes = readWholeFile(checkpoint.directory_ + "/index.json");
    std::string parseError;
    std::optional<Json> index = Json::parse(std::string(bytes.begin(), bytes.end()), parseError);
    if (!index || !index->isObject())
      fail(what, "index.json is not JSON (" + parseError + "): the checkpoint is incomplete or corrupt");
    const Json *format = index->find("format");
    if (!format || !format->isString() || format->asString() != kFormat)
      fail(what, std::string("index.json is not a ") + kFormat + " index");
    const Json *worldSize = index->find("world_size");
    const Json *step = index->find("step");
    const Json *files = index->find("files");
    const Json *entries = index->find("tensors");
    if (!worldSize || !worldSize->isNumber() || !step || !step->isNumber() || !files || !files->isArray() || !entries ||
        !entries->isObject())
      fail(what, "index.json lacks world_size, step, files or tensors");
    checkpoint.step_ = int64_t(step->asNumber());
    checkpoint.worldSize_ = int(worldSize->asNumber());
    if (const Json *info = index->find("info"); info && info->isObject())
      for (const auto &[key, value] : info->asObject())
        if (value.isString())
          checkpoint.info_[key] = value.asString();
    for (const Json &f : files->asArray()) {
      const Json *rank = f.isObject() ? f.find("rank") : nullptr;
      const Json *name = f.isObject() ? f.find("file") : nullptr;
      const Json *crc = f.isObject() ? f.find("crc32") : nullptr;
      if (!rank || !rank->isNumber() || !name || !name->isString() || !crc || !crc->isString() ||
          name->asString().find('/') != std::string::npos)
        fail(what, "index.json: a file entry lacks its rank, name or CRC");
      checkpoint.fileNames_[int(rank->asNumber())] = {name->asString(), crc->asString()};
    }
    for (const auto &[name, entry] : entries->asObject()) {
      IndexedTensor t;
      const Json *dtype = entry.find("dtype");
      std::optional<DType> parsed = dtype && dtype->isString() ? parseSafetensorsName(dtype->asString()) : std::nullopt;
      if (!parsed)
        fail(what, "index.json: tensor '" + name + "' has no known dtype");
      t.dtype = *parsed;
      t.shape = shapeOf(entry.find("global_shape"), what);
      t.padding = numberOr(entry, "padding", 0), t.paddingDim = numberOr(entry, "padding_dim", -1);
      const Json *shards = entry.find("shards");
      if (!shards || !shards->isArray())
        fail(what, "index.json: tensor '" + name + "' lists no shards");
      for (const Json &s : shards->asArray()) {
        IndexedTensor::Part part;
        part.rank = int(numberOr(s, "rank", -1));
        part.offsets = shapeOf(s.find("offsets"), what), part.shape = shapeOf(s.find("shape"), what);
        part.groups = numberOr(s, "groups", 1), part.groupDim = numberOr(s, "group_dim", -1);
        if (!checkpoint.fileNames_.count(part.rank) || part.offsets.size() != t.shape.size() ||
            part.shape.size() != t.shape.size())
          fail(what, "index.json: a shard of '" + name + "' names no file or does not fit its tensor");
        for (size_t d = 0; d < t.shape.size(); ++d) {
          bool grouped = part.groups > 1 && int64_t(d) == part.groupDim;
          int64_t parts = grouped ? part.groups : 1;
          if (grouped && (part.shape[d] % parts || t.shape[d] % parts))
            fail(what, "index.json: a shard of '" + name + "' is grouped unevenly");
          if (part.offsets[d] + part.shape[d] / parts > t.shape[d] / parts)
            fail(what, "index.json: a shard of '" + name + "' lies outside " + shapeString(t.shape));
        }
        t.parts.push_back(std::move(part));
      }
      (*tensors)[name] = std::move(t);
    }
    checkpoint.tensors_ = tensors;
    // Under the writer's rank count each rank reads its own file first: a
    // corrupt one is found (and named) by its own rank at once.
    if (checkpoint.worldSize_ == world.size() && checkpoint.fileNames_.count(world.rank()))
      checkpoint.file(world.rank());
  });
  return checkpoint;
}

const SafetensorsFile &LoadedCheckpoint::file(int rank) const {
  auto cached = files_.find(rank);
  if (cached != files_.end())
    return cached->second;
  std::string what = "load checkpoint " + directory_;
  auto named = fileNames_.find(rank);
  if (named == fileNames_.end())
    fail(what, "index.json names no file for rank " + std::to_string(rank));
  std::string path = directory_ + "/" + named->second.first;
  SafetensorsFile file = SafetensorsFile::read(path);
  if (hex(file.fileCrc()) != named->second.second)
    fail(what, path + " does not match index.json (checksum " + hex(file.fileCrc()) + ", index says " +
                   named->second.second + "): corrupt, or from another save");
  auto savedStep = file.metadata().find("step");
  if (savedStep == file.metadata().end() || savedStep->second != std::to_string(step_))
    fail(what, path + " was saved at another step than index.json records");
  return files_.emplace(rank, std::move(file)).first->second;
}

std::optional<DType> LoadedCheckpoint::dtypeOf(const std::string &name) const {
  auto found = tensors_->find(name);
  return found == tensors_->end() ? std::nullopt : std::optional<DType>(found->second.dtype);
}

void LoadedCheckpoint::readWhole(Communicator &world, const std::vector<WholeTensorRequest> &requests,
                                 const std::function<void(size_t, const std::vector<unsigned char> &)> &use) const {
  std::string what = "load checkpoint " + directory_;
  onEveryRankOrNone(world, what, [&] {
    for (size_t i = 0; i < requests.size(); ++i) {
      const WholeTensorRequest &want = requests[i];
      auto found = tensors_->find(want.name);
      if (found == tensors_->end())
        fail(what, "holds no tensor '" + want.name + "': a checkpoint of another model or program?");
      const IndexedTensor &t = found->second;
      if (t.dtype != want.dtype)
        fail(what, "tensor '" + want.name + "' is " + nameOf(t.dtype) + ", this program's is " + nameOf(want.dtype));
      std::vector<int64_t> saved = unpadded(t.shape, t.padding, t.paddingDim);
      if (saved != unpadded(want.shape, want.padding, want.paddingDim))
        fail(what, "tensor '" + want.name + "' is " + shapeString(saved) + " in the checkpoint, " +
                       shapeString(unpadded(want.shape, want.padding, want.paddingDim)) +
                       " in this program: a checkpoint of another model?");
      int64_t width = bytesOf(t.dtype), elements = indexing::product(t.shape);
      std::vector<unsigned char> whole(size_t(elements * width));
      std::vector<char> covered(size_t(elements), 0);
      int64_t missing = elements;
      for (const IndexedTensor::Part &part : t.parts) {
        // Data-parallel ranks hold copies: a part already placed is not read again.
        bool needed = false;
        indexing::forEachBlockRun(t.shape, part.shape, part.offsets, part.groups, part.groupDim,
                                  [&](int64_t at, int64_t, int64_t n) {
                                    for (int64_t k = 0; k < n && !needed; ++k)
                                      needed = !covered[size_t(at + k)];
                                  });
        if (!needed)
          continue;
        const TensorView &view = file(part.rank).require(want.name, t.dtype, part.shape);
        const auto *from = static_cast<const unsigned char *>(view.data);
        indexing::forEachBlockRun(t.shape, part.shape, part.offsets, part.groups, part.groupDim,
                                  [&](int64_t at, int64_t offset, int64_t n) {
                                    std::memcpy(whole.data() + at * width, from + offset * width, size_t(n * width));
                                    for (int64_t k = 0; k < n; ++k)
                                      missing -= !covered[size_t(at + k)], covered[size_t(at + k)] = 1;
                                  });
      }
      if (missing)
        fail(what, "tensor '" + want.name + "': the shards index.json lists leave " + std::to_string(missing) +
                       " of its " + std::to_string(elements) + " elements uncovered");
      if (t.shape == want.shape) {
        use(i, whole);
        continue;
      }
      // Another padding: the model's rows copied, the program's padding zeros.
      std::vector<unsigned char> shaped(size_t(indexing::product(want.shape) * width), 0);
      // The model's part (`saved`, at the origin of both), through a compact
      // copy of it.
      std::vector<int64_t> origin(saved.size(), 0);
      std::vector<unsigned char> model(size_t(indexing::product(saved) * width));
      indexing::forEachBlockRun(t.shape, saved, origin, 1, -1, [&](int64_t at, int64_t offset, int64_t n) {
        std::memcpy(model.data() + offset * width, whole.data() + at * width, size_t(n * width));
      });
      indexing::forEachBlockRun(want.shape, saved, origin, 1, -1, [&](int64_t at, int64_t offset, int64_t n) {
        std::memcpy(shaped.data() + at * width, model.data() + offset * width, size_t(n * width));
      });
      use(i, shaped);
    }
  });
}

} // namespace colossal::rt
