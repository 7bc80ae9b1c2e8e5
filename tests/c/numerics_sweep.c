/*
 * A sweep of shapes x dtypes x layouts through the C API against a plain-loop
 * double reference, with every buffer allocated at its exact size (so an
 * AddressSanitizer build catches any access outside a view's storage) and
 * output storage gaps checked for stray writes.
 * Bounds relative to the largest reference magnitude, by output dtype:
 * 1e-4 FLOAT, 1e-3 FLOAT16, 8e-3 BFLOAT16.
 * Prints FAIL lines and returns non-zero on any failure.
 */
#include "test_common.h"
#include "convtbc/convtbc_ext.h"

typedef struct {
    int64_t dims[3], strides[3], offset, storage; /* elements */
    int nd;
    aclDataType dt;
    unsigned char *buf;
    aclTensor *t;
} View;

enum { LAYOUT_CONTIGUOUS, LAYOUT_TRANSPOSED, LAYOUT_GAPPED, LAYOUT_COUNT };

static const uint16_t SENT16 = 0x7bff; /* a finite value neither dtype produces here by chance */

static void view_init(View *v, const int64_t *dims, int nd, aclDataType dt, int layout)
{
    memset(v, 0, sizeof *v);
    v->nd = nd;
    v->dt = dt;
    for (int i = 0; i < nd; ++i) v->dims[i] = dims[i];
    int64_t count = 1;
    for (int i = 0; i < nd; ++i) count *= dims[i];
    if (layout == LAYOUT_CONTIGUOUS || (nd == 1 && layout == LAYOUT_TRANSPOSED)) {
        contiguous_strides(dims, nd, v->strides);
        v->storage = count;
    } else if (layout == LAYOUT_TRANSPOSED) { /* first dim fastest */
        int64_t acc = 1;
        for (int i = 0; i < nd; ++i) {
            v->strides[i] = acc;
            acc *= dims[i] > 0 ? dims[i] : 1;
        }
        v->storage = count;
    } else { /* gaps: every dim padded by one element, offset 2, tail 1 */
        int64_t acc = 1;
        for (int i = nd - 1; i >= 0; --i) {
            v->strides[i] = acc * (i == nd - 1 ? 2 : 1);
            acc = v->strides[i] * ((dims[i] > 0 ? dims[i] : 1) + 1);
        }
        v->offset = 2;
        int64_t span = 0;
        for (int i = 0; i < nd; ++i) span += (dims[i] > 0 ? dims[i] - 1 : 0) * v->strides[i];
        v->storage = count ? v->offset + span + 2 : 0;
    }
    size_t bytes = (size_t)v->storage * elem_size(dt);
    v->buf = (unsigned char *)malloc(bytes ? bytes : 1);
    /* sentinel everywhere (0x7bff7bff as float32 is a large finite value) */
    for (size_t i = 0; i + 1 < bytes; i += 2) memcpy(v->buf + i, &SENT16, 2);
    int64_t sd[1] = {v->storage};
    v->t = aclCreateTensor(v->dims, (uint64_t)nd, dt, v->strides, v->offset, ACL_FORMAT_ND, sd, 1, v->buf);
    EXPECT(v->t != NULL, "aclCreateTensor refused a valid view: %s", recent_msg());
}

static int64_t view_index(const View *v, int64_t flat)
{
    int64_t idx = v->offset;
    for (int i = v->nd - 1; i >= 0; --i) {
        int64_t d = v->dims[i];
        idx += (flat % d) * v->strides[i];
        flat /= d;
    }
    return idx;
}

static int64_t view_count(const View *v)
{
    int64_t c = 1;
    for (int i = 0; i < v->nd; ++i) c *= v->dims[i];
    return c;
}

static void view_fill(View *v, double *dense, unsigned *seed)
{
    int64_t n = view_count(v);
    for (int64_t i = 0; i < n; ++i) {
        *seed = *seed * 1103515245u + 12345u;
        float val = (float)((int)((*seed >> 16) % 129) - 64) / 64.0f; /* exact in every dtype */
        store_elem(v->buf, view_index(v, i), v->dt, val);
        dense[i] = val;
    }
}

static void view_free(View *v)
{
    if (v->t) aclDestroyTensor(v->t);
    free(v->buf);
}

