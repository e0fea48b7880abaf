# The C API of tree_ensemble/olc_tree_ensemble.h that tree_ensemble.pyx uses.

from libc.stdint cimport int32_t, int64_t, uint8_t

cdef extern from "tree_ensemble/olc_tree_ensemble.h" nogil:
    ctypedef struct olc_te_forest:
        const void *nodes
        const uint8_t *modes
        const int32_t *nan_next
        const int32_t *leaf
        const int32_t *set_begin
        const int32_t *set_end
        const void *set_values
        const int32_t *roots
        const int32_t *depths
        int64_t n_trees
        const double *leaf_weights
        const int32_t *leaf_targets
        int64_t n_targets
        int uniform_mode
        int aggregate, post_transform
    int olc_te_block(const olc_te_forest *f, int dtype, const void *x, int64_t row0,
                     int64_t rows, int64_t F, void *y)
    int OLC_TE_NAN
