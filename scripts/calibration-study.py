#!/usr/bin/env python3
"""Why online run-time intervals under-cover on a bursty trace: a study on the peer's residuals.

    scripts/calibration-study.py JOBS.csv     # the table `augur data export` writes

Fits the LightGBM peer's run-time model (scripts/peer-lightgbm.py: same features, L1 on
ln seconds) on the first 85% of the training jobs, takes the last 15% as the calibration
slice, and replays the test jobs in event order (a job's interval issued at its submit, its
residual known at its finish) under several online calibrations of the 80% interval:

- static: the calibration slice's conformal interval;
- window + ACI: the last 1,000 finished jobs' residuals with adaptive conformal inference,
  its level clamped to [0, 1] (what `augur evaluate` and the service run);
- window + ACI, unclamped: the level may pass 1, giving an unbounded interval (cut at the
  job's time limit plus 15 minutes, as Augur's ceiling does);
- offset tracking: each end's offset moved by every outcome (quantile tracking);
- per user: the last K residuals of the same user, else the window.

Then prints the test slice's residual spread per fifth (by submit) and the feedback delay
(submit to finish). The peer's residuals stand in for Augur's: the point is how the trace's
residuals move in time, not the model. Not run by the tests.
"""
import collections
import importlib.util
import os
import sys

import numpy as np
import pandas as pd

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("peer", os.path.join(here, "peer-lightgbm.py"))
peer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer)

COVERAGE = 0.8
GRACE_S = 900.0


def conformal(res, level):
    r = np.sort(res)
    n = len(r)
    a = (1 - level) / 2
    lo = r[max(0, int(np.floor(a * (n + 1))) - 1)]
    hi = r[min(n - 1, int(np.ceil((1 - a) * (n + 1))) - 1)]
    return lo, hi


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    df = pd.read_csv(sys.argv[1])
    X = peer.build_features(df)
    train = np.where(df.split == "train")[0]
    test = np.where(df.split == "test")[0]
    dur = df.duration.to_numpy(float)
    lab = np.isfinite(dur)
    tr, te = train[lab[train]], test[lab[test]]
    n_fit = int(len(tr) * 0.85)
    fit_rows, cal_rows = tr[:n_fit], tr[n_fit:]
    y = np.log(np.maximum(np.where(lab, dur, 1.0), 1.0))
    model = peer.fit(X, y, fit_rows, "l1")
    lp = np.full(len(df), np.nan)
    rows = np.concatenate([cal_rows, te])
    lp[rows] = model.predict(X.iloc[rows], num_iteration=model.best_iteration)
    cal_res = y[cal_rows] - lp[cal_rows]
    s_lo, s_hi = conformal(cal_res, COVERAGE)
    limit = df.requested_time.to_numpy(float)
    ceiling = np.where(np.isfinite(limit), limit + GRACE_S, np.inf)
    user = df.user.fillna("none").to_numpy()
    sub = df.submit_time.to_numpy(float)
    fin = sub + df.queue_wait.fillna(0).to_numpy(float) + np.nan_to_num(dur)
    events = sorted([(sub[i], 1, i) for i in te] + [(fin[i], 0, i) for i in te])

    def inside(i, lo, hi):
        low = min(np.exp(lp[i] + lo), ceiling[i])
        high = min(np.exp(lp[i] + hi), ceiling[i])
        return low <= max(dur[i], 1.0) <= high, high / max(low, 1.0)

    def replay(issue, learn):
        cov, width, issued = [], [], {}
        for _, kind, i in events:
            if kind == 0:
                if i in issued:
                    learn(i, y[i] - lp[i], issued[i])
            else:
                issued[i] = issue(i)
                c, w = inside(i, *issued[i])
                cov.append(c)
                width.append(w)
        return np.mean(cov), np.median(width)

    def window_aci(clamp, gamma=0.005, size=1000):
        win = collections.deque(cal_res[-size:].tolist(), maxlen=size)
        st = {"alpha": 1 - COVERAGE}

        def issue(i):
            if st["alpha"] <= 0:
                return (-np.inf, np.inf)
            return conformal(np.array(win), min(1 - st["alpha"], 1.0))

        def learn(i, r, iv):
            a = st["alpha"] + gamma * ((1 - COVERAGE) - float(not (iv[0] <= r <= iv[1])))
            st["alpha"] = min(max(a, 0.0), 1.0) if clamp else a
            win.append(r)

        return issue, learn

    def tracking(step):
        st = {"lo": s_lo, "hi": s_hi}
        tail = (1 - COVERAGE) / 2

        def learn(i, r, iv):
            st["hi"] = float(np.clip(st["hi"] + step * ((r > iv[1]) - tail), s_hi - 3, s_hi + 3))
            st["lo"] = float(np.clip(st["lo"] - step * ((r < iv[0]) - tail), s_lo - 3, s_lo + 3))

        return (lambda i: (st["lo"], st["hi"])), learn

    def per_user(k, minimum, size=1000):
        win = collections.deque(cal_res[-size:].tolist(), maxlen=size)
        per = collections.defaultdict(lambda: collections.deque(maxlen=k))
        for i in cal_rows:
            per[user[i]].append(y[i] - lp[i])

        def issue(i):
            u = per[user[i]]
            return conformal(np.array(u if len(u) >= minimum else win), COVERAGE)

        def learn(i, r, iv):
            win.append(r)
            per[user[i]].append(r)

        return issue, learn

    print(f"{len(te)} test jobs over {(sub[te].max() - sub[te].min()) / 86400:.1f} days; "
          f"nominal coverage {COVERAGE:.0%}")
    print("calibration                      coverage  median width (high/low)")
    static = np.mean([inside(i, s_lo, s_hi)[0] for i in te])
    print(f"{'static':32} {static:8.3f}")
    for name, (issue, learn) in [
        ("window + ACI (as served)", window_aci(True)),
        ("window + ACI, unclamped", window_aci(False)),
        ("offset tracking, step 0.005", tracking(0.005)),
        ("offset tracking, step 0.02", tracking(0.02)),
        ("per user, last 100 (>= 30)", per_user(100, 30)),
    ]:
        c, w = replay(issue, learn)
        print(f"{name:32} {c:8.3f}  {w:10.1f}")
    print("test residuals (ln actual - ln predicted) by fifth of the test slice:")
    for k, part in enumerate(np.array_split(te, 5)):
        r = y[part] - lp[part]
        q10, q90 = np.quantile(r, [0.1, 0.9])
        cov = np.mean([inside(i, s_lo, s_hi)[0] for i in part])
        print(f"  fifth {k + 1}: q10 {q10:6.2f}  q90 {q90:6.2f}  static coverage {cov:.3f}")
    delay = (fin[te] - sub[te]) / 86400
    print(f"feedback delay (submit to finish): median {np.median(delay):.2f} days, "
          f"q90 {np.quantile(delay, 0.9):.2f} days")


if __name__ == "__main__":
    main()
