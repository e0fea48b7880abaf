"""The lean run loop and ``KernelOp.run``'s fast path: a run whose inputs
are like the last one's skips the checks, yet every input the checks
reject is still rejected with the same error; output buffers come back
only once nobody holds them."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc


def _add_session(opset=21):
    node = oh.make_node("Add", ["a", "b"], ["y"])
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info(n, T.FLOAT, None)
                                        for n in ("a", "b")],
                          [oh.make_tensor_value_info("y", T.FLOAT, None)])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)]))
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    return sess


def _error(sess, feeds):
    with pytest.raises(Exception) as info:
        sess.run(None, feeds)
    return type(info.value), str(info.value)


F32 = np.ones((2, 3), np.float32)


@pytest.mark.parametrize("feeds", [
    {"a": F32, "b": F32.astype(np.float64)},               # another dtype
    {"a": F32.astype(np.str_), "b": F32.astype(np.str_)},  # a type Add does not take
    {"a": F32, "b": [1.0, 2.0]},                           # not a tensor
    {"a": F32, "b": np.ones((2, 4), np.float32)},          # shapes that do not broadcast
])
def test_a_run_after_good_runs_is_checked_as_a_first_run(feeds):
    fresh = _error(_add_session(), feeds)
    sess = _add_session()
    for _ in range(2):  # the second run takes the fast path
        (y,) = sess.run(None, {"a": F32, "b": F32})
        np.testing.assert_array_equal(y, 2 * F32)
    assert _error(sess, feeds) == fresh
    (y,) = sess.run(None, {"a": F32, "b": F32})  # and good inputs run again
    np.testing.assert_array_equal(y, 2 * F32)
    assert set(olc.used_kernel_names(sess)) == {"onnx_light_cpu::Add"}


def test_scalars_strided_and_read_only_inputs_after_plain_ones():
    sess = _add_session()
    sess.run(None, {"a": F32, "b": F32})
    wide = np.arange(24, dtype=np.float32).reshape(4, 6)
    read_only = np.full((2, 3), 5, np.float32)
    read_only.flags.writeable = False
    for a, b in [(F32, np.float32(2)), (wide[::2, ::2], F32), (read_only, F32), (F32, F32)]:
        (y,) = sess.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(y, np.asarray(a) + np.asarray(b))
    assert set(olc.used_kernel_names(sess)) == {"onnx_light_cpu::Add"}


def test_an_attribute_error_is_raised_by_every_run():
    node = oh.make_node("Cast", ["x"], ["y"], to=12345)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", T.FLOAT, None)],
                          [oh.make_tensor_value_info("y", T.FLOAT, None)])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]))
    olc.register_kernels_for_session(sess)
    for _ in range(3):
        with pytest.raises(ValueError, match=r"^Cast: attribute to"):
            sess.run(None, {"x": F32})


def test_a_kept_output_is_never_overwritten():
    sess = _add_session()
    b = np.full((2, 3), 0.5, np.float32)
    (y1,) = sess.run(None, {"a": F32, "b": b})
    kept = y1.copy()
    (y2,) = sess.run(None, {"a": 3 * F32, "b": b})
    assert y2 is not y1
    np.testing.assert_array_equal(y1, kept)  # the caller's array is unchanged
    np.testing.assert_array_equal(y2, 3 * F32 + b)
    view = y2[0]  # a view holds its base
    del y2
    (y3,) = sess.run(None, {"a": F32, "b": b})
    np.testing.assert_array_equal(view, (3 * F32 + b)[0])
    np.testing.assert_array_equal(y3, F32 + b)


def test_an_output_nobody_holds_is_reused():
    sess = _add_session()
    b = np.full((2, 3), 0.5, np.float32)
    (y,) = sess.run(None, {"a": F32, "b": b})
    address = y.__array_interface__["data"][0]
    del y
    (y,) = sess.run(None, {"a": 2 * F32, "b": b})
    assert y.__array_interface__["data"][0] == address
    np.testing.assert_array_equal(y, 2 * F32 + b)
    (z,) = sess.run(None, {"a": F32, "b": np.ones((1, 3), np.float32)})  # broadcast, same shape
    np.testing.assert_array_equal(z, F32 + 1)
    np.testing.assert_array_equal(y, 2 * F32 + b)  # y was held: a new buffer for z
    (w,) = sess.run(None, {"a": np.ones((4, 3), np.float32), "b": b[:1]})  # another shape
    assert w.shape == (4, 3)


def test_outputs_held_during_the_next_run_come_back_one_run_later():
    """``y = sess.run(...)`` in a loop holds the last outputs while the next
    run makes its own: the buffer of the run before comes back."""
    sess = _add_session()
    b = np.full((64, 64), 0.5, np.float32)
    addresses = []
    for k in range(6):
        (y,) = sess.run(None, {"a": np.full((64, 64), k, np.float32), "b": b})
        np.testing.assert_array_equal(y, k + b)
        addresses.append(y.__array_interface__["data"][0])
    assert len(set(addresses[2:])) == 2  # two buffers take turns


def test_intermediates_of_a_chain_are_reused_and_results_stay_right():
    names = ["x", "t0", "t1", "t2", "y"]
    nodes = [oh.make_node(op, [names[i], "c"], [names[i + 1]])
             for i, op in enumerate(["Add", "Mul", "Sub", "Add"])]
    c = oh.make_tensor("c", T.FLOAT, [3], [1.0, 2.0, 3.0])
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", T.FLOAT, [None, 3])],
                          [oh.make_tensor_value_info("y", T.FLOAT, None),
                           oh.make_tensor_value_info("t1", T.FLOAT, None)], [c])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]))
    olc.register_kernels_for_session(sess)
    cv = np.array([1, 2, 3], np.float32)
    outputs = []
    for k in range(4):
        x = np.full((2, 3), k, np.float32)
        y, t1 = sess.run(None, {"x": x})
        want_t1 = (x + cv) * cv
        np.testing.assert_array_equal(t1, want_t1)
        np.testing.assert_array_equal(y, want_t1 - cv + cv)
        outputs.append((x, y, t1))
    for x, y, t1 in outputs:  # every kept output still holds its run's values
        np.testing.assert_array_equal(t1, (x + cv) * cv)
        np.testing.assert_array_equal(y, (x + cv) * cv)


def _graph_session(nodes, inputs, outputs):
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info(n, T.FLOAT, None) for n in inputs],
                          [oh.make_tensor_value_info(n, T.FLOAT, None) for n in outputs])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]))
    olc.register_kernels_for_session(sess)
    return sess


def test_a_chain_runs_in_two_buffers():
    """Each intermediate leaves the results after its last reader: a chain
    of eight nodes runs in two buffers, the last one written becoming the
    output (the caller's, out of the pool)."""
    names = ["x"] + [f"t{i}" for i in range(7)] + ["y"]
    sess = _graph_session([oh.make_node("Abs" if i % 2 else "Neg", [names[i]], [names[i + 1]])
                           for i in range(8)], ["x"], ["y"])
    x = np.arange(-500, 500, dtype=np.float32)
    outputs = [sess.run(None, {"x": x * k})[0] for k in range(3)]
    for k, y in enumerate(outputs):
        np.testing.assert_array_equal(y, np.abs(x * k))
    assert sess._olc_context.buffers.nbytes == x.nbytes


def test_a_buffer_still_viewed_is_not_handed_out():
    """``a`` leaves the results after Reshape, whose output is a view of it:
    Neg must not take a's buffer."""
    nodes = [oh.make_node("Abs", ["x"], ["a"]),
             oh.make_node("Reshape", ["a", "shape"], ["r"]),
             oh.make_node("Neg", ["x"], ["n"]),
             oh.make_node("Identity", ["n"], ["i"]),
             oh.make_node("Neg", ["x"], ["m"]),
             oh.make_node("Add", ["r", "i"], ["s"]),
             oh.make_node("Add", ["s", "m"], ["y"])]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", T.FLOAT, [6])],
                          [oh.make_tensor_value_info("y", T.FLOAT, None)],
                          [oh.make_tensor("shape", T.INT64, [1], [6])])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]))
    olc.register_kernels_for_session(sess)
    x = np.array([-3, -2, -1, 1, 2, 3], np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.abs(x) - 2 * x)


