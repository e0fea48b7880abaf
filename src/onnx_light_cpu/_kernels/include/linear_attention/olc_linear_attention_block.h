/* The block kernel of one level and one block width: a body file
 * (common/olc_level.h) that olc_linear_attention.h includes twice per level
 * with OLC_LVL, OLC_LVL_ATTR, OLC_LA_VW (floats per native vector,
 * OLC_FN(olc_la_vf) being that vector) and OLC_LA_NV / OLC_LA_WIDTH (2 / w:
 * two vectors a block row, 1 / n: one).  OLC_LA_FN(olc_la_block) is
 * olc_la_block_<width>_<level>.  No include guard.
 *
 * A block row is NV native vectors: row i, part x is S[i * NV + x].  The
 * loops over x have a constant trip count, so they unroll and the small
 * arrays stay in registers.  A pass reads its rows from src (row stride ss
 * floats): the block itself, or on the first token the caller's float32
 * past state, so decode reads the past once instead of copying it in
 * first; the update pass also writes the new rows to `keep` (the present
 * state, row stride dv) when the state of this token is kept.  The passes
 * are always inlined with a constant `factor`, so each decay rule gets its
 * own loop. */

static inline __attribute__((always_inline)) OLC_LVL_ATTR OLC_FN(olc_la_vf)
OLC_LA_FN(olc_la_ld)(const float *p) {
    OLC_FN(olc_la_vf) v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline __attribute__((always_inline)) OLC_LVL_ATTR void
OLC_LA_FN(olc_la_st)(float *p, OLC_FN(olc_la_vf) v) {
    memcpy(p, &v, sizeof v);
}
/* x times the decay of row i: OLC_LA_NONE, OLC_LA_ROW (e[i]), OLC_LA_HEAD (e0). */
static inline __attribute__((always_inline)) OLC_LVL_ATTR OLC_FN(olc_la_vf)
OLC_LA_FN(olc_la_decay)(OLC_FN(olc_la_vf) x, const int factor, const float *e, float e0, int64_t i) {
    return factor == OLC_LA_ROW ? x * e[i] : factor == OLC_LA_HEAD ? x * e0 : x;
}

/* S = S * factor + k u^T over the block's rows, with the readout of the
 * first query head (two accumulators so the FMA chains overlap). */
static inline __attribute__((always_inline)) OLC_LVL_ATTR void OLC_LA_FN(olc_la_update)(
        const int factor, OLC_FN(olc_la_vf) *S, const float *src, int64_t ss, float *keep,
        int keep_s, const float *k, const float *q, const float *e, float e0,
        const OLC_FN(olc_la_vf) *u, OLC_FN(olc_la_vf) *o0, OLC_FN(olc_la_vf) *o1, int64_t dk,
        int64_t dv) {
    enum { VW = OLC_LA_VW, NV = OLC_LA_NV };
    int64_t i = 0;
    for (; i + 2 <= dk; i += 2) {
        const float k0 = k[i], k1 = k[i + 1], q0 = q[i], q1 = q[i + 1];
        for (int x = 0; x < NV; ++x) {
            OLC_FN(olc_la_vf) s0 = OLC_LA_FN(olc_la_decay)(
                OLC_LA_FN(olc_la_ld)(src + i * ss + x * VW), factor, e, e0, i) + k0 * u[x];
            OLC_FN(olc_la_vf) s1 = OLC_LA_FN(olc_la_decay)(
                OLC_LA_FN(olc_la_ld)(src + (i + 1) * ss + x * VW), factor, e, e0, i + 1) + k1 * u[x];
            if (keep_s) { S[i * NV + x] = s0; S[(i + 1) * NV + x] = s1; }
            if (keep) {
                OLC_LA_FN(olc_la_st)(keep + i * dv + x * VW, s0);
                OLC_LA_FN(olc_la_st)(keep + (i + 1) * dv + x * VW, s1);
            }
            o0[x] += s0 * q0; o1[x] += s1 * q1;
        }
    }
    if (i < dk)
        for (int x = 0; x < NV; ++x) {
            OLC_FN(olc_la_vf) s0 = OLC_LA_FN(olc_la_decay)(
                OLC_LA_FN(olc_la_ld)(src + i * ss + x * VW), factor, e, e0, i) + k[i] * u[x];
            if (keep_s) S[i * NV + x] = s0;
            if (keep) OLC_LA_FN(olc_la_st)(keep + i * dv + x * VW, s0);
            o0[x] += s0 * q[i];
        }
}

/* r = (S * factor)^T k, storing the decayed state in S when `store`. */
static inline __attribute__((always_inline)) OLC_LVL_ATTR void OLC_LA_FN(olc_la_retrieve)(
        const int factor, int store, OLC_FN(olc_la_vf) *S, const float *src, int64_t ss,
        const float *k, const float *e, float e0, OLC_FN(olc_la_vf) *r0, OLC_FN(olc_la_vf) *r1,
        int64_t dk) {
    enum { VW = OLC_LA_VW, NV = OLC_LA_NV };
    int64_t i = 0;
    for (; i + 2 <= dk; i += 2) {
        const float k0 = k[i], k1 = k[i + 1];
        for (int x = 0; x < NV; ++x) {
            OLC_FN(olc_la_vf) s0 = OLC_LA_FN(olc_la_decay)(
                OLC_LA_FN(olc_la_ld)(src + i * ss + x * VW), factor, e, e0, i);
            OLC_FN(olc_la_vf) s1 = OLC_LA_FN(olc_la_decay)(
                OLC_LA_FN(olc_la_ld)(src + (i + 1) * ss + x * VW), factor, e, e0, i + 1);
            if (store) { S[i * NV + x] = s0; S[(i + 1) * NV + x] = s1; }
            r0[x] += s0 * k0; r1[x] += s1 * k1;
        }
    }
    if (i < dk)
        for (int x = 0; x < NV; ++x) {
            OLC_FN(olc_la_vf) s0 = OLC_LA_FN(olc_la_decay)(
                OLC_LA_FN(olc_la_ld)(src + i * ss + x * VW), factor, e, e0, i);
            if (store) S[i * NV + x] = s0;
            r0[x] += s0 * k[i];
        }
}

/* Columns [j0, j0 + jn) of the state, all the chunk's tokens (see
 * olc_la_chunk); blk: [dk, JB] floats of scratch. */
OLC_LVL_ATTR static void OLC_LA_FN(olc_la_block)(const olc_la_chunk *c, float *blk, int64_t j0,
                                                 int64_t jn) {
    enum { VW = OLC_LA_VW, NV = OLC_LA_NV, JB = OLC_LA_VW * OLC_LA_NV };
    OLC_FN(olc_la_vf) *S = (OLC_FN(olc_la_vf) *)blk;
    const int64_t dk = c->dk, dv = c->dv, nq = c->nq;
    const OLC_FN(olc_la_vf) zero = {0};
    /* float32 state, whole block: rows move as vectors, in the passes */
    const int fast = c->sdt == OLC_FLOAT && jn == JB;
    const float *src = blk;
    int64_t ss = JB;
    if (c->load) {
        if (!c->init)
            for (int64_t i = 0; i < dk * NV; ++i) S[i] = zero;
        else if (fast) { src = (const float *)c->init + j0; ss = dv; }
        else olc_la_load_block(c->widen, blk, JB, c->init, c->sdt, dk, dv, j0, jn);
    }
    for (int64_t t = 0; t < c->n; ++t) {
        const float *k = c->k + t * c->ks, *vv = c->v + t * c->vs + j0;
        const float *q = c->q + t * c->qs;
        const float *e = c->gated ? c->e + t * c->es : NULL;
        const float e0 = e ? e[0] : 1.0f;
        char *slot = NULL;
        float *keep = NULL;
        if (t >= c->store_from) {
            slot = (char *)c->slot0
                 + (t - c->store_from) * c->slot_stride * olc_la_esize(c->sdt);
            if (fast) keep = (float *)slot + j0;
        }
        /* the item's last token, written to present, read by one head: the
         * block itself needs no update (decode writes the state once) */
        const int keep_s = !(keep && nq == 1 && c->last && t == c->n - 1);
        OLC_FN(olc_la_vf) u[NV], o0[NV], o1[NV];
        if (jn == JB) memcpy(u, vv, sizeof u);
        else {
            float tmp[JB] = {0};
            for (int64_t cc = 0; cc < jn; ++cc) tmp[cc] = vv[cc];
            memcpy(u, tmp, sizeof u);
        }
        for (int x = 0; x < NV; ++x) o0[x] = o1[x] = zero;
        if (c->delta) {
            OLC_FN(olc_la_vf) r0[NV], r1[NV];
            for (int x = 0; x < NV; ++x) r0[x] = r1[x] = zero;
            /* the first pass stores the (decayed) state in the block, which the
             * update then reads from L1 */
            if (!e) {
                const int store = src != blk;
                OLC_LA_FN(olc_la_retrieve)(OLC_LA_NONE, store, S, src, ss, k, e, e0, r0, r1, dk);
                if (store) { src = blk; ss = JB; }
            } else if (c->decay_rows) {
                OLC_LA_FN(olc_la_retrieve)(OLC_LA_ROW, 1, S, src, ss, k, e, e0, r0, r1, dk);
                src = blk; ss = JB;
            } else {
                OLC_LA_FN(olc_la_retrieve)(OLC_LA_HEAD, 1, S, src, ss, k, e, e0, r0, r1, dk);
                src = blk; ss = JB;
            }
            const float bt = c->beta[t];
            for (int x = 0; x < NV; ++x) u[x] = (u[x] - (r0[x] + r1[x])) * bt;
            OLC_LA_FN(olc_la_update)(OLC_LA_NONE, S, src, ss, keep, keep_s, k, q, e, e0, u, o0, o1,
                                     dk, dv);
        } else if (!e) {
            OLC_LA_FN(olc_la_update)(OLC_LA_NONE, S, src, ss, keep, keep_s, k, q, e, e0, u, o0, o1,
                                     dk, dv);
        } else if (c->decay_rows) {
            OLC_LA_FN(olc_la_update)(OLC_LA_ROW, S, src, ss, keep, keep_s, k, q, e, e0, u, o0, o1,
                                     dk, dv);
        } else {
            OLC_LA_FN(olc_la_update)(OLC_LA_HEAD, S, src, ss, keep, keep_s, k, q, e, e0, u, o0, o1,
                                     dk, dv);
        }
        src = blk;
        ss = JB;
        for (int64_t g = 0; g < nq; ++g) {
            if (g > 0) {  /* the other query heads of the group read S again */
                const float *qg = q + g * c->qg;
                for (int x = 0; x < NV; ++x) o0[x] = o1[x] = zero;
                int64_t i = 0;
                for (; i + 2 <= dk; i += 2)
                    for (int x = 0; x < NV; ++x) {
                        o0[x] += S[i * NV + x] * qg[i];
                        o1[x] += S[(i + 1) * NV + x] * qg[i + 1];
                    }
                if (i < dk)
                    for (int x = 0; x < NV; ++x) o0[x] += S[i * NV + x] * qg[i];
            }
            OLC_FN(olc_la_vf) o[NV];
            for (int x = 0; x < NV; ++x) o[x] = (o0[x] + o1[x]) * c->scale;
            float *out = c->out + t * c->os + g * c->og + j0;
            if (jn == JB) memcpy(out, o, sizeof o);
            else {
                float tmp[JB];
                memcpy(tmp, o, sizeof o);
                for (int64_t cc = 0; cc < jn; ++cc) out[cc] = tmp[cc];
            }
        }
        if (slot && !fast)
            olc_la_store_block(c->narrow, slot, c->sdt, blk, JB, dk, dv, j0, jn);
    }
}
