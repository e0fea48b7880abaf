"""Conv chains fused in the run plan (registry/conv_chains.py): which chains
run as one FusedConv (and BatchNormalization + Relu as one
BatchNormalization), that no result changes by one bit, and the runs that
go node by node instead."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.registry import conv_chains
from onnx_light_cpu.registry.check import check_model

RNG = np.random.default_rng(7)

# (C, M, kernel, stride, group, size): one shape per Conv path
PATHS = {
    "winograd": (16, 16, 3, 1, 1, 9),
    "im2col": (5, 8, 3, 2, 1, 11),
    "gemm": (6, 12, 1, 1, 1, 9),
    # two blocks of k (the micro-kernels add the bias, Z and the
    # activation to the second block's sums), a partial row block, 81
    # pixels: two whole panels (epilogue in registers) and a part (not)
    "gemm_deep": (300, 30, 1, 1, 1, 9),
    "im2col_deep": (40, 20, 3, 2, 1, 11),
    "gemm_t": (320, 40, 1, 1, 1, 2),
    "depthwise": (8, 8, 3, 1, 8, 10),
}


@pytest.fixture(autouse=True)
def _global_setting():
    conv_chains.GLOBAL_SETTING["fuse_conv"] = True
    yield
    conv_chains.GLOBAL_SETTING["fuse_conv"] = True


def _chain_model(path="winograd", add="after", act="Relu", bounds=(0.0, 6.0), extra=()):
    """Conv -> [Add] -> [act]; ``add`` "after" (Add(c, Z)), "before"
    (Add(Z, c)) or None; ``extra`` nodes appended (they may read c or s)."""
    C, M, k, stride, group, _ = PATHS[path]
    inits = [nh.from_array(RNG.standard_normal((M, C // group, k, k)).astype(np.float32), "W"),
             nh.from_array(RNG.standard_normal(M).astype(np.float32), "B")]
    nodes = [oh.make_node("Conv", ["X", "W", "B"], ["c"], pads=[k // 2] * 4,
                          strides=[stride] * 2, group=group, name="conv")]
    last = "c"
    if add:
        nodes.append(oh.make_node("Add", ["c", "Z"] if add == "after" else ["Z", "c"], ["s"]))
        last = "s"
    if act == "Relu":
        nodes.append(oh.make_node("Relu", [last], ["y"]))
        last = "y"
    elif act == "Clip":
        inits += [nh.from_array(np.array(bounds[0], np.float32), "lo"),
                  nh.from_array(np.array(bounds[1], np.float32), "hi")]
        nodes.append(oh.make_node("Clip", [last, "lo", "hi"], ["y"]))
        last = "y"
    nodes += list(extra)
    graph = oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info("X", T.FLOAT, None),
                     oh.make_tensor_value_info("Z", T.FLOAT, None)],
        [oh.make_tensor_value_info(last, T.FLOAT, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _feeds(path="winograd", dtype=np.float32, z_shape=None):
    C, M, k, stride, _, size = PATHS[path]
    out = (size + 2 * (k // 2) - k) // stride + 1
    x = RNG.standard_normal((1, C, size, size)).astype(dtype)
    x[0, 0, 0, :2] = np.nan  # NaN and -0 reach the epilogue: Relu keeps both
    x[0, 1] = 0.0
    z = RNG.standard_normal(z_shape or (1, M, out, out)).astype(dtype)
    z.reshape(-1)[:5] = -0.0
    return {"X": x, "Z": z}


def _session(model, fuse_conv=True, threads=1):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess, fuse_conv=fuse_conv)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess


def _plan_ops(sess):
    return [entry[0].__self__.onnx_node.op_type for entry in sess._olc_plan]


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint8 if a.dtype.itemsize == 1 else f"u{a.dtype.itemsize}"),
        b.view(np.uint8 if b.dtype.itemsize == 1 else f"u{b.dtype.itemsize}"))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("add,act", [("after", "Relu"), ("before", "Relu"), (None, "Relu"),
                                     ("after", "Clip"), (None, "Clip"), ("after", None)])
def test_chain_runs_fused_with_the_same_bits(path, add, act, threads):
    model = _chain_model(path, add, act)
    fused, plain = _session(model, threads=threads), _session(model, fuse_conv=False)
    feeds = _feeds(path)
    (y,) = fused.run(None, feeds)
    (expected,) = plain.run(None, feeds)
    assert _plan_ops(fused) == ["FusedConv"]
    assert _same_bits(y, expected)
    assert olc.used_kernel_names(fused) == ["onnx_light_cpu::FusedConv"]
    assert "onnx_light_cpu::Conv" in olc.used_kernel_names(plain)
    (again,) = fused.run(None, feeds)  # the plan of a known signature
    assert _same_bits(again, expected)


def test_residual_computed_after_the_conv():
    """ResNet's downsample block: Z is the shortcut Conv's output, computed
    after the main Conv; the chain runs where its Relu stood."""
    W = nh.from_array(RNG.standard_normal((8, 4, 3, 3)).astype(np.float32), "W")
    S = nh.from_array(RNG.standard_normal((8, 4, 1, 1)).astype(np.float32), "S")
    graph = oh.make_graph(
        [oh.make_node("Conv", ["X", "W"], ["c"], pads=[1, 1, 1, 1]),
         oh.make_node("Conv", ["X", "S"], ["short"]),
         oh.make_node("Add", ["c", "short"], ["s"]),
         oh.make_node("Relu", ["s"], ["y"])],
        "g", [oh.make_tensor_value_info("X", T.FLOAT, None)],
        [oh.make_tensor_value_info("y", T.FLOAT, None)], [W, S])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    x = RNG.standard_normal((2, 4, 6, 6)).astype(np.float32)
    fused, plain = _session(model), _session(model, fuse_conv=False)
    assert _plan_ops(fused) == ["Conv", "FusedConv"]
    assert _same_bits(fused.run(None, {"X": x})[0], plain.run(None, {"X": x})[0])


@pytest.mark.parametrize("case", ["broadcast_z", "float64"])
def test_inputs_fused_conv_does_not_take_run_node_by_node(case):
    model = _chain_model("im2col", "after", "Relu")
    feeds = (_feeds("im2col", z_shape=(1, 8, 1, 1)) if case == "broadcast_z"
             else _feeds("im2col", dtype=np.float64))
    if case == "float64":
        model = _chain_model("im2col", "after", "Relu")
        for init in model.graph.initializer:
            init.CopyFrom(nh.from_array(nh.to_array(init).astype(np.float64), init.name))
    fused, plain = _session(model), _session(model, fuse_conv=False)
    (y,) = fused.run(None, feeds)
    assert _plan_ops(fused) == ["FusedConv"]
    assert _same_bits(y, plain.run(None, feeds)[0])
    used = olc.used_kernel_names(fused)
    assert "onnx_light_cpu::FusedConv" not in used and "onnx_light_cpu::Add" in used
    # and back to fused when the inputs allow it again
    if case == "broadcast_z":
        feeds = _feeds("im2col")
        assert _same_bits(fused.run(None, feeds)[0], plain.run(None, feeds)[0])
        assert "onnx_light_cpu::FusedConv" in olc.used_kernel_names(fused)


def test_asking_for_an_intermediate_runs_every_node():
    model = _chain_model("gemm", "after", "Relu")
    fused, plain = _session(model), _session(model, fuse_conv=False)
    feeds = _feeds("gemm")
    got = fused.run(["c", "y"], feeds)
    expected = plain.run(["c", "y"], feeds)
    assert all(_same_bits(a, b) for a, b in zip(got, expected))
    everything = fused.run(None, feeds, intermediate=True)
    assert _same_bits(everything["s"], plain.run(["s"], feeds)[0])


@pytest.mark.parametrize("case", ["c_is_output", "c_read_twice", "clip_min_above_max",
                                  "clip_bound_fed", "add_of_c_and_c"])
def test_chains_left_alone(case):
    if case == "c_is_output":
        model = _chain_model("gemm", None, "Relu")
        model.graph.output.append(oh.make_tensor_value_info("c", T.FLOAT, None))
    elif case == "c_read_twice":
        model = _chain_model("gemm", None, "Relu", extra=[oh.make_node("Neg", ["c"], ["n"])])
        model.graph.output.append(oh.make_tensor_value_info("n", T.FLOAT, None))
    elif case == "clip_min_above_max":
        model = _chain_model("gemm", None, "Clip", bounds=(1.0, -1.0))
    elif case == "clip_bound_fed":
        model = _chain_model("gemm", None, "Clip")
        model.graph.input.append(oh.make_tensor_value_info("hi", T.FLOAT, []))
        model.ir_version = 3  # an initializer listed as an input may be fed
        model.opset_import[0].version = 11
    else:
        model = _chain_model("gemm", None, None, extra=[
            oh.make_node("Add", ["c", "c"], ["y"])])
        model.graph.output[0].name = "y"
    fused, plain = _session(model), _session(model, fuse_conv=False)
    assert "FusedConv" not in _plan_ops(fused)
    feeds = _feeds("gemm")
    for a, b in zip(fused.run(None, feeds), plain.run(None, feeds)):
        assert _same_bits(a, b)


def test_opt_outs(monkeypatch):
    model = _chain_model("gemm", "after", "Relu")
    assert _plan_ops(_session(model)) == ["FusedConv"]
    assert _plan_ops(_session(model, fuse_conv=False)) == ["Conv", "Add", "Relu"]
    monkeypatch.setenv(conv_chains.ENV_VAR, "0")
    assert _plan_ops(_session(model)) == ["Conv", "Add", "Relu"]
    monkeypatch.delenv(conv_chains.ENV_VAR)
    try:
        olc.register_kernels_global(fuse_conv=False)
        assert _plan_ops(ReferenceEvaluator(model)) == ["Conv", "Add", "Relu"]
        olc.register_kernels_global()
        assert _plan_ops(ReferenceEvaluator(model)) == ["FusedConv"]
    finally:
        olc.unregister_kernels_global()


def test_check_says_how_many_chains_fuse():
    lines = check_model(_chain_model("gemm", "after", "Relu")).lines()
    assert lines[-1] == ("conv chains: 1 chain of Conv, Add and/or Relu or Clip run as one "
                         "FusedConv each")
    assert not any(line.startswith("conv chains") for line in
                   check_model(_chain_model("gemm", None, None)).lines())


def test_bad_input_is_the_conv_s_error_and_inputs_stay():
    """A chain whose Conv cannot run raises the Conv node's own error, and
    no run writes into its inputs."""
    model = _chain_model("im2col", "after", "Relu")
    fused = _session(model)
    feeds = _feeds("im2col")
    kept = {name: value.copy() for name, value in feeds.items()}
    fused.run(None, feeds)
    assert all(_same_bits(feeds[name], kept[name]) for name in feeds)
    with pytest.raises(ValueError, match="Conv"):
        fused.run(None, {"X": feeds["X"][:, :3], "Z": feeds["Z"]})


# ---- BatchNormalization + Relu (NormRelu) ----

def _norm_relu_model(extra=(), outputs=("y",), training=False, opset=15):
    c = 6
    inits = [nh.from_array(RNG.standard_normal(c).astype(np.float32), name)
             for name in ("scale", "bias", "mean")]
    inits.append(nh.from_array((RNG.random(c) + 0.5).astype(np.float32), "var"))
    nodes = [oh.make_node("BatchNormalization", ["X", "scale", "bias", "mean", "var"], ["n"],
                          epsilon=1e-3, **({"training_mode": 1} if training else {})),
             oh.make_node("Relu", ["n"], ["y"]), *extra]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("X", T.FLOAT, None)],
                          [oh.make_tensor_value_info(o, T.FLOAT, None) for o in outputs], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _norm_feeds(dtype=np.float32):
    x = RNG.standard_normal((2, 6, 5, 7)).astype(dtype)
    x[0, 0, 0, :2] = np.nan  # NaN passes Relu as it comes
    x[1, 2] = -np.inf
    return {"X": x}


@pytest.mark.parametrize("threads", [1, 2])
def test_norm_relu_runs_as_one_node_with_the_same_bits(threads):
    model = _norm_relu_model()
    fused, plain = _session(model, threads=threads), _session(model, fuse_conv=False)
    assert _plan_ops(fused) == ["BatchNormalization"]
    assert _plan_ops(plain) == ["BatchNormalization", "Relu"]
    feeds = _norm_feeds()
    (y,) = fused.run(None, feeds)
    assert _same_bits(y, plain.run(None, feeds)[0])
    assert np.isnan(y[0, 0, 0, :2]).all() and (y[~np.isnan(y)] >= 0).all()
    assert olc.used_kernel_names(fused) == ["onnx_light_cpu::BatchNormalization"]
    assert _same_bits(fused.run(["n", "y"], feeds)[1], y)  # the unfused plan


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("level", ["scalar", "avx2", "avx512"])
def test_norm_relu_keeps_nan_and_negative_zero_at_every_level(level, threads):
    """The Relu runs inside the normalization's vectors: channel 0 comes out
    -0 exactly ((x - mean) 0 times a negative scale, plus a bias of -0),
    which Relu keeps, as it keeps NaN; rows of 35 take the vector tails."""
    model = _norm_relu_model()
    values = {"scale": [-1.5, 2.0, 0.5, -3.0, 1.0, 0.25], "bias": [-0.0, 0.5, -1.0, 0.0, 2.0, -2.0],
              "mean": [0.25, 0.0, 1.0, -1.0, 0.5, 0.0]}
    for init in model.graph.initializer:
        if init.name in values:
            init.CopyFrom(nh.from_array(np.array(values[init.name], np.float32), init.name))
    feeds = _norm_feeds()
    feeds["X"][:, 0] = 0.25
    feeds["X"][1, 0, 1, :3] = np.nan
    with olc.simd.capped_simd_level(level):
        fused = _session(model, threads=threads)
        plain = _session(model, fuse_conv=False)
        (y,) = fused.run(None, feeds)
        assert _same_bits(y, plain.run(None, feeds)[0])
    zeros = y[0, 0]
    assert (zeros == 0).all() and np.signbit(zeros).all()
    assert np.isnan(y[1, 0, 1, :3]).all()
    assert olc.used_kernel_names(fused) == ["onnx_light_cpu::BatchNormalization"]


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_norm_relu_of_other_types_runs_node_by_node(dtype):
    model = _norm_relu_model()
    for init in model.graph.initializer:
        init.CopyFrom(nh.from_array(nh.to_array(init).astype(dtype), init.name))
    fused, plain = _session(model), _session(model, fuse_conv=False)
    feeds = _norm_feeds(dtype)
    (y,) = fused.run(None, feeds)
    assert y.dtype == dtype and _same_bits(y, plain.run(None, feeds)[0])
    assert "onnx_light_cpu::Relu" in olc.used_kernel_names(fused)


@pytest.mark.parametrize("case", ["n_is_output", "n_read_twice", "training"])
def test_norm_relu_left_alone(case):
    if case == "n_is_output":
        model = _norm_relu_model(outputs=("y", "n"))
    elif case == "n_read_twice":
        model = _norm_relu_model(extra=[oh.make_node("Neg", ["n"], ["m"])], outputs=("y", "m"))
    else:
        model = _norm_relu_model(training=True)
    fused, plain = _session(model), _session(model, fuse_conv=False)
    assert "Relu" in _plan_ops(fused)
    feeds = {"X": RNG.standard_normal((2, 6, 5, 7)).astype(np.float32)}
    for a, b in zip(fused.run(None, feeds), plain.run(None, feeds)):
        assert _same_bits(a, b)


# ---- Concat + BatchNormalization + Relu (NormRelu with its Concat) ----

def _dense_model(axis=1, extra=(), outputs=("y",), parts=(3, 1, 2)):
    """DenseNet's pre-activation: Concat(A, B, C) along the channels, then
    BatchNormalization and Relu; the parts stay graph inputs."""
    c = sum(parts)
    names = [f"p{i}" for i in range(len(parts))]
    inits = [nh.from_array(RNG.standard_normal(c).astype(np.float32), name)
             for name in ("scale", "bias", "mean")]
    inits.append(nh.from_array((RNG.random(c) + 0.5).astype(np.float32), "var"))
    nodes = [oh.make_node("Concat", names, ["j"], axis=axis),
             oh.make_node("BatchNormalization", ["j", "scale", "bias", "mean", "var"], ["n"],
                          epsilon=1e-3),
             oh.make_node("Relu", ["n"], ["y"]), *extra]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info(n, T.FLOAT, None)
                                       for n in names],
                          [oh.make_tensor_value_info(o, T.FLOAT, None) for o in outputs], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 15)])


def _dense_feeds(parts=(3, 1, 2), n=2, dtype=np.float32):
    feeds = {f"p{i}": RNG.standard_normal((n, c, 5, 7)).astype(dtype)
             for i, c in enumerate(parts)}
    feeds["p0"][0, 0, 0, :2] = np.nan
    feeds["p2"][1, 0] = -np.inf
    return feeds


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("axis", [1, -3])
def test_concat_norm_relu_reads_the_parts_with_the_same_bits(axis, threads):
    model = _dense_model(axis=axis)
    fused, plain = _session(model, threads=threads), _session(model, fuse_conv=False)
    assert _plan_ops(fused) == ["BatchNormalization"]
    assert _plan_ops(plain) == ["Concat", "BatchNormalization", "Relu"]
    feeds = _dense_feeds()
    kept = {k: v.copy() for k, v in feeds.items()}
    (y,) = fused.run(None, feeds)
    assert _same_bits(y, plain.run(None, feeds)[0])
    assert all(_same_bits(feeds[k], kept[k]) for k in feeds)
    assert sorted(olc.used_kernel_names(fused)) == ["onnx_light_cpu::BatchNormalization",
                                                    "onnx_light_cpu::Concat"]
    assert _same_bits(fused.run(["j", "y"], feeds)[1], y)  # the unfused plan


@pytest.mark.parametrize("case", ["strided", "float64", "wrong_channels", "one_image_1d",
                                  "empty_rows", "empty_batch", "empty_part", "byteswapped"])
def test_concat_norm_relu_other_inputs_run_the_concat(case):
    """Parts it does not read in place go through the Concat node: the
    same results or the same errors as the nodes one by one."""
    model = _dense_model()
    feeds = _dense_feeds()
    if case == "strided":
        feeds["p1"] = np.repeat(feeds["p1"], 2, axis=3)[..., ::2]
    elif case == "float64":
        model = _dense_model()
        feeds = _dense_feeds(dtype=np.float64)
    elif case == "wrong_channels":
        feeds["p2"] = feeds["p2"][:, :1]
    elif case == "byteswapped":  # float32 too, but not in this machine's order
        feeds["p1"] = feeds["p1"].astype(">f4")
    elif case.startswith("empty"):
        sl = {"empty_rows": np.s_[:, :, :0], "empty_batch": np.s_[:0]}.get(case)
        feeds = {k: np.ascontiguousarray(v[sl]) for k, v in feeds.items()} if sl else feeds
        if case == "empty_part":  # a part of no channels: still the join of the others
            model = _dense_model(parts=(3, 0, 3))
            feeds = _dense_feeds(parts=(3, 0, 3))
    else:
        feeds = {k: v[:1, :, 0] for k, v in feeds.items()}
    fused, plain = _session(model), _session(model, fuse_conv=False)
    try:
        expected = plain.run(None, feeds)
    except (ValueError, TypeError) as e:
        with pytest.raises(type(e)):
            fused.run(None, feeds)
        return
    for a, b in zip(fused.run(None, feeds), expected):
        assert _same_bits(a, b)


@pytest.mark.parametrize("case", ["join_is_output", "join_read_twice", "axis_2"])
def test_concat_norm_relu_keeps_the_concat(case):
    if case == "join_is_output":
        model = _dense_model(outputs=("y", "j"))
    elif case == "join_read_twice":
        model = _dense_model(extra=[oh.make_node("Neg", ["j"], ["m"])], outputs=("y", "m"))
    else:
        model = _dense_model(axis=2)
    fused, plain = _session(model), _session(model, fuse_conv=False)
    assert "Concat" in _plan_ops(fused)
    feeds = _dense_feeds() if case != "axis_2" else {
        f"p{i}": RNG.standard_normal((2, 6, c, 7)).astype(np.float32)
        for i, c in enumerate((3, 1, 2))}
    for a, b in zip(fused.run(None, feeds), plain.run(None, feeds)):
        assert _same_bits(a, b)


# ---- Sigmoid + Mul [+ Mul] (SiluGate) ----

def _silu_model(gate=True, extra=(), outputs=None, first=("x", "s"), second=("g", "u")):
    """Sigmoid(x) -> s, Mul(*first) -> g [, Mul(*second) -> y] as the model
    builder writes the SwiGLU MLP of Llama and Qwen."""
    nodes = [oh.make_node("Sigmoid", ["x"], ["s"]), oh.make_node("Mul", list(first), ["g"])]
    if gate:
        nodes.append(oh.make_node("Mul", list(second), ["y"]))
    nodes += list(extra)
    outputs = outputs or (("y",) if gate else ("g",))
    graph = oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info(n, T.FLOAT, None) for n in ("x", "u")],
        [oh.make_tensor_value_info(o, T.FLOAT, None) for o in outputs])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


def _silu_feeds(shape=(2, 3, 6007), dtype=np.float32):
    x = (RNG.standard_normal(shape) * 8).astype(np.float32)
    u = RNG.standard_normal(shape).astype(np.float32)
    flat_x, flat_u = x.reshape(-1), u.reshape(-1)
    if flat_x.size < 16:
        return {"x": x.astype(dtype), "u": u.astype(dtype)}
    flat_x[:10] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 100.0, -100.0, 88.7]
    # NaN payloads in both operands: the fused products keep the left one,
    # as the Mul kernel does (and Sigmoid of a NaN flips its sign)
    flat_x.view(np.uint32)[10:13] = [0x7FC00123, 0xFFC00456, 0x7F800001]
    flat_u.view(np.uint32)[10:12] = [0x7FC00789, 0xFFC00777]
    flat_u.view(np.uint32)[13] = 0x7FC00AAA
    flat_u[14:16] = [np.inf, 0.0]
    with np.errstate(invalid="ignore"):  # NaN payloads into float16
        return {"x": x.astype(dtype), "u": u.astype(dtype)}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("gate", [True, False])
@pytest.mark.parametrize("level", ["scalar", "avx2", "avx512"])
def test_silu_gate_runs_as_one_entry_with_the_same_bits(threads, gate, level):
    model = _silu_model(gate)
    fused, plain = _session(model, threads=threads), _session(model, fuse_conv=False)
    assert _plan_ops(fused) == ["Mul"]
    assert _plan_ops(plain) == ["Sigmoid", "Mul"] + ["Mul"] * gate
    feeds = _silu_feeds()
    with olc.simd.capped_simd_level(level) as used:
        (y,) = fused.run(None, feeds)
        assert _same_bits(y, plain.run(None, feeds)[0])
    assert set(olc.used_kernel_paths(fused)) == {
        f"silu_gate_float32_{olc.simd.code_level_name(used)}"}
    assert sorted(olc.used_kernel_names(fused)) == [
        "onnx_light_cpu::Mul", "onnx_light_cpu::Sigmoid"]
    assert _same_bits(fused.run(["s", "g"], feeds)[1], plain.run(["g"], feeds)[0])


def test_silu_gate_of_other_inputs_runs_node_by_node():
    model = _silu_model()
    fused, plain = _session(model), _session(model, fuse_conv=False)
    for feeds in (_silu_feeds(dtype=np.float16), _silu_feeds(dtype=np.float64),
                  {"x": _silu_feeds()["x"], "u": _silu_feeds((2, 1, 6007))["u"]},
                  {"x": _silu_feeds((3, 0, 4))["x"], "u": _silu_feeds((3, 0, 4))["u"]}):
        (y,) = fused.run(None, feeds)
        assert _same_bits(y, plain.run(None, feeds)[0])
    assert "onnx_light_cpu::Sigmoid" in olc.used_kernel_names(fused)


def test_silu_gate_reads_strided_and_read_only_inputs_and_leaves_them():
    model = _silu_model()
    fused, plain = _session(model, threads=2), _session(model, fuse_conv=False)
    feeds = {name: value[:, :, ::2] for name, value in _silu_feeds((2, 3, 40000)).items()}
    for value in feeds.values():
        value.flags.writeable = False
    kept = {name: value.copy() for name, value in feeds.items()}
    (y,) = fused.run(None, feeds)
    assert _same_bits(y, plain.run(None, feeds)[0])
    assert all(_same_bits(feeds[name], kept[name]) for name in feeds)


@pytest.mark.parametrize("case,ops", [
    ("s_is_output", ["Sigmoid", "Mul", "Mul"]),
    ("s_read_twice", ["Sigmoid", "Mul", "Mul", "Neg"]),
    ("sigmoid_first", ["Sigmoid", "Mul", "Mul"]),
    ("g_is_output", ["Mul", "Mul"]),
    ("g_read_twice", ["Mul", "Mul", "Neg"]),
    ("u_first", ["Mul", "Mul"]),
])
def test_silu_gate_left_alone_or_cut_short(case, ops):
    """No fusion where s is needed on its own or Mul reads it first; the
    gate stays a node of its own where g is needed or the Mul reads u first."""
    kwargs = {
        "s_is_output": {"outputs": ("y", "s")},
        "s_read_twice": {"extra": [oh.make_node("Neg", ["s"], ["n"])], "outputs": ("y", "n")},
        "sigmoid_first": {"first": ("s", "x")},
        "g_is_output": {"outputs": ("y", "g")},
        "g_read_twice": {"extra": [oh.make_node("Neg", ["g"], ["n"])], "outputs": ("y", "n")},
        "u_first": {"second": ("u", "g")},
    }[case]
    model = _silu_model(**kwargs)
    fused, plain = _session(model), _session(model, fuse_conv=False)
    assert _plan_ops(fused) == ops
    feeds = _silu_feeds()
    for a, b in zip(fused.run(None, feeds), plain.run(None, feeds)):
        assert _same_bits(a, b)


def test_silu_gate_bad_input_is_the_nodes_error():
    fused = _session(_silu_model())
    with pytest.raises(TypeError, match="Sigmoid"):
        fused.run(None, {"x": np.ones((2, 3), np.int32), "u": np.ones((2, 3), np.int32)})
    with pytest.raises(ValueError, match="Mul"):
        fused.run(None, {"x": np.ones((2, 3), np.float32), "u": np.ones((4, 3), np.float32)})


_SPECIALS = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 88.7, -88.7, 3.4e38],
                     np.float32)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(shape=st.lists(st.integers(0, 9), min_size=0, max_size=4), seed=st.integers(0, 2**32 - 1),
       layout=st.sampled_from(["contiguous", "fortran", "strided", "reversed"]),
       gate=st.booleans(), threads=st.sampled_from([1, 2]))
def test_silu_gate_property_same_bits_as_the_nodes(shape, seed, layout, gate, threads):
    """Any shape (0-d and empty included), layout and special values: the
    fused entry gives the unfused plan's bits and leaves its inputs alone."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in ("x", "u"):
        flat = (rng.standard_normal(max(1, int(np.prod(shape)) * 2)) * 8).astype(np.float32)
        flat[rng.random(flat.size) < 0.2] = rng.choice(_SPECIALS)
        flat.view(np.uint32)[rng.random(flat.size) < 0.05] = rng.integers(
            0x7F800001, 0x80000000, dtype=np.uint32)  # NaN payloads
        value = flat[:int(np.prod(shape))].reshape(shape)
        if layout == "fortran":
            value = np.asfortranarray(value)
        elif layout == "strided" and value.ndim:
            value = flat[:2 * value.size:2].reshape(shape) if value.size else value
        elif layout == "reversed" and value.ndim:
            value = value[..., ::-1]
        feeds[name] = value
    model = _silu_model(gate)
    fused, plain = _session(model, threads=threads), _session(model, fuse_conv=False)
    kept = {name: value.copy() for name, value in feeds.items()}
    (y,) = fused.run(None, feeds)
    assert _same_bits(y, plain.run(None, feeds)[0])
    assert all(_same_bits(feeds[name], kept[name]) for name in feeds)
    assert "onnx_light_cpu::Sigmoid" in olc.used_kernel_names(fused)
