#!/usr/bin/env python3
"""Runs every `augur evaluate` task with --json and compares its numbers with a recorded run.

    scripts/compare-evaluations.py record DIR [--augur BIN]   # write DIR/<task>.jsonl
    scripts/compare-evaluations.py check DIR [--augur BIN]    # run again, compare with DIR

Each task's JSON lines are flattened into `path -> value` (objects by key, lists by index, rows
that carry a "method"/"name"/"dataset" field by that name, so a reordered list still lines up).
`check` reports every number whose relative difference exceeds 1e-9, every recorded key that
disappeared, and exits 1 if there is any. Keys that time things (seconds of training or
prediction, latencies) are skipped: they differ on every run. New keys are allowed.

BIN defaults to the dev-profile binary the test command builds
(`$CARGO_TARGET_DIR/debug/augur`, else `target/debug/augur`); the numbers are the same in every
profile (no fast-math), only slower in dev.
"""
import json
import math
import os
import subprocess
import sys
import time

TASKS = {
    "runtime": ["evaluate", "--dataset", "philly,itp,mira", "--json", "--no-report"],
    "queue-wait": ["evaluate", "--task", "queue-wait", "--dataset", "mira,openb", "--json",
                   "--hindsight"],
    "failure": ["evaluate", "--task", "failure", "--dataset", "openb,mlperf", "--json", "--no-report"],
    "convergence": ["evaluate", "--task", "convergence", "--json", "--no-report"],
    "dag": ["evaluate", "--task", "dag", "--json", "--no-report"],
    "scaling": ["evaluate", "--task", "scaling", "--json"],
}
TIMING_WORDS = ("seconds", "_secs", "_s_wall", "latency", "elapsed", "duration_s", "train_s",
                "predict_s", "wall", "_ms", "_us", "per_job", "throughput")
ROW_NAMES = ("subset", "method", "name", "dataset", "benchmark", "prefix", "policy", "group")


def is_timing(key):
    k = key.lower()
    return any(w in k for w in TIMING_WORDS)


def flatten(value, path, out):
    if isinstance(value, dict):
        for k, v in value.items():
            if is_timing(k):
                continue
            flatten(v, f"{path}.{k}", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            label = str(i)
            if isinstance(v, dict):
                names = [str(v[n]) for n in ROW_NAMES if n in v and isinstance(v[n], (str, int, float))]
                if names:
                    label = "|".join(names)
            flatten(v, f"{path}[{label}]", out)
    else:
        out[path] = value


def run_task(binary, task):
    args = TASKS[task]
    t0 = time.time()
    res = subprocess.run([binary, *args], capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{task}: `augur {' '.join(args)}` failed ({res.returncode}):\n{res.stderr[-2000:]}")
    lines = [l for l in res.stdout.splitlines() if l.strip().startswith("{")]
    print(f"{task}: {len(lines)} JSON line(s) in {time.time() - t0:.0f} s", file=sys.stderr)
    return lines


def flat_of(lines):
    out = {}
    for i, line in enumerate(lines):
        obj = json.loads(line)
        label = str(i)
        if isinstance(obj, dict):
            names = [str(obj[n]) for n in ROW_NAMES if n in obj and isinstance(obj[n], str)]
            if names:
                label = "|".join(names)
        flatten(obj, f"[{label}]", out)
    return out


def same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if math.isnan(a) and math.isnan(b):
            return True
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("record", "check"):
        sys.exit(__doc__)
    mode, folder = sys.argv[1], sys.argv[2]
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    binary = os.path.join(target, "debug", "augur")
    tasks = list(TASKS)
    rest = sys.argv[3:]
    while rest:
        flag = rest.pop(0)
        if flag == "--augur":
            binary = rest.pop(0)
        elif flag == "--task":
            tasks = rest.pop(0).split(",")
        else:
            sys.exit(f"unknown argument {flag}")
    os.makedirs(folder, exist_ok=True)
    bad = 0
    for task in tasks:
        lines = run_task(binary, task)
        path = os.path.join(folder, f"{task}.jsonl")
        if mode == "record":
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            continue
        with open(path) as f:
            before = flat_of([l for l in f.read().splitlines() if l.strip()])
        after = flat_of(lines)
        diffs = [(k, v, after.get(k, "<missing>")) for k, v in before.items()
                 if k not in after or not same(v, after[k])]
        print(f"{task}: {len(before)} recorded values, {len(diffs)} differ")
        for k, v, w in diffs[:40]:
            print(f"  {k}: {v} -> {w}")
        bad += len(diffs)
    if mode == "check":
        print("all evaluation numbers unchanged" if bad == 0 else f"{bad} values changed")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
