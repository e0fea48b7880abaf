"""MatMul and Gemm against a float64 oracle, the built-ins and NumPy.

Float tolerances scale with K: float32 accumulation errs by about
K * eps32 * sum |a| |b|; half types are rounded once at the end.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level, code_level_name

from differential import check_node, element_type, node_model, run_ours, same_bits

FLOATS = [np.float32, np.float16, bfloat16]
INTS = [np.int32, np.int64, np.uint32, np.uint64]
# One rounding of the output type, relative.
ROUNDING = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2e-3,
            np.dtype(bfloat16): 1.6e-2, np.dtype(np.float64): 0.0}

# (M, K, N): 1, odd, prime, off-tile sizes, K past one packed block (256),
# N past one tile (512), M past one row tile (128); panels of 32 columns
# ending in 1-8 columns (the 8-lane edge kernel at AVX-512), 9-16 (the half
# kernel) and more.
SHAPES = [(1, 1, 1), (1, 7, 1), (3, 5, 7), (17, 13, 31), (8, 32, 32), (9, 33, 33),
          (7, 257, 65), (1, 300, 129), (1, 64, 1000), (130, 300, 70), (31, 600, 545),
          (2, 3, 1), (1, 1, 40), (13, 19, 44), (5, 40, 16), (14, 27, 57)]


def _random(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 7, size=shape).astype(dtype)
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


def _tolerance(dtype, K):
    """(rtol, atol) for a product summed over K of values in [-1, 1]."""
    dtype = np.dtype(dtype)
    eps = 2.2e-16 if dtype == np.float64 else 1.2e-7
    return (ROUNDING[dtype] + 4 * eps, 4 * max(K, 1) * eps + 1e-30)


def _matmul64(a, b):
    return [np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)]


@pytest.mark.parametrize("dtype", FLOATS + [np.float64], ids=lambda d: np.dtype(d).name)
def test_matmul_2d_matches_float64(dtype):
    rng = np.random.default_rng(0)
    for M, K, N in SHAPES:
        a, b = _random(rng, (M, K), dtype), _random(rng, (K, N), dtype)
        check_node("MatMul", [a, b], oracle=_matmul64, tolerance=_tolerance(dtype, K))


@pytest.mark.parametrize("dtype", FLOATS + [np.float64], ids=lambda d: np.dtype(d).name)
def test_matmul_batched_and_1d(dtype):
    rng = np.random.default_rng(1)
    pairs = [((2, 3, 4, 5), (5, 6)), ((2, 1, 4, 5), (3, 5, 6)), ((4, 5), (2, 5, 6)),
             ((5,), (5,)), ((5,), (2, 5, 3)), ((2, 3, 5), (5,)), ((1, 4, 5), (2, 1, 5, 3)),
             ((3, 17, 40), (3, 40, 19)), ((1, 9), (9, 300)), ((6,), (6, 7))]
    for sa, sb in pairs:
        a, b = _random(rng, sa, dtype), _random(rng, sb, dtype)
        check_node("MatMul", [a, b], oracle=_matmul64, tolerance=_tolerance(dtype, sa[-1]))


@pytest.mark.parametrize("dtype", FLOATS + [np.float64] + INTS, ids=lambda d: np.dtype(d).name)
def test_matmul_empty(dtype):
    for sa, sb in [((0, 5), (5, 3)), ((3, 0), (0, 4)), ((2, 0, 3, 4), (4, 5)), ((3, 4), (4, 0)),
                   ((0,), (0,)), ((2, 3, 0), (0, 2))]:
        a, b = np.ones(sa, dtype=dtype), np.ones(sb, dtype=dtype)
        check_node("MatMul", [a, b], oracle=lambda a, b: [np.matmul(a, b).astype(a.dtype)])


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_matmul_integers_exact(dtype):
    rng = np.random.default_rng(2)
    for sa, sb in [((1, 1), (1, 1)), ((3, 5), (5, 7)), ((17, 33), (33, 9)), ((2, 3, 4), (4, 5)),
                   ((5,), (5, 3)), ((2, 1, 3, 6), (4, 6, 2)), ((6, 40), (40, 37)),
                   ((33, 20), (20, 16))]:
        a, b = _random(rng, sa, dtype), _random(rng, sb, dtype)
        check_node("MatMul", [a, b], oracle="builtin")
    # Wrap-around, as NumPy.
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, size=(4, 9), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, size=(9, 21), dtype=dtype, endpoint=True)
    check_node("MatMul", [a, b], oracle=lambda a, b: [np.matmul(a, b)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16],
                         ids=lambda d: np.dtype(d).name)
def test_matmul_matches_builtin(dtype):
    rng = np.random.default_rng(3)
    a, b = _random(rng, (2, 9, 20), dtype), _random(rng, (20, 11), dtype)
    # NumPy's float16 matmul rounds as it goes: a looser bound for it.
    rtol = 1e-2 if dtype == np.float16 else 1e-5
    check_node("MatMul", [a, b], oracle="builtin", tolerance=(rtol, 1e-5))


def _gemm64(alpha, beta, trans_a, trans_b):
    def oracle(a, b, c=None):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        y = alpha * ((a64.T if trans_a else a64) @ (b64.T if trans_b else b64))
        if c is not None:
            y = y + beta * c.astype(np.float64)
        return [y.astype(a.dtype)]
    return oracle


@pytest.mark.parametrize("dtype", FLOATS + [np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_gemm_transposes_and_bias(dtype, trans_a, trans_b):
    rng = np.random.default_rng(4)
    for M, K, N in [(1, 5, 3), (7, 13, 17), (33, 300, 40), (1, 64, 130)]:
        a = _random(rng, (K, M) if trans_a else (M, K), dtype)
        b = _random(rng, (N, K) if trans_b else (K, N), dtype)
        for c_shape in [None, (), (1,), (N,), (1, N), (M, 1), (M, N)]:
            for alpha, beta in [(1.0, 1.0), (0.5, -2.0)]:
                inputs = [a, b] if c_shape is None else [a, b, _random(rng, c_shape, dtype)]
                check_node("Gemm", inputs, oracle=_gemm64(alpha, beta, trans_a, trans_b),
                           tolerance=_tolerance(dtype, K * 3), alpha=alpha, beta=beta,
                           transA=trans_a, transB=trans_b)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_gemm_integers(dtype):
    rng = np.random.default_rng(5)
    a, b, c = _random(rng, (6, 5), dtype), _random(rng, (7, 5), dtype), _random(rng, (7,), dtype)
    check_node("Gemm", [a, b, c], oracle="builtin", transB=1)
    check_node("Gemm", [a.T.copy(), b.T.copy()], oracle="builtin", transA=1)
    check_node("Gemm", [a, b, c], oracle="builtin", transB=1, alpha=2.0, beta=3.0)


@pytest.mark.parametrize("opset", [6, 9, 11, 13])
def test_gemm_opsets(opset):
    rng = np.random.default_rng(6)
    a, b = _random(rng, (4, 3), np.float32), _random(rng, (3, 5), np.float32)
    full, row = _random(rng, (4, 5), np.float32), _random(rng, (5,), np.float32)
    check_node("Gemm", [a, b, full], oracle="builtin", opset=opset, tolerance=(1e-5, 1e-6))
    if opset < 7:
        check_node("Gemm", [a, b, row], oracle="builtin", opset=opset, broadcast=1,
                   tolerance=(1e-5, 1e-6))
        with pytest.raises(ValueError, match="broadcast=0"):
            run_ours(node_model("Gemm", [a, b, row], opset=opset), [a, b, row])
    else:
        check_node("Gemm", [a, b, row], oracle="builtin", opset=opset, tolerance=(1e-5, 1e-6))
    if opset >= 11:
        check_node("Gemm", [a, b], oracle="builtin", opset=opset, tolerance=(1e-5, 1e-6))


def test_gemm_empty_and_k0():
    for M, K, N in [(0, 3, 4), (3, 0, 4), (3, 4, 0)]:
        a, b = np.ones((M, K), np.float32), np.ones((K, N), np.float32)
        c = np.full((N,), 2.0, np.float32)
        check_node("Gemm", [a, b, c], oracle=_gemm64(1.0, 0.5, 0, 0), beta=0.5)
        check_node("Gemm", [a, b], oracle=_gemm64(1.0, 1.0, 0, 0))


def test_threads_give_identical_bits_on_large_shapes():
    rng = np.random.default_rng(7)
    a, b = _random(rng, (200, 700), np.float32), _random(rng, (700, 600), np.float32)
    model = node_model("MatMul", [a, b])
    for level in available_simd_levels():
        with capped_simd_level(level):
            one, _, _ = run_ours(model, [a, b], 1)
            two, _, paths = run_ours(model, [a, b], 2)
            assert same_bits(one[0], two[0]), level
            assert paths == [f"matmul_float32_{code_level_name(level)}"]


def test_paths_are_recorded():
    rng = np.random.default_rng(8)
    a, b = _random(rng, (1, 64), np.float32), _random(rng, (64, 40), np.float32)
    _, names, paths = run_ours(node_model("MatMul", [a, b]), [a, b])
    assert names == ["onnx_light_cpu::MatMul"]
    assert paths[0].startswith("matmul_float32_gemv_")
    ai = a.astype(np.int64)
    _, _, paths = run_ours(node_model("MatMul", [ai, ai.T.copy()]), [ai, ai.T.copy()])
    assert paths[0].startswith("matmul_int64_blocked_")


def _constant_b_model(op_type, b, **attrs):
    inputs = ["A", "B"] + (["C"] if op_type == "Gemm" else [])
    node = oh.make_node(op_type, inputs, ["Y"], **attrs)
    inits = [onnx.numpy_helper.from_array(b, "B")]
    if op_type == "Gemm":
        n = b.shape[0] if attrs.get("transB") else b.shape[1]
        inits.append(onnx.numpy_helper.from_array(np.ones(n, b.dtype), "C"))
    elem = element_type(b.dtype)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("A", elem, None)],
                          [oh.make_tensor_value_info("Y", elem, None)], inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])


@pytest.mark.parametrize("op_type,attrs",
                         [("MatMul", {}), ("Gemm", {"transB": 1}), ("Gemm", {})])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_constant_b_is_packed_once(op_type, attrs, dtype):
    rng = np.random.default_rng(9)
    b = _random(rng, (70, 300) if attrs.get("transB") else (300, 70), dtype)
    model = _constant_b_model(op_type, b, **attrs)
    builtin = ReferenceEvaluator(model)
    for level in available_simd_levels():
        with capped_simd_level(level):
            sess = ReferenceEvaluator(model)
            olc.register_kernels_for_session(sess)
            olc.set_kernel_usage_recording(sess, True)
            node = sess.rt_nodes_[0]
            for M in (1, 5, 130):
                a = _random(rng, (M, 300), dtype)
                got = sess.run(None, {"A": a})[0]
                want = builtin.run(None, {"A": a})[0]
                np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                           rtol=2e-2, atol=1e-2 if dtype != np.float32 else 1e-4)
                packed = node._prepacked[min(level_index(level), 2)]
                assert node.prepared_bytes() == packed.nbytes > 0
            assert any("prepacked" in p for p in olc.used_kernel_paths(sess))
            # Packed once: the same buffer after more runs.
            sess.run(None, {"A": a})
            assert node._prepacked[min(level_index(level), 2)] is packed


def level_index(name):
    return ("scalar", "avx2", "avx512", "avx512vnni").index(name)


def test_inputs_not_modified_and_output_fresh():
    rng = np.random.default_rng(10)
    a, b = _random(rng, (20, 30), np.float32), _random(rng, (30, 10), np.float32)
    c = _random(rng, (20, 10), np.float32)
    check_node("Gemm", [a, b, c], oracle=_gemm64(1.0, 1.0, 0, 0),
               tolerance=_tolerance(np.float32, 30))
    outputs, _, _ = run_ours(node_model("Gemm", [a, b, c]), [a, b, c])
    assert not np.shares_memory(outputs[0], c)


F32 = np.float32


def _ones(*shapes, dtype=F32):
    return [np.ones(shape, dtype=dtype) for shape in shapes]


BAD = [
    ("MatMul", _ones((3, 4), (5, 6)), ValueError, "inner dimension"),
    ("MatMul", _ones((2, 3, 4), (3, 4, 5)), ValueError, "do not broadcast"),
    ("MatMul", [np.ones((3, 4), F32), np.ones((4, 5), np.float64)], TypeError, "element type"),
    ("MatMul", _ones((3, 4), (4, 5), dtype=np.int8), TypeError, "expected one of"),
    ("MatMul", _ones((), (4, 5)), ValueError, "at least one"),
    ("Gemm", _ones((3, 4), (5, 6)), ValueError, "inner dimension"),
    ("Gemm", _ones((3, 4), (4, 5), (3, 4)), ValueError, "input 2"),
    ("Gemm", _ones((3, 4), (4, 5), (2, 3, 5)), ValueError, "input 2"),
    ("Gemm", _ones((3, 4), (4, 5)) + [np.ones(5, np.float64)], TypeError, "input 2"),
    ("Gemm", _ones((2, 3, 4), (4, 5)), ValueError, "expected rank 2"),
]


@pytest.mark.parametrize("op_type,inputs,error,match", BAD,
                         ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input(op_type, inputs, error, match):
    originals = [x.copy() for x in inputs]
    with pytest.raises(error, match=match) as info:
        run_ours(node_model(op_type, inputs), inputs)
    assert op_type in str(info.value)
    for x, original in zip(inputs, originals):
        assert same_bits(x, original)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_matmul_random_sweep(dtype):
    rng = np.random.default_rng(11)
    for _ in range(40):
        M, K, N = (int(x) for x in rng.integers(1, 700, size=3))
        a, b = _random(rng, (M, K), dtype), _random(rng, (K, N), dtype)
        check_node("MatMul", [a, b], oracle=_matmul64, tolerance=_tolerance(dtype, K))


def test_non_constant_b_prepares_nothing():
    rng = np.random.default_rng(12)
    a, b = _random(rng, (4, 6), np.float32), _random(rng, (6, 5), np.float32)
    sess = ReferenceEvaluator(node_model("MatMul", [a, b]))
    olc.register_kernels_for_session(sess)
    sess.run(None, {"x0": a, "x1": b})
    assert sess.rt_nodes_[0].prepared_bytes() == 0


def test_fma_peak_loop_runs():
    from onnx_light_cpu._kernels.engines import gemm

    if available_simd_levels() == ("scalar",):
        pytest.skip("the FMA loop needs AVX2")
    assert gemm.fma_peak_gflops(10_000, 1, 1) > 0
    with pytest.raises(ValueError):
        gemm.fma_peak_gflops(10, 0, 1)


def _strided_views(rng, dtype, K, N):
    """B of shape (K, N) [or (K,)] as views the engine reads in place."""
    return {
        "transposed": _random(rng, (N, K), dtype).T,
        "column slice": _random(rng, (K, N + 5), dtype)[:, 2:N + 2],
        "row step": _random(rng, (2 * K, N), dtype)[::2],
        "both steps": _random(rng, (2 * K, 3 * N), dtype)[::2, ::3],
        "batch of one": _random(rng, (1, N, K), dtype).transpose(0, 2, 1),
        "1-D step": _random(rng, (2 * K,), dtype)[::2],
    }


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_strided_b_is_read_in_place_bit_for_bit(dtype):
    """A strided B gives the bits of its dense copy, at every level, M = 1
    (decode) and M > 1.  (K within one packed block: past it, a dense B at
    M = 1 takes the streamed gemv, whose sums are grouped otherwise.)"""
    rng = np.random.default_rng(11)
    for M, K, N in [(1, 200, 129), (5, 33, 40), (1, 1, 17), (130, 64, 70), (3, 300, 20)]:
        for name, b in _strided_views(rng, dtype, K, N).items():
            a = _random(rng, (M, K), dtype)
            dense = np.ascontiguousarray(b)
            for level in available_simd_levels():
                with capped_simd_level(level):
                    got, _, _ = run_ours(node_model("MatMul", [a, b]), [a, b])
                    want, _, _ = run_ours(node_model("MatMul", [a, dense]), [a, dense])
                assert same_bits(got[0], want[0]), (name, M, K, N, level)


def test_b_read_in_place_gives_the_bits_of_b_packed():
    """float32 B fed at run time: up to OLC_GEMM_STRIDED_ROWS rows of A its
    whole panels are read in place by the strided micro-kernels (a last
    partial panel packed), more rows pack it; a constant B is packed once.
    Every element is the same sum in the same order: the same bits, at
    every level and thread count."""
    rng = np.random.default_rng(17)
    for M, K, N in [(12, 64, 64), (37, 300, 129), (64, 513, 96), (128, 513, 96),
                    (129, 40, 33), (5, 7, 31)]:
        a = _random(rng, (M, K), np.float32)
        b = _random(rng, (K, N), np.float32)
        for level in available_simd_levels():
            with capped_simd_level(level):
                for threads in (1, 2):
                    fed, names, _ = run_ours(node_model("MatMul", [a, b]), [a, b], threads)
                    assert "onnx_light_cpu::MatMul" in names
                    sess = ReferenceEvaluator(_constant_b_model("MatMul", b))
                    olc.register_kernels_for_session(sess)
                    olc.set_num_threads_for_session(sess, threads)
                    packed = sess.run(None, {"A": a})[0]
                    assert same_bits(fed[0], packed), (M, K, N, level, threads)


def test_even_row_blocks_give_the_bits_of_packed_a():
    """A read in place runs a tile's rows in blocks of even height (49 rows:
    10+10+10+10+9), a packed A (Gemm's transA) in blocks of the micro-panel's
    height (4 x 12 + 1): each output is the same sum in the same order, so
    the bits agree, at every level and thread count, and match float64."""
    rng = np.random.default_rng(23)
    for M, K, N in [(49, 300, 70), (13, 40, 33), (25, 513, 64), (61, 64, 200), (196, 96, 40)]:
        a = _random(rng, (M, K), np.float32)
        b = _random(rng, (K, N), np.float32)
        at = np.ascontiguousarray(a.T)
        want = _matmul64(a, b)[0]
        for level in available_simd_levels():
            with capped_simd_level(level):
                for threads in (1, 2):
                    direct, names, _ = run_ours(node_model("MatMul", [a, b]), [a, b], threads)
                    packed, gemm, _ = run_ours(node_model("Gemm", [at, b], transA=1), [at, b],
                                               threads)
                    assert "onnx_light_cpu::MatMul" in names and "onnx_light_cpu::Gemm" in gemm
                    assert same_bits(direct[0], packed[0]), (M, K, N, level, threads)
                    np.testing.assert_allclose(direct[0], want, *_tolerance(np.float32, K))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_transposed_b_gives_the_bits_of_its_folded_constant(dtype):
    """What constant folding relies on: MatMul(A, Transpose(W)) fed the view
    and MatMul(A, W^T) with W^T a dense initializer agree bit for bit."""
    rng = np.random.default_rng(13)
    for M, K, N in [(1, 300, 129), (1, 896, 200), (7, 600, 33)]:
        w = _random(rng, (N, K), dtype)
        a = _random(rng, (M, K), dtype)
        for level in available_simd_levels():
            with capped_simd_level(level):
                fed, _, _ = run_ours(node_model("MatMul", [a, w.T]), [a, w.T])
                sess = ReferenceEvaluator(_constant_b_model("MatMul", np.ascontiguousarray(w.T)))
                olc.register_kernels_for_session(sess)
                (constant,) = sess.run(None, {"A": a})
            assert same_bits(fed[0], constant), (M, K, N, level)


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_gemm_reads_a_strided_b_in_place(dtype, trans_b):
    rng = np.random.default_rng(14)
    for M, K, N in [(1, 200, 129), (5, 33, 40), (130, 64, 70), (1, 1, 9)]:
        rows, cols = (N, K) if trans_b else (K, N)
        views = {"transposed": _random(rng, (cols, rows), dtype).T,
                 "column slice": _random(rng, (rows, cols + 4), dtype)[:, 1:cols + 1],
                 "both steps": _random(rng, (2 * rows, 2 * cols), dtype)[::2, ::2]}
        a, c = _random(rng, (M, K), dtype), _random(rng, (N,), dtype)
        for name, b in views.items():
            dense = np.ascontiguousarray(b)
            got, _, _ = run_ours(node_model("Gemm", [a, b, c], transB=trans_b), [a, b, c])
            want, _, _ = run_ours(node_model("Gemm", [a, dense, c], transB=trans_b),
                                  [a, dense, c])
            assert same_bits(got[0], want[0]), (name, M, K, N)



def test_gemm_c_is_scaled_as_numpy_multiplies():
    """Gemm's float32 C, broadcast and scaled by the core (fill_scaled), has
    numpy.multiply's bits for every shape and layout C may come in; a C
    that is not a float32 aligned array takes numpy's path, and bad
    shapes are refused."""
    from onnx_light_cpu._kernels.engines import gemm as core
    rng = np.random.default_rng(15)
    M, N = 5, 7
    c = _random(rng, (M, N), np.float32)
    c[0, 0], c[1, 2], c[2, 3] = np.nan, np.inf, -0.0
    cases = {"()": np.array(c[0, 1]), "(1,)": c[0, :1], "(N,)": c[1],
             "(1, N)": c[:1], "(M, 1)": c[:, :1], "(M, N)": c, "transposed": c.T.copy().T,
             "reversed": c[::-1, ::-1], "column step": _random(rng, (M, 2 * N), np.float32)[:, ::2]}
    for beta in (1.0, -2.5, 0.0):
        for name, view in cases.items():
            out = np.empty((M, N), np.float32)
            core.fill_scaled(view, out, beta)
            want = np.multiply(view, np.float32(beta)) * np.ones((M, N), np.float32)
            assert same_bits(out, want), (name, beta)
    with pytest.raises(ValueError, match="broadcast"):
        core.fill_scaled(c[:2], np.empty((M, N), np.float32), 1.0)
    for other in (np.float64, ">f4"):
        with pytest.raises(ValueError, match="float32"):
            core.fill_scaled(c.astype(other), np.empty((M, N), np.float32), 1.0)
    # through the node: strided and reversed C against the same C dense
    a, b = _random(rng, (M, 9), np.float32), _random(rng, (9, N), np.float32)
    for name in ("reversed", "column step", "(M, 1)"):
        view = cases[name]
        dense = np.ascontiguousarray(view)
        model = node_model("Gemm", [a, b, dense])
        got, names, _ = run_ours(model, [a, b, view])
        want, _, _ = run_ours(model, [a, b, dense])
        assert same_bits(got[0], want[0]), name
        assert "onnx_light_cpu::Gemm" in names

def test_transposed_b_is_not_copied():
    import tracemalloc

    rng = np.random.default_rng(12)
    b = _random(rng, (2000, 256), np.float32).T  # 2 MB, transposed
    a = _random(rng, (1, 256), np.float32)
    sess = ReferenceEvaluator(node_model("MatMul", [a, b]))
    olc.register_kernels_for_session(sess)
    sess.run(None, {"x0": a, "x1": b})  # plans, output buffer
    tracemalloc.start()
    try:
        sess.run(None, {"x0": a, "x1": b})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < b.nbytes // 4
