/*
 * The aclnn meta objects as a CANN host program uses them (C++, so that the
 * shape arrays the getters return are released with delete[] as CANN's docs
 * do):
 *  - aclCreateScalar for every dtype CANN accepts: the dtype's bytes are
 *    copied (read back with convtbc's convtbcGetScalar), no more are read
 *    (the sources are heap blocks of exactly that size: ASan would see an
 *    over-read), other dtypes and NULL are refused;
 *  - int/float/bool arrays: sizes, empty arrays, NULL values, sizes whose
 *    byte count overflows;
 *  - tensor and scalar lists own their elements: the program destroys only
 *    the lists, and under LeakSanitizer nothing leaks and nothing is freed
 *    twice; a list naming one element twice is refused;
 *  - every tensor getter and setter, and the NULL arguments of each.
 * Codes are CANN's: 161001 for NULL arguments, 161002 for invalid ones.
 * Prints FAIL lines and returns non-zero on any failure.
 */
#include <cstdint>
#include <cstring>
#include <vector>

#include "test_common.h"
#include "convtbc/convtbc_ext.h"

namespace {

const int NULLPTR = ACLNN_ERR_PARAM_NULLPTR, INVALID = ACLNN_ERR_PARAM_INVALID;

/* Says whether the pending message names `what` (and clears it). */
bool message_names(const char *what)
{
    return std::strstr(recent_msg(), what) != nullptr;
}

struct ScalarCase {
    int dtype;
    size_t bytes; /* CANN's aclScalar keeps this many bytes of the value */
};

/* From CANN's list of scalar dtypes; 37..41 are FLOAT8_E8M0, FLOAT6_E3M2,
 * FLOAT6_E2M3, FLOAT4_E2M1, FLOAT4_E1M2, one byte each. */
const ScalarCase SCALAR_CASES[] = {
    {ACL_FLOAT, 4},  {ACL_FLOAT16, 2},  {ACL_INT8, 1},       {ACL_INT32, 4},          {ACL_UINT8, 1},
    {ACL_INT16, 2},  {ACL_UINT16, 2},   {ACL_UINT32, 4},     {ACL_INT64, 8},          {ACL_UINT64, 8},
    {ACL_DOUBLE, 8}, {ACL_BOOL, 1},     {ACL_COMPLEX64, 8},  {ACL_COMPLEX128, 16},    {ACL_BF16, 2},
    {ACL_HIFLOAT8, 1}, {ACL_FLOAT8_E5M2, 1}, {ACL_FLOAT8_E4M3FN, 1}, {37, 1}, {38, 1}, {39, 1}, {40, 1}, {41, 1},
};

void test_scalar_bytes()
{
    for (const ScalarCase &c : SCALAR_CASES) {
        unsigned char *source = new unsigned char[c.bytes]; /* exactly the dtype's size */
        for (size_t i = 0; i < c.bytes; ++i)
            source[i] = static_cast<unsigned char>(0x40 + 7 * i + c.dtype);
        std::vector<unsigned char> expected(source, source + c.bytes);
        aclScalar *scalar = aclCreateScalar(source, static_cast<aclDataType>(c.dtype));
        EXPECT(scalar != nullptr, "aclCreateScalar dtype %d refused: %s", c.dtype, recent_msg());
        std::memset(source, 0, c.bytes); /* the scalar holds its own copy */
        delete[] source;
        if (!scalar)
            continue;
        unsigned char out[32];
        std::memset(out, 0xEE, sizeof out);
        size_t size = sizeof out;
        aclDataType dtype = ACL_DT_UNDEFINED;
        EXPECT_EQ(convtbcGetScalar(scalar, &dtype, out, &size), 0, "convtbcGetScalar");
        EXPECT_EQ(dtype, c.dtype, "scalar dtype");
        EXPECT_EQ(size, c.bytes, "scalar bytes");
        EXPECT(std::memcmp(out, expected.data(), c.bytes) == 0, "dtype %d: the value bytes changed", c.dtype);
        for (size_t i = c.bytes; i < sizeof out; ++i)
            EXPECT(out[i] == 0xEE, "dtype %d: byte %zu written past the value", c.dtype, i);

        size_t small = c.bytes - 1;
        EXPECT_EQ(convtbcGetScalar(scalar, &dtype, out, &small), INVALID, "convtbcGetScalar with too little room");
        EXPECT_EQ(small, c.bytes, "the room convtbcGetScalar asks for");
        recent_msg();
        EXPECT_EQ(aclDestroyScalar(scalar), 0, "aclDestroyScalar");
    }
}

template <typename T>
T round_trip(T value, aclDataType dtype)
{
    T copy = value, back{};
    aclScalar *scalar = aclCreateScalar(&copy, dtype);
    EXPECT(scalar != nullptr, "aclCreateScalar dtype %d", static_cast<int>(dtype));
    if (!scalar)
        return back;
    size_t size = sizeof back;
    aclDataType got;
    EXPECT_EQ(convtbcGetScalar(scalar, &got, &back, &size), 0, "convtbcGetScalar");
    EXPECT_EQ(size, sizeof(T), "typed scalar size");
    aclDestroyScalar(scalar);
    return back;
}

void test_scalar_values()
{
    EXPECT(round_trip(1.5f, ACL_FLOAT) == 1.5f, "float scalar");
    EXPECT(round_trip(-2.25, ACL_DOUBLE) == -2.25, "double scalar");
    EXPECT(round_trip(INT64_MIN, ACL_INT64) == INT64_MIN, "int64 scalar");
    EXPECT(round_trip(UINT64_MAX, ACL_UINT64) == UINT64_MAX, "uint64 scalar");
    EXPECT(round_trip(static_cast<int8_t>(-128), ACL_INT8) == -128, "int8 scalar");
    EXPECT(round_trip(true, ACL_BOOL) == true, "bool scalar");
    EXPECT(round_trip(static_cast<uint16_t>(0x3C00), ACL_FLOAT16) == 0x3C00, "float16 scalar (1.0)");
    struct Complex128 {
        double re, im;
    } z{1.0, -3.0};
    Complex128 back = round_trip(z, ACL_COMPLEX128);
    EXPECT(back.re == 1.0 && back.im == -3.0, "complex128 scalar");
}

void test_scalar_refusals()
{
    double value = 1.0;
    const int refused[] = {ACL_STRING, ACL_INT4, ACL_UINT1, ACL_COMPLEX32, ACL_DT_UNDEFINED, 42, 1000};
    for (int dtype : refused) {
        EXPECT(aclCreateScalar(&value, static_cast<aclDataType>(dtype)) == nullptr, "dtype %d accepted", dtype);
        EXPECT(message_names("aclCreateScalar") , "no message for dtype %d", dtype);
    }
    EXPECT(aclCreateScalar(nullptr, ACL_FLOAT) == nullptr, "NULL value accepted");
    EXPECT(message_names("value"), "the message does not name value");
    EXPECT_EQ(aclDestroyScalar(nullptr), 0, "aclDestroyScalar(NULL)");

    aclScalar *scalar = aclCreateScalar(&value, ACL_DOUBLE);
    aclDataType dtype;
    size_t size = 8;
    EXPECT_EQ(convtbcGetScalar(nullptr, &dtype, &value, &size), NULLPTR, "convtbcGetScalar(NULL)");
    EXPECT_EQ(convtbcGetScalar(scalar, nullptr, &value, &size), NULLPTR, "convtbcGetScalar(dataType NULL)");
    EXPECT_EQ(convtbcGetScalar(scalar, &dtype, nullptr, &size), NULLPTR, "convtbcGetScalar(value NULL)");
    EXPECT_EQ(convtbcGetScalar(scalar, &dtype, &value, nullptr), NULLPTR, "convtbcGetScalar(valueSize NULL)");
    recent_msg();
    aclDestroyScalar(scalar);
}

void test_arrays()
{
    const int64_t ints[] = {3, -1, 7};
    const float floats[] = {0.5f, -2.0f};
    const bool bools[] = {true, false, true, true};
    uint64_t size = 99;

    aclIntArray *ia = aclCreateIntArray(ints, 3);
    aclFloatArray *fa = aclCreateFloatArray(floats, 2);
    aclBoolArray *ba = aclCreateBoolArray(bools, 4);
    EXPECT(ia && fa && ba, "array creation failed: %s", recent_msg());
    EXPECT_EQ(aclGetIntArraySize(ia, &size), 0, "aclGetIntArraySize");
    EXPECT_EQ(size, 3, "int array size");
    EXPECT_EQ(aclGetFloatArraySize(fa, &size), 0, "aclGetFloatArraySize");
    EXPECT_EQ(size, 2, "float array size");
    EXPECT_EQ(aclGetBoolArraySize(ba, &size), 0, "aclGetBoolArraySize");
    EXPECT_EQ(size, 4, "bool array size");

    EXPECT_EQ(aclGetIntArraySize(nullptr, &size), NULLPTR, "aclGetIntArraySize(NULL)");
    EXPECT_EQ(aclGetFloatArraySize(fa, nullptr), NULLPTR, "aclGetFloatArraySize(size NULL)");
    EXPECT_EQ(aclGetBoolArraySize(nullptr, nullptr), NULLPTR, "aclGetBoolArraySize(NULL, NULL)");
    EXPECT(message_names("aclGetBoolArraySize"), "no message naming aclGetBoolArraySize");

    EXPECT_EQ(aclDestroyIntArray(ia), 0, "aclDestroyIntArray");
    EXPECT_EQ(aclDestroyFloatArray(fa), 0, "aclDestroyFloatArray");
    EXPECT_EQ(aclDestroyBoolArray(ba), 0, "aclDestroyBoolArray");
    EXPECT_EQ(aclDestroyIntArray(nullptr), 0, "aclDestroyIntArray(NULL)");
    EXPECT_EQ(aclDestroyFloatArray(nullptr), 0, "aclDestroyFloatArray(NULL)");
    EXPECT_EQ(aclDestroyBoolArray(nullptr), 0, "aclDestroyBoolArray(NULL)");

    /* empty arrays are valid, with or without a pointer */
    aclFloatArray *empty = aclCreateFloatArray(nullptr, 0);
    EXPECT(empty != nullptr, "empty float array refused");
    EXPECT_EQ(aclGetFloatArraySize(empty, &size), 0, "aclGetFloatArraySize(empty)");
    EXPECT_EQ(size, 0, "empty array size");
    aclDestroyFloatArray(empty);

    /* NULL values with a size, and sizes whose bytes overflow: refused, no crash */
    EXPECT(aclCreateIntArray(nullptr, 2) == nullptr, "NULL int values accepted");
    EXPECT(message_names("value"), "NULL values: the message does not name value");
    EXPECT(aclCreateBoolArray(nullptr, 1) == nullptr, "NULL bool values accepted");
    recent_msg();
    EXPECT(aclCreateIntArray(ints, UINT64_MAX) == nullptr, "UINT64_MAX ints accepted");
    EXPECT(message_names("too large"), "overflowing size: no 'too large' message");
    EXPECT(aclCreateIntArray(ints, (uint64_t)1 << 61) == nullptr, "2^61 ints (2^64 bytes) accepted");
    EXPECT(aclCreateFloatArray(floats, (uint64_t)1 << 62) == nullptr, "2^62 floats (2^64 bytes) accepted");
    EXPECT(aclCreateBoolArray(bools, UINT64_MAX - 4) == nullptr, "UINT64_MAX - 4 bools accepted");
    recent_msg();
}

aclTensor *small_tensor(int64_t n, void *data)
{
    int64_t dims[1] = {n}, strides[1] = {1};
    return aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, data);
}

