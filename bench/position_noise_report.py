#!/usr/bin/env python3
"""The report of bench/position_noise_study.sh, rebuilt from its result files alone.

  position_noise_report.py RUNS OUT [PLOT]

RUNS holds ARCH_seedS_rateR.json (one `eval loss --by-position --distract --json` line each) and
ARCH_seedS_train.json (the run's steps and wall time). OUT gets report.md, report.json and, given the
PLOT program (bench/position_noise_plot.c), the figures. Intervals are 95% bootstrap intervals over
seeds (seeds resampled with replacement, 4,000 draws, a fixed seed); a difference from softmax is paired
by seed (the same data order, initialisation seed and evaluation windows)."""
import json
import math
import os
import random
import re
import subprocess
import sys

BASE = 'softmax'
DRAWS = 4000


def load(runs):
    evals, trains = {}, {}
    for f in sorted(os.listdir(runs)):
        m = re.fullmatch(r'(\w+?)_seed(\d+)_rate([0-9.]+)\.json', f)
        t = re.fullmatch(r'(\w+?)_seed(\d+)_train\.json', f)
        if m:
            evals[(m[1], int(m[2]), m[3])] = json.loads(open(os.path.join(runs, f)).read())
        elif t:
            trains[(t[1], int(t[2]))] = json.loads(open(os.path.join(runs, f)).read())
    return evals, trains


def mean(v):
    return sum(v) / len(v)


def bootstrap(per_seed, stat=mean):
    """stat of per_seed and its 95% bootstrap interval over seeds; None values (a bin without a scored
    token) are left out."""
    per_seed = [v for v in per_seed if v is not None and not math.isnan(v)]
    if not per_seed:
        return float('nan'), float('nan'), float('nan')
    rng = random.Random(12345)
    n = len(per_seed)
    if n < 2:
        return stat(per_seed), float('nan'), float('nan')
    draws = sorted(stat([per_seed[rng.randrange(n)] for _ in range(n)]) for _ in range(DRAWS))
    return stat(per_seed), draws[int(0.025 * DRAWS)], draws[int(0.975 * DRAWS) - 1]


def sub(a, b):
    return None if a is None or b is None else a - b


def slope(xs, ys):
    """Least-squares slope of ys (None: left out) against xs."""
    pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    if len(pts) < 2:
        return None
    mx, my = mean(xs), mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def log_mid(b):
    return math.log2(math.sqrt(b['first'] * b['last']))


def fmt(v, lo, hi, d=4):
    if math.isnan(lo):
        return f'{v:+.{d}f}'
    return f'{v:+.{d}f} [{lo:+.{d}f}, {hi:+.{d}f}]'


def analyse(evals):
    archs = sorted({k[0] for k in evals}, key=lambda a: (a == BASE, a))
    rates = sorted({k[2] for k in evals}, key=float)
    seeds = sorted({k[1] for k in evals})
    out = {'archs': archs, 'rates': rates, 'seeds': seeds, 'curves': {}, 'diffs': {}, 'slopes': {}, 'overall': {}}
    for r in rates:
        for a in archs:
            runs = [evals[(a, s, r)] for s in seeds if (a, s, r) in evals]
            if not runs:
                continue
            bins = runs[0]['bins']
            curve = []
            for k, b in enumerate(bins):
                v, lo, hi = bootstrap([run['bins'][k]['loss'] for run in runs])
                curve.append({'first': b['first'], 'last': b['last'], 'loss': v, 'lo': lo, 'hi': hi,
                              'seeds': len(runs)})
            out['curves'][f'{a}@{r}'] = curve
            if a == BASE:
                continue
            paired = [s for s in seeds if (a, s, r) in evals and (BASE, s, r) in evals]
            if not paired:
                continue
            d = [[sub(evals[(a, s, r)]['bins'][k]['loss'], evals[(BASE, s, r)]['bins'][k]['loss'])
                  for k in range(len(bins))] for s in paired]
            xs = [log_mid(b) for b in bins]
            out['diffs'][f'{a}@{r}'] = [dict(zip(('diff', 'lo', 'hi'), bootstrap([row[k] for row in d])),
                                             first=b['first'], last=b['last']) for k, b in enumerate(bins)]
            out['slopes'][f'{a}@{r}'] = dict(zip(('slope', 'lo', 'hi'), bootstrap([slope(xs, row) for row in d])),
                                             seeds=len(paired))
            out['overall'][f'{a}@{r}'] = dict(zip(('diff', 'lo', 'hi'), bootstrap(
                [evals[(a, s, r)]['loss'] - evals[(BASE, s, r)]['loss'] for s in paired])), seeds=len(paired))
    return out


def rate_growth(evals, out):
    """Per column: (its difference from softmax at the highest rate) - (at rate 0), over all positions."""
    rates, seeds, g = out['rates'], out['seeds'], {}
    lo_r, hi_r = rates[0], rates[-1]
    for a in out['archs']:
        if a == BASE:
            continue
        keys = [(a, lo_r), (BASE, lo_r), (a, hi_r), (BASE, hi_r)]
        per = [(evals[(a, s, hi_r)]['loss'] - evals[(BASE, s, hi_r)]['loss']) -
               (evals[(a, s, lo_r)]['loss'] - evals[(BASE, s, lo_r)]['loss'])
               for s in seeds if all((k[0], s, k[1]) in evals for k in keys)]
        if per:
            g[a] = dict(zip(('growth', 'lo', 'hi'), bootstrap(per)), seeds=len(per), low=lo_r, high=hi_r)
    return g