def test_asking_for_an_intermediate_keeps_every_result():
    sess = _graph_session([oh.make_node("Abs", ["x"], ["a"]), oh.make_node("Neg", ["a"], ["y"])],
                          ["x"], ["y"])
    x = np.array([-1, 2], np.float32)
    a, y = sess.run(["a", "y"], {"x": x})
    np.testing.assert_array_equal(a, [1, 2])
    np.testing.assert_array_equal(y, [-1, -2])
    sess.run(None, {"x": 3 * x})
    np.testing.assert_array_equal(a, [1, 2])  # handed to the caller: not reused


def test_a_new_shape_takes_a_view_of_a_larger_free_buffer():
    """A shape the pool never kept a buffer of takes a view of the smallest
    free one of its dtype with up to twice its elements, never one in use
    (the view holds it), of another dtype or more than twice as large; a
    shape with buffers of its own waits for its own."""
    from onnx_light_cpu._kernels._runloop import BufferPool
    f32 = np.dtype(np.float32)
    pool = BufferPool()
    for shape in ((10, 10), (30, 10)):
        pool.keep(np.empty(shape, f32))
    view = pool.take((8, 10), f32)
    assert view.shape == (8, 10) and view.base.shape == (10, 10)
    assert view.flags.c_contiguous and view.flags.writeable
    assert pool.take((9, 10), f32) is None  # the 10x10 is held by the view; 30x10 too large
    assert pool.take((8, 10), np.dtype(np.float64)) is None
    del view
    assert pool.take((4, 10), f32) is None  # more than twice
    busy = pool.take((10, 10), f32)
    assert busy.base is None
    assert pool.take((10, 10), f32) is None  # its own shape: no view of the 30x10
    assert pool.take((20, 10), f32).base.shape == (30, 10)


