#!/usr/bin/env bash
# The measured peak on a busy machine (limits.py): a first peak measured with both cores loaded, the main job with
# the other core busy, then the main job quietly; against a quiet first run and `tvm-ttile peak --rebuild`.
# Prints a markdown report (redirect it to a results file). Needs a quiet machine apart from the load it makes.
set -euo pipefail
ROOT=${ROOT:-$(mktemp -d /tmp/busy_peak.XXXX)}
LAYER=${LAYER:-ResNet18-2}
busy() { for _ in $(seq "$1"); do python3 -c 'while True: pass' & done; }
calm() { kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; }
state() {  # the cached peak and the conv2d catalog's kept count and highest % of peak
  python3 - "$1" <<'PY'
import json, sys, glob
d = glob.glob(sys.argv[1] + "/*/peak.json")[0].rsplit("/", 1)[0]
p = json.load(open(d + "/peak.json"))
try:
    c = json.load(open(d + "/catalog_conv2d.json"))
    cat = f"conv2d catalog: {len(c['kept'])} of {c['candidates']} kept against {c['peak_gflops']:.1f}, highest {max(e['percent_of_peak'] or 0 for e in c['entries']):.0f}% of peak"
except OSError:
    cat = "no conv2d catalog yet"
print(f"cached peak {p['peak_gflops']:.1f} GFLOPS (nominal {p.get('nominal_gflops')}); last run {p['last_run']['peak_gflops']:.1f}; {len(p['revisions'])} revision(s); {cat}")
PY
}
run() { echo; echo "\$ $*"; echo '```'; "$@" 2>&1 | grep -v -e "^WARNING: Location" -e " eta " -e "^trial " || true; echo '```'; }
echo "# The peak on a busy machine"
echo
echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs; $(date -u +%FT%TZ); tvm_ttile $(git -C "$(dirname "$0")/.." rev-parse --short HEAD)"
echo "Command: \`bash benchmarks/paper/busy_peak.sh\` (LAYER=$LAYER)"
echo
echo "## A quiet first run (cache Q)"
export TVM_TTILE_CACHE=$ROOT/quiet
run tvm-ttile tune conv2d --layer "$LAYER" --work-dir "$ROOT/w_quiet"
echo; echo "- $(state "$ROOT/quiet")"
echo
echo "## Busy, then quiet (cache B)"
export TVM_TTILE_CACHE=$ROOT/busy
echo; echo "Both cores loaded by two busy loops while the first peak is measured:"
busy 2; run tvm-ttile peak; calm
echo; echo "- $(state "$ROOT/busy")"
echo; echo "The main job with the other core busy (one busy loop):"
busy 1; run tvm-ttile tune conv2d --layer "$LAYER" --work-dir "$ROOT/w_busy"; calm
echo; echo "- $(state "$ROOT/busy")"
echo; echo "The main job again, quietly:"
run tvm-ttile tune conv2d --layer "$LAYER" --work-dir "$ROOT/w_busy2"
echo; echo "- $(state "$ROOT/busy")"
echo
echo "## \`tvm-ttile peak --rebuild\`, quietly (cache B)"
run tvm-ttile peak --rebuild
echo; echo "- $(state "$ROOT/busy")"
python3 - "$ROOT" <<'PY'
import glob, json, sys
kept = {}
for name in ("quiet", "busy"):
    d = glob.glob(f"{sys.argv[1]}/{name}/*/catalog_conv2d.json")[0]
    kept[name] = {e["text"] for e in json.load(open(d))["kept"]}
print(f"\nKept sets: quiet first run {len(kept['quiet'])}, busy-then-quiet {len(kept['busy'])}; "
      f"in both {len(kept['quiet'] & kept['busy'])}, only quiet {len(kept['quiet'] - kept['busy'])}, "
      f"only busy {len(kept['busy'] - kept['quiet'])} (the microkernels themselves were measured in different runs)")
PY