/* Every storage element outside the view still holds the sentinel. */
static int gaps_untouched(const View *v)
{
    int64_t n = view_count(v);
    unsigned char *mark = (unsigned char *)calloc((size_t)(v->storage ? v->storage : 1), 1);
    for (int64_t i = 0; i < n; ++i) mark[view_index(v, i)] = 1;
    int ok = 1;
    size_t es = elem_size(v->dt);
    for (int64_t i = 0; i < v->storage && ok; ++i) {
        if (mark[i]) continue;
        for (size_t b = 0; b < es; b += 2)
            if (memcmp(v->buf + (size_t)i * es + b, &SENT16, 2) != 0) ok = 0;
    }
    free(mark);
    return ok;
}

/* The convtbcHostTensor describing the same view of the same storage. */
static convtbcHostTensor host_of(const View *v)
{
    convtbcHostTensor h;
    memset(&h, 0, sizeof h);
    h.data = v->buf;
    h.storage_elements = v->storage;
    h.offset = v->offset;
    h.dtype = v->dt;
    h.rank = (uint64_t)v->nd;
    for (int i = 0; i < v->nd; ++i) {
        h.dims[i] = v->dims[i];
        h.strides[i] = v->strides[i];
    }
    return h;
}

static double bound_for(aclDataType dt) { return dt == ACL_FLOAT ? 1e-4 : dt == ACL_FLOAT16 ? 1e-3 : 8e-3; }

static void compare(const View *v, const double *ref, const char *name, const char *ctx)
{
    int64_t n = view_count(v);
    double scale = 0, err = 0;
    for (int64_t i = 0; i < n; ++i) scale = fmax(scale, fabs(ref[i]));
    for (int64_t i = 0; i < n; ++i) {
        double got = load_elem(v->buf, view_index(v, i), v->dt);
        double e = fabs(got - ref[i]);
        if (!(e <= err)) err = e; /* NaN-propagating max */
    }
    double rel = scale > 0 ? err / scale : err;
    EXPECT(rel <= bound_for(v->dt), "%s %s: relative error %.3e > %.1e", ctx, name, rel, bound_for(v->dt));
    EXPECT(gaps_untouched(v), "%s %s: storage outside the view was written", ctx, name);
}

