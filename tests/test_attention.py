"""Attention at the token counts real models have (197, 50, a prime): softmax(c Q K^T + mask) V as one fused task
(attention.py, relax/attention.py) with K^T written either way a model exports it, each of its schedules equal to
numpy; where the chain is not that (a broadcast batch, a few keys) or fusing is turned off, Q K^T is a tvm_ttile task
that pads its columns to whole vectors inside the function (relax/padded_products.py), the scale after it fused;
outputs equal to ONNX Runtime untuned and tuned; batch dimensions broadcast."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import tvm  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tvm import relax  # noqa: E402

from tvm_ttile import attention  # noqa: E402
from tvm_ttile.cpu import detect_host  # noqa: E402
from tvm_ttile.relax import extract_tasks, prepare  # noqa: E402
from tvm_ttile.relax.padded_products import padded_product  # noqa: E402
from tvm_ttile.relax.tasks import fuse  # noqa: E402

HEADS, HEAD = 2, 16


def _attention(tokens: int, k_transposed_in_graph: bool, seed=0, mask: bool = False):
    """Self-attention of x[1, tokens, 32] with 2 heads of 16: Q, K, V projections, heads split by Reshape +
    Transpose, MatMul(Q, K^T) scaled by 1/4 (with `mask`, a constant added: the last key masked), Softmax,
    MatMul(P, V), heads merged. K^T is a Transpose of K [1, h, t, e] after the split (as torch exports
    `q @ k.transpose(-2, -1)`) or the split's own transpose to [1, h, e, t]."""
    rng = np.random.default_rng(seed)
    d = HEADS * HEAD
    inits = [numpy_helper.from_array((rng.standard_normal((d, d)) * 0.2).astype(np.float32), f"w{n}") for n in "qkv"]
    inits += [numpy_helper.from_array(np.array([1, tokens, HEADS, HEAD], np.int64), "split"),
              numpy_helper.from_array(np.array([1, tokens, d], np.int64), "merge"),
              numpy_helper.from_array(np.array(HEAD ** -0.5, np.float32), "scale"),
              numpy_helper.from_array(np.where(np.arange(tokens) < tokens - 1, 0, -1e4).astype(np.float32), "mask")]
    nodes = []
    for n in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{n}"], [f"{n}0"]),
                  helper.make_node("Reshape", [f"{n}0", "split"], [f"{n}1"])]
    nodes += [helper.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3])]
    if k_transposed_in_graph:
        nodes += [helper.make_node("Transpose", ["k1"], ["k"], perm=[0, 2, 1, 3]),
                  helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])]
    else:
        nodes += [helper.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1])]
    nodes += [helper.make_node("MatMul", ["q", "kt"], ["s0"]),
              helper.make_node("Mul", ["s0", "scale"], ["s1" if mask else "s"]),
              *([helper.make_node("Add", ["s1", "mask"], ["s"])] if mask else []),
              helper.make_node("Softmax", ["s"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["c0"]),
              helper.make_node("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["c1", "merge"], ["out"])]
    graph = helper.make_graph(nodes, "attention",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, tokens, d))],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _ort(model, x):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _untuned(mod, x):
    return relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("tokens,k_in_graph,mask", [(197, True, False), (37, False, False), (50, True, True)])
def test_attention_is_one_fused_task_at_odd_token_counts(tokens, k_in_graph, mask):
    from tvm.relax.frontend.onnx import from_onnx

    model = _attention(tokens, k_in_graph, mask=mask)
    mod = prepare(from_onnx(model, keep_params_in_input=False))
    tasks = extract_tasks(mod)
    fused = [t.shape for t in tasks if t.policy == "attention"]
    assert fused == [f"attention m{tokens},n{tokens},d{HEAD} x{HEADS}"], [(t.policy, t.shape) for t in tasks]
    assert not [t.shape for t in tasks if f"x{HEADS}" in t.shape and t.policy == "tvm_ttile"]  # no products apart
    assert not [t.shape for t in tasks if f"{tokens}x{tokens}" in t.shape]  # no softmax apart
    x = np.random.default_rng(1).standard_normal((1, tokens, HEADS * HEAD)).astype(np.float32)
    got, ref = _untuned(mod, x), _ort(model, x)
    assert got.shape == ref.shape and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def test_attention_is_fused_only_as_a_whole_chain():
    """A negative scale is fused (the max is taken over the scaled scores); batch dimensions that broadcast, or
    prepare's fused_attention=False, keep the three tasks."""
    bb = relax.BlockBuilder()
    q = relax.Var("q", relax.TensorType((2, 37, 16), "float32"))
    k = relax.Var("k", relax.TensorType((2, 37, 16), "float32"))
    v = relax.Var("v", relax.TensorType((2, 37, 16), "float32"))
    kb = relax.Var("kb", relax.TensorType((1, 37, 16), "float32"))
    outs = {}
    for name, scale, keys in [("plain", 0.25, k), ("negative", -0.25, k), ("broadcast", 0.25, kb)]:
        with bb.function(name, [q, k, v, kb]):
            with bb.dataflow():
                s0 = bb.emit(relax.op.matmul(q, relax.op.permute_dims(keys, [0, 2, 1])))
                p = bb.emit(relax.op.nn.softmax(bb.emit(relax.op.multiply(s0, relax.const(scale, "float32")))))
                out = bb.emit_output(relax.op.matmul(p, v))
            bb.emit_func_output(out)
    mod = bb.get()
    for fused_attention, expected in [(True, {"plain", "negative"}), (False, set())]:
        prepared = prepare(mod, fused_attention=fused_attention)
        outs[fused_attention] = {gv.name_hint for gv, f in prepared.functions.items() if isinstance(f, relax.Function)
                                 and "attention" in str(f)}
        assert outs[fused_attention] == expected, outs


@pytest.mark.parametrize("lead,m,n,d,dv,keys_transposed,scale,mask,threads", [
    ((1, 3), 197, 197, 64, 64, False, 0.125, None, 1), ((2,), 37, 37, 32, 32, True, -1.0, (37,), 2),
    ((1, 2), 5, 29, 16, 48, False, 0.3, (1, 5, 29), 1)])
def test_every_fused_attention_schedule_equals_numpy(lead, m, n, d, dv, keys_transposed, scale, mask, threads):
    """Masks: a padding mask over the keys (-1e4 on the last 5), a causal one per head and query."""
    from tvm import te

    q = te.placeholder((*lead, m, d), "float32", name="q")
    k = te.placeholder((*lead, d, n) if keys_transposed else (*lead, n, d), "float32", name="k")
    v = te.placeholder((*lead, n, dv), "float32", name="v")
    mk = [] if mask is None else [te.placeholder(mask, "float32", name="mask")]
    mod = tvm.IRModule({"main": te.create_prim_func([q, k, v, *mk, attention.fused_attention(
        q, k, v, *mk, keys_transposed=keys_transposed, scale=scale, lanes=16)])})
    shape = attention.shape_of(mod["main"])
    assert shape == attention.AttentionShape.from_key(shape.key) and shape.heads == int(np.prod(lead))
    assert shape.mask == mask
    rng = np.random.default_rng(0)
    qa, ka, va = (rng.standard_normal([int(x) for x in t.shape]).astype(np.float32) for t in (q, k, v))
    masks = {None: [], (37,): [np.where(np.arange(37) < 32, 0, -1e4).astype(np.float32)],
             (1, 5, 29): [np.where(np.arange(29)[None, None] <= np.arange(5)[None, :, None] + 24, 0, -1e4)
                          .astype(np.float32)]}[mask]
    scores = scale * (qa.astype(np.float64) @ (ka if keys_transposed else np.swapaxes(ka, -1, -2)))
    scores = scores + (masks[0] if masks else 0)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    exact = p / p.sum(-1, keepdims=True) @ va
    errors = []
    made = attention.schedules(mod, 16, threads, errors)
    fitting = attention.fitting_variants(dv, 16)
    assert not errors and [name for name, _ in made] == [x.name for x in fitting], errors
    for name, sch in [("as written", tvm.s_tir.Schedule(mod))] + made:
        lib = tvm.compile(sch.mod, target=detect_host().target(threads))
        args = [tvm.runtime.tensor(a) for a in (qa, ka, va, *masks)]
        args.append(tvm.runtime.tensor(np.zeros(exact.shape, np.float32)))
        lib(*args)
        assert np.abs(args[-1].numpy() - exact).max() <= 1e-5 * np.abs(exact).max(), name


@pytest.mark.parametrize("tokens,k_in_graph,mask", [(197, True, True), (13, False, False), (50, True, False)])
def test_attention_scores_at_odd_token_counts_are_tvm_ttile_tasks(tokens, k_in_graph, mask):
    """Not fused (fused_attention=False; 13 keys, less than a vector): Q K^T and P V are tasks of their own."""
    from tvm.relax.frontend.onnx import from_onnx

    model = _attention(tokens, k_in_graph, mask=mask)
    mod = prepare(from_onnx(model, keep_params_in_input=False), fused_attention=False)
    lanes = detect_host().lanes
    padded = -(-tokens // lanes) * lanes
    ours = [t.shape for t in extract_tasks(mod) if t.policy == "tvm_ttile"]
    assert f"matmul i{tokens},j{padded},k{HEAD} x{HEADS}" in ours, ours  # Q K^T, padded to whole vectors
    assert f"matmul i{tokens},j{HEAD},k{tokens} x{HEADS}" in ours, ours  # P V
    fused = fuse(mod, tvm.target.Target({"kind": "llvm"}))
    names = [gv.name_hint for gv, f in fused.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert any("matmul" in name and "multiply" in name for name in names), names  # the scale fused into Q K^T
    x = np.random.default_rng(1).standard_normal((1, tokens, HEADS * HEAD)).astype(np.float32)
    got, ref = _untuned(mod, x), _ort(model, x)
    assert got.shape == ref.shape and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def test_padded_product_broadcasts_batch_dimensions_and_reads_a_transposed_operand():
    from tvm import te

    rng = np.random.default_rng(3)
    cases = [((2, 3, 5, 8), (3, 8, 7), False, 16), ((1, 5, 8), (2, 3, 7, 8), True, 16),
             ((2, 1, 5, 8), (1, 3, 8, 7), False, 16), ((1, 5, 8), (3, 8, 7), False, 7), ((3, 5, 8), (3, 7, 8), True, 7)]
    for a_shape, b_shape, transposed, padded in cases:
        a, b = te.placeholder(a_shape, name="a"), te.placeholder(b_shape, name="b")
        c = padded_product(a, b, 7, padded, transposed)
        f = tvm.compile(te.create_prim_func([a, b, c]), target="llvm")
        x, y = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
        ref = x @ (np.swapaxes(y, -1, -2) if transposed else y)
        out = tvm.runtime.tensor(np.zeros(ref.shape, np.float32))
        f(tvm.runtime.tensor(x), tvm.runtime.tensor(y), out)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_padded_product_in_bf16_is_the_product_of_the_same_bf16_values():
    """bf16 (a bf16 network's attention): both operands rounded to bf16 and B packed in pairs inside the function,
    an odd K padded with zeros, N padded, batch dimensions broadcast, a transposed B: the float64 product of the
    same bf16 values, to fp32 accumulation's tolerance."""
    from tvm import te

    from tvm_ttile import bfloat16

    rng = np.random.default_rng(5)
    cases = [((2, 3, 5, 9), (3, 9, 7), False, 16), ((1, 5, 8), (2, 3, 7, 8), True, 16),
             ((3, 13, 13), (3, 13, 7), False, 7)]
    for a_shape, b_shape, transposed, padded in cases:
        a, b = te.placeholder(a_shape, name="a"), te.placeholder(b_shape, name="b")
        c = padded_product(a, b, 7, padded, transposed, precision="bf16")
        f = tvm.compile(te.create_prim_func([a, b, c]), target="llvm")
        x, y = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
        xb, yb = (bfloat16.values(bfloat16.bits(v)).astype(np.float64) for v in (x, y))
        ref = xb @ (np.swapaxes(yb, -1, -2) if transposed else yb)
        out = tvm.runtime.tensor(np.zeros(ref.shape, np.float32))
        f(tvm.runtime.tensor(x), tvm.runtime.tensor(y), out)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)
        assert np.abs(out.numpy() - x @ (np.swapaxes(y, -1, -2) if transposed else y)).max() > 1e-5  # bf16, not fp32


def test_padded_product_in_int8_is_the_exact_product_with_the_right_operand_shifted_to_s8():
    """int8 (a quantized network's attention): u8 x u8 as u8 x (u8 - 128) on the s8 instruction, K padded to groups
    of 4 with zeros, N padded, broadcast and transposed operands: numpy's integer product, exactly."""
    from tvm import te

    rng = np.random.default_rng(6)
    cases = [((2, 3, 5, 9), (3, 9, 7), False, 16), ((1, 5, 8), (2, 3, 7, 8), True, 16),
             ((3, 13, 13), (3, 13, 7), False, 7)]
    for a_shape, b_shape, transposed, padded in cases:
        a, b = te.placeholder(a_shape, "uint8", name="a"), te.placeholder(b_shape, "uint8", name="b")
        c = padded_product(a, b, 7, padded, transposed, precision="int8")
        f = tvm.compile(te.create_prim_func([a, b, c]), target="llvm")
        x, y = (rng.integers(0, 256, s).astype(np.uint8) for s in (a_shape, b_shape))
        yt = np.swapaxes(y, -1, -2) if transposed else y
        ref = x.astype(np.int64) @ (yt.astype(np.int64) - 128)
        out = tvm.runtime.tensor(np.zeros(ref.shape, np.int32))
        f(tvm.runtime.tensor(x), tvm.runtime.tensor(y), out)
        np.testing.assert_array_equal(out.numpy(), ref)


@pytest.mark.parametrize("tokens", [197, 13])
def test_a_bf16_network_computes_attention_in_bf16(tokens, tmp_path, small_catalog):
    """In a bf16 network, Q K^T and P V (two activations) are bf16 tvm_ttile tasks, reported as bf16; where the CPU
    has AVX512_BF16, tuned they verify and the build is within bf16's rounding of ONNX Runtime's fp32."""
    from tvm.relax.frontend.onnx import from_onnx

    from tvm_ttile import network as nw
    from tvm_ttile.context import Context
    from tvm_ttile.precision import dot_product
    from tvm_ttile.relax.bf16 import Bf16Report

    model = _attention(tokens, tokens == 197)
    report = Bf16Report()
    mod = prepare(from_onnx(model, keep_params_in_input=False), precision="bf16", bf16_report=report)
    assert not report.kept_fp32 and sum(" x [1, " in layer for layer in report.bf16) == 2, report
    lanes = detect_host().lanes
    padded = -(-tokens // lanes) * lanes
    ours = {t.shape: t.name for t in extract_tasks(mod) if t.policy == "tvm_ttile"}
    for shape in (f"matmul i{tokens},j{padded},k{HEAD} x{HEADS}",
                  f"matmul i{tokens},j{HEAD},k{tokens + tokens % 2} x{HEADS}"):
        assert "bf16_matmul" in ours.get(shape, ""), ours  # Q K^T (padded columns), P V (K padded to pairs)
    if dot_product("bf16", detect_host()) is None:
        return
    ctx = Context.make(precision="bf16", work_dir=str(tmp_path / "net"))
    res = nw.tune_network(mod, ctx, trials_per_task=2, memory_bound=False, progress=False)
    scores = [t for t in res.tasks if t.shape.endswith(f" x{HEADS}")]
    assert len(scores) == 2 and all(t.policy == "tvm_ttile" and t.verified and t.trials for t in scores), scores
    x = np.random.default_rng(2).standard_normal((1, tokens, HEADS * HEAD)).astype(np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "net"), ctx), x)
    ref = _ort(model, x)
    assert np.abs(got - ref).max() <= 2e-2 * np.abs(ref).max()


@pytest.mark.parametrize("fused", [True, False])
def test_a_tuned_attention_at_197_tokens_matches(fused, tmp_path, small_catalog):
    """Fused (and masked): each of its schedules measured, the fastest verified; unfused: Q K^T and P V tuned."""
    from tvm.relax.frontend.onnx import from_onnx

    from tvm_ttile import network as nw

    model = _attention(197, True, mask=fused)
    mod = prepare(from_onnx(model, keep_params_in_input=False), fused_attention=fused)
    res = nw.tune_network(mod, work_dir=str(tmp_path / "net"), trials_per_task=2, memory_bound=False, progress=False)
    if not fused:
        scores = [t for t in res.tasks if t.policy == "tvm_ttile" and t.shape.endswith(f" x{HEADS}")]  # Q K^T, P V
        assert len(scores) == 2
    else:
        scores = [t for t in res.tasks if t.policy == "attention"]
        fitting = attention.fitting_variants(HEAD, detect_host().lanes)
        assert len(scores) == 1 and scores[0].trials == len(fitting), [(t.shape, t.trials) for t in scores]
        assert scores[0].made_by in {x.name for x in fitting}
    assert all(t.verified and t.trials for t in scores), [(t.shape, t.verified) for t in scores]
    x = np.random.default_rng(2).standard_normal((1, 197, HEADS * HEAD)).astype(np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "net")), x)
    ref = _ort(model, x)
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()


