"""Bad numbers on the command line end in one line that names the problem, exit code 2, before any work."""
import pytest

from tvm_ttile import cli


@pytest.mark.parametrize("argv,words", [
    (["tune", "conv2d", "--layer", "ResNet18-2", "--threads", "0"], "threads"),
    (["tune", "conv2d", "--layer", "ResNet18-2", "--threads", "-2"], "threads"),
    (["tune", "conv2d", "--layer", "ResNet18-2", "--seed", "-1"], "--seed"),
    (["tune", "conv2d", "--layer", "ResNet18-2", "--rpc-tracker", "foo"], "host:port"),
    (["tune-model", "tiny_resnet", "--threads", "x"], "threads"),
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
    (["tune", "matmul", "--M", "8", "--N", "16", "--K", "8", "--batch", "2"], "--batch"),
])
def test_bad_values_give_one_line(argv, words, capsys, tmp_path):
    assert cli.main(argv + ["--work-dir", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]
