#include "compute/team.h"

#include <sys/types.h>
#include <unistd.h>

/* libgomp keeps its team's threads for the next region, and fork() copies
 * only the calling thread: a child of a process that ran a region would
 * wait in its next one for threads that do not exist. The first process to
 * start a team owns OpenMP here; in any other (a fork()ed child, however
 * deep) the work runs on the calling thread, with the same results, since
 * they do not depend on the thread count. */
static pid_t team_owner; /* atomic; 0 until a team is started */

bool ctbc_may_start_team(void)
{
    const pid_t me = getpid();
    pid_t owner = 0;
    if (__atomic_compare_exchange_n(&team_owner, &owner, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return true;
    return owner == me;
}
