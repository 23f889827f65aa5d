//===- GraphSearchTest.cpp - the search over an imported model's graph ----===//

#include "colossal/cost/GraphSearch.h"
#include "colossal/cost/Estimator.h"
#include "colossal/cost/GraphScaling.h"
#include "colossal/cost/LayerDetection.h"

#include <gtest/gtest.h>

#include <set>

using namespace colossal::cost;

namespace {

/// The builder's graph as an importer would hand it over: no layer marks,
/// layers found by detection; with `split`, each model axis's split as the
/// caller's partitioner makes it.
GraphAtMicrobatch importedGpt(int64_t layers, bool detect = true,
                              std::function<std::optional<ModelAxisSplit>(const Graph &, ModelAxis)> split = {},
                              std::vector<ModelAxis> axes = {}) {
  return [=](int64_t microbatch, std::string &) -> std::optional<SearchGraph> {
    TransformerShape shape;
    shape.layers = layers;
    shape.hidden = 1024;
    shape.heads = 16;
    shape.seq = 1024;
    shape.vocab = 32768;
    shape.microbatch = microbatch;
    Graph graph = buildTransformer(shape);
    for (Op &op : graph.ops)
      op.layer = -1;
    graph.numLayers = 0;
    if (detect)
      detectLayers(graph);
    SearchGraph given{graph, {}};
    for (const ModelAxis &axis : axes)
      if (std::optional<ModelAxisSplit> made = split(graph, axis))
        given.partitionerSplits[axis] = *made;
    return given;
  };
}

/// A split that leaves every op whole: what the search is given when the
/// test is about which axes it evaluates, not their cost.
ModelAxisSplit replicatedSplit(const Graph &graph) {
  GraphSharding sharding;
  for (const Op &op : graph.ops)
    sharding.emplace_back(op.factors.size());
  return ModelAxisSplit{sharding, ""};
}

/// The pruned search keeps the plans evaluating everything keeps, in order.
void expectSamePlans(const SearchResult &pruned, const SearchResult &all) {
  ASSERT_EQ(pruned.best.size(), all.best.size());
  for (size_t i = 0; i < all.best.size(); ++i) {
    EXPECT_EQ(pruned.best[i].strategy.str(), all.best[i].strategy.str());
    EXPECT_EQ(pruned.best[i].estimate.stepTime, all.best[i].estimate.stepTime);
  }
}

/// A search of `devices` for a global batch, with `fixed` parts of the
/// strategy.
SearchOptions searchFor(int devices, int64_t globalBatch, const std::string &fixed = "") {
  SearchOptions options;
  options.devices = devices;
  options.globalBatch = globalBatch;
  std::string error;
  if (!fixed.empty())
    options.fixed = *Strategy::parse(fixed, error, &options.fixedKeys);
  return options;
}

} // namespace

TEST(GraphSearch, KeepsTheFastestPlansThatFitInOrder) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  SearchResult result = searchGraphPlans(importedGpt(4), cluster, options);
  ASSERT_FALSE(result.best.empty()) << result.infeasible;
  EXPECT_EQ(result.evaluated, result.candidates - result.invalid - result.prunedByTime);
  for (size_t i = 0; i < result.best.size(); ++i) {
    const SearchCandidate &c = result.best[i];
    EXPECT_TRUE(c.estimate.fits());
    EXPECT_EQ(c.strategy.devices(), 8);
    EXPECT_EQ(c.strategy.dp * c.strategy.microbatches * c.microbatchSize, 32);
    if (i > 0)
      EXPECT_LE(result.best[i - 1].estimate.stepTime, c.estimate.stepTime);
    // A tensor-parallel plan carries the solver's per-op shardings.
    EXPECT_EQ(c.sharding.empty(), c.strategy.tp == 1);
  }
}

TEST(GraphSearch, PipelinesAndRecomputationNeedLayers) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  std::string error;
  options.fixed = *Strategy::parse("pp=2,recompute=full", error, &options.fixedKeys);
  SearchResult layered = searchGraphPlans(importedGpt(4), cluster, options);
  ASSERT_FALSE(layered.best.empty()) << layered.infeasible;
  EXPECT_EQ(layered.best.front().strategy.pp, 2);
  EXPECT_EQ(layered.best.front().strategy.recompute, Recompute::Full);

  SearchResult flat = searchGraphPlans(importedGpt(4, /*detect=*/false), cluster, options);
  EXPECT_TRUE(flat.best.empty());
  EXPECT_NE(flat.infeasible.find("no repeated layers"), std::string::npos) << flat.infeasible;
}

