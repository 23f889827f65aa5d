#!/usr/bin/python3
"""Every run of the emitted-program suites: the activation peak the
runtime's allocator charged, the compiler's planned peak, the cost model's
estimate, and the buffers beside them, gathered into one JSON file and
printed as a Markdown table (docs/benchmarks.md).

The suites write WORKDIR/step_memory.json as they finish
(test/codegen/program_checks.py); run them first (ctest -R emitted), then

  bench/suite_memory_table.py OUT.json build/test/emitted-programs build/test/emitted-parallel-programs
"""
import json
import sys

out, workdirs = sys.argv[1], sys.argv[2:]
rows = []
for workdir in workdirs:
    for row in json.load(open(f"{workdir}/step_memory.json")):
        row["suite"] = workdir.rstrip("/").split("/")[-1]
        rows.append(row)
json.dump({"benchmark": "suite_step_memory", "runs": rows}, open(out, "w"), indent=1)

print("| run | allocated activations | planned | cost model (ratio) | workspace | communication | step total |")
print("|---|---|---|---|---|---|---|")
for row in rows:
    predicted = row["predicted"]
    ratio = f"{predicted:,.0f} ({predicted / row['allocated']:.3f})" if predicted else "-"
    print(f"| {row['tag']} | {row['allocated']:,} | {row['planned']:,} | {ratio} | {row['workspace']:,} | "
          f"{row['communication']:,} | {row['total']:,} |")
ratios = [row["predicted"] / row["allocated"] for row in rows if row["predicted"]]
equal = sum(row["allocated"] == row["planned"] for row in rows)
print(f"\n{len(rows)} runs; allocated = planned in {equal}; cost model / allocated {min(ratios):.3f} to "
      f"{max(ratios):.3f}, {sum(abs(r - 1) <= 0.05 for r in ratios)} of {len(ratios)} within 5%")
