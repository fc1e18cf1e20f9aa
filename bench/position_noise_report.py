#!/usr/bin/env python3
"""The report of bench/position_noise_study.sh, rebuilt from its result files alone.

  position_noise_report.py RUNS OUT [PLOT]

RUNS holds ARCH_seedS_rateR.json (one `eval loss --by-position --distract --json` line each) and
ARCH_seedS_train.json (the run's steps and wall time; its presence marks the run finished). OUT gets
report.md, report.json and, given the PLOT program (bench/position_noise_plot.c), the figures.

The seeds analysed are those every budget column (diff, diff2, softmax) finished at every rate; a further
column (one the study's ARCHS adds, such as gda-noise-heads1) is analysed on those of them it finished too.
A difference from softmax is paired by seed (the same data order, initialisation seed and evaluation
windows). Intervals are 95% percentile bootstrap intervals over seeds: the seeds resampled with
replacement DRAWS = 4,000 times by Python's random.Random(BOOT_SEED = 47), the same resamples for every
statistic over the same number of seeds, so the report is the same on every run; the interval is the
101st and 3,900th of the sorted draws.
With fewer than MIN_SEEDS = 3 such seeds the report says the study is incomplete, lists the runs present,
and prints the curves and differences it has without any interval."""
import functools
import json
import math
import os
import random
import re
import subprocess
import sys

BASE = 'softmax'
BUDGET_COLUMNS = ('diff', 'diff2', 'softmax')
DRAWS = 4000
BOOT_SEED = 47
MIN_SEEDS = 3
# position groups for the rate question: the first tokens, the middle, the far context
GROUPS = ((1, 15), (16, 255), (256, 1 << 30))
NAN = float('nan')


def load(runs):
    evals, trains = {}, {}
    for f in sorted(os.listdir(runs)):
        m = re.fullmatch(r'([\w.-]+?)_seed(\d+)_rate([0-9.]+)\.json', f)
        t = re.fullmatch(r'([\w.-]+?)_seed(\d+)_train\.json', f)
        if m:
            evals[(m[1], int(m[2]), m[3])] = json.loads(open(os.path.join(runs, f)).read())
        elif t:
            trains[(t[1], int(t[2]))] = json.loads(open(os.path.join(runs, f)).read())
    return evals, trains


def mean(v):
    return sum(v) / len(v)


def usable(v):
    return v is not None and not math.isnan(v)


@functools.lru_cache(maxsize=None)
def resamples(n):
    """The DRAWS resamples of n seeds (their indices): the same for every statistic over n seeds, as if the
    generator were reseeded with BOOT_SEED for each."""
    rng = random.Random(BOOT_SEED)
    return tuple(tuple(rng.randrange(n) for _ in range(n)) for _ in range(DRAWS))


def bootstrap(per_seed, intervals=True):
    """The mean of per_seed and its 95% percentile bootstrap interval over seeds (nan, nan without
    intervals or with fewer than MIN_SEEDS values); None and nan values (a bin without a scored token)
    are left out."""
    per_seed = [v for v in per_seed if usable(v)]
    if not per_seed:
        return NAN, NAN, NAN
    n = len(per_seed)
    if not intervals or n < MIN_SEEDS:
        return mean(per_seed), NAN, NAN
    draws = sorted(sum(per_seed[i] for i in idx) / n for idx in resamples(n))
    return mean(per_seed), draws[int(0.025 * DRAWS)], draws[int(0.975 * DRAWS) - 1]


def slope(xs, ys):
    """Least-squares slope of ys (None, nan: left out) against xs."""
    pts = [(x, y) for x, y in zip(xs, ys) if usable(y)]
    if len(pts) < 2:
        return None
    mx, my = mean([p[0] for p in pts]), mean([p[1] for p in pts])
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def log_mid(b):
    return math.log2(math.sqrt(b['first'] * b['last']))


def bin_loss(run, k):
    b = run['bins'][k]
    return b['loss'] if b.get('tokens', 1) > 0 else None


def group_loss(run, lo, hi):
    """The mean loss over the scored tokens at positions lo..hi: the bins' losses weighted by their tokens."""
    num = den = 0.0
    for b in run['bins']:
        if lo <= b['first'] and b['last'] <= hi and b['tokens'] > 0 and usable(b['loss']):
            num += b['loss'] * b['tokens']
            den += b['tokens']
    return num / den if den else None


