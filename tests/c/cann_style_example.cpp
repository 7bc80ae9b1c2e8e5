/*
 * aclnnConvTbcBackward called the way CANN's documentation shows it:
 * aclInit -> aclrtSetDevice -> aclrtCreateStream -> aclrtMalloc + aclrtMemcpy
 * -> aclCreateTensor -> both phases -> aclrtSynchronizeStream -> copy back
 * -> check -> cleanup. The expected values are computed here by plain loops.
 *
 * Build: g++ $(convtbc config --cflags) cann_style_example.cpp $(convtbc config --libs)
 * Exit status 0 when every check passes.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_convolution_backward.h"

#define CHECK_RET(cond, return_expr) \
    do {                               \
        if (!(cond)) {                 \
            return_expr;               \
        }                              \
    } while (0)

#define LOG_PRINT(message, ...)         \
    do {                                \
        printf(message, ##__VA_ARGS__); \
    } while (0)

static int64_t GetShapeSize(const std::vector<int64_t> &shape)
{
    int64_t shapeSize = 1;
    for (auto i : shape) {
        shapeSize *= i;
    }
    return shapeSize;
}

static int Init(int32_t deviceId, aclrtStream *stream)
{
    auto ret = aclInit(nullptr);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclInit failed. ERROR: %d\n", ret); return ret);
    ret = aclrtSetDevice(deviceId);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtSetDevice failed. ERROR: %d\n", ret); return ret);
    ret = aclrtCreateStream(stream);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtCreateStream failed. ERROR: %d\n", ret); return ret);
    return 0;
}

template <typename T>
static int CreateAclTensor(const std::vector<T> &hostData, const std::vector<int64_t> &shape, void **deviceAddr,
                           aclDataType dataType, aclTensor **tensor)
{
    auto size = GetShapeSize(shape) * sizeof(T);
    auto ret = aclrtMalloc(deviceAddr, size, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtMalloc failed. ERROR: %d\n", ret); return ret);
    ret = aclrtMemcpy(*deviceAddr, size, hostData.data(), size, ACL_MEMCPY_HOST_TO_DEVICE);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtMemcpy failed. ERROR: %d\n", ret); return ret);

    std::vector<int64_t> strides(shape.size(), 1);
    for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; i--) {
        strides[i] = shape[i + 1] * strides[i + 1];
    }
    *tensor = aclCreateTensor(shape.data(), shape.size(), dataType, strides.data(), 0, aclFormat::ACL_FORMAT_ND,
                              shape.data(), shape.size(), *deviceAddr);
    CHECK_RET(*tensor != nullptr, LOG_PRINT("aclCreateTensor failed: %s\n", aclGetRecentErrMsg()); return -1);
    return 0;
}

struct Problem {
    int64_t T, B, Ci, K, Co, pad;
    int64_t To() const { return T + 2 * pad + 1 - K; }
};

/* Small integers: every product and sum is exact in float16 and float32. */
static float ValueAt(int which, int64_t i) { return static_cast<float>(static_cast<int>((i * 7 + which * 3) % 5) - 2); }

static void Expected(const Problem &p, const std::vector<float> &go, const std::vector<float> &x,
                     const std::vector<float> &w, std::vector<double> &gi, std::vector<double> &gw,
                     std::vector<double> &gb)
{
    const int64_t To = p.To();
    gi.assign(p.T * p.B * p.Ci, 0.0);
    gw.assign(p.K * p.Ci * p.Co, 0.0);
    gb.assign(p.Co, 0.0);
    for (int64_t t = 0; t < p.T; ++t)
        for (int64_t b = 0; b < p.B; ++b)
            for (int64_t c = 0; c < p.Ci; ++c)
                for (int64_t k = 0; k < p.K; ++k) {
                    int64_t u = t + p.pad - k;
                    if (u < 0 || u >= To) continue;
                    for (int64_t o = 0; o < p.Co; ++o)
                        gi[(t * p.B + b) * p.Ci + c] += go[(u * p.B + b) * p.Co + o] * w[(k * p.Ci + c) * p.Co + o];
                }
    for (int64_t k = 0; k < p.K; ++k)
        for (int64_t c = 0; c < p.Ci; ++c)
            for (int64_t o = 0; o < p.Co; ++o)
                for (int64_t t = 0; t < To; ++t) {
                    int64_t ti = t + k - p.pad;
                    if (ti < 0 || ti >= p.T) continue;
                    for (int64_t b = 0; b < p.B; ++b)
                        gw[(k * p.Ci + c) * p.Co + o] += x[(ti * p.B + b) * p.Ci + c] * go[(t * p.B + b) * p.Co + o];
                }
    for (int64_t t = 0; t < To; ++t)
        for (int64_t b = 0; b < p.B; ++b)
            for (int64_t o = 0; o < p.Co; ++o) gb[o] += go[(t * p.B + b) * p.Co + o];
}

