//===- ReshardingTest.cpp - every layout to every layout, run and priced --===//
//
// For every pair of layouts of a 2-D value on small meshes, the plan is run
// on simulated ranks holding integers (each step as the partitioner's
// collective defines it) and must leave every rank exactly its block of the
// value, or blocks summing to it where the target is a pending sum; and its
// bus bytes must equal the cheapest of every sequence of steps, found by a
// shortest-path search over all layouts.
//
//===----------------------------------------------------------------------===//

#include "colossal/cost/Resharding.h"

#include <gtest/gtest.h>

#include <map>
#include <queue>
#include <random>
#include <set>

using namespace colossal::cost;

namespace {

constexpr int kSide = 16; // divisible by every product of axis sizes below

using Block = std::vector<std::vector<int64_t>>; // rows x columns

Block zeros(int rows, int cols) { return Block(size_t(rows), std::vector<int64_t>(size_t(cols), 0)); }

/// Rank coordinates, axis 0 major.
std::vector<int> coordsOf(int rank, const std::vector<int> &sizes) {
  std::vector<int> c(sizes.size());
  for (int a = int(sizes.size()) - 1; a >= 0; --a)
    c[size_t(a)] = rank % sizes[size_t(a)], rank /= sizes[size_t(a)];
  return c;
}

int rankOf(const std::vector<int> &c, const std::vector<int> &sizes) {
  int r = 0;
  for (size_t a = 0; a < sizes.size(); ++a)
    r = r * sizes[a] + c[a];
  return r;
}

int rankCount(const std::vector<int> &sizes) {
  int n = 1;
  for (int s : sizes)
    n *= s;
  return n;
}

/// Where rank `c`'s block of dimension `d` starts and how long it is.
std::pair<int, int> extentOf(const TensorSpec &spec, int d, const std::vector<int> &c, const std::vector<int> &sizes) {
  int index = 0, parts = 1;
  for (int a : spec.dims[size_t(d)])
    index = index * sizes[size_t(a)] + c[size_t(a)], parts *= sizes[size_t(a)];
  int length = kSide / parts;
  return {index * length, length};
}

Block blockOf(const Block &whole, const TensorSpec &spec, const std::vector<int> &c, const std::vector<int> &sizes) {
  auto [r0, rows] = extentOf(spec, 0, c, sizes);
  auto [c0, cols] = extentOf(spec, 1, c, sizes);
  Block out = zeros(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      out[size_t(i)][size_t(j)] = whole[size_t(r0 + i)][size_t(c0 + j)];
  return out;
}

/// Part `k` of `n` of a block along dimension `d`.
Block partOf(const Block &b, int d, int k, int n) {
  int rows = int(b.size()), cols = int(b[0].size());
  int r0 = 0, c0 = 0;
  (d == 0 ? rows : cols) /= n;
  (d == 0 ? r0 : c0) = k * (d == 0 ? rows : cols);
  Block out = zeros(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      out[size_t(i)][size_t(j)] = b[size_t(r0 + i)][size_t(c0 + j)];
  return out;
}

Block concat(const std::vector<Block> &parts, int d) {
  Block out = parts[0];
  for (size_t p = 1; p < parts.size(); ++p) {
    if (d == 0)
      out.insert(out.end(), parts[p].begin(), parts[p].end());
    else
      for (size_t i = 0; i < out.size(); ++i)
        out[i].insert(out[i].end(), parts[p][i].begin(), parts[p][i].end());
  }
  return out;
}

Block sum(const std::vector<Block> &parts) {
  Block out = parts[0];
  for (size_t p = 1; p < parts.size(); ++p)
    for (size_t i = 0; i < out.size(); ++i)
      for (size_t j = 0; j < out[i].size(); ++j)
        out[i][j] += parts[p][i][j];
  return out;
}

/// The ranks of `rank`'s group along `axis`, by their coordinate on it.
std::vector<int> groupOf(int rank, int axis, const std::vector<int> &sizes) {
  std::vector<int> c = coordsOf(rank, sizes), group;
  for (int k = 0; k < sizes[size_t(axis)]; ++k) {
    c[size_t(axis)] = k;
    group.push_back(rankOf(c, sizes));
  }
  return group;
}

/// Every rank's block of a value laid out by `spec`: where it is a pending
/// sum, the ranks of each group over the summed axes hold random integers
/// but the first, which holds the value less the others.
std::vector<Block> distribute(const Block &whole, const TensorSpec &spec, const std::vector<int> &sizes,
                              std::mt19937 &random) {
  int n = rankCount(sizes);
  std::vector<Block> contribution(size_t(n), whole);
  std::uniform_int_distribution<int> noise(-50, 50);
  auto first = [&](int r) {
    std::vector<int> c = coordsOf(r, sizes);
    return std::all_of(spec.partial.begin(), spec.partial.end(), [&](int a) { return c[size_t(a)] == 0; });
  };
  for (int r = 0; r < n; ++r)
    if (!first(r))
      for (auto &row : contribution[size_t(r)])
        for (auto &x : row)
          x = noise(random);
  for (int r = 0; r < n; ++r) {
    if (!first(r))
      continue;
    std::vector<int> group = {r};
    for (int a : spec.partial) {
      std::vector<int> wider;
      for (int g : group)
        for (int h : groupOf(g, a, sizes))
          wider.push_back(h);
      group = wider;
    }
    for (int g : group)
      if (g != r)
        for (size_t i = 0; i < size_t(kSide); ++i)
          for (size_t j = 0; j < size_t(kSide); ++j)
            contribution[size_t(r)][i][j] -= contribution[size_t(g)][i][j];
  }
  std::vector<Block> local;
  for (int r = 0; r < n; ++r)
    local.push_back(blockOf(contribution[size_t(r)], spec, coordsOf(r, sizes), sizes));
  return local;
}

/// Runs one step on every rank.
void run(const ReshardStep &step, std::vector<Block> &local, const std::vector<int> &sizes) {
  int n = rankCount(sizes), parts = sizes[size_t(step.axis)];
  std::vector<Block> next{size_t(n)};
  for (int r = 0; r < n; ++r) {
    int mine = coordsOf(r, sizes)[size_t(step.axis)];
    std::vector<Block> group;
    for (int g : groupOf(r, step.axis, sizes))
      group.push_back(local[size_t(g)]);
    switch (step.kind) {
    case ReshardKind::Slice: next[size_t(r)] = partOf(local[size_t(r)], step.dim, mine, parts); break;
    case ReshardKind::AllReduce: next[size_t(r)] = sum(group); break;
    case ReshardKind::ReduceScatter: next[size_t(r)] = partOf(sum(group), step.dim, mine, parts); break;
    case ReshardKind::AllGather: next[size_t(r)] = concat(group, step.dim); break;
    case ReshardKind::AllToAll: {
      // Each rank cuts its block along `dim` and sends part j to rank j,
      // which puts what it receives side by side along `fromDim`.
      std::vector<Block> received;
      for (const Block &b : group)
        received.push_back(partOf(b, step.dim, mine, parts));
      next[size_t(r)] = concat(received, step.fromDim);
      break;
    }
    }
  }
  local = std::move(next);
}

/// Every layout of a 2-D value on a mesh of `axes` axes: each axis whole,
/// a pending sum, or splitting one dimension, in every nesting order.
std::vector<TensorSpec> everyLayout(int axes) {
  std::vector<TensorSpec> layouts;
  int choices = 1;
  for (int a = 0; a < axes; ++a)
    choices *= 4;
  for (int code = 0; code < choices; ++code) {
    TensorSpec spec;
    spec.dims.resize(2);
    for (int a = 0, c = code; a < axes; ++a, c /= 4) {
      if (c % 4 == 1)
        spec.partial.push_back(a);
      else if (c % 4 >= 2)
        spec.dims[size_t(c % 4 - 2)].push_back(a);
    }
    std::sort(spec.dims[0].begin(), spec.dims[0].end());
    do {
      std::vector<int> second = spec.dims[1];
      std::sort(second.begin(), second.end());
      spec.dims[1] = second;
      do
        layouts.push_back(spec);
      while (std::next_permutation(spec.dims[1].begin(), spec.dims[1].end()));
    } while (std::next_permutation(spec.dims[0].begin(), spec.dims[0].end()));
  }
  return layouts;
}

/// A layout as a comparable value: the splits, and the pending sums in
/// ascending order.
using Canonical = std::pair<std::vector<std::vector<int>>, std::vector<int>>;
Canonical canonical(const TensorSpec &spec) {
  std::vector<int> partial = spec.partial;
  std::sort(partial.begin(), partial.end());
  return {spec.dims, partial};
}

/// How a layout reads in a failure message: "0|1|" and the sums after.
std::string describe(const TensorSpec &spec) {
  std::string text;
  for (const auto &dim : spec.dims) {
    for (int a : dim)
      text += std::to_string(a);
    text += '|';
  }
  for (int a : canonical(spec).second)
    text += std::to_string(a);
  return text;
}

/// The fewest bus bytes of any step sequence from `from` to `to`
/// (Dijkstra over layouts, every step the planner may take anywhere).
double cheapest(const TensorSpec &from, const TensorSpec &to, const std::vector<int> &sizes, double fullBytes) {
  using Entry = std::pair<double, TensorSpec>;
  auto later = [](const Entry &x, const Entry &y) { return x.first > y.first; };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> open(later);
  std::set<Canonical> closed;
  open.push({0.0, from});
  Canonical goal = canonical(to);
  while (!open.empty()) {
    auto [cost, spec] = open.top();
    open.pop();
    Canonical key = canonical(spec);
    if (key == goal)
      return cost;
    if (!closed.insert(key).second)
      continue;
    double local = fullBytes;
    for (const auto &dim : spec.dims)
      for (int a : dim)
        local /= sizes[size_t(a)];
    auto push = [&](TensorSpec next, Collective c, int axis, double bytes) {
      open.push({cost + bytes * busFactor(c, sizes[size_t(axis)]), std::move(next)});
    };
    for (int a = 0; a < int(sizes.size()); ++a) {
      auto whole = [&](const TensorSpec &x) {
        return !std::count(x.partial.begin(), x.partial.end(), a) &&
               !std::count(x.dims[0].begin(), x.dims[0].end(), a) && !std::count(x.dims[1].begin(), x.dims[1].end(), a);
      };
      if (whole(from) && whole(to))
        continue; // an axis the resharding has no business with
      bool partial = std::count(spec.partial.begin(), spec.partial.end(), a) > 0;
      bool split = std::count(spec.dims[0].begin(), spec.dims[0].end(), a) ||
                   std::count(spec.dims[1].begin(), spec.dims[1].end(), a);
      for (int d = 0; d < 2; ++d) {
        TensorSpec next = spec;
        next.dims[size_t(d)].push_back(a);
        if (!partial && !split)
          open.push({cost, next}); // slice
        if (partial) {
          next.partial.erase(std::find(next.partial.begin(), next.partial.end(), a));
          push(next, Collective::ReduceScatter, a, local);
        }
      }
      if (partial) {
        TensorSpec next = spec;
        next.partial.erase(std::find(next.partial.begin(), next.partial.end(), a));
        push(next, Collective::AllReduce, a, local);
      }
    }
    for (int d = 0; d < 2; ++d) {
      if (spec.dims[size_t(d)].empty())
        continue;
      int a = spec.dims[size_t(d)].back();
      TensorSpec gathered = spec;
      gathered.dims[size_t(d)].pop_back();
      push(gathered, Collective::AllGather, a, local * sizes[size_t(a)]);
      TensorSpec moved = gathered;
      moved.dims[size_t(1 - d)].push_back(a);
      push(moved, Collective::AllToAll, a, local);
    }
  }
  return -1;
}

void checkEveryPair(const std::vector<int> &sizes, std::mt19937 &random) {
  const double fullBytes = 4.0 * kSide * kSide;
  Block whole = zeros(kSide, kSide);
  std::uniform_int_distribution<int> value(-1000, 1000);
  for (auto &row : whole)
    for (auto &x : row)
      x = value(random);
  std::vector<TensorSpec> layouts = everyLayout(int(sizes.size()));
  int plans = 0;
  for (const TensorSpec &from : layouts)
    for (const TensorSpec &to : layouts) {
      ReshardPlan plan = planResharding(from, to, sizes, fullBytes);
      bool reachable = std::all_of(to.partial.begin(), to.partial.end(), [&](int a) {
        return std::count(from.partial.begin(), from.partial.end(), a) > 0;
      });
      std::string tag = describe(from) + " -> " + describe(to);
      if (!reachable) {
        EXPECT_FALSE(plan.error.empty()) << tag << ": a value became a pending sum";
        continue;
      }
      ASSERT_TRUE(plan.error.empty()) << tag << ": " << plan.error;
      ++plans;
      // Run it.
      std::vector<Block> local = distribute(whole, from, sizes, random);
      for (const ReshardStep &step : plan.steps)
        run(step, local, sizes);
      int n = rankCount(sizes);
      for (int r = 0; r < n; ++r) {
        std::vector<int> c = coordsOf(r, sizes);
        Block want = blockOf(whole, to, c, sizes);
        // The target's pending sums: add up the rank's group over them.
        std::vector<int> group = {r};
        bool first = true;
        for (int a : to.partial) {
          first = first && c[size_t(a)] == 0;
          std::vector<int> wider;
          for (int g : group)
            for (int h : groupOf(g, a, sizes))
              wider.push_back(h);
          group = wider;
        }
        if (!first)
          continue;
        std::vector<Block> blocks;
        for (int g : group)
          blocks.push_back(local[size_t(g)]);
        ASSERT_EQ(sum(blocks), want) << tag << ": rank " << r << " after " << plan.steps.size() << " steps";
      }
      // Price it against the cheapest sequence.
      double best = cheapest(from, to, sizes, fullBytes);
      EXPECT_NEAR(busBytes(plan, sizes), best, 1e-9 * fullBytes) << tag;
    }
  EXPECT_GT(plans, 100);
}

TEST(Resharding, EveryLayoutPairOnTwoAxesIsExactAndCheapest) {
  std::mt19937 random(7);
  checkEveryPair({2, 4}, random);
  checkEveryPair({4, 2}, random);
}

TEST(Resharding, EveryLayoutPairOnThreeAxesIsExactAndCheapest) {
  std::mt19937 random(11);
  checkEveryPair({2, 2, 4}, random);
}

TEST(Resharding, SlicesComeBeforeTheCollectives) {
  // A pending sum over axis 0 wanted whole, split along rows by axis 1:
  // slicing first reduces a quarter of the value.
  ReshardPlan plan = planResharding({{{}, {}}, {0}}, {{{1}, {}}, {}}, {2, 4}, 1024);
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, ReshardKind::Slice);
  EXPECT_EQ(plan.steps[1].kind, ReshardKind::AllReduce);
  EXPECT_DOUBLE_EQ(plan.steps[1].bytes, 256);
}

TEST(Resharding, AMoveMakesRoomForAReduceScatter) {
  // Rows split by axis 1 and a pending sum over axis 0, wanted as columns
  // split by [1, 0]: move axis 1 to the columns, then reduce-scatter into
  // them (an all-reduce first would move twice the bytes).
  ReshardPlan plan = planResharding({{{1}, {}}, {0}}, {{{}, {1, 0}}, {}}, {2, 4}, 1024);
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, ReshardKind::AllToAll);
  EXPECT_EQ(plan.steps[1].kind, ReshardKind::ReduceScatter);
}

TEST(Resharding, RefusesToInventAPendingSum) {
  ReshardPlan plan = planResharding({{{}, {}}, {}}, {{{}, {}}, {0}}, {2}, 64);
  EXPECT_NE(plan.error.find("pending sum over mesh axis 0"), std::string::npos) << plan.error;
  plan = planResharding({{{0}, {0}}, {}}, {{{}, {}}, {}}, {2}, 64);
  EXPECT_NE(plan.error.find("twice"), std::string::npos) << plan.error;
}

} // namespace
