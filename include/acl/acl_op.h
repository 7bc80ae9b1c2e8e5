/*
 * convtbc: empty, as in CANN's runtime package: the single-operator API
 * (aclop*) comes with other CANN packages, which convtbc does not emulate.
 * The header exists so that code including it compiles.
 */
#ifndef CONVTBC_ACL_ACL_OP_H
#define CONVTBC_ACL_ACL_OP_H

#endif /* CONVTBC_ACL_ACL_OP_H */
