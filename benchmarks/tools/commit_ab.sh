#!/usr/bin/env bash
# A/B of two commits on layers' tuning: `tvm-ttile tune conv2d --layer L --prepack --trials T --seed S` at BASE
# and at HEAD (git worktrees), layer by layer and seed by seed, the two runs of a (layer, seed) back to back so
# machine noise hits both alike; then a table of the GFLOPS of each run's verified best, head / base per layer and
# their geometric mean. 1 thread. Run nothing else heavy meanwhile.
#
#   BASE=56f4c53 LAYERS="ResNet18-1" SEEDS="0 1 2 3" OUT=benchmarks/results/x.md bash benchmarks/tools/commit_ab.sh
#   BASE_CACHE=DIR ...                              # the base's own TVM_TTILE_CACHE (an older catalog format)
#   SHAPES=benchmarks/shapes/windows.json ...       # the conv2d / conv1d / matmul layers of a shapes file (LAYERS: some
#                                                   # of them), at the precision each names
#   TABLE_ONLY=1 HEAD=<commit the run used> ...   # only the table, from the JSON outputs a run left in $WORK
set -euo pipefail
cd "$(dirname "$0")/../.."
SHAPES=${SHAPES:-}
shape_args() {  # the tune arguments of layer $1: conv2d --layer, or its operator and sizes in $SHAPES
  if [ -z "$SHAPES" ]; then echo "conv2d --layer $1"; return; fi
  python - "$SHAPES" "$1" <<'PY'
import json, sys
layers = {d["name"]: d for d in json.load(open(sys.argv[1]))["layers"]}
d = layers.get(sys.argv[2]) or sys.exit(f"no layer {sys.argv[2]!r} in {sys.argv[1]}")
if d.get("op") not in ("conv2d", "conv1d", "matmul"):
    sys.exit(f"{sys.argv[2]} is a {d.get('op')}, not a conv2d, conv1d or matmul")
pad = d.get("pad", 0)
args = [d["op"]] + [f"--{k} {d[k]}" for k in ("M", "N", "K", "C", "H", "W", "R", "S", "stride", "dilation", "groups",
                                               "precision") if k in d]
print(" ".join(args + ([f"--pad {','.join(map(str, pad)) if isinstance(pad, list) else pad}"] if d["op"] != "matmul"
                       else [])))
PY
}
if [ -n "$SHAPES" ] && [ -z "${LAYERS:-}${LAYER:-}" ]; then
  LAYERS=$(python -c "import json, sys; print(' '.join(d['name'] for d in json.load(open(sys.argv[1]))['layers'] if d.get('op') in ('conv2d', 'conv1d', 'matmul')))" "$SHAPES")
fi
BASE=${BASE:?set BASE (a commit)} LAYERS=${LAYERS:-${LAYER:?set LAYERS (or LAYER)}} OUT=${OUT:?set OUT}
SEEDS=${SEEDS:-0 1 2 3} TRIALS=${TRIALS:-50} WORK=$(realpath -m "${WORK:-commit_ab_work}")
HEAD_COMMIT=${HEAD:-$(git rev-parse --short HEAD)}
if [ -z "${TABLE_ONLY:-}" ]; then
  mkdir -p "$WORK"
  [ -d "$WORK/base" ] || git worktree add -f "$WORK/base" "$BASE" > /dev/null
  for L in $LAYERS; do
    args=$(shape_args "$L")
    # fp32 layers' weights as a network's constants; a reduced precision's always are (older code refuses the flag)
    prepack=$(case "$args" in *--precision*) ;; *) echo --prepack ;; esac)
    for S in $SEEDS; do
      for side in base head; do
        tree=$([ $side = base ] && echo "$WORK/base" || pwd)
        cache=$([ $side = base ] && echo "${BASE_CACHE:-${TVM_TTILE_CACHE:-}}" || echo "${TVM_TTILE_CACHE:-}")
        rm -rf "$WORK/$L-$side-$S"
        (cd "$tree" && TVM_TTILE_CACHE="$cache" PYTHONPATH="$tree" python -m tvm_ttile tune $args \
           $prepack --trials "$TRIALS" --seed "$S" --work-dir "$WORK/$L-$side-$S" --json) > "$WORK/$L-$side-$S.json"
      done
    done
  done
fi
python - "$WORK" "$OUT" "$BASE" "$HEAD_COMMIT" "$LAYERS" "$TRIALS" "$SEEDS" <<'PY'
import json, math, os, statistics, sys, time
work, out, base, head, layers, trials, seeds = sys.argv[1:]
rows, ratios = [], {}
for layer in layers.split():
    for s in seeds.split():
        r = {side: json.load(open(f"{work}/{layer}-{side}-{s}.json")) for side in ("base", "head")}
        # GFLOPS, not % of peak: each side's peak comes from its own cache, measured at another moment
        gf = {side: r[side]["gflops"] if r[side]["verified"] else float("nan") for side in r}
        ratios.setdefault(layer, []).append(gf["head"] / gf["base"])
        rows += [f"| {layer} | {s} | {side} | {gf[side]:.1f} | {r[side]['percent_of_peak']:.1f} | "
                 f"{r[side]['verified']} | `{r[side]['scheme']}` |" for side in ("base", "head")]
per_layer = {layer: statistics.median(v) for layer, v in ratios.items()}
geo = math.exp(statistics.mean(math.log(v) for v in per_layer.values()))
from tvm_ttile import cpu as cpu_mod
cpu = cpu_mod.detect_host().describe()
base_cache = f"BASE_CACHE={os.environ['BASE_CACHE']} " if os.environ.get("BASE_CACHE") else ""
shapes = f"SHAPES={os.environ['SHAPES']} " if os.environ.get("SHAPES") else ""
lines = [f"# Tuning at {base} (base) against {head} (head), {trials} trials, 1 thread", "",
         f"Command: `{base_cache}{shapes}BASE={base} LAYERS=\"{layers}\" SEEDS=\"{seeds}\" TRIALS={trials} OUT={os.path.relpath(out)} "
         f"bash benchmarks/tools/commit_ab.sh` (table written {time.strftime('%Y-%m-%d %H:%M')}); {cpu['cpu']} "
         f"({cpu['isa']}, {cpu['cores']} cores); weights prepacked; GFLOPS of each run's verified best (as its "
         "tuning measured it), the two runs of a layer and seed back to back.", "",
         "| layer | seed | commit | GFLOPS (int8: GOPS) | % of its peak | verified | best scheme |",
         "|---|---:|---|---:|---:|---|---|", *rows, "",
         "head / base per layer (median over seeds): " + ", ".join(f"{k} {v:.3f}" for k, v in per_layer.items()),
         "", f"Geometric mean of head / base over {len(per_layer)} layer(s): **{geo:.3f}**; "
         f"range {min(per_layer.values()):.3f}-{max(per_layer.values()):.3f}."]
open(out, "w").write("\n".join(lines) + "\n")
print(lines[-1])
PY
