/*
 * The implementation lists and the plan-time choice among them (see
 * driver.h). Each gradient's list ends with the reference, which applies
 * to every problem, so a choice always exists.
 */
#include <string.h>

#include "compute/driver.h"

/* Best first: on equal cost the earlier wins. */
static const ctbc_impl *const grad_input_impls[] = {
    &ctbc_impl_gi_merged_in_place, &ctbc_impl_gi_merged, &ctbc_impl_gi_in_place,
    &ctbc_impl_gi_window,          &ctbc_impl_gi_reference, NULL,
};
static const ctbc_impl *const grad_weight_impls[] = {
    &ctbc_impl_gw_pairs, &ctbc_impl_gw_c_on_m, &ctbc_impl_gw_gemv, &ctbc_impl_gw_o_on_m,
    &ctbc_impl_gw_reference, NULL,
};
static const ctbc_impl *const grad_bias_impls[] = {&ctbc_impl_gb_rows, NULL};

const ctbc_impl *const *ctbc_impl_list(ctbc_gradient gradient)
{
    switch (gradient) {
    case CTBC_GRAD_INPUT:
        return grad_input_impls;
    case CTBC_GRAD_WEIGHT:
        return grad_weight_impls;
    default:
        return grad_bias_impls;
    }
}

const ctbc_impl *ctbc_impl_at(ctbc_gradient gradient, int index)
{
    return ctbc_impl_list(gradient)[index];
}

/* 1: `name` is one of the comma-separated words of `list`. */
static int named_in(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *s = list; s && *s;) {
        const char *end = strchr(s, ',');
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == n && strncmp(s, name, n) == 0)
            return 1;
        s = end ? end + 1 : NULL;
    }
    return 0;
}

int ctbc_impl_choose(ctbc_gradient gradient, const ctbc_problem *problem, const ctbc_context *context,
                     const char *forced)
{
    const ctbc_impl *const *list = ctbc_impl_list(gradient);
    int best = -1;
    double best_cost = 0.0;
    for (int i = 0; list[i]; i++) {
        if (!list[i]->applies(problem, context))
            continue;
        if (forced && named_in(forced, list[i]->name))
            return i;
        const double cost = list[i]->cost(problem, context);
        if (best < 0 || cost < best_cost) {
            best = i;
            best_cost = cost;
        }
    }
    return best;
}

const char *ctbc_plan_impl_name(const ctbc_plan *plan, ctbc_gradient gradient)
{
    ctbc_blocking blocking;
    ctbc_blocking_load(plan, &blocking);
    return ctbc_impl_at(gradient, blocking.impl[gradient])->name;
}