void test_lists_own_their_elements()
{
    static float storage[16];
    aclTensor *tensors[3] = {small_tensor(4, storage), small_tensor(8, storage), small_tensor(16, storage)};
    aclTensorList *list = aclCreateTensorList(tensors, 3);
    EXPECT(list != nullptr, "aclCreateTensorList: %s", recent_msg());
    uint64_t size = 0;
    EXPECT_EQ(aclGetTensorListSize(list, &size), 0, "aclGetTensorListSize");
    EXPECT_EQ(size, 3, "tensor list size");
    /* the list destroys the three tensors: nothing else frees them */
    EXPECT_EQ(aclDestroyTensorList(list), 0, "aclDestroyTensorList");

    float a = 1.0f;
    double b = 2.0;
    aclScalar *scalars[2] = {aclCreateScalar(&a, ACL_FLOAT), aclCreateScalar(&b, ACL_DOUBLE)};
    aclScalarList *slist = aclCreateScalarList(scalars, 2);
    EXPECT(slist != nullptr, "aclCreateScalarList: %s", recent_msg());
    EXPECT_EQ(aclGetScalarListSize(slist, &size), 0, "aclGetScalarListSize");
    EXPECT_EQ(size, 2, "scalar list size");
    EXPECT_EQ(aclDestroyScalarList(slist), 0, "aclDestroyScalarList");

    /* an absent (NULL) element is allowed and skipped on destruction */
    aclTensor *with_gap[3] = {small_tensor(2, storage), nullptr, small_tensor(3, storage)};
    list = aclCreateTensorList(with_gap, 3);
    EXPECT(list != nullptr, "a list with a NULL element refused: %s", recent_msg());
    EXPECT_EQ(aclDestroyTensorList(list), 0, "aclDestroyTensorList with a NULL element");

    /* empty lists */
    list = aclCreateTensorList(nullptr, 0);
    EXPECT(list != nullptr, "empty tensor list refused");
    EXPECT_EQ(aclGetTensorListSize(list, &size), 0, "aclGetTensorListSize(empty)");
    EXPECT_EQ(size, 0, "empty tensor list size");
    aclDestroyTensorList(list);
    slist = aclCreateScalarList(nullptr, 0);
    EXPECT(slist != nullptr, "empty scalar list refused");
    aclDestroyScalarList(slist);
}

