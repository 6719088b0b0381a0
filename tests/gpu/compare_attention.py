#!/usr/bin/env python3
"""The bundled kernel model's fused attention (`dtsim kernel attention --kernel K`, burst
clocks, as a benchmark loop runs) against tests/gpu/attention_sdpa.py's measurements:
median and mean |error| per kernel and pass; negative is optimistic.

    tests/gpu/compare_attention.py  (from the repository root, with build/ built)"""
import json
import statistics
import subprocess
import sys
d = json.load(open(sys.argv[1] if len(sys.argv) > 1 else 'calibrate/profiles/h100-sxm/attention-sdpa.json'))
print(d['gpu'], d['torch'], 'cudnn', d['cudnn'])
res = {}
for r in d['rows']:
    if 'error' in r: continue
    for bwd in (False, True):
        args = ['build/src/cli/dtsim', 'kernel', 'attention', '--device', 'H100-SXM', '--batch', str(r['batch']), '--seq', str(r['seq']),
                '--heads', str(r['heads']), '--head-dim', str(r['head_dim']), '--kernel', r['kernel'], '--json']
        if r['causal']: args.append('--causal')
        if bwd: args.append('--backward')
        j = json.loads(subprocess.run(args, capture_output=True, text=True).stdout)
        meas = (r['backward_us'] if bwd else r['forward_us']) * 1e-6
        e = j['time_s'] / meas - 1
        res.setdefault((r['kernel'], bwd), []).append((e, r['seq'], r['head_dim'], r['causal']))
for key, v in res.items():
    big = [x[0] for x in v if x[1] >= 2048]
    print(key[0], 'backward' if key[1] else 'forward', 'median %+.1f%%, mean|e| %.1f%%, seq>=2048 median %+.1f%%' % (
        100*statistics.median(x[0] for x in v), 100*statistics.mean(abs(x[0]) for x in v), 100*statistics.median(big)),
        ' worst', '%+.0f%% (seq %d d %d causal %s)' % max(((100*x[0],)+x[1:] for x in v), key=lambda t: abs(t[0])))
