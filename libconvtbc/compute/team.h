/*
 * The compute layer's threads (see team.c): whether this process may start
 * them, and the work-item team the backward op runs on.
 */
#ifndef CONVTBC_COMPUTE_TEAM_H
#define CONVTBC_COMPUTE_TEAM_H

#include <stdbool.h>
#include <stdint.h>

bool ctbc_may_start_team(void);

/* Computes one work item; `worker` (0 for the calling thread, else below
 * the team's size) names the scratch it may use. */
typedef void (*ctbc_item_fn)(void *context, int64_t item, int worker);

/*
 * Runs items [0, n_items) on up to `threads` threads, the caller among them:
 * each thread claims the next item until none is left, and the call returns
 * once every claimed item is done. A thread that wakes after the last item
 * was claimed does nothing, so the caller never waits for a thread that has
 * not started: on a busy machine (another library's threads on the other
 * cores) the call takes at worst its items on one thread, not a scheduler
 * slice. Items must not depend on which thread computes them; with one
 * thread, or when the team is busy with another call, the caller runs
 * them all.
 */
void ctbc_team_run(int threads, int64_t n_items, ctbc_item_fn fn, void *context);

#endif /* CONVTBC_COMPUTE_TEAM_H */