void test_list_refusals()
{
    static float storage[4];
    aclTensor *t = small_tensor(4, storage);
    aclTensor *twice[3] = {t, small_tensor(2, storage), t};
    EXPECT(aclCreateTensorList(twice, 3) == nullptr, "a list holding one tensor twice accepted");
    const char *msg = recent_msg();
    EXPECT(std::strstr(msg, "aclCreateTensorList") && std::strstr(msg, "value[0]"),
           "duplicate: message '%s' does not name aclCreateTensorList and value[0]", msg);
    aclDestroyTensor(twice[1]); /* no list took them */
    aclDestroyTensor(t);

    double v = 1.0;
    aclScalar *s = aclCreateScalar(&v, ACL_DOUBLE);
    aclScalar *stwice[2] = {s, s};
    EXPECT(aclCreateScalarList(stwice, 2) == nullptr, "a list holding one scalar twice accepted");
    recent_msg();
    aclDestroyScalar(s);

    EXPECT(aclCreateTensorList(nullptr, 2) == nullptr, "NULL tensors with size 2 accepted");
    EXPECT(message_names("value"), "NULL list values: the message does not name value");
    EXPECT(aclCreateScalarList(nullptr, 1) == nullptr, "NULL scalars with size 1 accepted");
    recent_msg();
    const aclTensor *one[1] = {nullptr};
    EXPECT(aclCreateTensorList(one, UINT64_MAX) == nullptr, "UINT64_MAX tensors accepted");
    recent_msg();

    uint64_t size;
    EXPECT_EQ(aclGetTensorListSize(nullptr, &size), NULLPTR, "aclGetTensorListSize(NULL)");
    EXPECT_EQ(aclGetScalarListSize(nullptr, &size), NULLPTR, "aclGetScalarListSize(NULL)");
    aclTensorList *empty = aclCreateTensorList(nullptr, 0);
    EXPECT_EQ(aclGetTensorListSize(empty, nullptr), NULLPTR, "aclGetTensorListSize(size NULL)");
    aclDestroyTensorList(empty);
    recent_msg();
    EXPECT_EQ(aclDestroyTensorList(nullptr), 0, "aclDestroyTensorList(NULL)");
    EXPECT_EQ(aclDestroyScalarList(nullptr), 0, "aclDestroyScalarList(NULL)");
}