/* One full CANN-style run with element type Elem (float or aclFloat16). */
template <typename Elem>
static int RunCase(const Problem &p, aclDataType dataType, int8_t cubeMathType, aclrtStream stream)
{
    const std::vector<int64_t> selfShape = {p.To(), p.B, p.Co}, inputShape = {p.T, p.B, p.Ci},
                               weightShape = {p.K, p.Ci, p.Co}, biasShape = {p.Co};
    std::vector<float> go(GetShapeSize(selfShape)), x(GetShapeSize(inputShape)), w(GetShapeSize(weightShape)),
        bias(p.Co);
    for (size_t i = 0; i < go.size(); ++i) go[i] = ValueAt(0, static_cast<int64_t>(i));
    for (size_t i = 0; i < x.size(); ++i) x[i] = ValueAt(1, static_cast<int64_t>(i));
    for (size_t i = 0; i < w.size(); ++i) w[i] = ValueAt(2, static_cast<int64_t>(i));
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 1.0f;

    auto toElem = [](const std::vector<float> &v) {
        std::vector<Elem> out(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
            if (sizeof(Elem) == 2) {
                aclFloat16 h = aclFloatToFloat16(v[i]);
                out[i] = *reinterpret_cast<Elem *>(&h);
            } else {
                float f = v[i];
                out[i] = *reinterpret_cast<Elem *>(&f);
            }
        }
        return out;
    };
    auto toFloat = [](Elem e) -> double {
        if (sizeof(Elem) == 2) return aclFloat16ToFloat(*reinterpret_cast<aclFloat16 *>(&e));
        return static_cast<double>(*reinterpret_cast<float *>(&e));
    };

    std::vector<Elem> selfHost = toElem(go), inputHost = toElem(x), weightHost = toElem(w), biasHost = toElem(bias);
    std::vector<Elem> gradInputHost(x.size(), Elem()), gradWeightHost(w.size(), Elem()), gradBiasHost(p.Co, Elem());

    void *selfDev = nullptr, *inputDev = nullptr, *weightDev = nullptr, *biasDev = nullptr;
    void *gradInputDev = nullptr, *gradWeightDev = nullptr, *gradBiasDev = nullptr;
    aclTensor *self = nullptr, *input = nullptr, *weight = nullptr, *biasT = nullptr;
    aclTensor *gradInput = nullptr, *gradWeight = nullptr, *gradBias = nullptr;
    int ret = CreateAclTensor(selfHost, selfShape, &selfDev, dataType, &self);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = CreateAclTensor(inputHost, inputShape, &inputDev, dataType, &input);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = CreateAclTensor(weightHost, weightShape, &weightDev, dataType, &weight);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = CreateAclTensor(biasHost, biasShape, &biasDev, dataType, &biasT);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = CreateAclTensor(gradInputHost, inputShape, &gradInputDev, dataType, &gradInput);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = CreateAclTensor(gradWeightHost, weightShape, &gradWeightDev, dataType, &gradWeight);
    CHECK_RET(ret == ACL_SUCCESS, return ret);
    ret = CreateAclTensor(gradBiasHost, biasShape, &gradBiasDev, dataType, &gradBias);
    CHECK_RET(ret == ACL_SUCCESS, return ret);

    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    ret = aclnnConvTbcBackwardGetWorkspaceSize(self, input, weight, biasT, p.pad, cubeMathType, gradInput, gradWeight,
                                               gradBias, &workspaceSize, &executor);
    CHECK_RET(ret == ACL_SUCCESS,
              LOG_PRINT("aclnnConvTbcBackwardGetWorkspaceSize failed. ERROR: %d (%s)\n", ret, aclGetRecentErrMsg());
              return ret);
    void *workspaceAddr = nullptr;
    if (workspaceSize > 0) {
        ret = aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
        CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("allocate workspace failed. ERROR: %d\n", ret); return ret);
    }
    ret = aclnnConvTbcBackward(workspaceAddr, workspaceSize, executor, stream);
    CHECK_RET(ret == ACL_SUCCESS,
              LOG_PRINT("aclnnConvTbcBackward failed. ERROR: %d (%s)\n", ret, aclGetRecentErrMsg()); return ret);
    ret = aclrtSynchronizeStream(stream);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("aclrtSynchronizeStream failed. ERROR: %d\n", ret); return ret);

    std::vector<Elem> giOut(x.size()), gwOut(w.size()), gbOut(p.Co);
    ret = aclrtMemcpy(giOut.data(), giOut.size() * sizeof(Elem), gradInputDev, giOut.size() * sizeof(Elem),
                      ACL_MEMCPY_DEVICE_TO_HOST);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy gradInput failed. ERROR: %d\n", ret); return ret);
    ret = aclrtMemcpy(gwOut.data(), gwOut.size() * sizeof(Elem), gradWeightDev, gwOut.size() * sizeof(Elem),
                      ACL_MEMCPY_DEVICE_TO_HOST);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy gradWeight failed. ERROR: %d\n", ret); return ret);
    ret = aclrtMemcpy(gbOut.data(), gbOut.size() * sizeof(Elem), gradBiasDev, gbOut.size() * sizeof(Elem),
                      ACL_MEMCPY_DEVICE_TO_HOST);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("copy gradBias failed. ERROR: %d\n", ret); return ret);

    std::vector<double> gi, gw, gb;
    Expected(p, go, x, w, gi, gw, gb);
    int bad = 0;
    for (size_t i = 0; i < gi.size(); ++i)
        if (toFloat(giOut[i]) != gi[i] && bad++ < 5)
            LOG_PRINT("gradInput[%zu] = %f, expected %f\n", i, toFloat(giOut[i]), gi[i]);
    for (size_t i = 0; i < gw.size(); ++i)
        if (toFloat(gwOut[i]) != gw[i] && bad++ < 10)
            LOG_PRINT("gradWeight[%zu] = %f, expected %f\n", i, toFloat(gwOut[i]), gw[i]);
    for (size_t i = 0; i < gb.size(); ++i)
        if (toFloat(gbOut[i]) != gb[i] && bad++ < 15)
            LOG_PRINT("gradBias[%zu] = %f, expected %f\n", i, toFloat(gbOut[i]), gb[i]);

    aclDestroyTensor(self);
    aclDestroyTensor(input);
    aclDestroyTensor(weight);
    aclDestroyTensor(biasT);
    aclDestroyTensor(gradInput);
    aclDestroyTensor(gradWeight);
    aclDestroyTensor(gradBias);
    aclrtFree(selfDev);
    aclrtFree(inputDev);
    aclrtFree(weightDev);
    aclrtFree(biasDev);
    aclrtFree(gradInputDev);
    aclrtFree(gradWeightDev);
    aclrtFree(gradBiasDev);
    if (workspaceSize > 0) aclrtFree(workspaceAddr);
    return bad;
}

