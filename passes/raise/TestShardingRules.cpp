//===- TestShardingRules.cpp - report factor rules as remarks ----*- C++ -*-===//

#include "passes/raise/Passes.h"

namespace colossal::train {
#define GEN_PASS_DEF_TESTSHARDINGRULES
#include "passes/raise/Passes.h.inc"

namespace {
struct TestShardingRulesPass : impl::TestShardingRulesBase<TestShardingRulesPass> {
  void runOnOperation() override {
    getOperation().walk([](ShardingRuleOpInterface op) {
      op->emitRemark() << "sharding rule: " << op.getShardingRule().str();
    });
  }
};
} // namespace
} // namespace colossal::train
