/*
 * Two views share a byte when an element of one starts less than an
 * element's length from an element of the other:
 *
 *     startA + sum(pA[k] * i[k]) - startB - sum(pB[k] * j[k]) = d,
 *     0 <= i[k] < nA[k], 0 <= j[k] < nB[k], -(itemA - 1) <= d <= itemB - 1,
 *
 * with pA, pB the strides in bytes. Counting B's indices from its far end
 * (j'[k] = nB[k] - 1 - j[k]) turns this into a sum of positive terms with
 * bounded unknowns for each d:
 *
 *     sum(a[t] * x[t]) = b,  0 <= x[t] <= u[t],
 *
 * a bounded linear Diophantine equation, which a depth-first search over
 * the terms, largest coefficient first, decides exactly. Two facts prune it
 * (the ideas of numpy's may_share_memory, written afresh): the rest of the
 * terms reach only [0, sum(a * u)] of what is left, and they reach only
 * multiples of their coefficients' gcd, so each unknown takes the few
 * values of one residue class that leave a reachable remainder. Views cut
 * from one buffer (halves, interleaved elements, neighbouring blocks) take
 * a handful of steps; the search gives up after WORK_BOUND steps and the
 * caller decides what an undecided pair means.
 */
#include "api/overlap.h"

#include <stdbool.h>

#include "api/tensor.h"

typedef __int128 wide; /* sums of byte offsets: two 64-bit spans and an address gap */

enum { MAX_TERMS = 2 * CTBC_MAX_DIMS, WORK_BOUND = 1 << 14 };

typedef struct {
    int count;
    wide a[MAX_TERMS], u[MAX_TERMS];
    wide reach[MAX_TERMS + 1]; /* sum of a * u from term t on */
    wide gcd[MAX_TERMS + 1];   /* gcd of the a from term t on; 0 past the last */
    /* x[t] is fixed modulo step[t] = gcd[t + 1] / gcd[t] by the remainder:
     * a[t] / gcd[t] * x[t] = remainder / gcd[t] modulo step[t], and
     * inverse[t] is the inverse of a[t] / gcd[t] there. */
    wide step[MAX_TERMS], inverse[MAX_TERMS];
    long work;                 /* steps left */
} equation;

static wide gcd_of(wide x, wide y)
{
    while (y != 0) {
        wide r = x % y;
        x = y, y = r;
    }
    return x;
}

/* The inverse of x modulo m (gcd(x, m) = 1, m > 1). */
static wide inverse_mod(wide x, wide m)
{
    wide r0 = m, r1 = x % m, s0 = 0, s1 = 1;
    while (r1 != 0) {
        wide q = r0 / r1, r = r0 - q * r1, s = s0 - q * s1;
        r0 = r1, r1 = r, s0 = s1, s1 = s;
    }
    return ((s0 % m) + m) % m;
}

/* Adds the view's terms: one per dim that moves (length above 1, stride
 * above 0), in bytes; a coefficient met before takes the other's range
 * too (x1 + x2 over [0, u1] x [0, u2] is every value of [0, u1 + u2]). */
static void add_terms(equation *e, const ctbc_byte_view *v)
{
    for (uint64_t d = 0; d < v->rank; d++) {
        if (v->dims[d] <= 1 || v->strides[d] == 0)
            continue;
        wide a = (wide)v->strides[d] * v->item, u = v->dims[d] - 1;
        int t = 0;
        while (t < e->count && e->a[t] != a)
            t++;
        if (t == e->count) {
            e->a[t] = a;
            e->u[t] = 0;
            e->count++;
        }
        e->u[t] += u;
    }
}

static void prepare(equation *e)
{
    for (int t = 1; t < e->count; t++) /* largest coefficient first */
        for (int s = t; s > 0 && e->a[s] > e->a[s - 1]; s--) {
            wide a = e->a[s], u = e->u[s];
            e->a[s] = e->a[s - 1], e->u[s] = e->u[s - 1];
            e->a[s - 1] = a, e->u[s - 1] = u;
        }
    e->reach[e->count] = 0;
    e->gcd[e->count] = 0;
    for (int t = e->count; t-- > 0;) {
        e->reach[t] = e->reach[t + 1] + e->a[t] * e->u[t];
        e->gcd[t] = gcd_of(e->a[t], e->gcd[t + 1]);
        e->step[t] = e->gcd[t + 1] / e->gcd[t]; /* 0 for the last term */
        e->inverse[t] = e->step[t] > 1 ? inverse_mod((e->a[t] / e->gcd[t]) % e->step[t], e->step[t]) : 0;
    }
}

/* 1: terms t.. reach b exactly; 0: they cannot; -1: out of work. */
static int solve(equation *e, int t, wide b)
{
    if (b < 0 || b > e->reach[t])
        return 0;
    if (t == e->count)
        return b == 0;
    if (b % e->gcd[t] != 0)
        return 0;
    const wide a = e->a[t];
    if (t == e->count - 1)
        return b % a == 0 && b / a <= e->u[t];
    /* x must leave a remainder the later terms reach: in range, and a
     * multiple of their gcd, which fixes x modulo `step`. */
    const wide step = e->step[t];
    wide lo = b - e->reach[t + 1], hi = b / a;
    lo = lo <= 0 ? 0 : (lo + a - 1) / a;
    if (hi > e->u[t])
        hi = e->u[t];
    wide x = lo;
    if (step > 1) {
        wide want = ((b / e->gcd[t]) % step) * e->inverse[t] % step;
        x = lo + ((want - lo % step) % step + step) % step;
    }
    for (; x <= hi; x += step) {
        if (--e->work < 0)
            return -1;
        int found = solve(e, t + 1, b - a * x);
        if (found != 0)
            return found;
    }
    return 0;
}

ctbc_overlap ctbc_views_overlap(const ctbc_byte_view *a, const ctbc_byte_view *b)
{
    if (a->span == 0 || b->span == 0)
        return CTBC_DISJOINT;
    /* in wide integers: a made-up storage address plus its offset may pass
     * the top of the address space, and must not wrap onto another view */
    const wide start_a = (wide)a->storage + a->offset, start_b = (wide)b->storage + b->offset;
    if (start_a + (wide)a->span <= start_b || start_b + (wide)b->span <= start_a)
        return CTBC_DISJOINT;

    equation e;
    e.count = 0;
    e.work = WORK_BOUND;
    add_terms(&e, a);
    add_terms(&e, b);
    prepare(&e);
    /* B's last element, from its start: where j' = 0 puts it. */
    const wide last_b = (wide)b->span - b->item;
    bool undecided = false;
    for (wide d = -(a->item - 1); d <= b->item - 1; d++) {
        int found = solve(&e, 0, d + (start_b - start_a) + last_b);
        if (found > 0)
            return CTBC_OVERLAP;
        undecided |= found < 0;
    }
    return undecided ? CTBC_UNDECIDED : CTBC_DISJOINT;
}
