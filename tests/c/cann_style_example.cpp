/*
 * The calling sequence a CANN host program uses, run against the installed
 * convtbc tree: runtime up, tensors in aclrtMalloc'd memory filled with
 * aclrtMemcpy, both phases on a stream, a synchronize, the gradients copied
 * back, the runtime down. Device-memory checking stays on, as for a user.
 *
 * Each case is checked element by element against gradients computed here by
 * plain loops. The fills are small integers, so every product and sum is
 * exact in float32, float16 and bfloat16 and the comparison is exact too.
 *
 * Build: c++ $(convtbc config --cflags) cann_style_example.cpp $(convtbc config --libs)
 * Prints "OK" and exits 0 when every case matches.
 */
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../../examples/cann_sample/acl_host.h"

using acl_host::DeviceTensor;

namespace {

struct Case {
    int64_t t_in, batch, c_in, k, c_out, pad;
    aclDataType dtype;
    int8_t cube_math_type;
    int64_t t_out() const { return t_in + 2 * pad + 1 - k; }
};

/* Values in -2..2, a different sequence for each tensor. */
std::vector<double> small_integers(size_t count, int which)
{
    std::vector<double> v(count);
    for (size_t i = 0; i < count; ++i)
        v[i] = static_cast<double>(static_cast<int>((i * 7 + static_cast<size_t>(which) * 3) % 5) - 2);
    return v;
}

struct Gradients {
    std::vector<double> input, weight, bias;
};

/* Straight from the definition: output row u reads input row u + k - pad
 * through tap k, so its gradient flows back along the same pairs. */
Gradients reference(const Case &p, const std::vector<double> &grad_output, const std::vector<double> &input,
                    const std::vector<double> &weight)
{
    Gradients g;
    g.input.assign(p.t_in * p.batch * p.c_in, 0.0);
    g.weight.assign(p.k * p.c_in * p.c_out, 0.0);
    g.bias.assign(p.c_out, 0.0);
    for (int64_t u = 0; u < p.t_out(); ++u)
        for (int64_t b = 0; b < p.batch; ++b)
            for (int64_t o = 0; o < p.c_out; ++o) {
                const double go = grad_output[(u * p.batch + b) * p.c_out + o];
                g.bias[o] += go;
                for (int64_t k = 0; k < p.k; ++k) {
                    const int64_t t = u + k - p.pad;
                    if (t < 0 || t >= p.t_in)
                        continue;
                    for (int64_t c = 0; c < p.c_in; ++c) {
                        g.input[(t * p.batch + b) * p.c_in + c] += go * weight[(k * p.c_in + c) * p.c_out + o];
                        g.weight[(k * p.c_in + c) * p.c_out + o] += go * input[(t * p.batch + b) * p.c_in + c];
                    }
                }
            }
    return g;
}

/* Number of wrong elements, or -1 when a call failed. */
int run(const Case &p, aclrtStream stream)
{
    const std::vector<int64_t> out_dims = {p.t_out(), p.batch, p.c_out}, in_dims = {p.t_in, p.batch, p.c_in},
                               weight_dims = {p.k, p.c_in, p.c_out}, bias_dims = {p.c_out};
    const std::vector<double> go = small_integers(p.t_out() * p.batch * p.c_out, 0);
    const std::vector<double> x = small_integers(p.t_in * p.batch * p.c_in, 1);
    const std::vector<double> w = small_integers(p.k * p.c_in * p.c_out, 2);
    const std::vector<double> ones(p.c_out, 1.0);

    DeviceTensor grad_output(out_dims, p.dtype, go), input(in_dims, p.dtype, x), weight(weight_dims, p.dtype, w);
    DeviceTensor bias(bias_dims, p.dtype, ones);
    DeviceTensor grad_input(in_dims, p.dtype), grad_weight(weight_dims, p.dtype), grad_bias(bias_dims, p.dtype);
    for (const DeviceTensor *t : {&grad_output, &input, &weight, &bias, &grad_input, &grad_weight, &grad_bias})
        if (!t->ready())
            return -1;
    if (!acl_host::conv_tbc_backward(grad_output, input, weight, bias, p.pad, p.cube_math_type, grad_input,
                                     grad_weight, grad_bias, stream))
        return -1;

    const Gradients want = reference(p, go, x, w);
    return acl_host::count_mismatches("gradInput", grad_input.read(), want.input) +
           acl_host::count_mismatches("gradWeight", grad_weight.read(), want.weight) +
           acl_host::count_mismatches("gradBias", grad_bias.read(), want.bias);
}

} // namespace

int main()
{
    const Case cases[] = {
        {5, 1, 2, 1, 2, 0, ACL_FLOAT, 1},     /* CANN's documented case, with other fills */
        {7, 2, 3, 3, 4, 1, ACL_FLOAT, 0},     /* taps and padding */
        {7, 2, 3, 3, 4, 2, ACL_FLOAT16, 1},   /* padding wider than needed */
        {4, 3, 5, 6, 2, 3, ACL_FLOAT, 3},     /* more taps than input rows; HF32 */
        {6, 2, 4, 2, 3, 1, ACL_BF16, 0},
    };
    int failures = 0;
    {
        acl_host::Runtime runtime(0);
        if (!runtime.ready())
            return 1;
        for (const Case &p : cases) {
            const int wrong = run(p, runtime.stream());
            if (wrong != 0)
                std::printf("case T%lld B%lld Ci%lld K%lld Co%lld pad%lld dtype %d: %s\n",
                            static_cast<long long>(p.t_in), static_cast<long long>(p.batch),
                            static_cast<long long>(p.c_in), static_cast<long long>(p.k),
                            static_cast<long long>(p.c_out), static_cast<long long>(p.pad), static_cast<int>(p.dtype),
                            wrong < 0 ? "a call failed" : "wrong values");
            failures += wrong != 0;
        }
    }
    if (failures) {
        std::printf("cann_style_example: %d case(s) failed\n", failures);
        return 1;
    }
    std::printf("cann_style_example: OK\n");
    return 0;
}