def inventory(evals, trains):
    """Columns, rates, the finished runs and the seeds to analyse."""
    rates = sorted({k[2] for k in evals}, key=float)
    cols = sorted({k[0] for k in evals} | {k[0] for k in trains}, key=lambda a: (a == BASE, a not in BUDGET_COLUMNS, a))
    finished = {(a, s) for (a, s) in trains if all((a, s, r) in evals for r in rates)}
    seeds = sorted({s for (_, s) in finished if all((a, s) in finished for a in BUDGET_COLUMNS)})
    return cols, rates, finished, seeds


def analyse(evals, trains):
    cols, rates, finished, seeds = inventory(evals, trains)
    complete = len(seeds) >= MIN_SEEDS
    out = {'columns': cols, 'rates': rates, 'seeds': seeds, 'complete': complete, 'draws': DRAWS,
           'boot_seed': BOOT_SEED, 'curves': {}, 'diffs': {}, 'slopes': {}, 'overall': {}, 'rate_growth': {}}
    # an incomplete study shows every finished run; a complete one the seeds every budget column finished
    seeds_of = {a: [s for s in (seeds if complete else sorted({s for (c, s) in finished}))
                    if (a, s) in finished] for a in set(cols) | {BASE}}
    for r in rates:
        for a in cols:
            runs = [evals[(a, s, r)] for s in seeds_of[a]]
            if not runs:
                continue
            bins = runs[0]['bins']
            out['curves'][f'{a}@{r}'] = [
                dict(zip(('loss', 'lo', 'hi'), bootstrap([bin_loss(run, k) for run in runs], complete)),
                     first=b['first'], last=b['last'], seeds=len(runs)) for k, b in enumerate(bins)]
            paired = [s for s in seeds_of[a] if s in seeds_of[BASE]] if a != BASE else []
            if not paired:
                continue
            d = [[(lambda x, y: None if x is None or y is None else x - y)(
                bin_loss(evals[(a, s, r)], k), bin_loss(evals[(BASE, s, r)], k)) for k in range(len(bins))]
                for s in paired]
            xs = [log_mid(b) for b in bins]
            out['diffs'][f'{a}@{r}'] = [dict(zip(('diff', 'lo', 'hi'), bootstrap([row[k] for row in d], complete)),
                                             first=b['first'], last=b['last']) for k, b in enumerate(bins)]
            per_seed = [slope(xs, row) for row in d]
            out['slopes'][f'{a}@{r}'] = dict(zip(('slope', 'lo', 'hi'), bootstrap(per_seed, complete)),
                                             seeds=paired, per_seed=per_seed)
            out['overall'][f'{a}@{r}'] = dict(zip(('diff', 'lo', 'hi'), bootstrap(
                [evals[(a, s, r)]['loss'] - evals[(BASE, s, r)]['loss'] for s in paired], complete)), seeds=paired)
    if len(rates) >= 2:
        out['rate_growth'] = rate_growth(evals, out, seeds_of, complete)
    return out


def rate_growth(evals, out, seeds_of, complete):
    """Per column and position group: (column - softmax) at the highest rate minus at the lowest, per seed."""
    lo_r, hi_r, g = out['rates'][0], out['rates'][-1], {}
    bins = next(iter(evals.values()))['bins']
    last = bins[-1]['last']
    groups = [(lo, hi) for lo, hi in GROUPS if any(lo <= b['first'] and b['last'] <= hi for b in bins)]
    for a in out['columns']:
        if a == BASE:
            continue
        paired = [s for s in seeds_of[a] if s in seeds_of[BASE]]
        if not paired:
            continue
        rows = {}
        for lo, hi in groups + [(0, 0)]:  # (0, 0): every position, from the runs' overall loss
            def d(s, r):
                if (lo, hi) == (0, 0):
                    return evals[(a, s, r)]['loss'] - evals[(BASE, s, r)]['loss']
                x, y = group_loss(evals[(a, s, r)], lo, hi), group_loss(evals[(BASE, s, r)], lo, hi)
                return None if x is None or y is None else x - y
            per = [None if d(s, hi_r) is None or d(s, lo_r) is None else d(s, hi_r) - d(s, lo_r) for s in paired]
            name = 'all' if (lo, hi) == (0, 0) else f'{lo}-{min(hi, last)}'
            rows[name] = dict(zip(('growth', 'lo', 'hi'), bootstrap(per, complete)), per_seed=per)
        g[a] = {'low': lo_r, 'high': hi_r, 'seeds': paired, 'groups': rows}
    return g


