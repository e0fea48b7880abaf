# cython: language_level=3, boundscheck=False, wraparound=False
"""ai.onnx.ml TreeEnsemble core.

:func:`flatten` lays each tree out once as a run of nodes in depth-first
order (true branch first), leaves included as self-loops; :class:`Forest`
holds the flattened arrays of one compute type and evaluates blocks of rows
on the worker pool (a row's result does not depend on the thread count).
"""

cimport numpy as cnp
import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc

from olc_pool cimport olc_parallel_for, olc_pool_import
from olc_tree_ensemble cimport OLC_TE_NAN, olc_te_block, olc_te_forest

cnp.import_array()
olc_pool_import()

# Added to a uniform mode when some node sends NaN to its true branch.
TRACK_NAN = OLC_TE_NAN

# Rows per block: a block walks every tree, so a tree's nodes stay in L1
# while 128 rows go through it.
cdef enum:
    BLOCK = 128


def flatten(const int64_t[:] true_ids, const int64_t[:] true_leaf,
            const int64_t[:] false_ids, const int64_t[:] false_leaf,
            const int64_t[:] roots, int64_t n_leaves):
    """Lay out the trees reachable from ``roots``.

    Returns ``(src, next_true, next_false, tree_root, tree_depth)``: per
    flattened node, its source (a ``nodes_*`` index, or ``-1 - leaf`` for a
    leaf) and its successors; per tree its root and the steps to its deepest
    leaf.  Trees sharing a root share nodes.
    A node whose two branches are the same leaf is that leaf.  Raises
    ValueError on a cycle.  Indices must be in range (checked by the caller).
    """
    cdef int64_t n_nodes = true_ids.shape[0]
    cdef int64_t[:] local = np.full(n_nodes, -1, dtype=np.int64)
    cdef int64_t[:] leaf_local = np.full(max(n_leaves, 1), -1, dtype=np.int64)
    cdef uint8_t[:] color = np.zeros(max(n_nodes, 1), dtype=np.uint8)  # 1 open, 2 done
    cdef int64_t[:] stack_node = np.empty(max(n_nodes, 1), dtype=np.int64)
    cdef uint8_t[:] stack_k = np.empty(max(n_nodes, 1), dtype=np.uint8)
    src, nt, nf, height = [], [], [], []
    root_of = {}
    tree_root = np.empty(roots.shape[0], dtype=np.int32)
    tree_depth = np.empty(roots.shape[0], dtype=np.int32)
    cdef int64_t t, r, top, node, child, cid, leaf, k, i
    cdef bint is_leaf
    touched, touched_leaves = [], []
    for t in range(roots.shape[0]):
        r = roots[t]
        if r in root_of:
            tree_root[t] = root_of[r]
            tree_depth[t] = height[root_of[r]]
            continue
        for i in touched:
            local[i] = -1
            color[i] = 0
        for i in touched_leaves:
            leaf_local[i] = -1
        touched, touched_leaves = [], []
        # The root itself may be a leaf (both branches the same leaf).
        if true_leaf[r] and false_leaf[r] and true_ids[r] == false_ids[r]:
            leaf = true_ids[r]
            cid = len(src)
            src.append(-1 - leaf)
            nt.append(cid)
            nf.append(cid)
            height.append(0)
            root_of[r] = tree_root[t] = cid
            tree_depth[t] = 0
            continue
        cid = len(src)
        local[r] = cid
        color[r] = 1
        touched.append(r)
        src.append(r)
        nt.append(-1)
        nf.append(-1)
        height.append(0)
        root_of[r] = tree_root[t] = cid
        top = 0
        stack_node[0] = r
        stack_k[0] = 0
        while top >= 0:
            node = stack_node[top]
            k = stack_k[top]
            if k == 2:
                color[node] = 2
                i = local[node]
                height[i] = 1 + max(height[nt[i]], height[nf[i]])
                top -= 1
                continue
            stack_k[top] = k + 1
            if k == 0:
                child, is_leaf = true_ids[node], true_leaf[node] != 0
            else:
                child, is_leaf = false_ids[node], false_leaf[node] != 0
            if not is_leaf and true_leaf[child] and false_leaf[child] \
                    and true_ids[child] == false_ids[child]:
                child, is_leaf = true_ids[child], True
            if is_leaf:
                cid = leaf_local[child]
                if cid < 0:
                    cid = leaf_local[child] = len(src)
                    touched_leaves.append(child)
                    src.append(-1 - child)
                    nt.append(cid)
                    nf.append(cid)
                    height.append(0)
            elif color[child] == 1:
                raise ValueError(f"the trees contain a cycle through node {child}")
            elif color[child] == 2:
                cid = local[child]
            else:
                cid = local[child] = len(src)
                color[child] = 1
                touched.append(child)
                src.append(child)
                nt.append(-1)
                nf.append(-1)
                height.append(0)
                top += 1
                stack_node[top] = child
                stack_k[top] = 0
            if k == 0:
                nt[local[node]] = cid
            else:
                nf[local[node]] = cid
        tree_depth[t] = height[tree_root[t]]
    return (np.array(src, dtype=np.int64), np.array(nt, dtype=np.int32),
            np.array(nf, dtype=np.int32), tree_root, tree_depth)


