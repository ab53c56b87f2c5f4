"""Bad numbers on the command line end in one line that names the problem, exit code 2, before any work."""
import pytest

from tvm_ttile import cli


def test_each_command_reads_its_own_strategy_options():
    """tune and tune-model take NAME=VALUE, compare [SYSTEM:]NAME=VALUE; redefining the option for compare must
    leave the others' parsing alone (the operator stays a positional of tune)."""
    parser = cli.make_parser()
    tune = parser.parse_args(["tune", "conv2d", "--layer", "ResNet18-2", "--strategy-option", "rho=3"])
    assert tune.op == "conv2d" and tune.strategy_option == ["rho=3"]
    assert parser.parse_args(["tune-model", "resnet18", "--strategy-option", "pool=3"]).strategy_option == ["pool=3"]
    assert parser.parse_args(["compare", "--strategy-option", "gbfs:rho=3"]).strategy_option == ["gbfs:rho=3"]


@pytest.mark.parametrize("argv,words", [
    (["tune", "conv2d", "--layer", "ResNet18-2", "--threads", "0"], "threads"),
    (["tune", "conv2d", "--layer", "ResNet18-2", "--threads", "-2"], "threads"),
    (["tune", "conv2d", "--layer", "ResNet18-2", "--seed", "-1"], "--seed"),
    (["tune", "conv2d", "--layer", "ResNet18-2", "--rpc-tracker", "foo"], "host:port"),
    (["tune-model", "tiny_resnet", "--threads", "x"], "threads"),
    (["tune", "conv2d", "--K", "16", "--C", "8", "--hw", "9", "--pad", "1,2,3"], "--pad"),
    (["tune", "conv2d", "--K", "16", "--C", "8", "--hw", "9", "--pad", "-1"], "--pad"),
    (["compare", "--layers", "ResNet18-2", "--shapes", "x.json"], "not allowed with"),
    (["tune", "matmul", "--M", "8", "--N", "16", "--K", "8", "--work-dir", __file__], "is a file"),
    (["compare", "--out", __file__], "is a file"),
])
def test_bad_numbers_are_refused_by_the_parser(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert words in err[-1] and "Traceback" not in "\n".join(err)


@pytest.mark.parametrize("argv,words", [
    (["tune-model", "tiny_resnet", "--input-shape", "1,x,10"], "--input-shape"),
    (["tune-model", "tiny_resnet", "--input-shape", "1,0,10,10"], "positive"),
    (["tune-model", "tiny_resnet", "--libraries", "nosuchlib"], "nosuchlib"),
    (["tune-model", "tiny_resnet", "--input-shape", "1,3"], "takes inputs shaped like [1, 3, 32, 32]"),
    (["tune", "matmul", "--M", "8", "--N", "16", "--K", "8", "--batch", "2"], "--batch"),
    (["tune", "conv2d", "--K", "16", "--C", "8", "--H", "9"], "missing: --W"),
    (["tune", "conv2d", "--K", "16", "--C", "8", "--hw", "2", "--R", "3", "--pad", "0"], "empty output"),
    (["tune", "depthwise", "--C", "16", "--H", "9"], "missing: --W"),
    (["tune", "depthwise", "--C", "16", "--K", "16", "--hw", "9"], "no --layer or --K"),
    (["tune", "depthwise", "--C", "16", "--hw", "2", "--R", "3"], "empty output"),
    (["tune", "conv1d", "--K", "16", "--C", "8"], "missing: --W"),
    (["tune", "conv1d", "--K", "16", "--C", "8", "--hw", "9"], "no --layer, --H or --hw"),
    (["tune", "conv1d", "--K", "16", "--C", "8", "--W", "9", "--pad", "0,1,0,1"], "conv1d --pad is one value or left,right"),
    (["tune", "conv1d", "--K", "16", "--C", "8", "--W", "2", "--S", "3"], "empty output"),
    (["tune", "conv1d", "--K", "16", "--C", "6", "--W", "9", "--groups", "4"], "divisible"),
    (["tune", "conv1d", "--K", "8", "--C", "8", "--W", "9", "--groups", "8"], "use the depthwise1d operator"),
    (["tune", "depthwise1d", "--C", "16"], "missing: --W"),
    (["tune", "depthwise1d", "--C", "16", "--K", "16", "--W", "9"], "or --K"),
    (["tune", "depthwise1d", "--C", "16", "--W", "9", "--groups", "16"], "--groups is for conv2d and conv1d"),
    (["tune", "matmul", "--M", "8", "--N", "16", "--K", "8", "--groups", "2"], "--groups is for conv2d"),
    (["tune", "conv2d", "--K", "16", "--C", "8", "--hw", "9", "--layout", "nt"], "--layout is for batch_matmul"),
    (["tune", "conv2d", "--K", "16", "--C", "6", "--hw", "9", "--groups", "4"], "divisible"),
    (["tune", "conv2d", "--layer", "ResNet18-2", "--groups", "2"], "--groups with --layer"),
    (["tune", "batch_matmul", "--M", "8", "--N", "16"], "missing: --K"),
])
def test_bad_values_give_one_line(argv, words, capsys, tmp_path):
    assert cli.main(argv + ["--work-dir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_compare_with_a_bad_shapes_file_is_one_line(capsys, tmp_path):
    bad = tmp_path / "shapes.json"
    bad.write_text('{"layers": [{"name": "x", "op": "conv2d", "K": 4}]}')
    for path, words in ((bad, "missing field(s) C, H, W, R, S"), (tmp_path / "none.json", "does not exist")):
        assert cli.main(["compare", "--shapes", str(path), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0]


@pytest.mark.parametrize("argv,words", [
    (["peak", "--target", '{"kind":"bogus"}'], 'Target kind "bogus" is not defined'),
    (["peak", "--target", "llvm -mcpu=x"], "must be a JSON dict"),
    (["compare", "--systems", "numpy", "--layers", "ResNet18-2"], "none of the systems handles ResNet18-2, a Conv2d (numpy takes Matmul and BatchMatmul operators)"),
    (["compare", "--systems", "tvm_ttile,gbfs", "--layers", "ResNet18-2", "--strategy-option", "tau=0.5"],
     "--strategy-option tau: no chosen system's search has it"),
    (["compare", "--systems", "gbfs", "--layers", "ResNet18-2", "--strategy-option", "na2c:tau=0.5"],
     "na2c is not among the systems (gbfs)"),
    (["compare", "--systems", "gbfs,numpy", "--layers", "ResNet18-2", "--strategy-option", "numpy:rho=3"],
     "numpy has no search strategy options"),
    (["compare", "--systems", "gbfs", "--layers", "ResNet18-2", "--strategy-option", "gbfs:rhoo=3"],
     "gbfs's search has no option(s) rhoo; it has rho, start, starts"),
])
def test_bad_targets_and_systems_are_one_line(argv, words, capsys, tmp_path):
    assert cli.main(argv + (["--out", str(tmp_path / "o")] if argv[0] == "compare" else [])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_a_file_that_is_not_a_model_is_one_line(capsys, tmp_path):
    text = tmp_path / "model.onnx"
    text.write_text("not a model")
    for model, words in ((text, "is not an ONNX model"), (tmp_path, "(a directory)")):
        assert cli.main(["tune-model", str(model), "--work-dir", str(tmp_path / "w")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0]


def test_an_unexpected_failure_is_one_line_and_its_traceback_comes_with_verbose(capsys, monkeypatch):
    from tvm_ttile import cpu

    def broken(*a, **k):
        raise RuntimeError("deep inside\nthe last line")

    monkeypatch.setattr(cpu, "peak", broken)
    assert cli.main(["peak"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tvm-ttile: error: RuntimeError: the last line (unexpected; run again with --verbose for the "
                   "traceback and report it)"]
    with pytest.raises(RuntimeError):
        cli.main(["peak", "--verbose"])


def test_ctrl_c_says_what_was_kept_and_how_to_resume_even_through_tvm(capsys, monkeypatch, tmp_path):
    """A KeyboardInterrupt raised inside TVM's callbacks reaches Python as a RuntimeError: still an interruption."""
    import os
    import signal

    from tvm_ttile import tune as tune_mod

    def interrupted_inside_tvm(*a, **k):
        os.kill(os.getpid(), signal.SIGINT)  # the handler main() installed notes it, then raises
        raise AssertionError("not reached")

    def as_tvm_reports_it(*a, **k):
        try:
            interrupted_inside_tvm()
        except KeyboardInterrupt:
            raise RuntimeError("") from None

    monkeypatch.setattr(tune_mod, "tune", as_tvm_reports_it)
    work = tmp_path / "w"
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest runs in a background job of a script
    assert cli.main(["tune", "matmul", "--M", "8", "--N", "16", "--K", "8", "--work-dir", str(work)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tvm-ttile: interrupted; every finished measurement is kept in {work}: run the same command "
                   "again to resume"]
    assert signal.getsignal(signal.SIGINT) is before  # restored