TEST(GraphSearch, RefusesWhatItDoesNotSearch) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options = searchFor(8, 32, "pp=2,stage_layers=1/1");
  SearchResult result = searchGraphPlans(importedGpt(2), cluster, options);
  EXPECT_TRUE(result.best.empty());
  EXPECT_NE(result.infeasible.find("stage_layers"), std::string::npos) << result.infeasible;
}

TEST(GraphSearch, GridsArePlacedByThePartitionerAndPricedByTheirAlgorithms) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options = searchFor(8, 32, "tp_mode=2d");
  options.keep = 1000;
  // Without the partitioner's splits no grid is placed.
  SearchResult none = searchGraphPlans(importedGpt(2), cluster, options);
  EXPECT_TRUE(none.best.empty());
  // The one grid 8 devices hold in a node is 2 x 2.
  std::vector<ModelAxis> asked = modelAxesToSplit(options, cluster);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked.front().str(), "tp=4,tp_mode=2d");
  // A split the partitioner refuses is the reason given.
  auto refused = [](const Graph &, ModelAxis) -> std::optional<ModelAxisSplit> {
    return ModelAxisSplit{std::nullopt, "the partitioner cannot split op embed"};
  };
  SearchResult refusal = searchGraphPlans(importedGpt(2, true, refused, asked), cluster, options);
  EXPECT_TRUE(refusal.best.empty());
  EXPECT_NE(refusal.infeasible.find("op embed"), std::string::npos) << refusal.infeasible;
  // Built, every plan is the grid, priced by the estimator's grid
  // algorithms: without a replicated sharding standing in for it, each
  // rank holds a 1/q^2 block of the weights (Optimus), a quarter of what
  // one rank holds of the whole model.
  auto built = [](const Graph &graph, ModelAxis) -> std::optional<ModelAxisSplit> { return replicatedSplit(graph); };
  options.exhaustive = true;
  SearchResult result = searchGraphPlans(importedGpt(2, true, built, asked), cluster, options);
  ASSERT_FALSE(result.best.empty()) << result.infeasible;
  std::string why;
  int blocksChecked = 0;
  for (const SearchCandidate &c : result.best) {
    EXPECT_EQ(c.strategy.tpMode, TensorMode::TwoD);
    EXPECT_EQ(c.strategy.tp, 4);
    EXPECT_EQ(c.placement, Placement::Partitioner);
    EXPECT_TRUE(c.sharding.empty());
    if (c.strategy.pp > 1 || c.strategy.zero == 3)
      continue;
    std::optional<SearchGraph> graph = importedGpt(2)(c.microbatchSize, why);
    std::optional<Estimate> whole = estimate(graph->graph, Strategy{}, cluster, why);
    ASSERT_TRUE(whole) << why;
    EXPECT_DOUBLE_EQ(c.estimate.memory.parameters * 4, whole->memory.parameters) << c.strategy.str();
    ++blocksChecked;
  }
  EXPECT_GT(blocksChecked, 0);
}

TEST(GraphSearch, GridsJoinThePrunedSearchWithTheSameAnswers) {
  // Every model axis of 8 devices, grids included, given as built: the
  // pruned search keeps what evaluating every candidate keeps, and the
  // grids (2.5D over two layers, 3D) are among the candidates evaluated.
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options = searchFor(8, 16);
  options.keep = 3;
  std::vector<ModelAxis> all = modelAxesToSplit(options, cluster);
  auto built = [](const Graph &graph, ModelAxis) -> std::optional<ModelAxisSplit> { return replicatedSplit(graph); };
  SearchResult pruned = searchGraphPlans(importedGpt(4, true, built, all), cluster, options);
  options.exhaustive = true;
  options.keep = 100000;
  SearchResult every = searchGraphPlans(importedGpt(4, true, built, all), cluster, options);
  ASSERT_FALSE(pruned.best.empty()) << pruned.infeasible;
  std::set<std::string> grids;
  for (const SearchCandidate &c : every.best)
    if (c.strategy.tpMode != TensorMode::OneD)
      grids.insert(nameOf(c.strategy.tpMode));
  every.best.erase(every.best.begin() + std::ptrdiff_t(std::min(every.best.size(), pruned.best.size())),
                   every.best.end());
  expectSamePlans(pruned, every);
  EXPECT_EQ(grids, (std::set<std::string>{"2d", "2.5d", "3d"}));
}

