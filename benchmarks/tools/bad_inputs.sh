#!/usr/bin/env bash
# Bad inputs and damaged state as a new user meets them: each command with the last line it printed to stderr and
# its exit code (one line and exit 2 expected; damaged work dirs: warnings naming file and line, then a resume).
#   bash benchmarks/tools/bad_inputs.sh > benchmarks/results/bad_inputs_<machine>.txt     (about 2 minutes)
DIR=${DIR:-$(mktemp -d)}; cd "$DIR"
run() { echo "\$ $*"; out=$("$@" 2>&1 >/dev/null); rc=$?; echo "$out" | grep -v "^\s*$" | grep -v "\[#" | tail -${TAILN:-1}; echo "  -> exit $rc"; }
echo '{"layers": [{"name": "x", "op": "conv2d", "K": 8, "C": 8, "H": 8, "W": 8, "R": 3, "S": 3, "pad": [1,1,1]}]}' > badpad.json
mkdir adir
run tvm-ttile tune conv2d --K 64 --C 64 --hw 56 --pad 1,1,1
run tvm-ttile tune conv2d --layer NoSuch
run tvm-ttile tune matmul --M 0 --N 16 --K 8
run tvm-ttile tune conv2d --K 16 --C 8 --hw 9 --R 11
run tvm-ttile compare --shapes /etc/passwd
run tvm-ttile compare --shapes adir
run tvm-ttile compare --shapes badpad.json
run tvm-ttile compare --systems foo
run tvm-ttile tune-model nosuch
run tvm-ttile tune-model tiny_resnet --input-shape 1,3
run tvm-ttile tune matmul --M 8 --N 16 --K 8 --threads 100000
run tvm-ttile peak --target '{"kind":"cuda"}'
run tvm-ttile tune matmul --M 8 --N 16 --K 8 --sampler nosuch
run tvm-ttile tune matmul --M 8 --N 16 --K 8 --sampler-option parallel=bogus
run tvm-ttile tune matmul --M 32 --N 32 --K 32 --trials 4 --work-dir w1
run tvm-ttile tune matmul --M 32 --N 32 --K 32 --trials 4 --work-dir w1 --threads 2
run tvm-ttile tune matmul --M 32 --N 32 --K 32 --trials 4 --work-dir w1 --isa avx2
python - <<'PY'
p = "w1/database_tuning_record.json"; t = open(p).read(); open(p, "w").write(t[:-50])
open("w1/curve.jsonl", "a").write('{"seconds": 3')
open("w1/ttile_tuning_seconds.json", "w").write("")
PY
TAILN=4 run tvm-ttile tune matmul --M 32 --N 32 --K 32 --trials 4 --work-dir w1
echo "\$ tvm-ttile tune matmul --M 64 --N 64 --K 64 --trials 200 --work-dir w2   (Ctrl-C after 25 s)"
timeout -s INT 25 tvm-ttile tune matmul --M 64 --N 64 --K 64 --trials 200 --work-dir w2 2>&1 >/dev/null | grep "^tvm-ttile" | tail -1
echo "  -> records kept: $(wc -l < w2/database_tuning_record.json); the same command again:"
timeout -s INT 25 tvm-ttile tune matmul --M 64 --N 64 --K 64 --trials 200 --work-dir w2 2>&1 | tr '\r' '\n' | grep "^tuning" | head -1
export TVM_TTILE_CACHE=$DIR/freshcache
(tvm-ttile peak --json > p1.json 2> p1.err &) ; tvm-ttile peak --json > p2.json 2> p2.err; sleep 2; while pgrep -f "tvm-ttile peak" > /dev/null; do sleep 1; done
echo "two first runs together: peaks $(python -c "import json; print(json.load(open('p1.json'))['peak_gflops'], json.load(open('p2.json'))['peak_gflops'])"); $(cat p1.err p2.err | grep -c 'another process is measuring') waited"
