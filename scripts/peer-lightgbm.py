#!/usr/bin/env python3
"""The LightGBM peer: runtime, queue-wait and failure rows on any trace Augur reads, on
exactly the jobs, times and time-ordered 80/20 split of `augur evaluate`.

Augur writes the trace's canonical job table (`augur data export`, one source of truth for
parsing, time zones and the split); this script builds the features a Slurm site has at
submit and trains LightGBM per task, timing each task with its features.

Install (once):   pip install lightgbm pandas numpy
Run:              augur data export --dataset graham --csv /tmp/graham.csv
                  python3 scripts/peer-lightgbm.py /tmp/graham.csv [--json]
or let it call augur:  python3 scripts/peer-lightgbm.py --augur target/debug/augur --dataset graham

Features (all known at the job's submit): CPUs, GPUs, memory, nodes, time limit, partition
and user (categorical), hour and weekday of submit (UTC), the user's mean of the last 2 and
median of the last 20 run times of jobs that finished before this submit, the user's
submissions in the last hour, and the queue state rebuilt from the file at submit: jobs,
GPUs and CPU-seconds (CPUs x time limit) queued, jobs, CPUs and GPUs running, overall and in
the job's partition. Slurm's Priority is left out (it is known only afterwards).

Rows:
  runtime     LightGBM L1 on ln(duration) (durations clamped to >= 1 s): mae_log, within-2x;
              the user's median of the last 20 finished runs as a baseline.
  queue wait  LightGBM L1 on ln(1 + wait): MAE s, within-2x and mean |log10| (waits floored
              at 1 s); LightGBM quantile 0.95 on ln(1 + wait): the bound's coverage and
              median width, raw and split-conformal (offset from the last 20% of training).
  failure     LightGBM binary on failed vs completed/killed: ROC-AUC, PR-AUC (average
              precision); the user's past failure rate as a baseline.
Early stopping on the last 10% of the training jobs (by submit). Seconds per task count the
shared feature build plus that task's fits and predictions.
"""

import argparse
import bisect
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict, deque

import lightgbm as lgb
import numpy as np
import pandas as pd

# ------------------------------------------------------------------ metrics (augur's)


def clamp1(v):
    return np.maximum(np.asarray(v, dtype=float), 1.0)


def mae_log(pred, actual):
    return float(np.mean(np.abs(np.log(clamp1(pred)) - np.log(clamp1(actual)))))


def within2x(pred, actual):
    r = clamp1(pred) / clamp1(actual)
    return float(np.mean((r >= 0.5) & (r <= 2.0)))


def mae_log10(pred, actual):
    return mae_log(pred, actual) / math.log(10.0)


def roc_auc(scores, labels):
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels, dtype=bool)
    n_pos = labels.sum()
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = pd.Series(scores).rank(method="average").to_numpy()
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def average_precision(scores, labels):
    """Step-wise area under the PR curve, one point per distinct score (augur's)."""
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels, dtype=bool)
    n_pos = labels.sum()
    if n_pos == 0:
        return float("nan")
    order = np.argsort(-scores, kind="mergesort")
    s, l = scores[order], labels[order]
    tp = np.cumsum(l)
    k = np.arange(1, len(s) + 1)
    last = np.r_[s[1:] != s[:-1], True]  # the last of each run of tied scores
    recall = tp[last] / n_pos
    precision = tp[last] / k[last]
    prev = np.r_[0.0, recall[:-1]]
    return float(np.sum((recall - prev) * precision))


# ------------------------------------------------------------------ features


