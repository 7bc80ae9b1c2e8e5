/*
 * The compute layer's worker threads.
 *
 * ctbc_pool_run hands out the items of one job to the calling thread
 * (worker 0) and to pool threads (workers 1..workers-1), each item to
 * exactly one worker, and returns when every item is done.
 *
 * Why not an OpenMP parallel region: a region ends in a barrier that waits
 * for every team member to arrive, including one that has not yet been
 * given a core. On a machine where another library's threads spin after
 * their own calls (numpy's OpenBLAS, torch), that wait was measured at
 * 3.5-5 ms for a 0.1 ms call on 2 cores, and libgomp's own threads spin for
 * milliseconds after each region, taking cores from the next library in
 * turn. Here a pool thread that has not claimed an item by the time the
 * caller finds none left is simply not waited for, and pool threads spin
 * for at most CTBC_POOL_SPIN_US before they sleep.
 *
 * One job runs at a time; a caller that finds the pool busy (another
 * thread's job) runs its items alone. Which worker runs an item never
 * changes a result bit: items are independent and each is computed start
 * to finish by one worker.
 */
#ifndef CONVTBC_COMPUTE_THREAD_POOL_H
#define CONVTBC_COMPUTE_THREAD_POOL_H

#include <stdint.h>

/* Runs one item with the scratch of `worker` (0 <= worker < workers). */
typedef void (*ctbc_item_fn)(void *context, int64_t item, int worker);

/* Runs items [0, n_items) on up to `workers` threads, the caller included. */
void ctbc_pool_run(int workers, int64_t n_items, ctbc_item_fn fn, void *context);

#endif /* CONVTBC_COMPUTE_THREAD_POOL_H */