def fmt(v, lo=NAN, hi=NAN, d=4):
    if not usable(v):
        return '-'
    if math.isnan(lo):
        return f'{v:+.{d}f}'
    return f'{v:+.{d}f} [{lo:+.{d}f}, {hi:+.{d}f}]'


def status_md(evals, trains, out):
    cols, rates, finished, seeds = inventory(evals, trains)
    runs = sorted({(a, s) for (a, s, _) in evals} | set(trains))
    md = ['## Runs present', '', '| column | seed | finished | steps | training wall time | rates scored |',
          '|---|---|---|---|---|---|']
    for a, s in runs:
        t = trains.get((a, s), {})
        scored = [r for r in rates if (a, s, r) in evals]
        wall = f"{t['wall_s'] / 3600:.2f} h ({t['wall_s']:.0f} s)" if 'wall_s' in t else '-'
        md.append(f"| {a} | {s} | {'yes' if (a, s) in finished else 'no'} | {t.get('steps', '-')} | {wall} | "
                  f"{', '.join(scored) or '-'} |")
    return md


def table(out):
    lines = []
    for r in out['rates']:
        cols = [a for a in out['columns'] if f'{a}@{r}' in out['curves']]
        if not cols:
            continue
        dcols = [a for a in cols if f'{a}@{r}' in out['diffs']]
        lines += ['', f'### Distractor rate {r}', '',
                  '| positions | ' + ' | '.join(f"{a} loss (seeds: {out['curves'][f'{a}@{r}'][0]['seeds']})"
                                              for a in cols) +
                  ''.join(f' | {a} - {BASE}' for a in dcols) + ' |',
                  '|---' * (1 + len(cols) + len(dcols)) + '|']
        for k, b in enumerate(out['curves'][f'{cols[0]}@{r}']):
            row = [f"{b['first']}-{b['last']}"]
            row += [fmt(out['curves'][f'{a}@{r}'][k]['loss']).lstrip('+') for a in cols]
            row += [fmt(*(out['diffs'][f'{a}@{r}'][k][x] for x in ('diff', 'lo', 'hi'))) for a in dcols]
            lines.append('| ' + ' | '.join(row) + ' |')
    return lines


def verdict(lo, hi, gains, loses):
    if math.isnan(lo):
        return None
    if hi < 0:
        return gains
    if lo > 0:
        return loses
    return 'the interval holds zero: no trend distinguishable from none'