TEST(GraphSearch, SequenceAxesArePlacedByThePartitioner) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  std::string error;
  options.fixed = *Strategy::parse("tp=1,sp_mode=all-to-all", error, &options.fixedKeys);
  // Without the partitioner's splits there is no sequence axis to place.
  SearchResult none = searchGraphPlans(importedGpt(2), cluster, options);
  EXPECT_TRUE(none.best.empty());
  // With them, the model axes to split are the sequence axes the fixed
  // parts allow; the search evaluates plans with the splits it is given
  // (here the tokens outside attention).
  std::vector<ModelAxis> asked = modelAxesToSplit(options, cluster);
  auto tokens = [&](const Graph &graph, ModelAxis axis) -> std::optional<ModelAxisSplit> {
    Strategy s;
    axis.applyTo(s);
    int sp = buildMesh(s, cluster).axisIndex("sp");
    ModelAxisSplit split = replicatedSplit(graph);
    for (size_t o = 0; o < graph.ops.size(); ++o)
      for (size_t f = 0; f < graph.ops[o].factors.size(); ++f)
        if (graph.ops[o].factors[f].name == "seq" && !graph.ops[o].attentionCore)
          (*split.sharding)[o][f].push_back(sp);
    return split;
  };
  SearchResult result = searchGraphPlans(importedGpt(2, true, tokens, asked), cluster, options);
  ASSERT_FALSE(result.best.empty()) << result.infeasible;
  for (const SearchCandidate &c : result.best) {
    EXPECT_EQ(c.strategy.spMode, SequenceMode::AllToAll);
    EXPECT_GT(c.strategy.sp, 1);
    EXPECT_EQ(c.strategy.tp, 1);
    EXPECT_EQ(c.placement, Placement::Partitioner);
    EXPECT_FALSE(c.sharding.empty());
  }
  ASSERT_FALSE(asked.empty());
  for (const ModelAxis &axis : asked) {
    EXPECT_EQ(axis.mode, SequenceMode::AllToAll) << axis.str();
    EXPECT_EQ(axis.tensor, 1) << axis.str();
  }

  // Beside a tensor axis, the solver places the tensor axis on top of the
  // partitioner's sequence split: its plans split with the sequence axis
  // exactly what the split does, and the tensor axis where it chooses.
  options.fixed = *Strategy::parse("tp=2,sp=2,sp_mode=all-to-all", error, &options.fixedKeys);
  options.keep = 40;
  asked = modelAxesToSplit(options, cluster);
  result = searchGraphPlans(importedGpt(2, true, tokens, asked), cluster, options);
  ASSERT_FALSE(result.best.empty()) << result.infeasible;
  std::set<Placement> placements;
  for (const SearchCandidate &c : result.best) {
    placements.insert(c.placement);
    if (c.placement != Placement::Solver)
      continue;
    const Graph graph = importedGpt(2)(c.microbatchSize, error)->graph;
    int sp = c.estimate.mesh.axisIndex("sp"), tp = c.estimate.mesh.axisIndex("tp");
    ASSERT_EQ(c.sharding.size(), graph.ops.size());
    int tensorSplits = 0;
    for (size_t o = 0; o < graph.ops.size(); ++o)
      for (size_t f = 0; f < graph.ops[o].factors.size(); ++f) {
        const std::vector<int> &on = c.sharding[o][f];
        bool want = graph.ops[o].factors[f].name == "seq" && !graph.ops[o].attentionCore;
        EXPECT_EQ(std::count(on.begin(), on.end(), sp), want ? 1 : 0)
            << graph.ops[o].name << " " << graph.ops[o].factors[f].name;
        tensorSplits += int(std::count(on.begin(), on.end(), tp));
      }
    EXPECT_GT(tensorSplits, 0);
  }
  // (The split given splits no tensor factor, so the solver's plans lead.)
  EXPECT_TRUE(placements.count(Placement::Solver));
}

