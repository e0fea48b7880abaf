"""MatMulInteger and QLinearMatMul: exact against a NumPy int64 oracle and
the built-ins, at every SIMD level and 1/2 threads (check_node).

The built-in broadcasts a 1-D zero point or scale of A along K (NumPy's
rule) where the schemas mean one per row, so those forms use the oracle.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu._kernels.engines import gemm_int8
from onnx_light_cpu.simd import LEVEL_NAMES, available_simd_levels, capped_simd_level

from differential import check_node, node_model, run_ours, unaligned

U8, S8 = np.uint8, np.int8
PAIRS = list(itertools.product((U8, S8), repeat=2))
# (M, K, N): 1, odd, prime, off the 16-column panel, the 4-deep K group and
# the 6/8-row blocks.
SHAPES = [(1, 1, 1), (1, 5, 1), (3, 7, 17), (9, 13, 31), (8, 64, 16), (17, 3, 33),
          (13, 257, 47), (1, 300, 129), (6, 31, 2)]


def _ids(pair):
    return "x".join(np.dtype(d).name for d in pair)


def _rand(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(dtype)


def _extreme(rng, shape, dtype):
    """Only the type's bounds: the worst case for 16-bit saturation."""
    info = np.iinfo(dtype)
    return rng.choice(np.array([info.min, info.max], dtype=dtype), size=shape)


def _row_form(za, a):
    """za as the oracle broadcasts it against a (1-D [M] means per row)."""
    if za.ndim == 1 and za.size > 1:
        return za.astype(np.int64).reshape(-1, 1)
    return za.astype(np.int64)


def oracle_integer(a, b, za=None, zb=None):
    a64 = a.astype(np.int64) - (0 if za is None else _row_form(za, a))
    b64 = b.astype(np.int64) - (0 if zb is None else zb.astype(np.int64))
    return [np.matmul(a64, b64).astype(np.int32)]


def oracle_qlinear(a, a_s, za, b, b_s, zb, y_s, zy):
    """The reference's arithmetic with per-row forms of A taken per row."""
    c = oracle_integer(a, b, za, zb)[0]
    a_s = a_s.reshape(-1, 1) if a_s.ndim == 1 and a_s.size > 1 else a_s
    d = c * (a_s * b_s / y_s)
    d = d + zy
    info = np.iinfo(zy.dtype)
    return [np.clip(np.rint(d), info.min, info.max).astype(zy.dtype)]


# ---- MatMulInteger ----

