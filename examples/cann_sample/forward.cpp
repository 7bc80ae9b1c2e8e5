/*
 * A host program that drives aclnnConvTbc, the forward op, as it would on an
 * Ascend NPU; like main.cpp it has nothing convtbc-specific in it.
 *
 * The problem is the one CANN documents for the forward op: self [2,2,3],
 * weight [3,3,4] and bias [4], every element 1, formats NCL, NCL, ND and
 * NCL (out), pad 1, cubeMathType 1 (ALLOW_FP32_DOWN_PRECISION). T_out is
 * 2 + 2*1 - 3 + 1 = 2, and each output step sees two of the three taps
 * inside self (the third reads padding), so every element is
 *
 *   out[t,b,o] = bias 1 + 2 taps * 3 input channels * 1 * 1 = 7
 *
 * The program prints out and exits with 1 if any value differs.
 */
#include <cstdio>
#include <vector>

#include "acl_host.h"

using acl_host::DeviceTensor;

int main()
{
    acl_host::Runtime runtime(0);
    if (!runtime.ready())
        return 1;

    const std::vector<int64_t> self_dims = {2, 2, 3}, weight_dims = {3, 3, 4}, bias_dims = {4}, out_dims = {2, 2, 4};
    DeviceTensor self(self_dims, ACL_FLOAT, std::vector<double>(12, 1.0), ACL_FORMAT_NCL);
    DeviceTensor weight(weight_dims, ACL_FLOAT, std::vector<double>(36, 1.0), ACL_FORMAT_NCL);
    DeviceTensor bias(bias_dims, ACL_FLOAT, std::vector<double>(4, 1.0), ACL_FORMAT_ND);
    DeviceTensor out(out_dims, ACL_FLOAT, std::vector<double>(16, 1.0), ACL_FORMAT_NCL);
    for (const DeviceTensor *t : {&self, &weight, &bias, &out})
        if (!t->ready())
            return 1;

    const int64_t pad = 1;
    const int8_t cube_math_type = 1;
    if (!acl_host::conv_tbc(self, weight, bias, pad, cube_math_type, out, runtime.stream()))
        return 1;

    const std::vector<double> values = out.read();
    for (size_t i = 0; i < values.size(); ++i)
        std::printf("result[%zu] is: %f\n", i, values[i]);
    const int wrong = acl_host::count_mismatches("out", values, std::vector<double>(values.size(), 7.0));
    std::printf(wrong ? "%d values differ from 7\n" : "every value is 7\n", wrong);
    return wrong ? 1 : 0;
}