def _broadcast_batch():
    """x[2, 3, 16, 32] @ s[3, 32, 16], s = x's first sample transposed: batch dimensions that broadcast."""
    nodes = [helper.make_node("Slice", ["x", "zero", "one", "zero"], ["x0"]),
             helper.make_node("Squeeze", ["x0", "zero"], ["x1"]),
             helper.make_node("Transpose", ["x1"], ["s"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["x", "s"], ["out"])]
    inits = [numpy_helper.from_array(np.array([v], np.int64), name) for v, name in ((0, "zero"), (1, "one"))]
    graph = helper.make_graph(nodes, "broadcast",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 3, 16, 32))],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_a_batch_matmul_with_broadcast_batch_dimensions_is_tuned_and_matches(tmp_path, small_catalog):
    from tvm.relax.frontend.onnx import from_onnx

    from tvm_ttile import network as nw

    model = _broadcast_batch()
    mod = prepare(from_onnx(model, keep_params_in_input=False))
    res = nw.tune_network(mod, work_dir=str(tmp_path / "net"), trials_per_task=2, memory_bound=False, progress=False)
    ours = [t for t in res.tasks if t.policy == "tvm_ttile"]
    assert [t.shape for t in ours] == ["matmul i16,j16,k32 x6"] and ours[0].verified and ours[0].trials
    x = np.random.default_rng(4).standard_normal((2, 3, 16, 32)).astype(np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "net")), x)
    ref = _ort(model, x)
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