@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_matmul_integer_shapes_scalar_zero_points(pair):
    rng = np.random.default_rng(0)
    ta, tb = pair
    for M, K, N in SHAPES:
        a, b = _rand(rng, (M, K), ta), _rand(rng, (K, N), tb)
        za, zb = _rand(rng, (), ta), _rand(rng, (1,), tb)
        check_node("MatMulInteger", [a, b, za, zb], oracle="builtin")
        check_node("MatMulInteger", [a, b], oracle=oracle_integer)


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_matmul_integer_extremes_no_saturation(pair):
    rng = np.random.default_rng(1)
    ta, tb = pair
    for M, K, N in [(7, 1000, 19), (2, 2049, 3)]:
        a, b = _extreme(rng, (M, K), ta), _extreme(rng, (K, N), tb)
        for za, zb in [(np.iinfo(ta).min, np.iinfo(tb).max), (np.iinfo(ta).max, np.iinfo(tb).min),
                       (0, 0)]:
            check_node("MatMulInteger", [a, b, np.array(za, ta), np.array(zb, tb)],
                       oracle=oracle_integer)
        # All bounds at once: every product is 255 x 128 or 128 x 128.
        a = np.full((3, K), np.iinfo(ta).max if ta == U8 else np.iinfo(ta).min, ta)
        b = np.full((K, 5), np.iinfo(tb).min, tb)
        check_node("MatMulInteger", [a, b], oracle=oracle_integer)


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_matmul_integer_per_row_and_column(pair):
    rng = np.random.default_rng(2)
    ta, tb = pair
    M, K, N = 11, 37, 21
    a, b = _rand(rng, (M, K), ta), _rand(rng, (K, N), tb)
    za_row, zb_col = _rand(rng, (M,), ta), _rand(rng, (N,), tb)
    check_node("MatMulInteger", [a, b, za_row, zb_col], oracle=oracle_integer)
    check_node("MatMulInteger", [a, b, za_row.reshape(M, 1), zb_col], oracle="builtin")
    # Per row and per batch: [..., M, 1] and [..., 1, N].
    a3, b3 = _rand(rng, (3, M, K), ta), _rand(rng, (3, K, N), tb)
    za3, zb3 = _rand(rng, (3, M, 1), ta), _rand(rng, (3, 1, N), tb)
    check_node("MatMulInteger", [a3, b3, za3, zb3], oracle="builtin")
    check_node("MatMulInteger", [a3, b, za3, zb_col], oracle="builtin")
    check_node("MatMulInteger", [a3, b3, za_row.reshape(M, 1), zb3[:1]], oracle="builtin")


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_matmul_integer_batched_broadcast_1d(pair):
    rng = np.random.default_rng(3)
    ta, tb = pair
    za, zb = _rand(rng, (), ta), _rand(rng, (), tb)
    for sa, sb in [((2, 3, 5, 7), (7, 4)), ((5, 7), (2, 3, 7, 4)), ((2, 1, 5, 7), (3, 7, 9)),
                   ((7,), (7, 4)), ((5, 7), (7,)), ((7,), (7,)), ((2, 3, 7), (7,)),
                   ((4, 1, 6), (1, 6, 18))]:
        a, b = _rand(rng, sa, ta), _rand(rng, sb, tb)
        check_node("MatMulInteger", [a, b, za, zb], oracle="builtin")


def test_matmul_integer_empty_and_unaligned():
    rng = np.random.default_rng(4)
    for sa, sb in [((0, 5), (5, 3)), ((4, 0), (0, 3)), ((2, 0, 4, 5), (5, 3)), ((4, 5), (5, 0))]:
        check_node("MatMulInteger", [_rand(rng, sa, U8), _rand(rng, sb, S8)],
                   oracle=oracle_integer)
    a, b = unaligned(_rand(rng, (9, 33), U8)), unaligned(_rand(rng, (33, 17), S8))
    check_node("MatMulInteger", [a, b, np.array(3, U8), np.array(-2, S8)], oracle="builtin")
    # Non-contiguous inputs.
    ours, _, _ = run_ours(node_model("MatMulInteger", [a, b]), [a.T.copy().T, b[:, ::-1]])
    np.testing.assert_array_equal(ours[0], oracle_integer(a, b[:, ::-1])[0])


