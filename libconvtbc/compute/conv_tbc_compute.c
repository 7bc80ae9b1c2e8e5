/*
 * Entry points of the compute layer (see conv_tbc_compute.h): the plan
 * fixes kernels, blocking, threads and scratch; execute hands out the work
 * tiles of the three gradients to the compute layer's threads.
 */
#include "compute/conv_tbc_compute.h"

#include <omp.h>
#include <string.h>

#include "compute/driver.h"
#include "compute/thread_pool.h"

/* The workspace base is only promised to be 16-byte aligned; sub-buffers
 * are 64-byte aligned from the first 64-byte boundary inside it. */
#define WS_ALIGN 64

void ctbc_plan_init(ctbc_plan *plan, const ctbc_problem *problem)
{
    memset(plan, 0, sizeof(*plan));
    plan->problem = *problem;
    /* OpenMP's settings (OMP_NUM_THREADS, affinity) size the team */
    plan->threads = omp_get_max_threads();
    if (plan->threads < 1)
        plan->threads = 1;

    ctbc_blocking blocking;
    ctbc_blocking_choose(problem, ctbc_isa_select(), &blocking);
    ctbc_blocking_store(plan, &blocking);

    ctbc_ws_layout layout;
    ctbc_ws_layout_of(problem, &blocking, &layout);
    const int teams = blocking.parallel ? plan->threads : 1;
    plan->workspace_bytes = (size_t)layout.per_thread * sizeof(float) * (size_t)teams + WS_ALIGN;
}

/* What every work item of one run shares. */
typedef struct {
    ctbc_run run;
    int64_t n_gw, n_gi;
    float *base; /* 64-byte aligned start of the workspace */
    ctbc_ws_layout layout;
} run_context;

/* Work item `item` with worker `worker`'s slice of the workspace. */
static void run_item(void *context, int64_t item, int worker)
{
    const run_context *ctx = context;
    float *mine = ctx->base + (int64_t)worker * ctx->layout.per_thread;
    const ctbc_scratch scratch = {mine, mine + ctx->layout.cbuf, mine + ctx->layout.cbuf + ctx->layout.abuf};
    if (item < ctx->n_gw)
        ctbc_grad_weight_tile(&ctx->run, item, &scratch);
    else if (item < ctx->n_gw + ctx->n_gi)
        ctbc_grad_input_tile(&ctx->run, item - ctx->n_gw, &scratch);
    else
        ctbc_grad_bias_tile(&ctx->run, item - ctx->n_gw - ctx->n_gi);
}

void ctbc_execute(const ctbc_plan *plan, const ctbc_buffers *buffers, void *workspace)
{
    const ctbc_problem *p = &plan->problem;
    run_context ctx;
    ctbc_run *run = &ctx.run;
    run->problem = p;
    ctbc_blocking_load(plan, &run->blocking);
    run->kernel = ctbc_kernel_for_isa((ctbc_isa)run->blocking.isa);
    run->grad_output = ctbc_operand_make(buffers->grad_output, &p->grad_output, p->rounding, run->kernel);
    run->input = ctbc_operand_make(buffers->input, &p->input, p->rounding, run->kernel);
    run->weight = ctbc_operand_make(buffers->weight, &p->weight, p->rounding, run->kernel);
    run->grad_input = buffers->grad_input;
    run->grad_weight = buffers->grad_weight;
    run->grad_bias = buffers->grad_bias;

    ctbc_ws_layout_of(p, &run->blocking, &ctx.layout);
    ctx.base = (float *)(((uintptr_t)workspace + (WS_ALIGN - 1)) & ~(uintptr_t)(WS_ALIGN - 1));
    ctx.n_gw = ctbc_grad_weight_tiles(run);
    ctx.n_gi = ctbc_grad_input_tiles(run);
    const int64_t n_items = ctx.n_gw + ctx.n_gi + ctbc_grad_bias_tiles(run);
    /* the workspace has one slice per planned thread, or just one */
    const int workers = run->blocking.parallel ? plan->threads : 1;
    ctbc_pool_run(workers, n_items, run_item, &ctx);
}
