//===- published_runs_calibration.cpp - the cost model against published runs ===//
//
// Predicts the step time of every measured training run in a
// colossal-published-runs/1 file (bench/published_runs.json: the model, the
// cluster, the plan and the measured step, each with its source) with the
// GPU presets as they ship, and writes the per-run error and its median and
// maximum by device class as JSON.
//
//   published-runs-bench RUNS.json [OUTPUT.json] [--preset NAME=CLUSTER.json ...]
//                        [--require MEDIAN,MAX]
//
// --require fails (exit 1) when a device class's median or largest
// |predicted/measured - 1| exceeds the bounds (ctest holds the presets to
// the 10% and 20%).
// --preset replaces a preset's description with a colossal-cluster/1 file
// (its node count follows each run): how bench/calibrate_gpu_presets.py
// tries a parameter set before it is written into the preset.
//
// The presets carry one parameter set per device class for every run; a run
// only says what its source says of its cluster (GPUs, memory per GPU, the
// network per GPU).
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Estimator.h"
#include "colossal/cost/TransformerBuilder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

using namespace colossal::cost;

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::cerr << "published-runs-bench: error: " << message << "\n";
  std::exit(1);
}

const Json &field(const Json &object, const std::string &key, const std::string &where) {
  const Json *value = object.find(key);
  if (!value)
    fail(where + ": missing '" + key + "'");
  return *value;
}

double number(const Json &object, const std::string &key, const std::string &where) {
  const Json &value = field(object, key, where);
  if (!value.isNumber())
    fail(where + ": '" + key + "' is not a number");
  return value.asNumber();
}

std::string text(const Json &object, const std::string &key, const std::string &where) {
  const Json &value = field(object, key, where);
  if (!value.isString())
    fail(where + ": '" + key + "' is not a string");
  return value.asString();
}

/// The preset of a device class and the memory each of its GPUs has.
std::pair<std::string, double> presetOf(const std::string &device, const std::string &where) {
  if (device == "a100-80gb")
    return {"dgx-a100", 80e9};
  if (device == "a100-40gb")
    return {"dgx-a100", 40e9};
  if (device == "h100-80gb")
    return {"dgx-h100", 80e9};
  fail(where + ": unknown device '" + device + "' (a100-80gb, a100-40gb, h100-80gb)");
}

TransformerShape shapeOf(const Json &model, int64_t microbatch, const std::string &where) {
  TransformerShape shape;
  std::optional<TransformerFamily> family = parseFamily(text(model, "family", where));
  if (!family)
    fail(where + ": unknown model family");
  shape.family = *family;
  shape.layers = int64_t(number(model, "layers", where));
  shape.hidden = int64_t(number(model, "hidden", where));
  shape.heads = int64_t(number(model, "heads", where));
  shape.seq = int64_t(number(model, "seq", where));
  shape.vocab = int64_t(number(model, "vocab", where));
  if (model.find("kv_heads"))
    shape.kvHeads = int64_t(number(model, "kv_heads", where));
  if (model.find("ffn"))
    shape.ffn = int64_t(number(model, "ffn", where));
  if (const Json *dropout = model.find("dropout"); dropout && dropout->isBool())
    shape.dropout = dropout->asBool();
  shape.microbatch = microbatch;
  if (shape.heads < 1 || shape.hidden % shape.heads != 0 || shape.kvHeads < 0 ||
      (shape.kvHeads > 0 && shape.heads % shape.kvHeads != 0))
    fail(where + ": hidden must divide into heads, and heads into kv_heads");
  return shape;
}

