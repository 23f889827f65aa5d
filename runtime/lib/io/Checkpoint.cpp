//===- Checkpoint.cpp -----------------------------------------------------===//

#include "colossal/runtime/io/Checkpoint.h"

#include "colossal/support/Json.h"
#include "colossal/runtime/io/AtomicFile.h"
#include "colossal/runtime/Error.h"

#include <cstdio>

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

void agreeOnFailure(Communicator &world, const std::string &what, const Failure &mine) {
  std::vector<std::string> errors = allGatherStrings(world, mine.reason);
  if (!mine.reason.empty())
    throw Error(errorRank(), mine.call, mine.reason);
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty())
      fail(what, "rank " + std::to_string(r) + " failed: " + errors[r]);
}

} // namespace

std::string checkpointFileName(int rank, int worldSize) {
  char name[64];
  std::snprintf(name, sizeof name, "rank-%05d-of-%05d.safetensors", rank, worldSize);
  return name;
}

void saveCheckpoint(const std::string &directory, Communicator &world, int64_t step, const std::vector<Shard> &shards,
                    const std::map<std::string, std::string> &info) {
  std::string what = "save checkpoint " + directory;
  std::string file = checkpointFileName(world.rank(), world.size());
  std::string description;
  Failure error;
  try {
    makeDirectories(directory);
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
      tensors[s.view.name] = Json(std::move(entry));
    }
    WrittenFile written = writeSafetensors(directory + "/" + file, views,
                                           {{"format", kFormat},
                                            {"step", std::to_string(step)},
                                            {"rank", std::to_string(world.rank())},
                                            {"world_size", std::to_string(world.size())}});
    description = Json(Json::Object{{"file", file},
                                    {"bytes", Json(written.bytes)},
                                    {"crc32", hex(written.crc)},
                                    {"tensors", Json(tensors)}})
                      .dump(0);
  } catch (...) {
    error.capture(what);
  }
  agreeOnFailure(world, what, error);

  std::vector<std::string> descriptions = allGatherStrings(world, description);
  if (world.rank() == 0) {
    try {
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
          if (entry.isNull())
            entry = Json(Json::Object{{"dtype", *t.find("dtype")},
                                      {"global_shape", *t.find("global_shape")},
                                      {"shards", Json(Json::Array{})}});
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
      writeFileAtomically(directory + "/index.json", {{index.data(), int64_t(index.size())}});
    } catch (...) {
      error.capture(what);
    }
  }
  agreeOnFailure(world, what, error);
}

LoadedCheckpoint LoadedCheckpoint::load(const std::string &directory, Communicator &world) {
  std::string what = "load checkpoint " + directory;
  LoadedCheckpoint checkpoint;
  Failure error;
  try {
    std::vector<unsigned char> bytes = readWholeFile(directory + "/index.json");
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
    if (!worldSize || !worldSize->isNumber() || !step || !step->isNumber() || !files || !files->isArray())
      fail(what, "index.json lacks world_size, step or files");
    if (int(worldSize->asNumber()) != world.size())
      fail(what, "written by " + std::to_string(int(worldSize->asNumber())) + " ranks, but this job has " +
                     std::to_string(world.size()) + " (loading onto another rank count is not supported yet)");
    checkpoint.step_ = int64_t(step->asNumber());
    if (const Json *info = index->find("info"); info && info->isObject())
      for (const auto &[key, value] : info->asObject())
        if (value.isString())
          checkpoint.info_[key] = value.asString();
    const Json *mine = nullptr;
    for (const Json &f : files->asArray())
      if (f.isObject() && f.find("rank") && f.find("rank")->isNumber() &&
          int(f.find("rank")->asNumber()) == world.rank())
        mine = &f;
    if (!mine || !mine->find("file") || !mine->find("crc32") || !mine->find("bytes"))
      fail(what, "index.json names no file for rank " + std::to_string(world.rank()));
    std::string file = directory + "/" + mine->find("file")->asString();
    checkpoint.file_ = std::make_unique<SafetensorsFile>(SafetensorsFile::read(file));
    if (hex(checkpoint.file_->fileCrc()) != mine->find("crc32")->asString())
      fail(what, file + " does not match index.json (checksum " + hex(checkpoint.file_->fileCrc()) +
                     ", index says " + mine->find("crc32")->asString() + "): corrupt, or from another save");
    auto savedStep = checkpoint.file_->metadata().find("step");
    if (savedStep == checkpoint.file_->metadata().end() || savedStep->second != std::to_string(checkpoint.step_))
      fail(what, file + " was saved at another step than index.json records");
  } catch (...) {
    error.capture(what);
  }
  agreeOnFailure(world, what, error);
  return checkpoint;
}

} // namespace colossal::rt
