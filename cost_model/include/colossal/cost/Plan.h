//===- Plan.h - a parallelisation strategy and its mesh ------------*- C++ -*-===//
//
// A strategy says how many ways each kind of parallelism splits the work
// (data, pipeline, tensor, sequence), which algorithm each uses, the
// microbatching and pipeline schedule, the ZeRO stage, offload and
// recomputation. From it follow a device mesh (named axes, innermost first,
// placed on the cluster's nodes) and, op by op, which mesh axes split which
// factors: the per-op sharding the cost model evaluates. A plan file can
// carry explicit per-op shardings instead; the evaluator does not know how a
// sharding was chosen.
//
//===----------------------------------------------------------------------===//

#ifndef COLOSSAL_COST_PLAN_H
#define COLOSSAL_COST_PLAN_H

#include "colossal/cost/Cluster.h"
#include "colossal/cost/Graph.h"

#include <set>
#include <string>
#include <vector>

namespace colossal::cost {

enum class TensorMode { OneD, TwoD, TwoPointFiveD, ThreeD };
enum class SequenceMode {
  None,
  Megatron, // layer norm and dropout split along the sequence on the tensor axis
  AllToAll, // sequence split to head split around attention (DeepSpeed-Ulysses)
  Ring,     // keys and values passed around a ring of ranks (ring self-attention)
};
/// The strategy string's name of a sequence mode ("none", "megatron", "all-to-all", "ring").
const char *nameOf(SequenceMode mode);

enum class Schedule { GPipe, OneFOneB, Interleaved };
enum class Recompute { None, Selective, Full };
/// The strategy string's names ("1d", "2.5d"; "gpipe", "1f1b",
/// "interleaved"; "none", "selective", "full").
const char *nameOf(TensorMode mode);
const char *nameOf(Schedule schedule);
const char *nameOf(Recompute recompute);

struct Strategy {
  int dp = 1, pp = 1, tp = 1, sp = 1;
  TensorMode tpMode = TensorMode::OneD;
  /// Depth d of 2.5D tensor parallelism (tp = q * q * d).
  int tpDepth = 1;
  /// Megatron sequence parallelism reuses the tensor axis (sp stays 1).
  SequenceMode spMode = SequenceMode::None;
  int microbatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  /// Model chunks per pipeline rank for the interleaved schedule.
  int virtualStages = 1;
  int zero = 0;
  bool offloadOptimizer = false;
  Recompute recompute = Recompute::None;
  /// Layers per pipeline stage (pp x virtual_stages entries, in stage
  /// order); empty: an equal split (the layers must divide).
  std::vector<int64_t> stageLayers;

  int devices() const { return dp * pp * tp * sp; }
  std::string str() const;
  Json toJson() const;
  static std::optional<Strategy> fromJson(const Json &json, std::string &error);
  /// Parses "dp=8,tp=8,pp=2,sp_mode=megatron,zero=1,recompute=selective,...";
  /// keys as in toJson(). Unknown keys and values are errors. With `keys`,
  /// also says which keys the text named (the parts a search must keep).
  static std::optional<Strategy> parse(const std::string &text, std::string &error,
                                       std::set<std::string> *keys = nullptr);
};

/// One mesh axis: a name, a size, and how its groups sit on the cluster.
struct MeshAxis {
  std::string name;
  int size = 1;
  /// Ranks of one group that share a node (size when the group is inside a
  /// node, 1 when every member is on another node).
  int perNode = 1;
  bool spansNodes() const { return perNode < size; }
};

struct Mesh {
  /// Innermost first: tensor, sequence, data, pipeline.
  std::vector<MeshAxis> axes;
  int axisIndex(const std::string &name) const;
  const MeshAxis *axis(const std::string &name) const;
  /// The ranks the mesh spans: its axes' sizes multiplied.
  int devices() const {
    int n = 1;
    for (const MeshAxis &a : axes)
      n *= a.size;
    return n;
  }
  Json toJson() const;
};

/// Places the strategy's axes on the cluster, tensor axes innermost (inside a
/// node, on NVLink), then sequence, data, pipeline. 2D, 2.5D and 3D tensor
/// parallelism get their grid axes (tp_row, tp_col, tp_depth) instead of tp.
Mesh buildMesh(const Strategy &strategy, const Cluster &cluster);

/// Which mesh axes split each factor of each op: sharding[op][factor] is a
/// list of axis indices (major first).
using OpSharding = std::vector<std::vector<int>>;
using GraphSharding = std::vector<OpSharding>;

/// Every op of `graph` replicated: no factor split.
GraphSharding replicatedSharding(const Graph &graph);

/// Derives per-op shardings from the strategy's templates (Megatron 1D
/// tensor parallelism by factor names, the three sequence algorithms).
GraphSharding shardGraph(const Graph &graph, const Strategy &strategy, const Mesh &mesh);

/// The side q and depth d of a 2D/2.5D/3D tensor grid ({0, 0} if tp does not
/// have that shape; d = q for 3D, 1 for 2D).
std::pair<int, int> tensorGrid(const Strategy &strategy);

/// Where a sharding comes from: the search's block splits, or a
/// partitioned program (AppliedSharding.h), whose grouped layouts (a fused
/// QKV projection split by heads) and padded splits (a vocabulary the
/// ranks do not divide) exist because the partitioner built them.
enum class SplitLayouts { Blocks, Built };

/// Checks that every split divides its factor and that whole factors stay
/// whole except where a special algorithm takes them; `error` says which op.
/// A sharding read back from a partitioned program passes as it is.
bool checkSharding(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh,
                   const Strategy &strategy, std::string &error,
                   SplitLayouts layouts = SplitLayouts::Blocks);

/// The plan file's per-op and per-value shardings: `ops` lists every op
/// that some axis splits (its index, name, and the mesh axes per factor);
/// `values` lists every produced value whose layout is not replicated
/// (per dimension the axes splitting it, and the axes it is a pending
/// partial sum over). `op_count` lets a reader check the file matches.
Json shardingToJson(const Graph &graph, const GraphSharding &sharding, const Mesh &mesh);

/// Reads the `ops` section back; fails naming the entry that does not
/// match `graph` or `mesh`.
std::optional<GraphSharding> shardingFromJson(const Json &json, const Graph &graph, const Mesh &mesh,
                                              std::string &error);

} // namespace colossal::cost

#endif // COLOSSAL_COST_PLAN_H
