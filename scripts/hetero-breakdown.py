#!/usr/bin/env python3
"""Where a heterogeneous `augur simulate` replay's average JCT goes, per policy, from its report
folder (`--gpu-types ... --report DIR`; pass the per-size folder holding affinity.json and
jobs-<policy>.csv):

- avg JCT = avg wait + avg run (run: JCT minus the time queued, restart pauses included);
- the share of GPU-time held on each type;
- speed: per job, the GPU-time-weighted speed of its model on the types it held over its
  speed on its fastest type (1.0 = always on its best type), averaged over jobs;
- on best: share of jobs that held only their fastest type.

Usage: scripts/hetero-breakdown.py DIR [--policies a,b,...]
"""
import csv
import json
import sys
from pathlib import Path


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    folder = Path(args[0])
    only = None
    if "--policies" in args:
        only = args[args.index("--policies") + 1].split(",")
    aff = json.loads((folder / "affinity.json").read_text())
    speeds = {c["name"]: c["speeds"] for c in aff["classes"]}
    types = aff["gpu_types"]
    files = sorted(folder.glob("jobs-*.csv"))
    head = f"{'policy':<16}{'avg JCT h':>10}{'wait h':>8}{'run h':>8}  " + "".join(
        f"{'%' + t:>7}" for t in types
    ) + f"{'speed':>8}{'on best':>9}"
    print(head)
    for f in files:
        policy = f.stem[len("jobs-"):]
        if only and policy not in only:
            continue
        jct = wait = 0.0
        n = 0
        by_type = [0.0] * len(types)
        eff_sum = 0.0
        eff_n = 0
        on_best = 0
        with f.open() as fh:
            for row in csv.DictReader(fh):
                if not row["jct_s"]:
                    continue
                j, w = float(row["jct_s"]), float(row["wait_s"])
                jct += j
                wait += w
                n += 1
                g = [float(row.get(f"gpu_s_{t}", 0) or 0) for t in types]
                for k, x in enumerate(g):
                    by_type[k] += x
                sp = speeds.get(row["class"])
                if sp and sum(g) > 0:
                    best = max(sp)
                    eff = sum(x * s for x, s in zip(g, sp)) / sum(g)
                    eff_sum += eff / best
                    eff_n += 1
                    bt = sp.index(best)
                    if all(x == 0 for k, x in enumerate(g) if k != bt):
                        on_best += 1
        if n == 0:
            continue
        tot = sum(by_type) or 1.0
        shares = "".join(f"{100 * x / tot:>7.1f}" for x in by_type)
        print(
            f"{policy:<16}{jct / n / 3600:>10.2f}{wait / n / 3600:>8.2f}"
            f"{(jct - wait) / n / 3600:>8.2f}  {shares}"
            f"{eff_sum / max(eff_n, 1):>8.3f}{100 * on_best / max(eff_n, 1):>8.1f}%"
        )


if __name__ == "__main__":
    main()