double measuredStep(const Json &measured, const std::string &where) {
  if (measured.find("step_seconds"))
    return number(measured, "step_seconds", where);
  return number(measured, "global_batch_tokens", where) / number(measured, "tokens_per_second", where);
}

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> positional;
  std::map<std::string, Cluster> replaced;
  std::string error;
  double requiredMedian = 0, requiredMax = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--require") {
      if (i + 1 >= argc || std::sscanf(argv[++i], "%lf,%lf", &requiredMedian, &requiredMax) != 2 ||
          requiredMedian <= 0 || requiredMax <= 0)
        fail("--require expects MEDIAN,MAX as fractions (0.1,0.2)");
      continue;
    }
    if (arg != "--preset") {
      positional.push_back(arg);
      continue;
    }
    std::string spec = i + 1 < argc ? argv[++i] : "";
    size_t eq = spec.find('=');
    if (eq == std::string::npos)
      fail("--preset expects NAME=CLUSTER.json");
    std::optional<Cluster> cluster = Cluster::load(spec.substr(eq + 1), 1, error);
    if (!cluster)
      fail(error);
    replaced[spec.substr(0, eq)] = *cluster;
  }
  if (positional.empty() || positional.size() > 2)
    fail("usage: published-runs-bench RUNS.json [OUTPUT.json] [--preset NAME=CLUSTER.json ...]");
  std::ifstream in(positional[0]);
  if (!in)
    fail("cannot read " + positional[0]);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::optional<Json> file = Json::parse(buffer.str(), error);
  if (!file)
    fail(std::string(positional[0]) + ": " + error);
  const Json &runs = field(*file, "runs", positional[0]);
  if (!runs.isArray() || runs.asArray().empty())
    fail(std::string(positional[0]) + ": 'runs' is not a non-empty array");

  Json::Array results;
  std::map<std::string, std::vector<double>> errorsByClass;
  std::vector<double> allErrors;
  std::printf("%-44s %9s %9s %7s  %s\n", "run", "measured", "predicted", "error",
              "compute / comm / bubble / optimizer");
  for (const Json &run : runs.asArray()) {
    std::string name = text(run, "name", "a run");
    std::string where = std::string(positional[0]) + ": run '" + name + "'";
    std::string device = text(run, "device", where);
    auto [presetName, memory] = presetOf(device, where);
    int gpus = int(number(run, "gpus", where));
    std::optional<Cluster> cluster = Cluster::preset(presetName, std::max(1, (gpus + 7) / 8));
    if (auto it = replaced.find(presetName); it != replaced.end()) {
      cluster = it->second;
      cluster->nodes = std::max(1, (gpus + 7) / 8);
    }
    if (!cluster || gpus % cluster->gpusPerNode != 0)
      fail(where + ": " + std::to_string(gpus) + " GPUs do not fill nodes of 8");
    cluster->memoryBytes = memory;
    if (const Json *attention = run.find("attention")) {
      // A program that materializes the score matrix runs no fused kernel:
      // its products and softmax are priced as the separate kernels they are.
      if (!attention->isString() || attention->asString() != "materialized")
        fail(where + ": 'attention' is either absent (a fused kernel) or \"materialized\"");
      KernelRates &k = cluster->kernels;
      k.attentionForward.clear(), k.attentionBackward.clear();
      k.causalAttentionForward.clear(), k.causalAttentionBackward.clear();
    }
    cluster->interNode.bandwidth = number(run, "inter_node_gb_per_s", where) * 1e9;

    std::optional<Strategy> strategy = Strategy::parse(text(run, "strategy", where), error);
    if (!strategy)
      fail(where + ": strategy: " + error);
    if (strategy->devices() != gpus)
      fail(where + ": the strategy spans " + std::to_string(strategy->devices()) + " devices, not " +
           std::to_string(gpus));
    TransformerShape shape = shapeOf(field(run, "model", where), int64_t(number(run, "microbatch", where)), where);
    std::optional<Estimate> e = estimate(buildTransformer(shape), *strategy, *cluster, error);
    if (!e)
      fail(where + ": " + error);

    double measured = measuredStep(field(run, "measured", where), where);
    double relative = e->stepTime / measured - 1;
    errorsByClass[device.substr(0, 4)].push_back(std::fabs(relative));
    allErrors.push_back(std::fabs(relative));
    std::printf("%-44s %8.3fs %8.3fs %+6.1f%%  %.3f / %.3f / %.3f / %.3f\n", name.c_str(), measured, e->stepTime,
                100 * relative, e->compute, e->exposedComm, e->bubble, e->optimizer);
    results.push_back(Json::Object{{"name", name},
                                   {"source", text(run, "source", where)},
                                   {"device", device},
                                   {"gpus", gpus},
                                   {"strategy", e->strategy.str()},
                                   {"measured_step_s", measured},
                                   {"predicted_step_s", e->stepTime},
                                   {"error", relative},
                                   {"predicted_compute_s", e->compute},
                                   {"predicted_exposed_comm_s", e->exposedComm},
                                   {"predicted_bubble_s", e->bubble},
                                   {"predicted_optimizer_s", e->optimizer},
                                   {"measured_mfu", e->mfu * e->stepTime / measured},
                                   {"predicted_mfu", e->mfu}});
  }

  Json::Object summary;
  bool withinBounds = true;
  for (auto &[deviceClass, errors] : errorsByClass) {
    if (requiredMedian > 0 &&
        (median(errors) > requiredMedian || *std::max_element(errors.begin(), errors.end()) > requiredMax)) {
      std::fprintf(stderr, "published-runs-bench: %s exceeds median %.0f%% or max %.0f%%\n", deviceClass.c_str(),
                   100 * requiredMedian, 100 * requiredMax);
      withinBounds = false;
    }
    summary[deviceClass] = Json::Object{{"runs", int64_t(errors.size())},
                                        {"median_abs_error", median(errors)},
                                        {"max_abs_error", *std::max_element(errors.begin(), errors.end())}};
    std::printf("%s: %zu runs, median |error| %.1f%%, max %.1f%%\n", deviceClass.c_str(), errors.size(),
                100 * median(errors), 100 * *std::max_element(errors.begin(), errors.end()));
  }
  summary["all"] = Json::Object{{"runs", int64_t(allErrors.size())},
                                {"median_abs_error", median(allErrors)},
                                {"max_abs_error", *std::max_element(allErrors.begin(), allErrors.end())}};
  std::printf("all: %zu runs, median |error| %.1f%%, max %.1f%%\n", allErrors.size(), 100 * median(allErrors),
              100 * *std::max_element(allErrors.begin(), allErrors.end()));

  Json result = Json::Object{{"benchmark", "published_runs_calibration"},
                             {"runs_file", positional[0]},
                             {"summary", summary},
                             {"runs", results}};
  if (positional.size() == 2) {
    std::ofstream out(positional[1]);
    out << result.dump() << "\n";
    if (!out)
      fail("cannot write " + positional[1]);
  }
  return withinBounds ? 0 : 1;
}
