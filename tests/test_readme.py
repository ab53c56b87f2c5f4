"""The README's Python snippets run as written (on any x86 host: the target and lanes come from tvm_ttile), with
tiny budgets: each budget below is replaced in the text, and a replacement that no longer matches fails the test,
so the README cannot drift from what is tested."""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parents[1]
BUDGETS = [  # (as written in the README, as run here)
    ("max_trials_global=50,", "max_trials_global=2,"),
    ('load_model("resnet18")', 'load_model("micro_resnet")'),
    ("trials_per_task=50, threads=2)", "trials_per_task=1, memory_bound=False, threads=2)"),
    ("max_trials_global=1000,", "max_trials_global=6,"),
    ("max_trials_per_task=50,", "max_trials_per_task=1, num_trials_per_iter=1,"),
]


def snippets() -> str:
    text = (ROOT / "README.md").read_text()
    return "\n".join(re.findall(r"```python\n(.*?)```", text, re.S))


@pytest.mark.slow
def test_readme_snippets_run_with_tiny_budgets(tmp_path):
    code = snippets()
    assert code.count("import") >= 3
    for written, tiny in BUDGETS:
        assert written in code, f"the README no longer says {written!r}: update BUDGETS"
        code = code.replace(written, tiny)
    code += "\nprint('README OK', out.shape)\n"
    # A small microkernel family (as test_network does), so that the catalog is measured in seconds, not minutes.
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
            "from kernels import conv_kept, matmul_kept\n"
            "from tvm_ttile.microkernels import family\n"
            "family.candidates = lambda op, isa, red, precision='fp32': {'conv2d': conv_kept, 'matmul': matmul_kept}[op]"
            "(isa.name, isa.lanes, red)\n") + code
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "README OK" in out.stdout


def test_shapes_file_example_loads(tmp_path):
    """The shapes-file example the README points to (benchmarks/README.md) is a file load_shapes reads."""
    from tvm_ttile.operators import load_shapes

    (example,) = re.findall(r"```json\n(.*?)```", (ROOT / "benchmarks" / "README.md").read_text(), re.S)
    path = tmp_path / "layers.json"
    path.write_text(example)
    assert [op.name for op in load_shapes(path)] == ["inception-1x7", "same-3x3s2", "mobilenet-dw", "bert-ffn",
                                                     "bert-scores"]


def test_the_readmes_sampler_options_are_the_declared_ones():
    """The sampler options the README names are options the ttile sampler declares (options.py checks them)."""
    from tvm_ttile.samplers import SAMPLERS

    text = (ROOT / "README.md").read_text()
    (listed,) = re.findall(r"--sampler-option NAME=VALUE` \((.*?)\)", text, re.S)
    names = {m.split("=")[0] for m in re.findall(r"`([a-z_]+)(?:=[^`]*)?`", listed)}
    assert names and names <= set(SAMPLERS["ttile"].all_options()), names - set(SAMPLERS["ttile"].all_options())