cdef struct _PredictJob:
    const olc_te_forest *f
    int dtype
    const void *x
    void *y
    int64_t N, F, block
    int *failed  # per block: nonzero when its scratch could not be allocated


cdef void _predict_task(void *arg, Py_ssize_t b, int slot) noexcept nogil:
    cdef _PredictJob *job = <_PredictJob *>arg
    cdef int64_t start = b * job.block
    cdef int64_t count = job.block if job.N - start > job.block else job.N - start
    job.failed[b] = olc_te_block(job.f, job.dtype, job.x, start, count, job.F, job.y)


cdef class Forest:
    """Flattened trees of one compute type (float32 or float64) and the
    aggregation settings; ``predict`` fills y [N, T] from x [N, F]."""

    cdef olc_te_forest f
    cdef object keep  # the arrays the struct points into

    def __init__(self, cnp.ndarray nodes, cnp.ndarray modes, cnp.ndarray nan_next,
                 cnp.ndarray leaf, cnp.ndarray set_begin, cnp.ndarray set_end,
                 cnp.ndarray set_values, cnp.ndarray roots, cnp.ndarray depths,
                 cnp.ndarray leaf_weights,
                 cnp.ndarray leaf_targets, int64_t n_targets, int uniform_mode,
                 int aggregate, int post_transform):
        arrays = (nodes, modes, nan_next, leaf, set_begin, set_end, set_values, roots, depths,
                  leaf_weights, leaf_targets)
        for a in arrays:
            if not a.flags.c_contiguous:
                raise ValueError("tree_ensemble core: arrays must be contiguous")
        self.keep = arrays
        self.f.nodes = cnp.PyArray_DATA(nodes)
        self.f.modes = <const uint8_t *>cnp.PyArray_DATA(modes)
        self.f.nan_next = <const int32_t *>cnp.PyArray_DATA(nan_next)
        self.f.leaf = <const int32_t *>cnp.PyArray_DATA(leaf)
        self.f.set_begin = <const int32_t *>cnp.PyArray_DATA(set_begin)
        self.f.set_end = <const int32_t *>cnp.PyArray_DATA(set_end)
        self.f.set_values = cnp.PyArray_DATA(set_values)
        self.f.roots = <const int32_t *>cnp.PyArray_DATA(roots)
        self.f.depths = <const int32_t *>cnp.PyArray_DATA(depths)
        self.f.n_trees = cnp.PyArray_SIZE(roots)
        self.f.leaf_weights = <const double *>cnp.PyArray_DATA(leaf_weights)
        self.f.leaf_targets = <const int32_t *>cnp.PyArray_DATA(leaf_targets)
        self.f.n_targets = n_targets
        self.f.uniform_mode = uniform_mode
        self.f.aggregate = aggregate
        self.f.post_transform = post_transform

    def predict(self, cnp.ndarray x, cnp.ndarray y, int dtype, int threads):
        """y[N, T] from C-contiguous x[N, F] of element type ``dtype`` (the
        TensorProto code of float, double or float16, float16 as uint16
        bits); blocks of rows spread over the worker pool."""
        cdef int64_t N = cnp.PyArray_DIM(x, 0)
        cdef int64_t F = cnp.PyArray_DIM(x, 1)
        cdef const void *px = cnp.PyArray_DATA(x)
        cdef void *py = cnp.PyArray_DATA(y)
        # A row's result does not depend on its block, so a few rows may be
        # cut into smaller blocks to give each thread about four (the caller
        # can then take over the share of a worker that does not wake).
        cdef int64_t block = BLOCK
        if threads > 1 and N < 4 * BLOCK * threads:
            block = max(16, (N + 64 * threads - 1) // (64 * threads) * 16)
        cdef int64_t nblocks = (N + block - 1) // block
        cdef int64_t b
        cdef _PredictJob job
        if N == 0:
            return
        job.f, job.dtype, job.x, job.y = &self.f, dtype, px, py
        job.N, job.F, job.block = N, F, block
        job.failed = <int *>malloc(sizeof(int) * nblocks)
        if job.failed == NULL:
            raise MemoryError()
        try:
            with nogil:
                olc_parallel_for(nblocks, _predict_task, &job, threads)
            for b in range(nblocks):
                if job.failed[b]:
                    raise MemoryError("TreeEnsemble: out of memory for a block's scratch")
        finally:
            free(job.failed)