def test_a_new_shape_takes_its_last_buffer_again_while_it_is_free():
    """The buffer a shape without buffers of its own took last is tried
    first (no scan of the pool); in use, the scan finds another."""
    from onnx_light_cpu._kernels._runloop import BufferPool
    f32 = np.dtype(np.float32)
    pool = BufferPool()
    for shape in ((15, 10), (10, 10)):
        pool.keep(np.empty(shape, f32))
    view = pool.take((8, 10), f32)
    first = id(view.base)  # not the base itself: a reference holds it
    assert view.base.shape == (10, 10)
    del view
    for _ in range(3):
        assert id(pool.take((8, 10), f32).base) == first
    busy = pool.take((10, 10), f32)
    assert id(busy) == first
    other = pool.take((8, 10), f32)
    assert other.base.shape == (15, 10)
    assert pool.take((8, 10), f32) is None  # both held
    del other
    for _ in range(8):
        pool.end_run()  # a sweep (every 8 runs) forgets which buffer each shape took
    assert pool.take((8, 10), f32).base.shape == (15, 10)


def test_intermediates_of_new_shapes_run_in_freed_buffers():
    """A Concat of a shape no node made before writes into the buffer an
    earlier, larger intermediate freed in the same run."""
    nodes = [oh.make_node("Concat", ["x", "x", "x"], ["a"], axis=0),
             oh.make_node("Neg", ["a"], ["b"]),
             oh.make_node("Concat", ["x", "x"], ["c"], axis=0),
             oh.make_node("Abs", ["c"], ["e"])]
    sess = _graph_session(nodes, ["x"], ["b", "e"])
    x = np.arange(-20, 20, dtype=np.float32)
    b, e = sess.run(None, {"x": x})
    np.testing.assert_array_equal(b, -np.concatenate([x, x, x]))
    np.testing.assert_array_equal(e, np.abs(np.concatenate([x, x])))
    # the pool keeps a (c was a view of it); b and e are the caller's
    assert sess._olc_context.buffers.nbytes == 3 * x.nbytes
    for k in range(2, 5):
        b, e = sess.run(None, {"x": x * k})
        np.testing.assert_array_equal(b, -np.concatenate([x, x, x]) * k)
        np.testing.assert_array_equal(e, np.abs(np.concatenate([x, x]) * k))


