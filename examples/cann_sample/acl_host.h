/*
 * The host side of one aclnn call, in a few small pieces a CANN program would
 * otherwise write out by hand each time:
 *
 *   acl_host::Runtime       aclInit, a device and a stream, undone in reverse
 *                           order when it goes out of scope;
 *   acl_host::DeviceTensor  a contiguous tensor whose elements live in
 *                           aclrtMalloc'd memory, filled from and read back
 *                           into host doubles, whatever its dtype;
 *   acl_host::conv_tbc, acl_host::conv_tbc_backward
 *                           phase 1, the workspace, phase 2 on the stream and
 *                           the wait for it, for the forward and the
 *                           backward op;
 *   acl_host::count_mismatches
 *                           compares what came back with what was expected.
 *
 * It calls CANN's public API only, so a program built on it runs against
 * convtbc and against a CANN toolkit alike. examples/cann_sample/main.cpp and
 * tests/c/cann_style_example.cpp both use it. C++11.
 */
#ifndef CONVTBC_EXAMPLES_ACL_HOST_H
#define CONVTBC_EXAMPLES_ACL_HOST_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution.h"
#include "aclnnop/aclnn_convolution_backward.h"

namespace acl_host {

/* A failed call is reported where it happens, with the runtime's own
 * explanation, so callers can simply stop on false. */
inline bool succeeded(const char *call, int status)
{
    if (status == 0)
        return true;
    const char *why = aclGetRecentErrMsg();
    std::fprintf(stderr, "%s returned %d: %s\n", call, status, (why && *why) ? why : "(no message)");
    return false;
}

class Runtime {
public:
    explicit Runtime(int32_t device) : device_(device)
    {
        initialised_ = succeeded("aclInit", aclInit(nullptr));
        device_set_ = initialised_ && succeeded("aclrtSetDevice", aclrtSetDevice(device_));
        if (device_set_ && !succeeded("aclrtCreateStream", aclrtCreateStream(&stream_)))
            stream_ = nullptr;
    }
    ~Runtime()
    {
        if (stream_)
            aclrtDestroyStream(stream_);
        if (device_set_)
            aclrtResetDevice(device_);
        if (initialised_)
            aclFinalize();
    }
    Runtime(const Runtime &) = delete;
    Runtime &operator=(const Runtime &) = delete;

