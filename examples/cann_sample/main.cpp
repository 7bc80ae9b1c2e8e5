/*
 * A host program that drives aclnnConvTbcBackward exactly as it would drive
 * it on an Ascend NPU, here against convtbc. Nothing in it is specific to
 * convtbc: built against a CANN toolkit instead, it runs there unchanged.
 *
 * The problem is the one CANN documents for this operator: grad_output
 * (`self`) [5,1,2], input [5,1,2], weight [1,2,2] and bias [2], every element
 * 1, pad 0, cubeMathType 1 (ALLOW_FP32_DOWN_PRECISION). With all ones each
 * gradient element is a plain count:
 *
 *   grad_input[t,b,c]  = sum over the 2 output channels         = 2
 *   grad_weight[k,c,o] = sum over the 5 (t_out, batch) positions = 5
 *   grad_bias[o]       = sum over the 5 (t_out, batch) positions = 5
 *
 * The program prints each gradient and exits with 1 if any value differs.
 */
#include <cstdio>
#include <vector>

#include "acl_host.h"

using acl_host::DeviceTensor;

static int show_and_check(const char *name, const DeviceTensor &gradient, double expected)
{
    const std::vector<double> values = gradient.read();
    std::printf("%-11s [", name);
    for (size_t i = 0; i < gradient.dims().size(); ++i)
        std::printf(i ? ",%lld" : "%lld", static_cast<long long>(gradient.dims()[i]));
    std::printf("]:");
    for (double v : values)
        std::printf(" %g", v);
    std::printf("\n");
    const std::vector<double> want(values.empty() ? 1 : values.size(), expected);
    return acl_host::count_mismatches(name, values, want);
}

int main()
{
    acl_host::Runtime runtime(0);
    if (!runtime.ready())
        return 1;

    const std::vector<int64_t> sequence = {5, 1, 2}, kernel = {1, 2, 2}, channels = {2};
    const std::vector<double> ones(10, 1.0);
    DeviceTensor grad_output(sequence, ACL_FLOAT, ones), input(sequence, ACL_FLOAT, ones);
    DeviceTensor weight(kernel, ACL_FLOAT, ones), bias(channels, ACL_FLOAT, ones);
    DeviceTensor grad_input(sequence, ACL_FLOAT), grad_weight(kernel, ACL_FLOAT), grad_bias(channels, ACL_FLOAT);
    for (const DeviceTensor *t : {&grad_output, &input, &weight, &bias, &grad_input, &grad_weight, &grad_bias})
        if (!t->ready())
            return 1;

    const int64_t pad = 0;
    const int8_t cube_math_type = 1;
    if (!acl_host::conv_tbc_backward(grad_output, input, weight, bias, pad, cube_math_type, grad_input, grad_weight,
                                     grad_bias, runtime.stream()))
        return 1;

    const int wrong = show_and_check("gradInput", grad_input, 2.0) + show_and_check("gradWeight", grad_weight, 5.0) +
                      show_and_check("gradBias", grad_bias, 5.0);
    if (wrong) {
        std::printf("%d value(s) differ from CANN's documented results\n", wrong);
        return 1;
    }
    std::printf("every value matches CANN's documented results\n");
    return 0;
}