def table(out):
    lines = []
    for r in out['rates']:
        lines.append(f'\n### Distractor rate {r}\n')
        archs = [a for a in out['archs'] if f'{a}@{r}' in out['curves']]
        lines.append('| positions | ' + ' | '.join(f'{a} loss' for a in archs) + ' | ' +
                     ' | '.join(f'{a} - {BASE}' for a in archs if a != BASE) + ' |')
        lines.append('|---' * (1 + len(archs) + len([a for a in archs if a != BASE])) + '|')
        first = out['curves'][f'{archs[0]}@{r}']
        for k, b in enumerate(first):
            row = [f"{b['first']}-{b['last']}"]
            row += [f"{out['curves'][f'{a}@{r}'][k]['loss']:.4f}" for a in archs]  # nan: no scored token
            for a in archs:
                if a != BASE and f'{a}@{r}' in out['diffs']:
                    x = out['diffs'][f'{a}@{r}'][k]
                    row.append(fmt(x['diff'], x['lo'], x['hi']))
            lines.append('| ' + ' | '.join(row) + ' |')
    return '\n'.join(lines)


def report_md(out, trains, growth):
    n_seeds = len(out['seeds'])
    wall = sum(t.get('wall_s', 0) for t in trains.values())
    steps = sorted({t.get('steps') for t in trains.values()})
    md = ['# Does the advantage grow with position and with noise?', '',
          f"Columns {', '.join(out['archs'])}; {n_seeds} seeds ({', '.join(map(str, out['seeds']))}); "
          f"evaluated at distractor rates {', '.join(out['rates'])}; training steps {steps}; "
          f"training wall time {wall / 3600:.1f} h over {len(trains)} runs.",
          '', 'Loss in nats per target token by position bin, mean over seeds; a difference from softmax is '
          'paired by seed, with its 95% bootstrap interval over seeds (negative: lower loss than softmax).']
    md.append(table(out))
    md += ['', '## The slope of the difference against log2 position', '',
           'Per seed, the least-squares slope of (column - softmax) per bin against log2 of the bin\'s '
           'geometric middle; mean over seeds with its bootstrap interval. Negative: the column gains on '
           'softmax as the position grows.', '', '| column | rate | slope per doubling | overall difference |',
           '|---|---|---|---|']
    for key, s in out['slopes'].items():
        a, r = key.split('@')
        o = out['overall'][key]
        md.append(f"| {a} | {r} | {fmt(s['slope'], s['lo'], s['hi'])} | {fmt(o['diff'], o['lo'], o['hi'])} |")
    md += ['', '## Growth with the rate', '', '(column - softmax) at the highest rate minus at rate 0, over all '
           'positions. Negative: the column gains on softmax as noise grows.', '', '| column | growth |', '|---|---|']
    for a, g in growth.items():
        md.append(f"| {a} | {fmt(g['growth'], g['lo'], g['hi'])} (rate {g['high']} vs {g['low']}, {g['seeds']} seeds) |")
    md += ['', '## Answers', '']
    for key, s in out['slopes'].items():
        a, r = key.split('@')
        if math.isnan(s['lo']):
            verdict = 'one seed: no interval'
        elif s['hi'] < 0:
            verdict = 'the difference grows in the column\'s favour with position'
        elif s['lo'] > 0:
            verdict = 'the difference moves against the column with position'
        else:
            verdict = 'no trend with position distinguishable from zero'
        md.append(f'- {a}, rate {r}: {verdict}.')
    md += ['', 'Figures: loss_rate*.png (loss by position per column), diff_*.png (difference from softmax by '
           'position, one line per rate).', '']
    return '\n'.join(md)


def plots(out, dest, plot):
    figs = []
    for r in out['rates']:
        spec = ''
        for a in out['archs']:
            c = out['curves'].get(f'{a}@{r}')
            if c:
                spec += f'series {a}\n' + ''.join(f"{log_mid(b)} {b['loss']} {b['lo']} {b['hi']}\n" for b in c)
        figs.append((f'loss_rate{r}.png', f'Loss by position, distractor rate {r}', spec, 'loss (nats per token)'))
    for a in out['archs']:
        if a == BASE:
            continue
        spec = ''
        for r in out['rates']:
            d = out['diffs'].get(f'{a}@{r}')
            if d:
                spec += f'series rate {r}\n' + ''.join(f"{log_mid(b)} {b['diff']} {b['lo']} {b['hi']}\n" for b in d)
        figs.append((f'diff_{a}.png', f'{a} - {BASE} by position (95% bootstrap over seeds)', spec,
                     'loss difference (nats per token)'))
    for name, title, spec, ylabel in figs:
        subprocess.run([plot, os.path.join(dest, name), title, 'log2 position', ylabel], input=spec.encode(),
                       check=True)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    runs, dest = sys.argv[1], sys.argv[2]
    evals, trains = load(runs)
    if not evals:
        sys.exit(f'{runs}: no result files')
    os.makedirs(dest, exist_ok=True)
    out = analyse(evals)
    growth = rate_growth(evals, out)
    out['rate_growth'] = growth
    out['train'] = {f'{a}_seed{s}': t for (a, s), t in sorted(trains.items())}
    with open(os.path.join(dest, 'report.json'), 'w') as f:
        json.dump(out, f, indent=1, sort_keys=True)
    with open(os.path.join(dest, 'report.md'), 'w') as f:
        f.write(report_md(out, trains, growth))
    if len(sys.argv) == 4:
        plots(out, dest, sys.argv[3])


if __name__ == '__main__':
    main()