def build_features(df):
    """Per-job features known at submit, from an event sweep over the whole file."""
    n = len(df)
    submit = df["submit_time"].to_numpy(float)
    start = df["start_time"].to_numpy(float)
    end = df["end_time"].to_numpy(float)
    dur = df["duration"].to_numpy(float)
    cpus = df["cpus"].fillna(1.0).to_numpy(float)
    gpus = df["num_gpus"].fillna(0.0).to_numpy(float)
    limit = df["requested_time"].to_numpy(float)
    user = df["user"].fillna(df["group"]).fillna("").astype(str).to_numpy()
    part = df["queue"].fillna("").astype(str).to_numpy()
    status = df["status"].astype(str).to_numpy()
    cpu_s = cpus * np.where(np.isfinite(limit), limit, 0.0)

    # events: finish (0) before start (1) before submit (2) at the same instant
    ev = []
    for i in range(n):
        ev.append((submit[i], 2, i))
        if np.isfinite(start[i]):
            ev.append((start[i], 1, i))
            if np.isfinite(end[i]):
                ev.append((end[i], 0, i))
    ev.sort()

    cols = [
        "q_jobs", "q_gpus", "q_cpu_s", "r_jobs", "r_cpus", "r_gpus",
        "pq_jobs", "pq_gpus", "pq_cpu_s", "pr_jobs", "pr_cpus", "pr_gpus",
        "user_last2", "user_med20", "user_subs_1h", "user_fail_rate", "user_n_done",
    ]
    out = {c: np.full(n, np.nan) for c in cols}
    tot = dict(q_jobs=0.0, q_gpus=0.0, q_cpu_s=0.0, r_jobs=0.0, r_cpus=0.0, r_gpus=0.0)
    per = defaultdict(lambda: dict(q_jobs=0.0, q_gpus=0.0, q_cpu_s=0.0, r_jobs=0.0, r_cpus=0.0, r_gpus=0.0))
    queued = np.zeros(n, dtype=bool)
    running = np.zeros(n, dtype=bool)
    last20 = defaultdict(lambda: deque(maxlen=20))
    subs = defaultdict(deque)
    fails = defaultdict(lambda: [0, 0])

    def move(i, key_from, key_to, sign):
        p = per[part[i]]
        for d in (tot, p):
            if key_from == "q":
                d["q_jobs"] += sign
                d["q_gpus"] += sign * gpus[i]
                d["q_cpu_s"] += sign * cpu_s[i]
            else:
                d["r_jobs"] += sign
                d["r_cpus"] += sign * cpus[i]
                d["r_gpus"] += sign * gpus[i]

    for t, kind, i in ev:
        if kind == 2:
            p = per[part[i]]
            for c in ("q_jobs", "q_gpus", "q_cpu_s", "r_jobs", "r_cpus", "r_gpus"):
                out[c][i] = tot[c]
                out["p" + c][i] = p[c]
            h = last20[user[i]]
            if h:
                out["user_last2"][i] = np.mean(list(h)[-2:])
                out["user_med20"][i] = np.median(h)
            q = subs[user[i]]
            while q and q[0] < t - 3600.0:
                q.popleft()
            out["user_subs_1h"][i] = len(q)
            q.append(t)
            f = fails[user[i]]
            out["user_n_done"][i] = f[1]
            if f[1]:
                out["user_fail_rate"][i] = f[0] / f[1]
            queued[i] = True
            move(i, "q", None, 1.0)
        elif kind == 1:
            if queued[i]:
                queued[i] = False
                move(i, "q", None, -1.0)
            running[i] = True
            move(i, "r", None, 1.0)
        else:
            if running[i]:
                running[i] = False
                move(i, "r", None, -1.0)
            if np.isfinite(dur[i]):
                last20[user[i]].append(max(dur[i], 1.0))
            if status[i] in ("failed", "completed", "killed"):
                f = fails[user[i]]
                f[0] += status[i] == "failed"
                f[1] += 1

    X = pd.DataFrame(out)
    X["cpus"] = df["cpus"].to_numpy(float)
    X["gpus"] = df["num_gpus"].to_numpy(float)
    X["memory_mib"] = df["memory_mib"].to_numpy(float)
    X["nodes"] = df["num_nodes"].to_numpy(float)
    X["time_limit"] = limit
    ts = pd.to_datetime(submit, unit="s", utc=True)
    X["hour"] = ts.hour.to_numpy()
    X["weekday"] = ts.day_of_week.to_numpy()
    X["partition"] = pd.Categorical(part)
    X["user"] = pd.Categorical(user)
    return X


# ------------------------------------------------------------------ training

PARAMS = dict(learning_rate=0.05, num_leaves=63, min_data_in_leaf=20, feature_fraction=0.9,
              bagging_fraction=0.9, bagging_freq=1, verbose=-1, num_threads=os.cpu_count() or 2,
              seed=7, cat_smooth=10, max_cat_to_onehot=8)
ROUNDS = 2000
PATIENCE = 50


