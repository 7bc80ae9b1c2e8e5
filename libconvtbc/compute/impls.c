/*
 * The implementation lists and the plan-time choice among them (see
 * driver.h). Each gradient's list ends with the reference, which applies
 * to every problem, so a choice always exists.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compute/conv_tbc_forward.h"
#include "compute/driver.h"

/* Best first: on equal cost the earlier wins. */
static const ctbc_impl *const grad_input_impls[] = {
    &ctbc_impl_gi_merged_in_place, &ctbc_impl_gi_merged, &ctbc_impl_gi_in_place,
    &ctbc_impl_gi_window,          &ctbc_impl_gi_c_on_m,  &ctbc_impl_gi_c_on_m_bf16,
    &ctbc_impl_gi_dot,             &ctbc_impl_gi_dot_steps, &ctbc_impl_gi_dot_bf16, &ctbc_impl_gi_dot_bf16_steps,
    &ctbc_impl_gi_dot_f16,         &ctbc_impl_gi_merged_in_place_narrow,
    &ctbc_impl_gi_merged_narrow, &ctbc_impl_gi_in_place_narrow, &ctbc_impl_gi_window_narrow, &ctbc_impl_gi_c_on_m_amx,
    &ctbc_impl_gi_reference,
    NULL,
};
static const ctbc_impl *const grad_weight_impls[] = {
    &ctbc_impl_gw_pairs,        &ctbc_impl_gw_c_on_m,       &ctbc_impl_gw_gemv,     &ctbc_impl_gw_o_on_m,
    &ctbc_impl_gw_c_on_m_bf16, &ctbc_impl_gw_o_on_m_bf16, &ctbc_impl_gw_c_on_m_narrow, &ctbc_impl_gw_o_on_m_narrow,
    &ctbc_impl_gw_c_on_m_bf16_narrow, &ctbc_impl_gw_o_on_m_bf16_narrow, &ctbc_impl_gw_c_on_m_amx, &ctbc_impl_gw_reference, NULL,
};
static const ctbc_impl *const grad_bias_impls[] = {&ctbc_impl_gb_in_gw, &ctbc_impl_gb_rows, NULL};

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

/* Bits per forced slot: an implementation's index + 1 (0: none), so
 * lists of up to 2^FORCE_BITS - 1 entries. */
#define FORCE_BITS 5
#define FORCE_MASK ((UINT32_C(1) << FORCE_BITS) - 1u)
/* The forward op's implementations (conv_tbc_forward.c) take the slot after
 * the gradients'. */
#define FORWARD_SLOT CTBC_GRADIENTS
_Static_assert(FORCE_BITS * (FORWARD_SLOT + 1) <= 32, "the forced slots fit in 32 bits");
/* (each list, its NULL aside, numbered from 1 in its slot: a longer list
 * would spill into the next gradient's slot) */
#define FITS_A_SLOT(list) (sizeof(list) / sizeof *(list) - 1 <= FORCE_MASK)
_Static_assert(FITS_A_SLOT(grad_input_impls) && FITS_A_SLOT(grad_weight_impls) && FITS_A_SLOT(grad_bias_impls),
               "every implementation list fits a forced slot");
#undef FITS_A_SLOT

/* The forced choices (see driver.h); atomic. */
static uint32_t forced_now;
static pthread_once_t environment_once = PTHREAD_ONCE_INIT;

/* Parses comma-separated names into forced bits; -1 for an unknown name
 * when `strict`, else unknown names are skipped. */
static int64_t parse_forced(const char *names, int strict)
{
    uint32_t bits = 0;
    for (const char *s = names; s && *s;) {
        const char *end = strchr(s, ',');
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        int found = len == 0;
        for (int g = 0; g <= FORWARD_SLOT && !found; g++) {
            const char *const *names_of = g == FORWARD_SLOT ? ctbc_forward_implementation_names() : NULL;
            const ctbc_impl *const *list = g == FORWARD_SLOT ? NULL : ctbc_impl_list((ctbc_gradient)g);
            for (int i = 0; (list ? list[i] != NULL : names_of[i] != NULL) && !found; i++) {
                const char *name = list ? list[i]->name : names_of[i];
                if (strlen(name) == len && strncmp(name, s, len) == 0) {
                    bits &= ~(FORCE_MASK << (FORCE_BITS * g));
                    bits |= (uint32_t)(i + 1) << (FORCE_BITS * g);
                    found = 1;
                }
            }
        }
        if (!found && strict)
            return -1;
        s = end ? end + 1 : NULL;
    }
    return bits;
}

/* Read once: getenv scans the whole environment, a cost each plan would
 * otherwise pay. */
static void read_environment(void)
{
    __atomic_store_n(&forced_now, (uint32_t)parse_forced(getenv("CONVTBC_FORCE_IMPL"), 0), __ATOMIC_RELEASE);
}

uint32_t ctbc_impl_forced(void)
{
    pthread_once(&environment_once, read_environment);
    return __atomic_load_n(&forced_now, __ATOMIC_ACQUIRE);
}

int ctbc_forward_forced(void) { return (int)((ctbc_impl_forced() >> (FORCE_BITS * FORWARD_SLOT)) & FORCE_MASK) - 1; }

int ctbc_force_implementations(const char *names)
{
    pthread_once(&environment_once, read_environment);
    const int64_t bits = parse_forced(names, 1);
    if (bits < 0)
        return -1;
    __atomic_store_n(&forced_now, (uint32_t)bits, __ATOMIC_RELEASE);
    return 0;
}

int ctbc_impl_choose(ctbc_gradient gradient, const ctbc_problem *problem, const ctbc_context *context,
                     uint32_t forced)
{
    const ctbc_impl *const *list = ctbc_impl_list(gradient);
    const int forced_index = (int)((forced >> (FORCE_BITS * gradient)) & FORCE_MASK) - 1;
    if (forced_index >= 0 && list[forced_index]->applies(problem, context))
        return forced_index;
    int best = -1;
    double best_cost = 0.0;
    for (int i = 0; list[i]; i++) {
        if (!list[i]->applies(problem, context))
            continue;
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