TEST(GraphSearch, ModelAxesAreEveryTensorBySequenceSplit) {
  // 4 ranks: the tensor axis alone and with Megatron's sequence
  // parallelism; 1 x 4, 2 x 2 for each of all-to-all and ring.
  std::vector<std::string> names;
  for (const ModelAxis &axis : modelAxesOf(4))
    names.push_back(axis.str());
  EXPECT_EQ(names, (std::vector<std::string>{"tp=4", "tp=4,sp_mode=megatron", "tp=1,sp=4,sp_mode=all-to-all",
                                             "tp=1,sp=4,sp_mode=ring", "tp=2,sp=2,sp_mode=all-to-all",
                                             "tp=2,sp=2,sp_mode=ring", "tp=4,tp_mode=2d"}));
  // 8 ranks make two layers of a 2 x 2 grid and a 2 x 2 x 2 cube; 16 a
  // 4 x 4 grid and four layers of a 2 x 2 one; 6 no grid.
  auto gridsOf = [](int ranks) {
    std::vector<std::string> grids;
    for (const ModelAxis &axis : modelAxesOf(ranks))
      if (axis.onGrid())
        grids.push_back(axis.str());
    return grids;
  };
  EXPECT_EQ(gridsOf(8), (std::vector<std::string>{"tp=8,tp_mode=2.5d,tp_depth=2", "tp=8,tp_mode=3d"}));
  EXPECT_EQ(gridsOf(16), (std::vector<std::string>{"tp=16,tp_mode=2.5d,tp_depth=4", "tp=16,tp_mode=2d"}));
  EXPECT_TRUE(gridsOf(6).empty());
  for (const ModelAxis &axis : modelAxesOf(6))
    EXPECT_EQ(axis.ranks(), 6) << axis.str();
  EXPECT_EQ(modelAxesOf(1).size(), 1u);
}

TEST(GraphSearch, TensorBySequenceAxesArePlacedByThePartitioner) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  std::string error;
  options.fixed = *Strategy::parse("tp=2,sp=2,sp_mode=ring", error, &options.fixedKeys);
  std::vector<ModelAxis> asked = modelAxesToSplit(options, cluster);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked.front().str(), "tp=2,sp=2,sp_mode=ring");
  // Given the split of the one axis it asks for, the search evaluates the
  // fixed tensor x sequence plans with it.
  std::vector<ModelAxis> seen;
  auto split = [&](const Graph &graph, ModelAxis axis) -> std::optional<ModelAxisSplit> {
    seen.push_back(axis);
    return replicatedSplit(graph);
  };
  SearchResult result = searchGraphPlans(importedGpt(2, true, split, asked), cluster, options);
  ASSERT_FALSE(result.best.empty()) << result.infeasible;
  for (const SearchCandidate &c : result.best) {
    EXPECT_EQ(c.strategy.tp, 2);
    EXPECT_EQ(c.strategy.sp, 2);
    EXPECT_EQ(c.strategy.spMode, SequenceMode::Ring);
    EXPECT_EQ(c.placement, Placement::Partitioner);
  }
  EXPECT_FALSE(seen.empty());

  // Unfixed, the search on 4 devices evaluates every model axis it is given
  // a split for, tensor x sequence ones included.
  SearchOptions open;
  open.devices = 4;
  open.globalBatch = 8;
  open.keep = 1000;
  std::vector<ModelAxis> all = modelAxesToSplit(open, cluster);
  SearchResult searched = searchGraphPlans(importedGpt(2, true, split, all), cluster, open);
  std::set<std::string> axes;
  for (const SearchCandidate &c : searched.best)
    axes.insert(ModelAxis{c.strategy.tp, c.strategy.sp, c.strategy.spMode}.str());
  EXPECT_TRUE(axes.count("tp=2,sp=2,sp_mode=all-to-all")) << searched.best.size();
  EXPECT_TRUE(axes.count("tp=2,sp=2,sp_mode=ring"));
  EXPECT_TRUE(axes.count("tp=1,sp=4,sp_mode=ring"));
}

