/*
 * Entry points of the compute layer (see conv_tbc_compute.h): the plan
 * fixes kernels, blocking, threads and scratch; execute hands out the work
 * tiles of the three gradients to the work-item team (team.c).
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
    ctbc_blocking_choose(problem, ctbc_isa_select(), ctbc_impl_forced(), &blocking);
    ctbc_blocking_store(plan, &blocking);

    ctbc_ws_layout layout;
    ctbc_ws_layout_of(problem, &blocking, &layout);
    _Static_assert(sizeof(layout) == sizeof(plan->scratch_floats), "layout must fit in the plan");
    memcpy(plan->scratch_floats, &layout, sizeof(layout));
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

/* The work items of one run: the tiles of the three gradients, each
 * computed by its gradient's implementation, the gradient with the largest
 * tiles first (see item_order). */
typedef struct {
    const ctbc_impl *impl[CTBC_GRADIENTS];
    const ctbc_run *run[CTBC_GRADIENTS]; /* what each one's tiles read */
    int64_t first[CTBC_GRADIENTS + 1]; /* item of each one's tile 0; the total */
} work_items;

/* The gradients in the order their tiles are handed out: largest tiles
 * first, so that the team ends on small ones. Handed out after the many
 * small tiles of another gradient, one large tile ran alone at the end:
 * T46 B11 Ci430 K13 Co19, 42 grad_weight tiles, then grad_input in one,
 * a quarter of the samples waiting. The work of a tile is its gradient's
 * multiply-adds (grad_bias: its adds) over its tiles; ties keep grad_weight,
 * grad_input, grad_bias. The order changes no result: tiles write disjoint
 * outputs. */
static void item_order(const ctbc_problem *p, const int64_t tiles[CTBC_GRADIENTS], ctbc_gradient order[CTBC_GRADIENTS])
{
    const double macs = (double)p->t_out * (double)p->b * (double)p->c_in * (double)p->c_out * (double)p->k;
    double per_tile[CTBC_GRADIENTS];
    per_tile[CTBC_GRAD_WEIGHT] = macs;
    per_tile[CTBC_GRAD_INPUT] = macs;
    per_tile[CTBC_GRAD_BIAS] = (double)p->t_out * (double)p->b * (double)p->c_out;
    const ctbc_gradient first[CTBC_GRADIENTS] = {CTBC_GRAD_WEIGHT, CTBC_GRAD_INPUT, CTBC_GRAD_BIAS};
    for (int i = 0; i < CTBC_GRADIENTS; i++) {
        per_tile[first[i]] /= (double)(tiles[first[i]] > 0 ? tiles[first[i]] : 1);
        /* insertion: after every earlier one at least as large */
        int j = i;
        while (j > 0 && per_tile[order[j - 1]] < per_tile[first[i]]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = first[i];
    }
}

static void run_item(const work_items *items, int64_t item, const ctbc_scratch *scratch)
{
    int g = 0;
    while (item >= items->first[g + 1])
        g++;
    items->impl[g]->run_tile(items->run[g], item - items->first[g], scratch);
}

/* What every thread of a run's team reads. */
typedef struct {
    const work_items *items;
    float *base;
    const ctbc_ws_layout *layout;
} item_context;

static void run_item_of(void *context, int64_t item, int worker)
{
    const item_context *c = context;
    const ctbc_scratch scratch = scratch_of(c->base, c->layout, worker);
    run_item(c->items, item, &scratch);
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
    const int64_t *gi = p->grad_input.stride, *gw = p->grad_weight.stride;
    run.gi_out = ctbc_writer_make(buffers->grad_input, p->grad_input.dtype, run.kernel, p->b, gi[0], gi[1], gi[2]);
    run.gw_c_rows = ctbc_writer_make(buffers->grad_weight, p->grad_weight.dtype, run.kernel, INT64_MAX, 0, gw[1], gw[2]);
    run.gw_o_rows = ctbc_writer_make(buffers->grad_weight, p->grad_weight.dtype, run.kernel, INT64_MAX, 0, gw[2], gw[1]);
    run.gb_out = ctbc_writer_make(buffers->grad_bias, p->grad_bias.dtype, run.kernel, 1, 0, 0, p->grad_bias.stride[0]);
    run.grad_input_row_stride = 0;
    if (run.blocking.gi_in_place)
        ctbc_grad_input_direct(p, &run.grad_input_row_stride);

    ctbc_ws_layout layout;
    memcpy(&layout, plan->scratch_floats, sizeof(layout));
    float *base = (float *)(((uintptr_t)workspace + (WS_ALIGN - 1)) & ~(uintptr_t)(WS_ALIGN - 1));

    /* the same run on the narrow or the AMX tile, for implementations that
     * use one (the plan chose them only where the ISA has it) */
    const ctbc_isa isa = (ctbc_isa)run.blocking.isa;
    ctbc_run on_tile[CTBC_GRADIENTS];
    const ctbc_impl *impl[CTBC_GRADIENTS];
    const ctbc_run *run_of[CTBC_GRADIENTS];
    int64_t tiles[CTBC_GRADIENTS];
    for (int g = 0; g < CTBC_GRADIENTS; g++) {
        impl[g] = ctbc_impl_at((ctbc_gradient)g, run.blocking.impl[g]);
        run_of[g] = &run;
        if (impl[g]->tile != CTBC_TILE_WIDE) {
            on_tile[g] = run;
            on_tile[g].kernel = impl[g]->tile == CTBC_TILE_NARROW ? ctbc_narrow_kernel_for_isa(isa)
                                                                  : ctbc_amx_kernel_for_isa(isa);
            run_of[g] = &on_tile[g];
        }
        tiles[g] = impl[g]->tiles(run_of[g]);
    }
    ctbc_gradient order[CTBC_GRADIENTS];
    item_order(p, tiles, order);
    work_items items;
    items.first[0] = 0;
    for (int i = 0; i < CTBC_GRADIENTS; i++) {
        items.impl[i] = impl[order[i]];
        items.run[i] = run_of[order[i]];
        items.first[i + 1] = items.first[i] + tiles[order[i]];
    }
    const int64_t n_items = items.first[CTBC_GRADIENTS];
    const item_context context = {&items, base, &layout};
    ctbc_team_run(run.blocking.parallel ? plan->threads : 1, n_items, run_item_of, (void *)&context);
}
