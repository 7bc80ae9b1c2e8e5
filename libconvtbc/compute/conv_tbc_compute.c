/*
 * Entry points of the compute layer (see conv_tbc_compute.h): the plan
 * fixes kernels, blocking, threads and scratch; execute hands out the work
 * tiles of the three gradients to an OpenMP team.
 */
#include "compute/conv_tbc_compute.h"

#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "compute/driver.h"
#include "compute/team.h"

/* The workspace base is only promised to be 16-byte aligned; sub-buffers
 * are 64-byte aligned from the first 64-byte boundary inside it. */
#define WS_ALIGN 64

void ctbc_plan_init(ctbc_plan *plan, const ctbc_problem *problem)
{
    memset(plan, 0, sizeof(*plan));
    plan->problem = *problem;
    plan->threads = omp_get_max_threads();
    if (plan->threads < 1)
        plan->threads = 1;

    ctbc_blocking blocking;
    ctbc_blocking_choose(problem, ctbc_isa_select(), &blocking);
    ctbc_blocking_store(plan, &blocking);

    ctbc_ws_layout layout;
    ctbc_ws_layout_of(problem, &blocking, &layout);
    const int teams = blocking.parallel ? plan->threads : 1;
    /* An absurd problem's layout sits at blocking.c's ceiling; its byte
     * count then stops at SIZE_MAX, a workspace no allocation can meet. */
    size_t bytes;
    if (__builtin_mul_overflow((size_t)layout.per_thread, sizeof(float) * (size_t)teams, &bytes) ||
        __builtin_add_overflow(bytes, (size_t)WS_ALIGN, &bytes))
        bytes = SIZE_MAX;
    plan->workspace_bytes = bytes;
}

/* Worker `worker`'s slice of the workspace. */
static ctbc_scratch scratch_of(float *base, const ctbc_ws_layout *layout, int worker)
{
    float *mine = base + (int64_t)worker * layout->per_thread;
    return (ctbc_scratch){mine, mine + layout->cbuf, mine + layout->cbuf + layout->abuf};
}

static void run_item(const ctbc_run *run, int64_t item, int64_t n_gw, int64_t n_gi,
                     const ctbc_scratch *scratch)
{
    if (item < n_gw)
        ctbc_grad_weight_tile(run, item, scratch);
    else if (item < n_gw + n_gi)
        ctbc_grad_input_tile(run, item - n_gw, scratch);
    else
        ctbc_grad_bias_tile(run, item - n_gw - n_gi);
}

void ctbc_execute(const ctbc_plan *plan, const ctbc_buffers *buffers, void *workspace)
{
    const ctbc_problem *p = &plan->problem;
    ctbc_run run;
    run.problem = p;
    ctbc_blocking_load(plan, &run.blocking);
    run.kernel = ctbc_kernel_for_isa((ctbc_isa)run.blocking.isa);
    run.grad_output =
        ctbc_operand_make(buffers->grad_output, &p->grad_output, p->rounding, run.kernel);
    run.input = ctbc_operand_make(buffers->input, &p->input, p->rounding, run.kernel);
    run.weight = ctbc_operand_make(buffers->weight, &p->weight, p->rounding, run.kernel);
    run.grad_input = buffers->grad_input;
    run.grad_weight = buffers->grad_weight;
    run.grad_bias = buffers->grad_bias;
    const ctbc_operand grad_input_view =
        ctbc_operand_make(buffers->grad_input, &p->grad_input, CTBC_ROUND_NONE, run.kernel);
    run.grad_input_direct =
        ctbc_operand_direct(&grad_input_view, p->b, p->t * p->b, &run.grad_input_row_stride);

    ctbc_ws_layout layout;
    ctbc_ws_layout_of(p, &run.blocking, &layout);
    float *base = (float *)(((uintptr_t)workspace + (WS_ALIGN - 1)) & ~(uintptr_t)(WS_ALIGN - 1));

    const int64_t n_gw = ctbc_grad_weight_tiles(&run);
    const int64_t n_gi = ctbc_grad_input_tiles(&run);
    const int64_t n_items = n_gw + n_gi + ctbc_grad_bias_tiles(&run);
    const int parallel = run.blocking.parallel && plan->threads > 1 && n_items > 1 && ctbc_may_start_team();

    if (!parallel) {
        /* not even an `if (0)` region: libgomp still sets up a team for one,
         * with futex calls that cost more than a small problem's compute */
        const ctbc_scratch scratch = scratch_of(base, &layout, 0);
        for (int64_t item = 0; item < n_items; item++)
            run_item(&run, item, n_gw, n_gi, &scratch);
        return;
    }
#pragma omp parallel num_threads(plan->threads)
    {
        /* a team smaller than planned (OMP_DYNAMIC, nesting) still finds its
         * scratch: thread ids stay below plan->threads */
        const ctbc_scratch scratch = scratch_of(base, &layout, omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
        for (int64_t item = 0; item < n_items; item++)
            run_item(&run, item, n_gw, n_gi, &scratch);
    }
}