TEST(GraphSearch, APartitionerRefusalIsTheReasonGiven) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  std::string error;
  options.fixed = *Strategy::parse("sp_mode=ring", error, &options.fixedKeys);
  auto refuse = [](const Graph &, ModelAxis axis) -> std::optional<ModelAxisSplit> {
    return ModelAxisSplit{std::nullopt, "the tokens do not divide by " + std::to_string(axis.sequence)};
  };
  SearchResult result =
      searchGraphPlans(importedGpt(2, true, refuse, modelAxesToSplit(options, cluster)), cluster, options);
  EXPECT_TRUE(result.best.empty());
  EXPECT_NE(result.infeasible.find("the tokens do not divide by"), std::string::npos) << result.infeasible;
}

TEST(GraphSearch, InfeasibleSaysWhatWouldFit) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  cluster.memoryBytes = 1e8; // far too small for a 0.4B model
  SearchOptions options;
  options.devices = 2;
  options.globalBatch = 2;
  SearchResult result = searchGraphPlans(importedGpt(2), cluster, options);
  EXPECT_TRUE(result.best.empty());
  EXPECT_NE(result.infeasible.find("the smallest found needs"), std::string::npos) << result.infeasible;
  EXPECT_NE(result.infeasible.find("devices would hold it"), std::string::npos) << result.infeasible;
}

TEST(GraphScaling, TheGraphAtAnyBatchFollowsFromOneAndTwo) {
  // From one and two samples, and from two and four (what the planner uses
  // when an export's graph at one sample has another structure), the graphs
  // at 8 and 12 samples equal the ones built at those sizes.
  for (TransformerFamily family : {TransformerFamily::GPT, TransformerFamily::LLaMA}) {
    auto build = [&](int64_t microbatch) {
      TransformerShape shape;
      shape.family = family;
      shape.layers = 3;
      shape.hidden = 512;
      shape.heads = 8;
      shape.seq = 256;
      shape.vocab = 5000;
      shape.microbatch = microbatch;
      return buildTransformer(shape);
    };
    Graph one = build(1), two = build(2), four = build(4);
    for (auto [from, to] : {std::pair(&one, &two), std::pair(&two, &four)})
      for (int64_t target : {8, 12}) {
        Graph built = build(target);
        std::string error;
        std::optional<Graph> scaled = graphAtBatch(*from, *to, target, error);
        ASSERT_TRUE(scaled) << error;
        ASSERT_EQ(scaled->ops.size(), built.ops.size());
        for (size_t o = 0; o < built.ops.size(); ++o) {
          for (size_t f = 0; f < built.ops[o].factors.size(); ++f)
            EXPECT_EQ(scaled->ops[o].factors[f].size, built.ops[o].factors[f].size) << built.ops[o].name;
          EXPECT_DOUBLE_EQ(scaled->ops[o].forwardFlops, built.ops[o].forwardFlops) << built.ops[o].name;
          EXPECT_DOUBLE_EQ(scaled->ops[o].backwardFlops, built.ops[o].backwardFlops) << built.ops[o].name;
        }
        EXPECT_EQ(scaled->microbatch, target);
        EXPECT_EQ(scaled->tokensPerMicrobatch, built.tokensPerMicrobatch);
        Strategy s;
        s.tp = 2;
        s.dp = 2;
        Cluster cluster = *Cluster::preset("dgx-a100");
        auto a = estimate(*scaled, s, cluster, error), b = estimate(built, s, cluster, error);
        ASSERT_TRUE(a && b) << error;
        EXPECT_DOUBLE_EQ(a->stepTime, b->stepTime);
        EXPECT_DOUBLE_EQ(a->memory.total(), b->memory.total());
      }
    // Graphs that are not at m and 2m samples are refused.
    std::string error;
    EXPECT_FALSE(graphAtBatch(one, four, 8, error));
    EXPECT_NE(error.find("not m and 2m"), std::string::npos) << error;
  }
}

TEST(GraphScaling, RefusesGraphsOfDifferentStructure) {
  TransformerShape shape;
  shape.layers = 2;
  Graph one = buildTransformer(shape);
  shape.layers = 3;
  shape.microbatch = 2;
  Graph other = buildTransformer(shape);
  std::string error;
  EXPECT_FALSE(graphAtBatch(one, other, 4, error));
  EXPECT_NE(error.find("differ"), std::string::npos) << error;
}