def fit(X, y, train_idx, objective, **extra):
    """Fits on the first 90% of the training rows, early-stopped on the last 10%."""
    cut = int(len(train_idx) * 0.9)
    fi, vi = train_idx[:cut], train_idx[cut:]
    params = dict(PARAMS, objective=objective, **extra)
    dtrain = lgb.Dataset(X.iloc[fi], y[fi])
    dval = lgb.Dataset(X.iloc[vi], y[vi], reference=dtrain)
    return lgb.train(params, dtrain, ROUNDS, valid_sets=[dval],
                     callbacks=[lgb.early_stopping(PATIENCE, verbose=False)])


def size_bin(cpus, gpus):
    if gpus > 0:
        return "gpu"
    if cpus <= 1:
        return "cpu 1"
    if cpus <= 8:
        return "cpu 2-8"
    return "cpu 9+"


def per_group_coverage(df, idx, inside, top=6):
    """Coverage per partition (the `top` largest in the test set, the rest as `other`) and per
    GPU/CPU size bin."""
    out = {}
    parts = df["queue"].fillna("").astype(str).to_numpy()[idx]
    big = set(pd.Series(parts).value_counts().index[:top])
    keys = np.array([p if p in big else "other" for p in parts])
    for k in sorted(set(keys)):
        m = keys == k
        out[f"partition={k or '-'}"] = (float(inside[m].mean()), int(m.sum()))
    cpus = df["cpus"].fillna(1.0).to_numpy(float)[idx]
    gpus = df["num_gpus"].fillna(0.0).to_numpy(float)[idx]
    bins = np.array([size_bin(c, g) for c, g in zip(cpus, gpus)])
    for k in sorted(set(bins)):
        m = bins == k
        out[f"size={k}"] = (float(inside[m].mean()), int(m.sum()))
    return out


def runtime_task(df, X, train, test):
    dur = df["duration"].to_numpy(float)
    lab = np.isfinite(dur)
    tr, te = train[lab[train]], test[lab[test]]
    if len(tr) < 100 or len(te) == 0:
        return None
    y = np.log(clamp1(np.where(lab, dur, 1.0)))
    m = fit(X, y, tr, "l1")
    pred = np.exp(m.predict(X.iloc[te], num_iteration=m.best_iteration))
    act = dur[te]
    med20 = X["user_med20"].to_numpy()[te]
    gmed = float(np.median(clamp1(dur[tr])))
    base = np.where(np.isfinite(med20), med20, gmed)
    return {
        "n_train": int(len(tr)), "n_test": int(len(te)), "trees": int(m.best_iteration),
        "lightgbm": {"mae_log": mae_log(pred, act), "within2x": within2x(pred, act)},
        "user median of last 20 finished": {"mae_log": mae_log(base, act), "within2x": within2x(base, act)},
    }


def queue_wait_task(df, X, train, test):
    wait = df["queue_wait"].to_numpy(float)
    start = df["start_time"].to_numpy(float)
    submit = df["submit_time"].to_numpy(float)
    wait = np.where(np.isfinite(wait), wait, start - submit)
    lab = np.isfinite(wait) & (wait >= 0)
    tr, te = train[lab[train]], test[lab[test]]
    if len(tr) < 200 or len(te) == 0:
        return None
    y = np.log1p(np.where(lab, wait, 0.0))
    m = fit(X, y, tr, "l1")
    pred = np.maximum(np.expm1(m.predict(X.iloc[te], num_iteration=m.best_iteration)), 0.0)
    act = wait[te]
    # the 95% bound: quantile trees on the first 80% of training, split-conformal offset
    # from the last 20% (the raw quantile is reported too)
    cut = int(len(tr) * 0.8)
    fit_rows, cal_rows = tr[:cut], tr[cut:]
    q = fit(X, y, fit_rows, "quantile", alpha=0.95)
    raw_cal = q.predict(X.iloc[cal_rows], num_iteration=q.best_iteration)
    scores = y[cal_rows] - raw_cal
    k = min(1.0, math.ceil(0.95 * (len(scores) + 1)) / len(scores))
    offset = float(np.quantile(scores, k))
    raw_te = q.predict(X.iloc[te], num_iteration=q.best_iteration)
    ub_raw = np.maximum(np.expm1(raw_te), pred)
    ub = np.maximum(np.expm1(raw_te + offset), pred)
    inside = act <= ub
    return {
        "n_train": int(len(tr)), "n_test": int(len(te)), "trees": int(m.best_iteration),
        "lightgbm": {
            "mae_s": float(np.mean(np.abs(pred - act))),
            "within2x": within2x(pred, act),
            "mae_log10": mae_log10(pred, act),
        },
        "lightgbm quantile 0.95": {
            "coverage95": float(np.mean(act <= ub_raw)), "median_bound_s": float(np.median(ub_raw)),
        },
        "lightgbm quantile 0.95, split conformal": {
            "coverage95": float(np.mean(inside)), "median_bound_s": float(np.median(ub)),
            "per_group": per_group_coverage(df, te, inside),
        },
    }