int main()
{
    int32_t deviceId = 0;
    aclrtStream stream;
    auto ret = Init(deviceId, &stream);
    CHECK_RET(ret == ACL_SUCCESS, LOG_PRINT("Init acl failed. ERROR: %d\n", ret); return 1);

    int failures = 0;
    // CANN's documented example: all [5,1,2]/[1,2,2]/[2], pad 0, cubeMathType 1.
    failures += RunCase<float>(Problem{5, 1, 2, 1, 2, 0}, ACL_FLOAT, 1, stream);
    // Larger kernel and padding, float32 and float16.
    failures += RunCase<float>(Problem{7, 2, 3, 3, 4, 1}, ACL_FLOAT, 0, stream);
    failures += RunCase<aclFloat16>(Problem{7, 2, 3, 3, 4, 2}, ACL_FLOAT16, 1, stream);
    failures += RunCase<float>(Problem{4, 3, 5, 6, 2, 3}, ACL_FLOAT, 3, stream);

    aclrtDestroyStream(stream);
    aclrtResetDevice(deviceId);
    aclFinalize();
    if (failures) {
        LOG_PRINT("cann_style_example: %d mismatch(es)\n", failures);
        return 1;
    }
    LOG_PRINT("cann_style_example: OK\n");
    return 0;
}