TEST(GraphSearch, OnlyAdmittedStrategiesAreCandidates) {
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  SearchResult all = searchGraphPlans(importedGpt(4), cluster, options);
  options.admit = [](const Strategy &s) { return s.tp == 1 && s.pp == 1 && s.zero <= 2; };
  SearchResult admitted = searchGraphPlans(importedGpt(4), cluster, options);
  ASSERT_FALSE(admitted.best.empty()) << admitted.infeasible;
  EXPECT_LT(admitted.candidates, all.candidates);
  for (const SearchCandidate &c : admitted.best)
    EXPECT_TRUE(c.strategy.tp == 1 && c.strategy.pp == 1 && c.strategy.zero <= 2) << c.strategy.str();
  // The unrestricted search is never slower.
  EXPECT_LE(all.best.front().estimate.stepTime, admitted.best.front().estimate.stepTime);
}

TEST(GraphSearch, PruningKeepsTheSamePlansAndTheBestBuildable) {
  // ZeRO and offload variants are skipped once their group's pipeline
  // cannot beat the kept plans: the same plans as evaluating everything,
  // and the same fastest plan a predicate calls buildable (here: ZeRO-2 on
  // a tensor axis of 2, a variant of slower groups that pruning would
  // skip), which pruning must not lose.
  Cluster cluster = *Cluster::preset("dgx-a100");
  SearchOptions options;
  options.devices = 8;
  options.globalBatch = 32;
  options.keep = 2;
  options.buildable = [](const Strategy &s, Placement) { return s.tp == 2 && s.zero == 2; };
  SearchResult pruned = searchGraphPlans(importedGpt(4), cluster, options);
  options.exhaustive = true;
  SearchResult all = searchGraphPlans(importedGpt(4), cluster, options);
  ASSERT_FALSE(pruned.best.empty()) << pruned.infeasible;
  EXPECT_GT(pruned.prunedByTime, 0);
  EXPECT_LT(pruned.evaluated, all.evaluated);
  expectSamePlans(pruned, all);
  ASSERT_TRUE(all.bestBuildable && pruned.bestBuildable);
  EXPECT_EQ(pruned.bestBuildable->strategy.str(), all.bestBuildable->strategy.str());
  EXPECT_EQ(pruned.bestBuildable->estimate.stepTime, all.bestBuildable->estimate.stepTime);
  for (const SearchCandidate &c : all.best)
    EXPECT_LE(c.estimate.stepTime, all.bestBuildable->estimate.stepTime);
}

TEST(GraphSearch, MeasuredLayerBoundsKeepTheSameAnswers) {
  // Deep pipelines are skipped when what the evaluated plans measured per
  // layer (time, kept activations) rules them out: the same plans, the same
  // best buildable plan, and the same closest miss when nothing fits.
  Cluster cluster = *Cluster::preset("dgx-a100", 4);
  for (double capacity : {8e9, 1e9, 0.3e9, 0.15e9}) {
    cluster.memoryBytes = capacity;
    SearchOptions options;
    options.devices = 32;
    options.globalBatch = 64;
    options.buildable = [](const Strategy &s, Placement) { return s.pp == 1 && s.zero == 1; };
    SearchResult pruned = searchGraphPlans(importedGpt(16), cluster, options);
    options.exhaustive = true;
    SearchResult all = searchGraphPlans(importedGpt(16), cluster, options);
    SCOPED_TRACE("capacity " + std::to_string(capacity));
    expectSamePlans(pruned, all);
    ASSERT_EQ(bool(pruned.bestBuildable), bool(all.bestBuildable));
    if (all.bestBuildable)
      EXPECT_EQ(pruned.bestBuildable->strategy.str(), all.bestBuildable->strategy.str());
    if (all.best.empty())
      EXPECT_EQ(pruned.infeasible, all.infeasible);
    std::printf("capacity %.2g: %s; %lld of %lld evaluated (%lld pruned by memory, %lld by time), "
                "exhaustively %lld\n",
                capacity, all.best.empty() ? "nothing fits" : "a plan fits", (long long)pruned.evaluated,
                (long long)pruned.candidates, (long long)pruned.prunedByMemory, (long long)pruned.prunedByTime,
                (long long)all.evaluated);
  }
}