def test_matmul_integer_constant_b_prepared_once():
    rng = np.random.default_rng(5)
    a, b = _rand(rng, (10, 70), U8), _rand(rng, (70, 40), S8)
    zb = np.array(5, S8)
    graph = oh.make_graph(
        [oh.make_node("MatMulInteger", ["A", "B", "", "zb"], ["Y"])], "g",
        [oh.make_tensor_value_info("A", onnx.TensorProto.UINT8, [None, 70])],
        [oh.make_tensor_value_info("Y", onnx.TensorProto.INT32, None)],
        [onnx.numpy_helper.from_array(b, "B"), onnx.numpy_helper.from_array(zb, "zb")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    for level in available_simd_levels():
        with capped_simd_level(level):
            sess = ReferenceEvaluator(model)
            olc.register_kernels_for_session(sess)
            olc.set_kernel_usage_recording(sess, True)
            for rows in (10, 3, 10):
                got = sess.run(None, {"A": a[:rows]})[0]
                np.testing.assert_array_equal(got, oracle_integer(a[:rows], b, None, zb)[0])
            node = sess.rt_nodes_[0]
            assert node.prepared_bytes() > 0
            assert any(p.endswith("_prepacked") for p in olc.used_kernel_paths(sess))
    # B as a graph input: packed per call, nothing kept.
    model = node_model("MatMulInteger", [a, b])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    sess.run(None, {"x0": a, "x1": b})
    assert sess.rt_nodes_[0].prepared_bytes() == 0


@pytest.mark.parametrize("M,K,N", [(128, 768, 768), (128, 768, 3072), (8, 768, 768)])
def test_int8_product_threads_follow_the_kernel(M, K, N):
    """At 2 threads a product takes a second thread from 2 x 2^17
    multiply-adds on the VNNI kernel, from 2 x 2^26 on AMX tiles (16 rows
    and more, where the CPU has them); the result is the same either way."""
    rng = np.random.default_rng(6)
    a, b = _rand(rng, (M, K), U8), _rand(rng, (K, N), S8)
    want = oracle_integer(a, b)[0]
    for level in available_simd_levels():
        with capped_simd_level(level):
            sess = ReferenceEvaluator(node_model("MatMulInteger", [a, b]))
            olc.register_kernels_for_session(sess)
            olc.set_num_threads_for_session(sess, 2)
            np.testing.assert_array_equal(sess.run(None, {"x0": a, "x1": b})[0], want)
            node = sess.rt_nodes_[0]
            product, _ = node._last_plan[1]  # MatMulInteger's plan: (product, empty)
            threads = product.threads
            amx = gemm_int8.uses_amx(olc.simd.state.level, M)
            assert not amx or M >= 16
            minimum = node.min_amx_work_per_thread if amx else node.min_work_per_thread
            assert threads == (2 if M * K * N >= 2 * minimum else 1), (level, amx, threads)


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_matmul_integer_sweep(pair):
    rng = np.random.default_rng(6)
    ta, tb = pair
    for _ in range(30):
        M, K, N = (int(v) for v in rng.integers(1, 90, size=3))
        K = int(rng.choice([K, K * 37]))
        a, b = _rand(rng, (M, K), ta), _rand(rng, (K, N), tb)
        check_node("MatMulInteger", [a, b, _rand(rng, (M,), ta), _rand(rng, (N,), tb)],
                   oracle=oracle_integer)


def _error(op, inputs, exc, match, opset=None):
    model = node_model(op, inputs, opset=opset)
    with pytest.raises(exc, match=match):
        run_ours(model, inputs)


def test_matmul_integer_bad_input():
    a, b = np.zeros((3, 4), U8), np.zeros((4, 5), S8)
    _error("MatMulInteger", [a, np.zeros((3, 5), S8)], ValueError,
           "MatMulInteger: input 1.*inner dimension 3 differs from A's 4")
    _error("MatMulInteger", [np.zeros((2, 3, 4), U8), np.zeros((3, 4, 5), S8)], ValueError,
           "MatMulInteger: input 1.*do not broadcast")
    _error("MatMulInteger", [a.astype(np.int16), b], TypeError,
           "MatMulInteger: input 0.*int16, expected one of uint8, int8")
    _error("MatMulInteger", [a, b, np.zeros(1, S8)], TypeError,
           "MatMulInteger: input 2.*int8, expected uint8 like input 0")
    _error("MatMulInteger", [a, b, np.zeros(2, U8)], ValueError,
           r"MatMulInteger: input 2.*\[M\] or \[..., M, 1\]")
    _error("MatMulInteger", [a, b, np.zeros(1, U8), np.zeros((4,), S8)], ValueError,
           r"MatMulInteger: input 3.*\[N\] or \[..., 1, N\]")
    _error("MatMulInteger", [a, b, np.zeros((1, 3), U8)], ValueError,
           "MatMulInteger: input 2 .*has shape")
    _error("MatMulInteger", [np.zeros((), U8), b], ValueError,
           "MatMulInteger: input 0.*at least one dimension")


# ---- QLinearMatMul ----

def _qinputs(rng, shape_a, shape_b, ta, tb, ty, scale=np.float32, row=False, col=False):
    M, N = (shape_a[-2] if len(shape_a) > 1 else 1), (shape_b[-1] if len(shape_b) > 1 else 1)
    a, b = _rand(rng, shape_a, ta), _rand(rng, shape_b, tb)
    za = _rand(rng, (M,) if row else (), ta)
    a_s = rng.uniform(0.001, 0.05, (M,) if row else ()).astype(scale)
    zb = _rand(rng, (N,) if col else (1,), tb)
    b_s = rng.uniform(0.001, 0.05, (N,) if col else (1,)).astype(scale)
    y_s = np.array(rng.uniform(0.5, 4), dtype=scale)
    zy = _rand(rng, (), ty)
    return [a, a_s, za, b, b_s, zb, y_s, zy]


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
@pytest.mark.parametrize("ty", [U8, S8], ids=["yu8", "yi8"])
def test_qlinear_matmul_matches_builtin(pair, ty):
    rng = np.random.default_rng(7)
    ta, tb = pair
    for (M, K, N), opset in itertools.product(SHAPES[::2] + [(5, 1000, 9)], (10, 21)):
        inputs = _qinputs(rng, (M, K), (K, N), ta, tb, ty, col=True)
        check_node("QLinearMatMul", inputs, oracle="builtin", opset=opset)


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_qlinear_matmul_per_row_float16_batched(pair):
    rng = np.random.default_rng(8)
    ta, tb = pair
    inputs = _qinputs(rng, (9, 40), (40, 13), ta, tb, U8, row=True, col=True)
    check_node("QLinearMatMul", inputs, oracle=oracle_qlinear)
    # [M, 1] per-row forms: the built-in broadcasts them as the schema means.
    inputs[1], inputs[2] = inputs[1].reshape(9, 1), inputs[2].reshape(9, 1)
    check_node("QLinearMatMul", inputs, oracle="builtin")
    half = _qinputs(rng, (2, 7, 30), (30, 11), ta, tb, S8, scale=np.float16, col=True)
    check_node("QLinearMatMul", half, oracle="builtin", opset=21)
    batched = _qinputs(rng, (3, 1, 6, 20), (2, 20, 5), ta, tb, S8)
    check_node("QLinearMatMul", batched, oracle="builtin")
    one_d = _qinputs(rng, (20,), (20,), ta, tb, U8)
    # 0-d scale and zero point of B: with shape [1] the built-in's
    # broadcasting would give the 0-d product a dimension.
    one_d[4], one_d[5] = one_d[4].reshape(()), one_d[5].reshape(())
    check_node("QLinearMatMul", one_d, oracle="builtin")
    empty = _qinputs(rng, (0, 20), (20, 4), ta, tb, U8)
    check_node("QLinearMatMul", empty, oracle="builtin")


def test_qlinear_matmul_ties_and_saturation():
    # Products c = 1..8 times 0.5: every .5 tie, rounded to even, then the
    # zero point and saturation at both ends.
    a = np.arange(1, 9, dtype=U8).reshape(8, 1)
    b = np.ones((1, 1), U8)
    for zy, ty, y_s in [(0, U8, 2.0), (127, S8, 2.0), (-128, S8, -2.0), (250, U8, 2.0),
                        (3, U8, -0.01), (0, S8, 0.004)]:
        inputs = [a, np.array(1, np.float32), np.array(0, U8), b, np.array(1, np.float32),
                  np.array(0, U8), np.array(y_s, np.float32), np.array(zy, ty)]
        check_node("QLinearMatMul", inputs, oracle="builtin")
    rng = np.random.default_rng(9)
    inputs = _qinputs(rng, (31, 64), (64, 33), S8, U8, U8, col=True)
    inputs[6] = np.array(1 / 64, np.float32)  # far outside the range: saturates
    check_node("QLinearMatMul", inputs, oracle="builtin")


def test_qlinear_matmul_bad_input():
    rng = np.random.default_rng(10)
    good = _qinputs(rng, (3, 4), (4, 5), U8, S8, U8)

    def bad(i, value, exc, match, opset=None):
        inputs = list(good)
        inputs[i] = value
        _error("QLinearMatMul", inputs, exc, match, opset)

    bad(1, np.array(1.0, np.float64), TypeError, "QLinearMatMul: input 1.*float64")
    bad(1, np.array(1.0, np.float16), TypeError, "QLinearMatMul: input 1.*float16, expected "
        "one of float32$", opset=10)
    bad(4, np.array(1.0, np.float16), TypeError, "QLinearMatMul: input 4.*like input 1", 21)
    bad(2, np.array(1, S8), TypeError, "QLinearMatMul: input 2.*int8, expected uint8 like input 0")
    bad(1, np.ones(2, np.float32), ValueError, "QLinearMatMul: input 1.*scale must have")
    bad(6, np.ones(2, np.float32), ValueError, "QLinearMatMul: input 6.*one-element")
    bad(6, np.ones((1, 1, 1), np.float32), ValueError, "QLinearMatMul: input 6.*scalars")
    # regression: one element of a higher rank than A would broadcast the output's rank
    bad(1, np.ones((1, 1, 1), np.float32), ValueError, "QLinearMatMul: input 1.*scale must have")
    bad(3, np.zeros((3, 5), S8), ValueError, "QLinearMatMul: input 3.*inner dimension")
    bad(7, np.array(1.0, np.float32), TypeError, "QLinearMatMul: input 7.*float32")
    from ml_dtypes import bfloat16, float8_e4m3fn
    bad(1, np.array(1.0, bfloat16), TypeError, "QLinearMatMul: input 1.*bfloat16", opset=21)
    with pytest.raises(TypeError, match="QLinearMatMul: input 0.*float8"):
        good8 = list(good)
        good8[0] = good8[0].astype(float8_e4m3fn)
        good8[2] = np.array(0, float8_e4m3fn)
        model = node_model("QLinearMatMul", good8, opset=21)
        run_ours(model, good8)


def test_engine_level_names():
    used = {LEVEL_NAMES[gemm_int8.level_used(level)] for level in range(3)}
    assert "scalar" in used


@pytest.mark.parametrize("pair", PAIRS, ids=_ids)
def test_every_engine_level_directly(pair):
    """The core at each level this CPU can run, AVX-512 with and without
    VNNI included (and its AMX tiles from 16 rows where the CPU has them:
    K not a multiple of 64, an odd panel, several row chunks and tile
    groups; ONNX_LIGHT_CPU_INT8_AMX=0 runs the VNNI kernel instead)."""
    rng = np.random.default_rng(11)
    ta, tb = pair
    levels = {gemm_int8.level_used(level) for level in range(len(available_simd_levels()))}
    for level in sorted(levels):
        for M, K, N, batch in [(13, 259, 47, 1), (3, 1000, 70, 2), (1, 1, 1, 1),
                               (40, 100, 50, 2), (300, 832, 530, 1)]:
            a, b = _rand(rng, (batch, M, K), ta), _rand(rng, (batch, K, N), tb)
            za, zb = _rand(rng, (batch, M), ta), _rand(rng, (N,), tb)
            a_off = np.arange(batch, dtype=np.int64) * M * K
            b_off = np.arange(batch, dtype=np.int64) * K * N
            packed = np.empty(batch * gemm_int8.packed_size(K, N), np.int8)
            sums = np.empty(batch * gemm_int8.colsum_size(N), np.int32)
            gemm_int8.pack_b(b.view(np.uint8), b_off, packed, sums, K, N, tb == S8, level, 2)
            za_s = za.astype(np.int32) + (128 if ta == S8 else 0)
            zb_s = zb.astype(np.int32) - (0 if tb == S8 else 128)
            y = np.empty((batch, M, N), np.int32)
            gemm_int8.gemm(a.view(np.uint8), a_off, packed, sums,
                           np.arange(batch, dtype=np.int64), za_s, zb_s, y, M, 1, 0, 1, M, N, K,
                           ta == S8, level, 2)
            want = np.matmul(a.astype(np.int64) - za[..., None], b.astype(np.int64) - zb)
            np.testing.assert_array_equal(y, want.astype(np.int32), err_msg=f"level {level}")