def report_md(evals, trains, out):
    seeds, wall = out['seeds'], sum(t.get('wall_s', 0) for t in trains.values())
    md = ['# Does the advantage grow with position and with noise?', '']
    if out['complete']:
        md += [f"Columns {', '.join(out['columns'])}; seeds {', '.join(map(str, seeds))} (every budget column "
               f"finished them); evaluated at distractor rates {', '.join(out['rates'])}; training wall time "
               f"{wall / 3600:.1f} h over {len(trains)} runs. Intervals: 95% percentile bootstrap over seeds, "
               f"{DRAWS} resamples, random.Random({BOOT_SEED})."]
    else:
        md += [f"**The study is incomplete:** {len(seeds)} seed(s) have every budget column "
               f"({', '.join(BUDGET_COLUMNS)}) finished at every rate; the report needs {MIN_SEEDS}. What follows "
               'is what the finished runs show, means over the seeds each column has, without intervals; it answers '
               'neither question. The runs present:', '']
        md += status_md(evals, trains, out)
    md += ['', 'Loss in nats per target token by position bin (position in the window, distractors included), mean '
           'over seeds; a difference from softmax is paired by seed (negative: lower loss than softmax).']
    md += table(out)
    md += ['', '## The slope of the difference against log2 position', '',
           "Per seed, the least-squares slope of (column - softmax) per bin against log2 of the bin's geometric "
           'middle; their mean over seeds. Negative: the column gains on softmax as the position grows.', '',
           '| column | rate | seeds | slope per doubling | per seed | overall difference |', '|---|---|---|---|---|---|']
    for key, s in out['slopes'].items():
        a, r = key.split('@')
        o = out['overall'][key]
        md.append(f"| {a} | {r} | {', '.join(map(str, s['seeds']))} | {fmt(s['slope'], s['lo'], s['hi'])} | "
                  f"{' '.join(fmt(v) for v in s['per_seed'])} | {fmt(o['diff'], o['lo'], o['hi'])} |")
    md += ['', '## Growth with the rate', '', '(column - softmax) at the highest rate minus at the lowest, per position '
           'group (the bins\' losses weighted by their scored tokens) and over all positions. Negative: the column '
           'gains on softmax as the noise grows.', '', '| column | rates | positions | growth | per seed |',
           '|---|---|---|---|---|']
    for a, g in out['rate_growth'].items():
        for name, x in g['groups'].items():
            md.append(f"| {a} | {g['high']} - {g['low']} | {name} | {fmt(x['growth'], x['lo'], x['hi'])} | "
                      f"{' '.join(fmt(v) for v in x['per_seed'])} |")
    md += ['', '## Answers', '']
    if not out['complete']:
        md.append(f'None yet: fewer than {MIN_SEEDS} seeds with every budget column finished.')
    else:
        md += ['Each line reads one 95% interval of many (per column, rate and position group), none adjusted for '
               'the others: one in twenty may exclude zero by chance.', '']
        for key, s in out['slopes'].items():
            a, r = key.split('@')
            v = verdict(s['lo'], s['hi'], "the difference grows in the column's favour with position",
                        'the difference moves against the column with position')
            md.append(f'- position, {a} at rate {r}: {v}.')
        for a, g in out['rate_growth'].items():
            for name, x in g['groups'].items():
                v = verdict(x['lo'], x['hi'], "the difference grows in the column's favour with the rate",
                            'the difference moves against the column with the rate')
                where = 'all positions' if name == 'all' else f'positions {name}'
                md.append(f"- rate ({g['high']} vs {g['low']}), {a} at {where}: {v}.")
    md += ['', 'Figures: loss_rate*.png (loss by position, one line per column), loss_COLUMN.png (loss by position, '
           'one line per rate), diff_COLUMN.png (the difference from softmax by position, one line per rate); bands '
           'only where there are intervals.', '']
    return '\n'.join(md)


def plots(out, dest, plot):
    figs = []
    for r in out['rates']:
        spec = ''.join(f'series {a}\n' + ''.join(f"{log_mid(b)} {b['loss']} {b['lo']} {b['hi']}\n"
                                                 for b in out['curves'][f'{a}@{r}'] if usable(b['loss']))
                       for a in out['columns'] if f'{a}@{r}' in out['curves'])
        figs.append((f'loss_rate{r}.png', f'Loss by position, distractor rate {r}', spec, 'loss (nats per token)'))
    for a in out['columns']:
        spec = ''.join(f'series rate {r}\n' + ''.join(f"{log_mid(b)} {b['loss']} {b['lo']} {b['hi']}\n"
                                                      for b in out['curves'][f'{a}@{r}'] if usable(b['loss']))
                       for r in out['rates'] if f'{a}@{r}' in out['curves'])
        figs.append((f'loss_{a}.png', f'{a}: loss by position per distractor rate', spec, 'loss (nats per token)'))
    for a in out['columns']:
        spec = ''.join(f'series rate {r}\n' + ''.join(f"{log_mid(b)} {b['diff']} {b['lo']} {b['hi']}\n"
                                                      for b in out['diffs'][f'{a}@{r}'] if usable(b['diff']))
                       for r in out['rates'] if f'{a}@{r}' in out['diffs'])
        band = '95% bootstrap over seeds' if out['complete'] else 'incomplete study, no interval'
        figs.append((f'diff_{a}.png', f'{a} - {BASE} by position ({band})', spec, 'loss difference (nats per token)'))
    for name, title, spec, ylabel in figs:
        if spec:  # a column without a paired softmax run has no figure yet
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
    out = analyse(evals, trains)
    out['train'] = {f'{a}_seed{s}': t for (a, s), t in sorted(trains.items())}
    with open(os.path.join(dest, 'report.json'), 'w') as f:
        json.dump(out, f, indent=1, sort_keys=True)
    with open(os.path.join(dest, 'report.md'), 'w') as f:
        f.write(report_md(evals, trains, out))
    if len(sys.argv) == 4:
        plots(out, dest, sys.argv[3])


if __name__ == '__main__':
    main()
