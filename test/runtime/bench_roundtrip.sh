#!/usr/bin/env bash
# colossal-bench measures this machine under mpirun and writes a cluster
# description; colossal-cost must accept it and evaluate a plan with it. One
# node has no inter-node link: the description says it is unmeasured (not a
# copy of the intra-node one) and the report names where its value came from.
#   bench_roundtrip.sh BENCH COST MPIRUN...
set -euo pipefail
bench=$1 cost=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$@" -np 2 "$bench" --quick --mesh dp=2 --name ci-host -o "$dir/cluster.json"
grep -q '"format": "colossal-cluster/1"' "$dir/cluster.json"
"$cost" --model gpt --layers 2 --hidden 256 --heads 4 --seq 128 --vocab 1000 \
  --cluster "$dir/cluster.json" --strategy dp=2 | tee "$dir/cost.txt"
grep -q "cluster    ci-host" "$dir/cost.txt"
grep -q '"inter_node": "unmeasured"' "$dir/cluster.json"
grep -q "measured: .*intra_node; unmeasured, taken from h200-node: inter_node" "$dir/cost.txt"
echo PASS
