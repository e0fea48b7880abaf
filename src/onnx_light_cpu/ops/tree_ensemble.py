"""ai.onnx.ml TreeEnsemble (opset 5).

    Y[n, t] = aggregate over trees of the weights of the leaves row n reaches
              whose target is t, then the post transform

The attributes are validated and the trees flattened once, in the
constructor; a problem is raised when the node runs (a constructor error
would break building the evaluator).  Semantics, where the schema leaves
room, follow the onnx.reference built-in:

- aggregation adds (or compares) each float64 leaf weight into a result of
  the input's type, rounding after every step; AVERAGE adds weight / trees;
  MIN and MAX start from the type's largest finite value (so a target no
  leaf reaches reads +-max, where ONNX Runtime writes 0);
- comparisons are exact between the input value and the split of the
  attribute's type (a float input meets a double split as doubles);
- NaN features take the true branch where ``nodes_missing_value_tracks_true``
  says so, otherwise the comparison's own outcome (false, true for NEQ);
- the post transforms are those of onnx.reference's ML helpers (the
  TreeEnsemble built-in itself skips them), evaluated in double: LOGISTIC
  and PROBIT per score, SOFTMAX and SOFTMAX_ZERO per row, whatever
  ``n_targets`` (ONNX Runtime leaves a single target untransformed except
  for PROBIT).

Where the built-in departs from the schema, the schema wins: membership sets
belong to the BRANCH_MEMBER nodes in node order (the built-in takes them in
its traversal order, and reads a member 0.0 as the end of a set), and a
one-leaf tree reaches the leaf its node references (the built-in reads the
leaf at the root's node index).

ONNX Runtime 1.32 also differs: it reads post_transform 1 as LOGISTIC and 2
as SOFTMAX (the schema says the reverse), truncates a feature to an integer
before a membership test (and accepts only integer members), computes the
transforms in float and gives -inf as the probit of 0.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .._kernels import tree_ensemble as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
MODE_NAMES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ",
              "BRANCH_MEMBER")
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
FLOAT_TENSORS = (np.float16, np.float32, np.float64)

# The core's node structs (olc_te_node_f32/_f64): the comparison's 0/1
# indexes next_false/next_true.
NODE_TYPE_F32 = np.dtype([("thr", np.float32), ("feature", np.int32), ("next_false", np.int32),
                          ("next_true", np.int32)])
NODE_TYPE_F64 = np.dtype([("thr", np.float64), ("feature", np.int32), ("next_false", np.int32),
                          ("next_true", np.int32)], align=True)
INT32_MAX = np.iinfo(np.int32).max


class _AttributeError(ValueError):
    pass


def _float32_bounds(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The largest float32 <= v and the smallest float32 >= v (v float64)."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = v.astype(np.float32)
        back = f.astype(np.float64)
        down = np.where(back > v, np.nextafter(f, np.float32(-np.inf)), f)
        up = np.where(back < v, np.nextafter(f, np.float32(np.inf)), f)
    return down, up


class TreeEnsemble(KernelOp):
    op_domain = "ai.onnx.ml"
    since_version = 5
    # Work is rows x (the trees' depths + one aggregation per tree), about
    # 0.8 ns a unit on one core.  Measured through the core (10 trees of
    # depth 4, 51 units a row, best of 200 calls; the second core was
    # seldom idle, load average 4-6): 64 rows 2.6 -> 2.1 µs with two
    # threads, 128 rows 5.2 -> 3.4 µs, 1024 rows 39.7 -> 20.9 µs.  Two
    # threads from 8K units (about 6.5 µs of work).
    min_work_per_thread = 1 << 12

    inputs = (Input("X", types=(T.FLOAT, T.DOUBLE, T.FLOAT16), ranks=(2,)),)
    attributes = (
        Attr("tree_roots", "ints"), Attr("nodes_modes", "tensor"),
        Attr("nodes_featureids", "ints"), Attr("nodes_splits", "tensor"),
        Attr("nodes_truenodeids", "ints"), Attr("nodes_trueleafs", "ints"),
        Attr("nodes_falsenodeids", "ints"), Attr("nodes_falseleafs", "ints"),
        Attr("leaf_targetids", "ints"), Attr("leaf_weights", "tensor"), Attr("n_targets", "int"),
        Attr("aggregate_function", "int", 1, allowed=tuple(range(len(AGGREGATES)))),
        Attr("post_transform", "int", 0, allowed=tuple(range(len(POST_TRANSFORMS)))),
        Attr("nodes_missing_value_tracks_true", "ints", None),
        Attr("nodes_hitrates", "tensor", None), Attr("membership_values", "tensor", None))

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        self._forests = {}
        if self._attribute_error is None:
            try:
                self._parse()
            except _AttributeError as e:
                # Raised by every run: the evaluator must still build.
                self._reject_attribute(str(e))

    # ---- attributes ----

    def _parse(self) -> None:
        """Checks the declared attributes' values and flattens the trees."""

        def ints(name):
            return np.asarray(getattr(self, name), dtype=np.int64).reshape(-1)

        def floats(name):
            array = getattr(self, name)
            if array.dtype not in FLOAT_TENSORS:
                raise _AttributeError(f"attribute {name} must be a float16, float or double "
                                      f"tensor, got {array.dtype}")
            return array.reshape(-1).astype(np.float64)

        aggregate, post = self.aggregate_function, self.post_transform
        n_targets = self.n_targets
        if not 1 <= n_targets <= INT32_MAX:
            raise _AttributeError(f"attribute n_targets must be positive, got {n_targets}")

        modes = self.nodes_modes.reshape(-1).astype(np.int64)
        features = ints("nodes_featureids")
        splits = floats("nodes_splits")
        true_ids, true_leaf = ints("nodes_truenodeids"), ints("nodes_trueleafs")
        false_ids, false_leaf = ints("nodes_falsenodeids"), ints("nodes_falseleafs")
        n_nodes = len(modes)
        nodes_lists = {"nodes_featureids": features, "nodes_splits": splits,
                       "nodes_truenodeids": true_ids, "nodes_trueleafs": true_leaf,
                       "nodes_falsenodeids": false_ids, "nodes_falseleafs": false_leaf}
        if self.nodes_missing_value_tracks_true is not None:
            nodes_lists["nodes_missing_value_tracks_true"] = ints("nodes_missing_value_tracks_true")
        if self.nodes_hitrates is not None:
            nodes_lists["nodes_hitrates"] = floats("nodes_hitrates")
        for name, values in nodes_lists.items():
            if len(values) != n_nodes:
                raise _AttributeError(f"attribute {name} has {len(values)} values, nodes_modes "
                                      f"has {n_nodes}: every nodes_* attribute needs one per node")
        missing = nodes_lists.get("nodes_missing_value_tracks_true", np.zeros(n_nodes, np.int64))
        if n_nodes > INT32_MAX // 4:
            raise _AttributeError(f"too many nodes ({n_nodes})")

        targets = ints("leaf_targetids")
        weights = floats("leaf_weights")
        n_leaves = len(targets)
        if len(weights) != n_leaves:
            raise _AttributeError(f"attribute leaf_weights has {len(weights)} values, "
                                  f"leaf_targetids has {n_leaves}: they need one per leaf")
        bad = np.flatnonzero((targets < 0) | (targets >= n_targets))
        if bad.size:
            raise _AttributeError(f"attribute leaf_targetids[{bad[0]}] = {targets[bad[0]]} is out "
                                  f"of range [0, {n_targets}) (n_targets)")
        bad = np.flatnonzero((modes < 0) | (modes > MEMBER))
        if bad.size:
            raise _AttributeError(f"attribute nodes_modes[{bad[0]}] = {modes[bad[0]]} is not a "
                                  f"mode (0..6: {', '.join(MODE_NAMES)})")
        bad = np.flatnonzero((features < 0) | (features > INT32_MAX))
        if bad.size:
            raise _AttributeError(f"attribute nodes_featureids[{bad[0]}] = {features[bad[0]]} "
                                  f"is not a feature index")
        for ids, leafs, name in ((true_ids, true_leaf, "nodes_truenodeids"),
                                 (false_ids, false_leaf, "nodes_falsenodeids")):
            limit = np.where(leafs != 0, n_leaves, n_nodes)
            bad = np.flatnonzero((ids < 0) | (ids >= limit))
            if bad.size:
                i = bad[0]
                what = "leaf_* entries" if leafs[i] else "nodes"
                raise _AttributeError(f"attribute {name}[{i}] = {ids[i]} is out of range: "
                                      f"there are {limit[i]} {what}")
        roots = ints("tree_roots")
        bad = np.flatnonzero((roots < 0) | (roots >= n_nodes))
        if bad.size:
            raise _AttributeError(f"attribute tree_roots[{bad[0]}] = {roots[bad[0]]} is out of "
                                  f"range [0, {n_nodes}) (the nodes_* entries)")

        # One set per BRANCH_MEMBER node, in node order, each ended by NaN.
        member_nodes = np.flatnonzero(modes == MEMBER)
        sets = {}
        if self.membership_values is not None:
            values = floats("membership_values")
            ends = np.flatnonzero(np.isnan(values))
            if len(ends) != len(member_nodes):
                raise _AttributeError(
                    f"attribute membership_values holds {len(ends)} NaN-terminated sets for "
                    f"{len(member_nodes)} BRANCH_MEMBER nodes")
            start = 0
            for node_index, end in zip(member_nodes, ends):
                sets[int(node_index)] = np.unique(values[start:end])
                start = end + 1
        elif len(member_nodes):
            raise _AttributeError(f"nodes_modes has {len(member_nodes)} BRANCH_MEMBER nodes but "
                                  "attribute membership_values is missing")

        try:
            src, next_true, next_false, tree_root, tree_depth = core.flatten(
                true_ids, true_leaf, false_ids, false_leaf, roots, n_leaves)
        except ValueError as e:
            raise _AttributeError(str(e)) from None
        if len(src) > INT32_MAX:
            raise _AttributeError(f"the flattened trees have too many nodes ({len(src)})")

        inner = src >= 0
        s = np.where(inner, src, 0)
        self._src, self._inner = src, inner
        self._modes = np.where(inner, modes[s], LEQ).astype(np.uint8)
        self._features = np.where(inner, features[s], 0).astype(np.int32)
        self._splits = np.where(inner, splits[s], np.nan)
        self._leaf = np.where(inner, -1, -1 - src).astype(np.int32)
        self._next_true, self._next_false = next_true, next_false
        tracks = inner & (missing[s] != 0)
        nan_true = tracks | (self._modes == NEQ)
        self._nan_next = np.where(inner, np.where(nan_true, next_true, next_false),
                                  np.arange(len(src))).astype(np.int32)
        self._sets = {int(i): sets[int(src[i])]
                      for i in np.flatnonzero(inner & (self._modes == MEMBER))}
        self._tree_root, self._tree_depth = tree_root, tree_depth
        self._work_per_row = int(tree_depth.sum()) + len(tree_depth) + 1
        # One comparison mode everywhere: the core's branch-free walks; the
        # nodes whose NaN goes true then store their feature complemented.
        used = np.unique(self._modes[inner])
        self._uniform = -1
        if len(used) == 1 and used[0] <= GT:
            self._uniform = int(used[0]) + (core.TRACK_NAN if tracks.any() else 0)
            self._features = np.where(tracks, ~self._features, self._features).astype(np.int32)
        self._max_feature = int(features[s][inner].max()) if inner.any() else -1
        self._leaf_weights = np.ascontiguousarray(weights)
        self._leaf_targets = targets.astype(np.int32)
        self.n_targets, self.aggregate, self.post_transform = n_targets, aggregate, post
        mode = "generic"
        if self._uniform >= 0:
            mode = MODE_NAMES[int(used[0])].lower() + ("_nan" if tracks.any() else "")
        self._path_prefix = f"tree_ensemble_{mode}"

    def _forest(self, double: bool):
        """The core's arrays in the compute type (float32 for float and
        float16 inputs, float64 for double), built on first use."""
        forest = self._forests.get(double)
        if forest is not None:
            return forest
        nodes = np.empty(len(self._src), dtype=NODE_TYPE_F64 if double else NODE_TYPE_F32)
        nodes["feature"] = self._features
        nodes["next_true"] = self._next_true
        nodes["next_false"] = self._next_false
        if double:
            nodes["thr"] = self._splits
        else:
            # Exact comparisons of float inputs with wider splits: x <= t is
            # x <= (largest float <= t), x < t is x < (smallest float >= t)...
            down, up = _float32_bounds(self._splits)
            m = self._modes
            thr = np.where((m == LEQ) | (m == GT), down, up)
            # ... and x == t never holds for a t no float equals.
            exact = down == up
            thr = np.where(((m == EQ) | (m == NEQ)) & ~exact, np.float32(np.nan), thr)
            nodes["thr"] = thr
        compute = np.float64 if double else np.float32
        begin = np.zeros(len(self._src), dtype=np.int32)
        end = np.zeros(len(self._src), dtype=np.int32)
        chunks, offset = [], 0
        for i, values in self._sets.items():
            if not double:  # members no float equals can never match
                values = values[values.astype(np.float32).astype(np.float64) == values]
            values = np.unique(values.astype(compute))
            begin[i], end[i] = offset, offset + len(values)
            offset += len(values)
            chunks.append(values)
        set_values = np.concatenate(chunks) if chunks else np.zeros(1, dtype=compute)
        forest = core.Forest(nodes, self._modes, self._nan_next, self._leaf, begin, end,
                             np.ascontiguousarray(set_values, dtype=compute), self._tree_root,
                             self._tree_depth, self._leaf_weights, self._leaf_targets,
                             self.n_targets, self._uniform, self.aggregate, self.post_transform)
        self._forests[double] = forest
        return forest

    # ---- run ----

    def _plan(self, x):
        if self._max_feature >= x.shape[1] and x.shape[0]:
            raise ValueError(self._input_error(
                0, f"has {x.shape[1]} features (shape {x.shape}) but the trees read feature "
                   f"{self._max_feature}"))
        element_type = ELEMENT_TYPES[x.dtype]
        label = f"{self._path_prefix}_{x.dtype.name}"
        work = x.shape[0] * self._work_per_row
        return (element_type, self._forest(element_type == T.DOUBLE),
                self._num_threads(work, self.min_work_per_thread),
                ((element_type, self._uniform), lambda: label))

    def _execute(self, plan, x):
        element_type, forest, threads, path = plan
        self._record_path(*path)
        y = self._new_output((x.shape[0], self.n_targets), x.dtype)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if element_type == T.FLOAT16:
            x, out = x.view(np.uint16), y.view(np.uint16)
        else:
            out = y
        forest.predict(x, out, element_type, threads)
        return (y,)


KERNELS = {
    "RegisterTreeEnsembleKernel": (TreeEnsemble,),
}
