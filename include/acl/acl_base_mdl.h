/*
 * convtbc: empty, as in CANN's runtime package: the model API's base types
 * comes with other CANN packages, which convtbc does not emulate. The header
 * exists so that code including it compiles.
 */
#ifndef CONVTBC_ACL_ACL_BASE_MDL_H
#define CONVTBC_ACL_ACL_BASE_MDL_H

#endif /* CONVTBC_ACL_ACL_BASE_MDL_H */