def test_the_pool_holds_no_buffer_of_a_past_shape_or_a_dropped_output():
    """Shapes that change from run to run (a growing cache) and outputs the
    caller kept then dropped: the pool gives the memory back."""
    sess = _graph_session([oh.make_node("Abs", ["x"], ["a"]), oh.make_node("Neg", ["a"], ["y"])],
                          ["x"], ["y"])
    pool = sess._olc_context.buffers
    kept = [sess.run(None, {"x": np.ones(1000 + n, np.float32)})[0] for n in range(40)]
    assert pool.nbytes < 20 * 4 * 1040  # not one buffer a run
    del kept
    for _ in range(20):
        sess.run(None, {"x": np.ones(8, np.float32)})
    assert pool.nbytes <= 2 * 4 * 8


def test_aligned_buffers_are_owned_by_the_pool_and_views_are_not():
    """aligned_empty's arrays start on a 64-byte boundary; the pool takes
    one back once its caller lets it go, never a view of it."""
    from onnx_light_cpu._kernels._runloop import BufferPool, aligned_empty

    for shape in [(0,), (3, 5), (1000, 17)]:
        a = aligned_empty(shape, np.float32)
        assert a.shape == shape and a.dtype == np.float32 and a.flags.c_contiguous
        assert a.flags.writeable and a.ctypes.data % 64 == 0
    pool = BufferPool()
    a = aligned_empty((3, 5), np.float32)
    a[:] = 1.0
    address, values = a.ctypes.data, [a]
    del a
    assert pool.reclaim(values) == [] and pool.nbytes == 60
    back = pool.take((3, 5), np.dtype(np.float32))
    assert back is not None and back.ctypes.data == address and back.sum() == 15.0
    assert pool.reclaim([back[1:]]) == [] and pool.nbytes == 60  # a view: not kept


def test_nodes_with_no_input_and_several_outputs_in_the_lean_loop():
    nodes = [oh.make_node("Constant", [], ["k"], value_floats=[1.0, 2.0, 3.0, 4.0]),
             oh.make_node("Exp", ["x"], ["e"]),
             oh.make_node("Add", ["e", "k"], ["s"]),
             oh.make_node("Split", ["s"], ["p", "q"], num_outputs=2, axis=0)]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", T.FLOAT, [4])],
                          [oh.make_tensor_value_info(n, T.FLOAT, None) for n in ("p", "q")])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]))
    olc.register_kernels_for_session(sess)
    assert sess._olc_plan is not None
    x = np.array([0.0, 1.0, -1.0, 2.0], np.float32)
    for _ in range(2):
        p, q = sess.run(None, {"x": x})
        s = np.exp(x) + np.array([1, 2, 3, 4], np.float32)
        np.testing.assert_allclose(np.concatenate([p, q]), s, rtol=1e-6)
    with pytest.raises(RuntimeError, match="nope"):  # the original's error
        sess.run(["nope"], {"x": x})


def test_plans_follow_the_signature_from_run_to_run():
    node = oh.make_node("Pow", ["x", "e"], ["y"])
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info(n, T.UNDEFINED, None)
                                        for n in ("x", "e")],
                          [oh.make_tensor_value_info("y", T.UNDEFINED, None)])
    sess = ReferenceEvaluator(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]))
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    cases = [(x, np.float32(2)), (x.T.copy(), x), (x, np.int64(3)), (x, np.float32(2)),
             (x.astype(np.float64), np.float64(0.5))]
    for threads in (1, 2, 1):
        olc.set_num_threads_for_session(sess, threads)
        for a, e in cases:
            (y,) = sess.run(None, {"x": a, "e": np.asarray(e)})
            want = np.power(a, e).astype(a.dtype)
            assert y.dtype == a.dtype and y.shape == want.shape
            np.testing.assert_allclose(y, want, rtol=1e-6)
    assert set(olc.used_kernel_names(sess)) == {"onnx_light_cpu::Pow"}
