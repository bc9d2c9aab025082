#!/usr/bin/env python3
"""Times Augur's GBDT beside LightGBM on the very same matrix and parameters.

    scripts/bench-same-matrix.py [--augur BIN] [--fit-bin BIN] [--inputs DIR]
                                 [--runs N] [--trees N] [TRACE ARGS...]

`scripts/bench-peer-speed.sh` compares whole tasks: Augur's features and models against the
peer's own (fewer) features and models. This script separates the trainer from the model:
`augur data fit-inputs` writes the matrix the queue-wait median model is fitted on (its
rows, targets, validation rows, parameters; TRACE ARGS name the trace, default `--dataset
graham`, and may add `--model bound` for the 95% bound's quantile model), and both
libraries fit it with the same parameters (objective, learning rate,
leaves, minimum rows per leaf, L2, row and column sampling per tree, bins), on every core:

- fixed: exactly --trees trees each (default 300), no early stopping, so the seconds per
  tree compare one library's trees with the other's;
- early-stopped: each library stops on the validation rows as the parameters say (their
  stopping points differ: the trees and the validation loss are printed beside the time).

Each side is timed in its own process from binning to the last tree (reading the files is
not timed); the pairs run in turn (augur, LightGBM, augur, ...) so both see the same load,
and the median of the N paired ratios is printed with their range (default 3). Augur's side
is the `fit_inputs` example of the models crate (built here with `cargo build --release`
unless --fit-bin names it); --inputs reuses a folder written before. Needs `pip install
lightgbm numpy`; run by hand, not by the tests.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def lightgbm_params(p):
    """LightGBM's names for Augur's GbdtParams (fit.json's `params`)."""
    loss = p["objective"]["loss"]
    out = {
        "learning_rate": p["learning_rate"],
        "num_leaves": p["num_leaves"],
        "max_depth": p["max_depth"] if p["max_depth"] > 0 else -1,
        "min_data_in_leaf": p["min_data_in_leaf"],
        "lambda_l2": p["lambda_l2"],
        "bagging_fraction": p["subsample"],
        "bagging_freq": 1 if p["subsample"] < 1.0 else 0,
        "feature_fraction": p["colsample"],
        "max_bin": p["max_bins"],
        "num_threads": os.cpu_count() or 1,
        "seed": p["seed"],
        "force_row_wise": True,  # the quicker of its two layouts on these matrices
        "verbose": -1,
    }
    if loss == "l1":
        out["objective"] = "l1"
    elif loss == "l2":
        out["objective"] = "l2"
    elif loss == "quantile":
        out.update(objective="quantile", alpha=p["objective"]["alpha"])
    elif loss == "log_loss":
        out["objective"] = "binary"
    else:
        sys.exit(f"fit.json: unknown objective {loss!r}")
    return out


def lightgbm_fit(folder, trees):
    """The LightGBM side, run in a child process: prints one JSON line like the example's."""
    import lightgbm as lgb
    import numpy as np

    with open(os.path.join(folder, "fit.json")) as f:
        h = json.load(f)
    d = len(h["columns"])
    fx, fy, vx, vy = (os.path.join(folder, n) for n in h["files"])
    fx = np.fromfile(fx, dtype="<f4").reshape(h["fit_rows"], d)
    fy = np.fromfile(fy, dtype="<f8")
    vx = np.fromfile(vx, dtype="<f4").reshape(h["valid_rows"], d)
    vy = np.fromfile(vy, dtype="<f8")
    p = h["params"]
    params = lightgbm_params(p)
    rounds = trees if trees else p["n_trees"]
    t0 = time.perf_counter()
    train = lgb.Dataset(fx, fy)
    grown = [0]

    def count(env):
        grown[0] = env.iteration + 1

    callbacks = [count]
    kwargs = {}
    stops = not trees and h["valid_rows"] > 0
    if stops:
        kwargs["valid_sets"] = [lgb.Dataset(vx, vy, reference=train)]
        callbacks.append(lgb.early_stopping(p["early_stopping_rounds"], verbose=False))
    model = lgb.train(params, train, num_boost_round=rounds, callbacks=callbacks, **kwargs)
    seconds = time.perf_counter() - t0
    grown = grown[0]
    kept = model.best_iteration if stops and model.best_iteration > 0 else grown
    pred = model.predict(vx, num_iteration=kept)
    loss = p["objective"]["loss"]
    if loss == "l1":
        valid_loss = float(np.mean(np.abs(pred - vy)))
    elif loss == "l2":
        valid_loss = float(np.mean((pred - vy) ** 2))
    elif loss == "quantile":
        a = p["objective"]["alpha"]
        r = vy - pred
        valid_loss = float(np.mean(np.where(r >= 0, a * r, (a - 1) * r)))
    else:
        q = np.clip(pred, 1e-12, 1 - 1e-12)
        valid_loss = float(-np.mean(vy * np.log(q) + (1 - vy) * np.log(1 - q)))
    print(json.dumps({
        "library": "lightgbm " + lgb.__version__,
        "trees_grown": grown,
        "trees_kept": kept,
        "seconds": seconds,
        "ms_per_tree": 1e3 * seconds / max(grown, 1),
        "valid_loss": valid_loss,
    }))


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--augur", default=None, help="augur binary (writes the inputs)")
    ap.add_argument("--fit-bin", default=None, help="the models crate's fit_inputs example")
    ap.add_argument("--inputs", default=None, help="a folder `augur data fit-inputs` wrote")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trees", type=int, default=300)
    ap.add_argument("--lightgbm-child", default=None, help=argparse.SUPPRESS)
    args, trace = ap.parse_known_args()
    if args.lightgbm_child:
        lightgbm_fit(args.lightgbm_child, args.trees)
        return
    if args.runs < 1 or args.trees < 1:
        sys.exit("--runs and --trees take a whole number of at least 1")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    tmp = None
    folder = args.inputs
    if folder is None:
        augur = args.augur or os.path.join(target, "release", "augur")
        if not os.access(augur, os.X_OK):
            sys.exit(f"no augur binary at {augur} (cargo build --release -p augur, or --augur)")
        tmp = tempfile.mkdtemp()
        folder = os.path.join(tmp, "fit")
        # a trace is named by --dataset or a path (an argument no option takes as its value)
        valued = {"--dataset", "--format", "--timezone", "--model"}
        names_trace = "--dataset" in trace or any(
            not a.startswith("--") and (i == 0 or trace[i - 1] not in valued)
            for i, a in enumerate(trace))
        subprocess.run([augur, "data", "fit-inputs", "--out", folder] + trace
                       + ([] if names_trace else ["--dataset", "graham"]), check=True)
    fit_bin = args.fit_bin
    if fit_bin is None:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "augur-models",
                        "--example", "fit_inputs"], check=True, cwd=ROOT)
        fit_bin = os.path.join(target, "release", "examples", "fit_inputs")
    with open(os.path.join(folder, "fit.json")) as f:
        h = json.load(f)
    print(f"inputs: {folder}: {h['fit_rows']} fit rows, {h['valid_rows']} validation rows, "
          f"{len(h['columns'])} columns; objective {h['params']['objective']}, "
          f"lr {h['params']['learning_rate']}, {h['params']['num_leaves']} leaves")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    me = [sys.executable, os.path.abspath(__file__)]
    try:
        for mode, trees in (("fixed", args.trees), ("early-stopped", 0)):
            pairs = []
            for _ in range(args.runs):
                a = run_json([fit_bin, folder] + (["--trees", str(trees)] if trees else []))
                b = run_json(me + ["--lightgbm-child", folder, "--trees", str(trees)])
                pairs.append((a, b))
            ratios = sorted(a["seconds"] / b["seconds"] for a, b in pairs)
            a, b = pairs[-1]
            label = f" ({trees} trees)" if trees else ""
            print(f"\n{mode}{label}, {args.runs} pairs; the last pair:")
            print(f"  {'library':<16} {'seconds':>8} {'grown':>6} {'kept':>6} "
                  f"{'ms/tree':>8} {'valid loss':>11}")
            for r in (a, b):
                print(f"  {r['library']:<16} {r['seconds']:>8.2f} {r['trees_grown']:>6} "
                      f"{r['trees_kept']:>6} {r['ms_per_tree']:>8.1f} {r['valid_loss']:>11.5f}")
            per_tree = sorted((x["ms_per_tree"] / y["ms_per_tree"]) for x, y in pairs)
            print(f"  augur / lightgbm seconds: median {statistics.median(ratios):.2f} "
                  f"({ratios[0]:.2f}-{ratios[-1]:.2f}); per tree: median "
                  f"{statistics.median(per_tree):.2f} ({per_tree[0]:.2f}-{per_tree[-1]:.2f})")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