bool same(const int64_t *got, uint64_t got_count, std::vector<int64_t> want)
{
    if (got_count != want.size())
        return false;
    for (uint64_t i = 0; i < got_count; ++i)
        if (got[i] != want[i])
            return false;
    return true;
}

void test_tensor_getters_and_setters()
{
    static uint16_t storage[8], other[16];
    const int64_t dims[2] = {2, 3}, strides[2] = {1, 2}, storage_dims[1] = {8};
    aclTensor *t = aclCreateTensor(dims, 2, ACL_FLOAT16, strides, 1, ACL_FORMAT_NCHW, storage_dims, 1, storage);
    EXPECT(t != nullptr, "aclCreateTensor: %s", recent_msg());
    if (!t)
        return;

    int64_t *values = nullptr;
    uint64_t count = 0;
    EXPECT_EQ(aclGetViewShape(t, &values, &count), 0, "aclGetViewShape");
    EXPECT(same(values, count, {2, 3}), "view shape");
    delete[] values;
    EXPECT_EQ(aclGetViewStrides(t, &values, &count), 0, "aclGetViewStrides");
    EXPECT(same(values, count, {1, 2}), "view strides");
    delete[] values;
    EXPECT_EQ(aclGetStorageShape(t, &values, &count), 0, "aclGetStorageShape");
    EXPECT(same(values, count, {8}), "storage shape");
    delete[] values;
    int64_t offset = -1;
    EXPECT_EQ(aclGetViewOffset(t, &offset), 0, "aclGetViewOffset");
    EXPECT_EQ(offset, 1, "view offset");
    aclFormat format = ACL_FORMAT_UNDEFINED;
    EXPECT_EQ(aclGetFormat(t, &format), 0, "aclGetFormat");
    EXPECT_EQ(format, ACL_FORMAT_NCHW, "format");
    aclDataType dtype = ACL_DT_UNDEFINED;
    EXPECT_EQ(aclGetDataType(t, &dtype), 0, "aclGetDataType");
    EXPECT_EQ(dtype, ACL_FLOAT16, "dtype");
    void *address = nullptr;
    EXPECT_EQ(aclGetRawTensorAddr(t, &address), 0, "aclGetRawTensorAddr");
    EXPECT(address == storage, "raw address");
    EXPECT_EQ(aclSetRawTensorAddr(t, other), 0, "aclSetRawTensorAddr");
    EXPECT_EQ(aclGetRawTensorAddr(t, &address), 0, "aclGetRawTensorAddr after set");
    EXPECT(address == other, "raw address after aclSetRawTensorAddr");

    /* aclInitTensor gives the same tensor a new description */
    const int64_t dims3[3] = {2, 2, 4}, storage3[2] = {4, 4};
    EXPECT_EQ(aclInitTensor(t, dims3, 3, ACL_INT32, nullptr, 0, ACL_FORMAT_ND, storage3, 2, storage), 0,
              "aclInitTensor");
    EXPECT_EQ(aclGetViewShape(t, &values, &count), 0, "aclGetViewShape after aclInitTensor");
    EXPECT(same(values, count, {2, 2, 4}), "view shape after aclInitTensor");
    delete[] values;
    EXPECT_EQ(aclGetViewStrides(t, &values, &count), 0, "aclGetViewStrides after aclInitTensor");
    EXPECT(same(values, count, {8, 4, 1}), "contiguous strides after aclInitTensor (stride NULL)");
    delete[] values;
    EXPECT_EQ(aclGetStorageShape(t, &values, &count), 0, "aclGetStorageShape after aclInitTensor");
    EXPECT(same(values, count, {4, 4}), "storage shape after aclInitTensor");
    delete[] values;
    aclGetDataType(t, &dtype);
    aclGetFormat(t, &format);
    aclGetViewOffset(t, &offset);
    aclGetRawTensorAddr(t, &address);
    EXPECT(dtype == ACL_INT32 && format == ACL_FORMAT_ND && offset == 0 && address == storage,
           "dtype/format/offset/address after aclInitTensor");

    /* NULL arguments: 161001, nothing written */
    values = nullptr;
    EXPECT_EQ(aclGetViewShape(nullptr, &values, &count), NULLPTR, "aclGetViewShape(NULL tensor)");
    EXPECT_EQ(aclGetViewShape(t, nullptr, &count), NULLPTR, "aclGetViewShape(NULL dims)");
    EXPECT_EQ(aclGetViewShape(t, &values, nullptr), NULLPTR, "aclGetViewShape(NULL count)");
    EXPECT_EQ(aclGetViewStrides(t, nullptr, &count), NULLPTR, "aclGetViewStrides(NULL)");
    EXPECT_EQ(aclGetStorageShape(nullptr, &values, &count), NULLPTR, "aclGetStorageShape(NULL)");
    EXPECT(values == nullptr, "a refused getter wrote its output");
    EXPECT_EQ(aclGetViewOffset(nullptr, &offset), NULLPTR, "aclGetViewOffset(NULL)");
    EXPECT_EQ(aclGetViewOffset(t, nullptr), NULLPTR, "aclGetViewOffset(NULL out)");
    EXPECT_EQ(aclGetFormat(t, nullptr), NULLPTR, "aclGetFormat(NULL out)");
    EXPECT_EQ(aclGetDataType(nullptr, &dtype), NULLPTR, "aclGetDataType(NULL)");
    EXPECT_EQ(aclGetRawTensorAddr(t, nullptr), NULLPTR, "aclGetRawTensorAddr(NULL out)");
    EXPECT_EQ(aclSetRawTensorAddr(nullptr, other), NULLPTR, "aclSetRawTensorAddr(NULL)");
    EXPECT_EQ(aclInitTensor(nullptr, dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, storage_dims, 1, storage),
              NULLPTR, "aclInitTensor(NULL)");
    EXPECT(message_names("aclInitTensor"), "aclInitTensor(NULL): no message naming it");

    /* a rank-0 tensor: empty shapes, still an array the caller deletes */
    const int64_t one[1] = {1};
    aclTensor *scalar_tensor = aclCreateTensor(nullptr, 0, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, one, 1, storage);
    if (scalar_tensor) {
        EXPECT_EQ(aclGetViewShape(scalar_tensor, &values, &count), 0, "aclGetViewShape(rank 0)");
        EXPECT_EQ(count, 0, "rank-0 view dims");
        delete[] values;
        aclDestroyTensor(scalar_tensor);
    } else {
        EXPECT(false, "rank-0 tensor refused: %s", recent_msg());
    }
    EXPECT_EQ(aclDestroyTensor(t), 0, "aclDestroyTensor");
    EXPECT_EQ(aclDestroyTensor(nullptr), 0, "aclDestroyTensor(NULL)");
}

} // namespace

int main()
{
    test_scalar_bytes();
    test_scalar_values();
    test_scalar_refusals();
    test_arrays();
    test_lists_own_their_elements();
    test_list_refusals();
    test_tensor_getters_and_setters();
    return finish("meta_objects");
}