    bool ready() const { return stream_ != nullptr; }
    aclrtStream stream() const { return stream_; }

private:
    int32_t device_;
    bool initialised_ = false;
    bool device_set_ = false;
    aclrtStream stream_ = nullptr;
};

/* bfloat16 is the top half of a float32, rounded to nearest-even; CANN's
 * headers have no conversion for it. NaN keeps a quiet payload bit. */
inline uint16_t bfloat16_from_float(float value)
{
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    if (std::isnan(value))
        return static_cast<uint16_t>((bits >> 16) | 0x40);
    bits += 0x7fff + ((bits >> 16) & 1);
    return static_cast<uint16_t>(bits >> 16);
}

inline float float_from_bfloat16(uint16_t half)
{
    uint32_t bits = static_cast<uint32_t>(half) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

class DeviceTensor {
public:
    /* A tensor of shape `dims` in row-major order. With `values` (one per
     * element) the device memory starts with them, otherwise with zeros. */
    DeviceTensor(std::vector<int64_t> dims, aclDataType dtype, const std::vector<double> &values = {},
                 aclFormat format = ACL_FORMAT_ND)
        : dims_(dims), dtype_(dtype)
    {
        elements_ = 1;
        for (int64_t d : dims_)
            elements_ *= static_cast<size_t>(d);
        const size_t bytes = elements_ * aclDataTypeSize(dtype_);
        if (!succeeded("aclrtMalloc", aclrtMalloc(&device_data_, bytes ? bytes : 1, ACL_MEM_MALLOC_HUGE_FIRST))) {
            device_data_ = nullptr;
            return;
        }
        std::vector<unsigned char> host(bytes, 0);
        for (size_t i = 0; i < values.size() && i < elements_; ++i)
            encode(values[i], &host[i * aclDataTypeSize(dtype_)]);
        if (bytes && !succeeded("aclrtMemcpy to the device",
                                aclrtMemcpy(device_data_, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE)))
            return;

        std::vector<int64_t> strides(dims_.size(), 1);
        for (size_t i = dims_.size(); i-- > 1;)
            strides[i - 1] = strides[i] * dims_[i];
        tensor_ = aclCreateTensor(dims_.data(), dims_.size(), dtype_, strides.data(), 0, format,
                                  dims_.data(), dims_.size(), device_data_);
        if (!tensor_)
            succeeded("aclCreateTensor", -1);
    }
    ~DeviceTensor()
    {
        if (tensor_)
            aclDestroyTensor(tensor_);
        if (device_data_)
            aclrtFree(device_data_);
    }
    DeviceTensor(const DeviceTensor &) = delete;
    DeviceTensor &operator=(const DeviceTensor &) = delete;

    bool ready() const { return tensor_ != nullptr; }
    aclTensor *get() const { return tensor_; }
    const std::vector<int64_t> &dims() const { return dims_; }

    /* The elements as they are in device memory now; empty if the copy
     * fails (the failure is reported). */
    std::vector<double> read() const
    {
        const size_t size = aclDataTypeSize(dtype_), bytes = elements_ * size;
        std::vector<unsigned char> host(bytes);
        if (bytes && !succeeded("aclrtMemcpy to the host",
                                aclrtMemcpy(host.data(), bytes, device_data_, bytes, ACL_MEMCPY_DEVICE_TO_HOST)))
            return {};
        std::vector<double> values(elements_);
        for (size_t i = 0; i < elements_; ++i)
            values[i] = decode(&host[i * size]);
        return values;
    }

private:
    void encode(double value, unsigned char *out) const
    {
        const float f = static_cast<float>(value);
        uint16_t half;
        switch (dtype_) {
        case ACL_FLOAT16: half = aclFloatToFloat16(f); break;
        case ACL_BF16: half = bfloat16_from_float(f); break;
        default: std::memcpy(out, &f, sizeof f); return;
        }
        std::memcpy(out, &half, sizeof half);
    }
    double decode(const unsigned char *in) const
    {
        float f;
        uint16_t half;
        switch (dtype_) {
        case ACL_FLOAT16: std::memcpy(&half, in, sizeof half); return aclFloat16ToFloat(half);
        case ACL_BF16: std::memcpy(&half, in, sizeof half); return float_from_bfloat16(half);
        default: std::memcpy(&f, in, sizeof f); return f;
        }
    }

    std::vector<int64_t> dims_;
    aclDataType dtype_;
    size_t elements_ = 0;
    void *device_data_ = nullptr;
    aclTensor *tensor_ = nullptr;
};

/* Phase 2 of an op whose phase 1 gave `executor` and `workspace_size`: the
 * workspace, the run on `stream` and the wait for it; the workspace lives
 * only as long as the call. */
inline bool run_phase2(const char *name, aclnnStatus (*phase2)(void *, uint64_t, aclOpExecutor *, aclrtStream),
                       uint64_t workspace_size, aclOpExecutor *executor, aclrtStream stream)
{
    void *workspace = nullptr;
    if (workspace_size > 0 &&
        !succeeded("aclrtMalloc (workspace)", aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST))) {
        /* A phase-1 executor that never runs must still be released. */
        aclDestroyAclOpExecutor(executor);
        return false;
    }
    bool done = succeeded(name, phase2(workspace, workspace_size, executor, stream)) &&
                succeeded("aclrtSynchronizeStream", aclrtSynchronizeStream(stream));
    if (workspace)
        aclrtFree(workspace);
    return done;
}

/* Both phases of aclnnConvTbcBackward on `stream`, waiting for the result. */
inline bool conv_tbc_backward(const DeviceTensor &grad_output, const DeviceTensor &input, const DeviceTensor &weight,
                              const DeviceTensor &bias, int64_t pad, int8_t cube_math_type, DeviceTensor &grad_input,
                              DeviceTensor &grad_weight, DeviceTensor &grad_bias, aclrtStream stream)
{
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    return succeeded("aclnnConvTbcBackwardGetWorkspaceSize",
                     aclnnConvTbcBackwardGetWorkspaceSize(grad_output.get(), input.get(), weight.get(), bias.get(),
                                                          pad, cube_math_type, grad_input.get(), grad_weight.get(),
                                                          grad_bias.get(), &workspace_size, &executor)) &&
           run_phase2("aclnnConvTbcBackward", aclnnConvTbcBackward, workspace_size, executor, stream);
}

/* Both phases of aclnnConvTbc (the forward op) on `stream`, waiting for the
 * result. */
inline bool conv_tbc(const DeviceTensor &self, const DeviceTensor &weight, const DeviceTensor &bias, int64_t pad,
                     int8_t cube_math_type, DeviceTensor &out, aclrtStream stream)
{
    uint64_t workspace_size = 0;
    aclOpExecutor *executor = nullptr;
    return succeeded("aclnnConvTbcGetWorkspaceSize",
                     aclnnConvTbcGetWorkspaceSize(self.get(), weight.get(), bias.get(), pad, out.get(),
                                                  cube_math_type, &workspace_size, &executor)) &&
           run_phase2("aclnnConvTbc", aclnnConvTbc, workspace_size, executor, stream);
}

/* How many of `got` differ from `want` (exactly, or both NaN); the first
 * `report_limit` differences are printed with `name` and their index. */
inline int count_mismatches(const char *name, const std::vector<double> &got, const std::vector<double> &want,
                            int report_limit = 5)
{
    if (got.size() != want.size()) {
        std::printf("%s: %zu values came back, %zu expected\n", name, got.size(), want.size());
        return 1 + static_cast<int>(want.size());
    }
    int wrong = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))
            continue;
        if (wrong++ < report_limit)
            std::printf("%s[%zu] = %g, expected %g\n", name, i, got[i], want[i]);
    }
    return wrong;
}

} // namespace acl_host

#endif /* CONVTBC_EXAMPLES_ACL_HOST_H */
