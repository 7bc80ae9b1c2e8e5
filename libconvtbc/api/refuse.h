/*
 * The one way a function convtbc cannot emulate answers: CANN's code for it,
 * and a message naming the function and why a CPU cannot do it. The stubs
 * that call this are generated from libconvtbc/api/api_functions.tsv.
 */
#ifndef CONVTBC_API_REFUSE_H
#define CONVTBC_API_REFUSE_H

int ctbc_refuse(const char *function, int code, const char *why);

#endif /* CONVTBC_API_REFUSE_H */