def failure_task(df, X, train, test):
    status = df["status"].astype(str).to_numpy()
    lab = np.isin(status, ["failed", "completed", "killed"])
    tr, te = train[lab[train]], test[lab[test]]
    y = (status == "failed").astype(float)
    if len(tr) == 0 or len(te) == 0 or y[tr].min() == y[tr].max():
        return None
    m = fit(X, y, tr, "binary")
    p = m.predict(X.iloc[te], num_iteration=m.best_iteration)
    yt = y[te] > 0.5
    rate = X["user_fail_rate"].to_numpy()[te]
    base = np.where(np.isfinite(rate), rate, float(y[tr].mean()))
    return {
        "n_train": int(len(tr)), "n_test": int(len(te)), "trees": int(m.best_iteration),
        "base_rate_test": float(yt.mean()),
        "lightgbm": {"roc_auc": roc_auc(p, yt), "pr_auc": average_precision(p, yt)},
        "user past failure rate": {"roc_auc": roc_auc(base, yt), "pr_auc": average_precision(base, yt)},
    }


TASKS = {"runtime": runtime_task, "queue-wait": queue_wait_task, "failure": failure_task}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="?", help="the job table written by `augur data export`")
    ap.add_argument("--augur", help="augur binary to export the table with (with --dataset/--trace)")
    ap.add_argument("--dataset", help="bundled dataset name to export through --augur")
    ap.add_argument("--trace", help="trace file or folder to export through --augur")
    ap.add_argument("--format", help="--format of --trace")
    ap.add_argument("--tasks", default="runtime,queue-wait,failure")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    path = args.csv
    if path is None:
        if not args.augur or not (args.dataset or args.trace):
            ap.error("give the CSV, or --augur with --dataset or --trace")
        path = os.path.join(tempfile.mkdtemp(), "jobs.csv")
        cmd = [args.augur, "data", "export", "--csv", path]
        cmd += ["--dataset", args.dataset] if args.dataset else [args.trace]
        if args.format:
            cmd += ["--format", args.format]
        subprocess.run(cmd, check=True)

    t0 = time.perf_counter()
    df = pd.read_csv(path, dtype={"job_id": str, "user": str, "group": str, "queue": str,
                                  "gpu_type": str, "job_name": str, "cluster": str, "qos": str,
                                  "source": str, "status": str})
    X = build_features(df)
    features_s = time.perf_counter() - t0
    order = df["order"].to_numpy()
    assert (np.diff(order) == 1).all(), "rows must be in the export's submit order"
    is_train = (df["split"] == "train").to_numpy()
    train, test = np.flatnonzero(is_train), np.flatnonzero(~is_train)

    result = {"trace": args.dataset or args.trace or path, "jobs": int(len(df)),
              "features_s": features_s, "tasks": {}}
    for name in args.tasks.split(","):
        t1 = time.perf_counter()
        r = TASKS[name](df, X, train, test)
        if r is None:
            result["tasks"][name] = {"skipped": "not enough labelled jobs"}
            continue
        r["seconds"] = features_s + time.perf_counter() - t1
        result["tasks"][name] = r
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{result['trace']}: {result['jobs']} jobs, features {features_s:.1f} s")
    for name, r in result["tasks"].items():
        if "skipped" in r:
            print(f"  {name}: skipped ({r['skipped']})")
            continue
        print(f"  {name} ({r['n_train']} train / {r['n_test']} test, {r['seconds']:.1f} s incl. features, {r['trees']} trees)")
        for k, v in r.items():
            if isinstance(v, dict):
                shown = {a: b for a, b in v.items() if a != "per_group"}
                print(f"    {k:42s} " + "  ".join(
                    f"{a} {b:,.3f}" if abs(b) < 100 else f"{a} {b:,.0f}" for a, b in shown.items()))
                for g, (cov, cnt) in v.get("per_group", {}).items():
                    print(f"      {g:30s} coverage {cov:.3f} ({cnt} jobs)")


if __name__ == "__main__":
    sys.exit(main())