int main(void)
{
    static const int64_t shapes[][6] = {
        /* T, B, C_in, K, C_out, pad */
        {1, 1, 1, 1, 1, 0},   {3, 2, 1, 4, 1, 2},  {2, 1, 3, 5, 2, 2},   {7, 3, 5, 3, 4, 0},
        {7, 3, 5, 3, 4, 6},   {33, 5, 17, 4, 19, 1}, {16, 8, 64, 2, 48, 0}, {9, 3, 7, 9, 70, 4},
        {0, 2, 3, 1, 2, 1},   {5, 2, 3, 0, 4, 1},  {5, 2, 0, 2, 3, 0},   {24, 4, 40, 5, 33, 2},
        {1, 9, 130, 1, 17, 0}, {64, 1, 41, 26, 1, 0}, {43, 7, 70, 1, 1, 0}, {5, 3, 37, 2, 3, 1},
    };
    static const aclDataType dts[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};
    unsigned seed = 12345u;
    int cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        int64_t T = shapes[s][0], B = shapes[s][1], Ci = shapes[s][2], K = shapes[s][3], Co = shapes[s][4],
                pad = shapes[s][5], To = T + 2 * pad + 1 - K;
        for (int combo = 0; combo < 6; ++combo) {
            int layout = combo % LAYOUT_COUNT;
            /* dtype of each of the seven tensors: all-same for combos 0..2, mixed after */
            aclDataType d[7];
            for (int i = 0; i < 7; ++i) d[i] = combo < 3 ? dts[combo] : dts[(i + combo) % 3];
            int8_t cube = 0;
            const int64_t dgo[3] = {To, B, Co}, dx[3] = {T, B, Ci}, dw[3] = {K, Ci, Co}, db[1] = {Co};
            View go, x, w, b, gi, gw, gb;
            view_init(&go, dgo, 3, d[0], layout);
            view_init(&x, dx, 3, d[1], (layout + 1) % LAYOUT_COUNT);
            view_init(&w, dw, 3, d[2], (layout + 2) % LAYOUT_COUNT);
            view_init(&b, db, 1, d[3], layout);
            view_init(&gi, dx, 3, d[4], layout == LAYOUT_CONTIGUOUS ? LAYOUT_GAPPED : layout);
            view_init(&gw, dw, 3, d[5], (layout + 2) % LAYOUT_COUNT);
            view_init(&gb, db, 1, d[6], LAYOUT_GAPPED);
            size_t ngo = (size_t)(To * B * Co), nx = (size_t)(T * B * Ci), nw = (size_t)(K * Ci * Co);
            double *rgo = (double *)calloc(ngo + 1, sizeof(double)), *rx = (double *)calloc(nx + 1, sizeof(double)),
                   *rw = (double *)calloc(nw + 1, sizeof(double)), *rb = (double *)calloc((size_t)Co + 1, 8);
            double *egi = (double *)calloc(nx + 1, sizeof(double)), *egw = (double *)calloc(nw + 1, sizeof(double)),
                   *egb = (double *)calloc((size_t)Co + 1, sizeof(double));
            view_fill(&go, rgo, &seed);
            view_fill(&x, rx, &seed);
            view_fill(&w, rw, &seed);
            view_fill(&b, rb, &seed);
            reference(rgo, rx, rw, T, B, Ci, K, Co, pad, egi, egw, egb);

            char ctx[160];
            snprintf(ctx, sizeof ctx, "shape T%lld B%lld Ci%lld K%lld Co%lld pad%lld combo %d", (long long)T,
                     (long long)B, (long long)Ci, (long long)K, (long long)Co, (long long)pad, combo);
            uint64_t wsz = 0;
            aclOpExecutor *ex = NULL;
            aclnnStatus st = aclnnConvTbcBackwardGetWorkspaceSize(go.t, x.t, w.t, b.t, pad, cube, gi.t, gw.t, gb.t,
                                                                  &wsz, &ex);
            EXPECT(st == 0, "%s: phase 1 status %d: %s", ctx, st, recent_msg());
            if (st == 0) {
                void *ws = wsz ? malloc((size_t)wsz) : NULL; /* exact size, malloc alignment only */
                st = aclnnConvTbcBackward(ws, wsz, ex, NULL);
                EXPECT(st == 0, "%s: phase 2 status %d: %s", ctx, st, recent_msg());
                free(ws);
                compare(&gi, egi, "gradInput", ctx);
                compare(&gw, egw, "gradWeight", ctx);
                compare(&gb, egb, "gradBias", ctx);
                ++cases;
            }

            /* The one-call host form, into exact-size contiguous outputs
             * (where float32 grad_input is written in place, so an
             * AddressSanitizer build sees any write past a row or the end). */
            View hgi, hgw, hgb;
            view_init(&hgi, dx, 3, d[4], LAYOUT_CONTIGUOUS);
            view_init(&hgw, dw, 3, d[5], LAYOUT_CONTIGUOUS);
            view_init(&hgb, db, 1, d[6], LAYOUT_CONTIGUOUS);
            const convtbcHostTensor hs[7] = {host_of(&go), host_of(&x), host_of(&w), host_of(&b),
                                             host_of(&hgi), host_of(&hgw), host_of(&hgb)};
            aclnnStatus host_st =
                convtbcConvTbcBackwardOnHost(&hs[0], &hs[1], &hs[2], &hs[3], pad, cube, &hs[4], &hs[5], &hs[6]);
            EXPECT(host_st == st, "%s: host call status %d, two-phase status %d: %s", ctx, host_st, st,
                   recent_msg());
            if (host_st == 0) {
                char hctx[200];
                snprintf(hctx, sizeof hctx, "%s (host call)", ctx);
                compare(&hgi, egi, "gradInput", hctx);
                compare(&hgw, egw, "gradWeight", hctx);
                compare(&hgb, egb, "gradBias", hctx);
            }
            view_free(&hgi); view_free(&hgw); view_free(&hgb);
            view_free(&go); view_free(&x); view_free(&w); view_free(&b);
            view_free(&gi); view_free(&gw); view_free(&gb);
            free(rgo); free(rx); free(rw); free(rb); free(egi); free(egw); free(egb);
        }
    }
    printf("numerics_sweep: %d cases\n", cases);
    return finish("numerics_sweep");
}
