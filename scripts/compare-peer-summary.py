#!/usr/bin/env python3
"""Prints the markdown tables of a scripts/compare-peer.sh run: Augur beside the LightGBM peer
per trace and task (point metrics, static and online coverage, seconds), then Augur's
coverage per group. Usage: scripts/compare-peer-summary.py OUT_DIR"""

import glob
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            text = f.read().strip()
        if not text:
            return None
        # augur prints one JSON object per line (the last is the run's); the peer one document
        try:
            return json.loads(text)
        except ValueError:
            return json.loads(text.splitlines()[-1])
    except (OSError, ValueError):
        return None


def row(rows, prefix):
    return next((r for r in rows if r["method"].startswith(prefix)), None)


def met(r):
    # evaluation rows carry their metrics flat (older ones under "metrics")
    return r.get("metrics", r)


def pct(v):
    return "-" if v is None else f"{100 * v:.1f}%"


def num(v, d=3):
    return "-" if v is None else f"{v:,.{d}f}"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "compare-peer"
    traces = sorted({os.path.basename(p)[: -len("-peer.json")] for p in glob.glob(f"{out}/*-peer.json")})
    order = [t for t in ("graham", "mira", "itp", "philly") if t in traces] + [t for t in traces if t not in ("graham", "mira", "itp", "philly")]
    groups = []
    print("| trace | task | method | point metrics | coverage static | coverage online | median bound s | seconds |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for t in order:
        peer = load(f"{out}/{t}-peer.json") or {"tasks": {}}
        for task in ("runtime", "queue-wait", "failure"):
            a = load(f"{out}/{t}-{task}.json")
            secs = (load(f"{out}/{t}-{task}.time.json") or {}).get("seconds")
            p = peer["tasks"].get(task, {})
            if task == "runtime" and a:
                ev = a["runtime"]
                s, o = row(ev["rows"], "augur, static"), row(ev["rows"], "augur, online")
                base = row(ev["rows"], "last-2")
                print(f"| {t} | runtime | augur | mae_log {num(met(s)['mae_log'])}, within2x {pct(met(s)['within2x'])} "
                      f"| {pct(met(s)['coverage80'])} | {pct(met(o)['coverage80'])} | - | {num(secs, 0)} |")
                if base:
                    print(f"| {t} | runtime | {base['method']} | mae_log {num(met(base)['mae_log'])}, within2x {pct(met(base)['within2x'])} | - | - | - | - |")
                groups.append((t, "runtime 80%", ev.get("coverage_by_group", [])))
            if task == "runtime" and "lightgbm" in p:
                m = p["lightgbm"]
                print(f"| {t} | runtime | LightGBM peer | mae_log {num(m['mae_log'])}, within2x {pct(m['within2x'])} | - | - | - | {num(p['seconds'], 0)} |")
                b = p.get("user median of last 20 finished")
                if b:
                    print(f"| {t} | runtime | user median of last 20 finished (peer script) | mae_log {num(b['mae_log'])}, within2x {pct(b['within2x'])} | - | - | - | - |")
            if task == "queue-wait" and a:
                ev = a["queue_wait"]
                st = row(ev["rows"], "augur gbdt + queue state, risk-split static") or row(ev["rows"], "augur gbdt + queue state, static")
                on = row(ev["rows"], "augur gbdt + queue state, risk-split online") or row(ev["rows"], "augur gbdt + queue state, online")
                m = met(st)
                print(f"| {t} | queue wait | augur | MAE {num(m['mae_s'], 0)} s, within2x {pct(m.get('within2x'))}, |log10| {num(m.get('mae_log10'))} "
                      f"| {pct(m['coverage95'])} | {pct(met(on)['coverage95'])} | {num(m['median_bound_s'], 0)} / {num(met(on)['median_bound_s'], 0)} | {num(secs, 0)} |")
                groups.append((t, "queue wait 95%", ev.get("coverage_by_group", [])))
            if task == "queue-wait" and "lightgbm" in p:
                m = p["lightgbm"]
                c = p["lightgbm quantile 0.95, split conformal"]
                print(f"| {t} | queue wait | LightGBM peer | MAE {num(m['mae_s'], 0)} s, within2x {pct(m['within2x'])}, |log10| {num(m['mae_log10'])} "
                      f"| {pct(c['coverage95'])} | - | {num(c['median_bound_s'], 0)} | {num(p['seconds'], 0)} |")
            if task == "failure" and a and "failure" in a:
                ev = a["failure"]
                for r in ev["rows"]:
                    if r["method"].startswith(("gbdt", "svm", "user", "augur")) or "past" in r["method"]:
                        mm = met(r)
                        print(f"| {t} | failure | {r['method']} | ROC-AUC {num(mm['roc_auc'])}, PR-AUC {num(mm['pr_auc'])} | - | - | - | {num(secs, 0) if r['method'].startswith('gbdt') else '-'} |")
            if task == "failure" and "lightgbm" in p:
                m = p["lightgbm"]
                print(f"| {t} | failure | LightGBM peer | ROC-AUC {num(m['roc_auc'])}, PR-AUC {num(m['pr_auc'])} | - | - | - | {num(p['seconds'], 0)} |")
    for t, what, g in groups:
        if not g:
            continue
        print(f"\n{t} · {what} coverage per group (static / online):\n")
        print("| dimension | group | jobs | static | online |\n|---|---|---:|---:|---:|")
        for r in g:
            print(f"| {r['dimension']} | {r['group']} | {r['jobs']:,} | {pct(r['coverage_static'])} | {pct(r['coverage_online'])} |")


if __name__ == "__main__":
    main()
