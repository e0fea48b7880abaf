/* The walks of one compute type OLC_TE_TN (f32: float, f64: double):
 * olc_te_walk_<type> sends rows [0, rows) of x through one tree and writes
 * the node each reached.  Included by olc_tree_ensemble.h; no include
 * guard. */

/* Set membership: short sets scanned, long ones bisected. */
static inline int OLC_TE_FN(olc_te_member)(const OLC_TE_X *v, int32_t b, int32_t e, OLC_TE_X x) {
    if (e - b <= 16) {
        for (int32_t i = b; i < e; ++i)
            if (v[i] == x) return 1;
        return 0;
    }
    int32_t lo = b, hi = e;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo < e && v[lo] == x;
}

/* One comparison mode (LEQ..GT) for every node; mode and track are
 * constants where this is inlined.  Without track a NaN feature makes the
 * comparison false, as the operator wants.  With track a node whose NaN
 * goes to the true branch stores its feature complemented (~feature < 0):
 * the sign both recovers the index and ORs "is NaN" into the outcome,
 * branch-free. */
static inline __attribute__((always_inline)) void OLC_TE_FN(olc_te_walk_uniform)(
    const OLC_TE_NODE *nodes, int32_t root, int32_t depth, const OLC_TE_X *x, int64_t F,
    int64_t rows, int32_t *out, const int mode, const int track) {
    const int G = track ? 8 : 16; /* fewer with track: no spills */
    for (int64_t r0 = 0; r0 < rows; r0 += G) {
        int64_t m = rows - r0 < G ? rows - r0 : G;
        int32_t idx[16];
        const OLC_TE_X *xr[16];
        for (int r = 0; r < G; ++r) {
            idx[r] = root;
            xr[r] = x + (r0 + (r < m ? r : 0)) * F; /* tail lanes repeat */
        }
        for (int32_t d = 0; d < depth; ++d) {
            for (int r = 0; r < G; ++r) {
                const OLC_TE_NODE *n = nodes + idx[r];
                int32_t fe = n->feature, neg = track ? fe >> 31 : 0;
                OLC_TE_X v = xr[r][fe ^ neg];
                /* An index, not a branch: the outcome is unpredictable. */
                int c = mode == OLC_TE_LEQ ? v <= n->thr
                      : mode == OLC_TE_LT  ? v < n->thr
                      : mode == OLC_TE_GTE ? v >= n->thr
                                           : v > n->thr;
                if (track) c |= (v != v) & neg;
                idx[r] = (&n->next_false)[c];
            }
            if ((d & 3) == 3 && d + 1 < depth) { /* all at leaves? */
                int done = 1;
                for (int r = 0; r < G; ++r)
                    done &= nodes[idx[r]].next_false == idx[r];
                if (done) break;
            }
        }
        for (int64_t r = 0; r < m; ++r) out[r0 + r] = idx[r];
    }
}

/* Any mode, NaN tracking: one switch per step. */
static void OLC_TE_FN(olc_te_walk_generic)(const olc_te_forest *f, int32_t root, int32_t depth,
                                           const OLC_TE_X *x, int64_t F, int64_t rows, int32_t *out) {
    const OLC_TE_NODE *nodes = (const OLC_TE_NODE *)f->nodes;
    const OLC_TE_X *sv = (const OLC_TE_X *)f->set_values;
    for (int64_t r0 = 0; r0 < rows; r0 += OLC_TE_GROUP) {
        int64_t m = rows - r0 < OLC_TE_GROUP ? rows - r0 : OLC_TE_GROUP;
        int32_t idx[OLC_TE_GROUP];
        const OLC_TE_X *xr[OLC_TE_GROUP];
        for (int r = 0; r < OLC_TE_GROUP; ++r) {
            idx[r] = root;
            xr[r] = x + (r0 + (r < m ? r : 0)) * F;
        }
        for (int32_t d = 0; d < depth; ++d) {
            for (int r = 0; r < OLC_TE_GROUP; ++r) {
                int32_t i = idx[r];
                const OLC_TE_NODE *n = nodes + i;
                OLC_TE_X v = xr[r][n->feature];
                int32_t nx;
                if (v != v) {
                    nx = f->nan_next[i];
                } else {
                    int c;
                    switch (f->modes[i]) {
                    case OLC_TE_LEQ: c = v <= n->thr; break;
                    case OLC_TE_LT: c = v < n->thr; break;
                    case OLC_TE_GTE: c = v >= n->thr; break;
                    case OLC_TE_GT: c = v > n->thr; break;
                    case OLC_TE_EQ: c = v == n->thr; break;
                    case OLC_TE_NEQ: c = v != n->thr; break;
                    default: c = OLC_TE_FN(olc_te_member)(sv, f->set_begin[i], f->set_end[i], v);
                    }
                    nx = (&n->next_false)[c];
                }
                idx[r] = nx;
            }
            if ((d & 3) == 3 && d + 1 < depth) {
                int done = 1;
                for (int r = 0; r < OLC_TE_GROUP; ++r)
                    done &= nodes[idx[r]].next_false == idx[r];
                if (done) break;
            }
        }
        for (int64_t r = 0; r < m; ++r) out[r0 + r] = idx[r];
    }
}

/* The forest's walk: a uniform one where every node has one comparison
 * mode (+ OLC_TE_NAN when some NaN goes true), else the generic one. */
static void OLC_TE_FN(olc_te_walk)(const olc_te_forest *f, int32_t root, int32_t depth,
                                   const void *x, int64_t F, int64_t rows, int32_t *out) {
    const OLC_TE_NODE *n = (const OLC_TE_NODE *)f->nodes;
    const OLC_TE_X *xt = (const OLC_TE_X *)x;
    switch (f->uniform_mode) {
    case OLC_TE_LEQ:
        OLC_TE_FN(olc_te_walk_uniform)(n, root, depth, xt, F, rows, out, OLC_TE_LEQ, 0); break;
    case OLC_TE_LT:
        OLC_TE_FN(olc_te_walk_uniform)(n, root, depth, xt, F, rows, out, OLC_TE_LT, 0); break;
    case OLC_TE_GTE:
        OLC_TE_FN(olc_te_walk_uniform)(n, root, depth, xt, F, rows, out, OLC_TE_GTE, 0); break;
    case OLC_TE_GT:
        OLC_TE_FN(olc_te_walk_uniform)(n, root, depth, xt, F, rows, out, OLC_TE_GT, 0); break;
    case OLC_TE_NAN + OLC_TE_LEQ:
        OLC_TE_FN(olc_te_walk_uniform)(n, root, depth, xt, F, rows, out, OLC_TE_LEQ, 1); break;
    case OLC_TE_NAN + OLC_TE_LT:
        OLC_TE_FN(olc_te_walk_uniform)(n, root, depth, xt, F, rows, out, OLC_TE_LT, 1); break;
    case OLC_TE_NAN + OLC_TE_GTE:
        OLC_TE_FN(olc_te_walk_uniform)(n, root, depth, xt, F, rows, out, OLC_TE_GTE, 1); break;
    case OLC_TE_NAN + OLC_TE_GT:
        OLC_TE_FN(olc_te_walk_uniform)(n, root, depth, xt, F, rows, out, OLC_TE_GT, 1); break;
    default: OLC_TE_FN(olc_te_walk_generic)(f, root, depth, xt, F, rows, out);
    }
}
