#!/usr/bin/env python3
"""Prints a fuzzing finding as the seed file it grew from plus the edits that
turn the seed into it, so that a finding of tens of kilobytes fits in a few
lines of CI log.

libFuzzer's inputs are mutations of the seed corpus (test/fixtures): a few
bytes changed, inserted or erased in a large model file. Printing the whole
file would push the sanitizer's report out of the part of the log that is
kept.

    fuzz_finding_delta.py FINDING SEED...        prints the delta
    fuzz_finding_delta.py --apply SEED DELTA OUT rebuilds the finding

DELTA is the printed "edits:" line saved to a file.
"""
import base64
import os
import sys

SYNC = 32        # bytes that must agree to call the two files in step again
REACH = 4096     # how far past a difference to look for that agreement
MAX_EDIT_BYTES = 4000


def edits_between(seed, finding):
    """[(offset in seed, bytes of seed replaced, new bytes)], greedy: after a
    difference, the nearest point where SYNC bytes agree again."""
    edits = []
    i = j = 0
    while i < len(seed) and j < len(finding):
        if seed[i] == finding[j]:
            i += 1
            j += 1
            continue
        best = None
        for skip in range(0, REACH):
            if best is not None and skip >= best[0]:
                break
            key = seed[i + skip:i + skip + SYNC]
            if len(key) < SYNC:
                break
            limit = j + REACH + SYNC
            pos = finding.find(key, j, limit)
            if pos >= 0 and (best is None or skip + pos - j < best[0]):
                best = (skip + pos - j, skip, pos)
        if best is None:
            break
        _, skip, pos = best
        edits.append((i, skip, finding[j:pos]))
        i += skip
        j = pos
    if i < len(seed) or j < len(finding):
        edits.append((i, len(seed) - i, finding[j:]))
    return edits


def describe(finding_path, seed_paths):
    finding = open(finding_path, 'rb').read()
    best = None
    for path in seed_paths:
        seed = open(path, 'rb').read()
        # Cheap ranking first: most bytes in step from either end.
        n = min(len(seed), len(finding))
        prefix = next((k for k in range(n) if seed[k] != finding[k]), n)
        suffix = next((k for k in range(n - prefix) if seed[-1 - k] != finding[-1 - k]),
                      n - prefix)
        if best is None or prefix + suffix > best[1]:
            best = (path, prefix + suffix, seed)
    if best is None:
        print("no seed files given")
        return 1
    path, _, seed = best
    edits = edits_between(seed, finding)
    changed = sum(len(new) + removed for _, removed, new in edits)
    print(f"finding: {len(finding)} bytes; seed {os.path.relpath(path)} with {len(edits)} "
          f"edit(s) ({changed} bytes)")
    text = " ".join(f"{offset}:{removed}:{base64.b64encode(new).decode()}"
                    for offset, removed, new in edits)
    if len(text) > MAX_EDIT_BYTES:
        print(f"edits (first {MAX_EDIT_BYTES} characters; too many to replay): "
              + text[:MAX_EDIT_BYTES])
    else:
        print("edits: " + text)
        print(f"replay: scripts/fuzz_finding_delta.py --apply {os.path.relpath(path)} "
              "DELTA_FILE finding.onnx && build-asan/tools/fuzz/onnx-import-fuzzer finding.onnx")
    return 0


def apply(seed_path, delta_path, out_path):
    seed = open(seed_path, 'rb').read()
    text = open(delta_path).read().replace("edits:", "").split()
    out = bytearray()
    at = 0
    for entry in text:
        offset, removed, new = entry.split(":")
        offset, removed = int(offset), int(removed)
        out += seed[at:offset] + base64.b64decode(new)
        at = offset + removed
    out += seed[at:]
    open(out_path, 'wb').write(out)
    return 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--apply":
        return apply(*sys.argv[2:])
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    return describe(sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
