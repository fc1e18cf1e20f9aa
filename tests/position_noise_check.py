#!/usr/bin/env python3
"""Checks bench/position_noise_report.py's report.json against the run files, computed here on its own with
numpy: per-bin differences from softmax paired by seed, the least-squares slope against log2 position
(np.polyfit), the rate growth per position group (token-weighted), and each 95% interval against the EXACT
bootstrap distribution of the mean (every one of the n^n equally likely resamples of n seeds enumerated): the
report's Monte Carlo endpoint v must sit at the 2.5% (97.5%) quantile, P(X < v) <= q + TOL and P(X <= v) >= q - TOL.

  position_noise_check.py RUNS REPORT_JSON complete|incomplete
Prints one line per failed check and exits 1 if any failed."""
import itertools
import json
import math
import os
import re
import sys

import numpy as np

TOL = 0.01  # the Monte Carlo quantile's error at 4,000 draws is about 0.0025 (one sd)
fails = []


def check(what, cond):
    if not cond:
        fails.append(what)


def exact_quantile_ok(values, v, q):
    n = len(values)
    means = np.array([np.mean(c) for c in itertools.product(values, repeat=n)])
    eps = 1e-12
    return np.mean(means < v - eps) <= q + TOL and np.mean(means <= v + eps) >= q - TOL


def check_stat(what, values, got, complete):
    values = [v for v in values if v is not None]
    check(f'{what}: mean {got[0]} != {np.mean(values)}', abs(got[0] - np.mean(values)) < 1e-9)
    if complete:
        check(f'{what}: lower end {got[1]} is not the exact bootstrap 2.5% quantile',
              exact_quantile_ok(values, got[1], 0.025))
        check(f'{what}: upper end {got[2]} is not the exact bootstrap 97.5% quantile',
              exact_quantile_ok(values, got[2], 0.975))
    else:
        check(f'{what}: an interval ({got[1]}, {got[2]}) in an incomplete study',
              math.isnan(got[1]) and math.isnan(got[2]))


def main():
    runs, report, mode = sys.argv[1:]
    complete = mode == 'complete'
    rep = json.load(open(report))
    ev, fin = {}, set()
    for f in os.listdir(runs):
        m = re.fullmatch(r'(.+?)_seed(\d+)_rate([0-9.]+)\.json', f)
        if m:
            ev[(m[1], int(m[2]), m[3])] = json.load(open(os.path.join(runs, f)))
        t = re.fullmatch(r'(.+?)_seed(\d+)_train\.json', f)
        if t:
            fin.add((t[1], int(t[2])))
    rates = sorted({k[2] for k in ev}, key=float)
    check(f"complete flag {rep['complete']} for a {mode} study", rep['complete'] == complete)
    for a in ('diff', 'diff2'):
        for r in rates:
            seeds = [s for s in range(1, 100) if all((c, s) in fin and (c, s, q) in ev
                                                    for c in (a, 'softmax') for q in rates)]
            if complete:
                seeds = [s for s in seeds if all((c, s) in fin for c in ('diff', 'diff2', 'softmax'))]
            key = f'{a}@{r}'
            if not seeds:
                check(f'{key}: a difference without a paired run', key not in rep['diffs'])
                continue
            bins = ev[(a, seeds[0], r)]['bins']
            d = np.array([[ev[(a, s, r)]['bins'][k]['loss'] - ev[('softmax', s, r)]['bins'][k]['loss']
                           for k in range(len(bins))] for s in seeds])
            for k in range(len(bins)):
                x = rep['diffs'][key][k]
                check_stat(f'{key} bin {k}', list(d[:, k]), (x['diff'], x['lo'], x['hi']), complete)
            xs = np.log2(np.sqrt([b['first'] * b['last'] for b in bins]))
            slopes = [np.polyfit(xs, row, 1)[0] for row in d]
            s = rep['slopes'][key]
            check_stat(f'{key} slope', slopes, (s['slope'], s['lo'], s['hi']), complete)
            check(f'{key}: per-seed slopes {s["per_seed"]} != {slopes}', np.allclose(s['per_seed'], slopes, atol=1e-9))
        # the rate question: (a - softmax) at the highest rate minus at the lowest, per position group
        lo_r, hi_r = rates[0], rates[-1]
        seeds = rep['rate_growth'][a]['seeds']

        def group(run, lo, hi):
            b = [x for x in run['bins'] if lo <= x['first'] and x['last'] <= hi]
            return np.average([x['loss'] for x in b], weights=[x['tokens'] for x in b])
        for lo, hi, name in ((1, 15, '1-15'), (16, 255, '16-255'), (256, 1 << 30, '256-1024')):
            per = [(group(ev[(a, s, hi_r)], lo, hi) - group(ev[('softmax', s, hi_r)], lo, hi)) -
                   (group(ev[(a, s, lo_r)], lo, hi) - group(ev[('softmax', s, lo_r)], lo, hi)) for s in seeds]
            g = rep['rate_growth'][a]['groups'][name]
            check_stat(f'{a} rate growth at {name}', per, (g['growth'], g['lo'], g['hi']), complete)
    for f in fails:
        print('FAIL', f)
    sys.exit(1 if fails else 0)


if __name__ == '__main__':
    main()
