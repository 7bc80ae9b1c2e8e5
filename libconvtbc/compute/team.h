/*
 * Whether this process may start an OpenMP team (see team.c): every
 * parallel region of the compute layer asks first.
 */
#ifndef CONVTBC_COMPUTE_TEAM_H
#define CONVTBC_COMPUTE_TEAM_H

#include <stdbool.h>

bool ctbc_may_start_team(void);

#endif /* CONVTBC_COMPUTE_TEAM_H */
