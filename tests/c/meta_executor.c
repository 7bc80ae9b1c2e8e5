/*
 * The executor-level setters and aclDumpOpTensors on a real, repeatable
 * executor of aclnnConvTbcBackward, in C, CANN-style: tensors in aclrtMalloc
 * memory, host data moved only by aclrtMemcpy, runs on a stream.
 *  - aclSetTensorAddr / AclSetTensorAddr: index over the inputs then the
 *    outputs; the next run reads and writes the new addresses (and only
 *    them), and the aclTensor records the address (aclGetRawTensorAddr);
 *  - AclSetInputTensorAddr / AclSetOutputTensorAddr as their lower-case twins;
 *  - the Dynamic variants (input, output, both, and their Acl* spellings):
 *    the op has no tensor-list parameters, so the call that makes sense
 *    names a list holding the very tensor phase 1 was given at irIndex; it
 *    rebinds it. Other lists, indexes and NULLs get CANN's codes (561103,
 *    161002);
 *  - aclDestroyAclOpExecutor, and setters on a destroyed executor;
 *  - aclDumpOpTensors with aclInit's acl.json naming a dump_path: one file
 *    in {dump_path}/{time}/0/ whose text header describes the seven tensors
 *    and whose data is their storage at that point of the stream; with no
 *    dump configured it succeeds and writes nothing; NULL arguments refused.
 * Tensors put in a list are owned by it: the program destroys the list only.
 * Prints FAIL lines and returns non-zero on any failure.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_common.h"

enum { NT = 7, NIN = 4 };
static const int64_t T = 5, B = 2, CI = 3, K = 2, CO = 4, PAD = 1, TO = 5 + 2 * 1 + 1 - 2;

typedef struct {
    int64_t dims[3];
    uint64_t rank;
    int64_t elems;
} Shape;

/* self, input, weight, bias, gradInput, gradWeight, gradBias */
static Shape shapes[NT];
static aclrtStream stream;

static void init_shapes(void)
{
    const Shape s[NT] = {{{TO, B, CO}, 3, TO * B * CO}, {{T, B, CI}, 3, T * B * CI}, {{K, CI, CO}, 3, K * CI * CO},
                         {{CO}, 1, CO},                 {{T, B, CI}, 3, T * B * CI}, {{K, CI, CO}, 3, K * CI * CO},
                         {{CO}, 1, CO}};
    memcpy(shapes, s, sizeof s);
}

static void *device_copy_of(const float *host, int64_t n)
{
    void *dev = NULL;
    EXPECT_EQ(aclrtMalloc(&dev, (size_t)n * 4, ACL_MEM_MALLOC_HUGE_FIRST), 0, "aclrtMalloc");
    if (dev && host)
        EXPECT_EQ(aclrtMemcpy(dev, (size_t)n * 4, host, (size_t)n * 4, ACL_MEMCPY_HOST_TO_DEVICE), 0, "H2D");
    return dev;
}

static void device_fill(void *dev, int64_t n, float v)
{
    float *h = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; ++i) h[i] = v;
    EXPECT_EQ(aclrtMemcpy(dev, (size_t)n * 4, h, (size_t)n * 4, ACL_MEMCPY_HOST_TO_DEVICE), 0, "fill H2D");
    free(h);
}

static void read_back(float *host, const void *dev, int64_t n)
{
    EXPECT_EQ(aclrtMemcpy(host, (size_t)n * 4, dev, (size_t)n * 4, ACL_MEMCPY_DEVICE_TO_HOST), 0, "D2H");
}

static aclTensor *tensor_on(int which, void *dev)
{
    const Shape *s = &shapes[which];
    int64_t strides[3];
    contiguous_strides(s->dims, (int)s->rank, strides);
    return make_tensor(s->dims, s->rank, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, s->elems, dev);
}

static float *values(int which, int seed)
{
    float *h = malloc((size_t)shapes[which].elems * 4);
    for (int64_t i = 0; i < shapes[which].elems; ++i) h[i] = (float)((i * (3 + seed) + seed) % 5) - 2;
    return h;
}

/* Compares the three gradients at gi/gw/gb (device) with the reference of
 * go/x/w (host). Small integers: exact. */
static void check_gradients(const float *go, const float *x, const float *w, const void *gi, const void *gw,
                            const void *gb, const char *what)
{
    int64_t n[3] = {shapes[4].elems, shapes[5].elems, shapes[6].elems};
    double *dgo = malloc(sizeof(double) * (size_t)shapes[0].elems), *dx = malloc(sizeof(double) * (size_t)n[0]),
           *dw = malloc(sizeof(double) * (size_t)n[1]), *ref[3];
    for (int64_t i = 0; i < shapes[0].elems; ++i) dgo[i] = go[i];
    for (int64_t i = 0; i < n[0]; ++i) dx[i] = x[i];
    for (int64_t i = 0; i < n[1]; ++i) dw[i] = w[i];
    for (int j = 0; j < 3; ++j) ref[j] = malloc(sizeof(double) * (size_t)n[j]);
    reference(dgo, dx, dw, T, B, CI, K, CO, PAD, ref[0], ref[1], ref[2]);
    const void *dev[3] = {gi, gw, gb};
    for (int j = 0; j < 3; ++j) {
        float *got = malloc((size_t)n[j] * 4);
        read_back(got, dev[j], n[j]);
        int64_t bad = 0;
        for (int64_t i = 0; i < n[j]; ++i) bad += got[i] != (float)ref[j][i];
        EXPECT(bad == 0, "%s: gradient %d has %lld wrong elements", what, j, (long long)bad);
        free(got);
        free(ref[j]);
    }
    free(dgo); free(dx); free(dw);
}

static void expect_all(const void *dev, int64_t n, float v, const char *what)
{
    float *h = malloc((size_t)n * 4);
    read_back(h, dev, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += h[i] != v;
    EXPECT(bad == 0, "%s: %lld elements changed", what, (long long)bad);
    free(h);
}

static void run(aclOpExecutor *ex, void *ws, uint64_t ws_size, const char *what)
{
    EXPECT_EQ(aclnnConvTbcBackward(ws, ws_size, ex, stream), 0, what);
    EXPECT_EQ(aclrtSynchronizeStream(stream), 0, what);
}

static void *raw_address(const aclTensor *t)
{
    void *a = NULL;
    EXPECT_EQ(aclGetRawTensorAddr(t, &a), 0, "aclGetRawTensorAddr");
    return a;
}

static int message_has(const char *what) { return strstr(recent_msg(), what) != NULL; }

/* ---- the dump file ---- */

static char dump_root[64];
static char found_file[4096];

static int find_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st; (void)ftw;
    if (type == FTW_F)
        snprintf(found_file, sizeof found_file, "%s", path);
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st; (void)type; (void)ftw;
    return remove(path);
}

static char config_path[128];

static void remove_all(const char *path) { nftw(path, remove_entry, 8, FTW_DEPTH | FTW_PHYS); }

static int count_files(void)
{
    found_file[0] = 0;
    nftw(dump_root, find_file, 8, FTW_PHYS);
    return found_file[0] != 0;
}

/* Checks the one dump file against the seven tensors and the device data
 * `expect` (host copies of what each tensor's storage held). */
static void check_dump_file(aclTensor *const *tensors, float *const *expect)
{
    EXPECT(count_files(), "no dump file under %s", dump_root);
    if (!found_file[0])
        return;
    /* {dump_root}/{14-digit time}/0/ConvTbcBackward.conv_tbc_bwd.{task}.{stream}.{timestamp} */
    const char *rest = found_file + strlen(dump_root);
    int digits = 0;
    while (rest[1 + digits] >= '0' && rest[1 + digits] <= '9') ++digits;
    EXPECT(rest[0] == '/' && digits == 14 && strncmp(rest + 15, "/0/ConvTbcBackward.conv_tbc_bwd.", 32) == 0,
           "dump file path %s", found_file);

    FILE *f = fopen(found_file, "rb");
    EXPECT(f != NULL, "cannot open %s", found_file);
    if (!f)
        return;
    char line[1024];
    EXPECT(fgets(line, sizeof line, f) && strcmp(line, "convtbc-dump 1\n") == 0, "first line '%s'", line);
    EXPECT(fgets(line, sizeof line, f) && strcmp(line, "op_type ConvTbcBackward\n") == 0, "op_type line '%s'", line);
    EXPECT(fgets(line, sizeof line, f) && strcmp(line, "op_name conv_tbc_bwd\n") == 0, "op_name line '%s'", line);
    int tensors_seen = -1;
    size_t bytes[NT] = {0};
    while (fgets(line, sizeof line, f) && strcmp(line, "end\n") != 0) {
        if (sscanf(line, "tensors %d", &tensors_seen) == 1)
            continue;
        int i;
        if (sscanf(line, "tensor %d", &i) != 1)
            continue;
        EXPECT(i >= 0 && i < NT, "tensor line index %d", i);
        if (i < 0 || i >= NT)
            continue;
        char want[256];
        const Shape *s = &shapes[i];
        snprintf(want, sizeof want, "tensor %d %s %d dtype DT_FLOAT(0) format ND(2) view_shape [", i,
                 i < NIN ? "input" : "output", i < NIN ? i : i - NIN);
        EXPECT(strncmp(line, want, strlen(want)) == 0, "tensor line '%s' does not start '%s'", line, want);
        char dims[64];
        if (s->rank == 3)
            snprintf(dims, sizeof dims, "view_shape [%lld,%lld,%lld]", (long long)s->dims[0], (long long)s->dims[1],
                     (long long)s->dims[2]);
        else
            snprintf(dims, sizeof dims, "view_shape [%lld]", (long long)s->dims[0]);
        EXPECT(strstr(line, dims) != NULL, "tensor %d: no '%s' in '%s'", i, dims, line);
        snprintf(dims, sizeof dims, "storage_shape [%lld]", (long long)s->elems);
        EXPECT(strstr(line, dims) != NULL, "tensor %d: no '%s' in '%s'", i, dims, line);
        char addr[64];
        snprintf(addr, sizeof addr, " address %p ", raw_address(tensors[i]));
        EXPECT(strstr(line, addr) != NULL, "tensor %d: no '%s' in '%s'", i, addr, line);
        const char *db = strstr(line, "data_bytes ");
        if (db)
            bytes[i] = (size_t)strtoull(db + 11, NULL, 10);
        EXPECT(bytes[i] == (size_t)s->elems * 4, "tensor %d: data_bytes %zu, want %lld", i, bytes[i],
               (long long)s->elems * 4);
    }
    EXPECT_EQ(tensors_seen, NT, "tensors line");
    for (int i = 0; i < NT; ++i) {
        float *got = malloc(bytes[i] ? bytes[i] : 1);
        size_t n = fread(got, 1, bytes[i], f);
        EXPECT(n == bytes[i] && memcmp(got, expect[i], bytes[i]) == 0, "tensor %d: dumped data differs", i);
        free(got);
    }
    EXPECT(fgetc(f) == EOF, "bytes after the last tensor's data");
    fclose(f);
}

/* dump_mode "input": one tensor, the bias (input 0), and its data. */
static void check_input_only_dump(const float *bias)
{
    EXPECT(count_files(), "dump_mode input: no dump file");
    if (!found_file[0])
        return;
    EXPECT(strstr(found_file, "/0/Op.in_only.") != NULL, "dump file name %s", found_file);
    FILE *f = fopen(found_file, "rb");
    char line[1024];
    int tensors = -1, saw_end = 0, saw_tensor = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "tensors %d", &tensors) == 1)
            continue;
        if (strncmp(line, "tensor ", 7) == 0) {
            saw_tensor++;
            EXPECT(strncmp(line, "tensor 0 input 0 dtype DT_FLOAT(0)", 34) == 0, "tensor line '%s'", line);
        }
        if (strcmp(line, "end\n") == 0) {
            saw_end = 1;
            break;
        }
    }
    EXPECT(tensors == 1 && saw_tensor == 1 && saw_end, "dump_mode input: tensors %d, lines %d", tensors, saw_tensor);
    float got[CO + 1];
    size_t n = f ? fread(got, 1, sizeof got, f) : 0;
    EXPECT(n == (size_t)CO * 4 && memcmp(got, bias, (size_t)CO * 4) == 0, "dump_mode input: bias data (%zu bytes)",
           n);
    if (f)
        fclose(f);
}


/* ---- one configuration per process ---- */

enum { CONFIG_CASES = 7 };

/* Runs this program again as `--config-case c DUMP_ROOT`; 0 when the child
 * passed. */
static int run_config_case(const char *self, int c)
{
    pid_t pid = fork();
    if (pid == 0) {
        char number[16];
        snprintf(number, sizeof number, "%d", c);
        execl(self, self, "--config-case", number, dump_root, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void write_config(const char *json)
{
    FILE *f = fopen(config_path, "w");
    fputs(json, f);
    fclose(f);
}

/* Case 0: dump_mode "input", the path written with JSON escapes, other
 * members of all kinds around it: only the input is dumped. Cases 1-5: no
 * dump (no config file, a config without dump_path, malformed JSON). Case 6:
 * a dump_path that does not exist, which CANN wants made beforehand. */
static int config_case(int c)
{
    char config_dir[64];
    snprintf(config_dir, sizeof config_dir, "/tmp/convtbc-conf-XXXXXX");
    if (!mkdtemp(config_dir))
        return 1;
    snprintf(config_path, sizeof config_path, "%s/acl.json", config_dir);
    char escaped[256], json[1024];
    size_t e = 0;
    for (const char *ch = dump_root; *ch && e + 3 < sizeof escaped; ++ch) {
        if (*ch == '/') escaped[e++] = '\\';
        escaped[e++] = *ch;
    }
    escaped[e] = 0;
    const char *off[] = {NULL, "{\"dump\": {\"dump_list\": [], \"dump_mode\": \"all\"}}",
                         "{\"dump\": {\"dump_path\": \"/tmp\"", "{\"dump\": {\"dump_path\": 7}}", "[1, 2"};
    if (c == 0)
        snprintf(json, sizeof json,
                 "{\"n\": -1.5e3, \"list\": [1, [true, false], {\"a\": null}], \"dump\": {\"dump_list\": [],"
                 " \"dump_path\" : \"%s\", \"dump_mode\": \"input\", \"dump_data\": \"tensor\"}, \"z\": \"\\u00e9\"}",
                 escaped);
    else if (c == 6)
        snprintf(json, sizeof json, "{\"dump\": {\"dump_path\": \"%s/missing/deeper\"}}", dump_root);
    const char *config = c == 0 || c == 6 ? json : off[c - 1];
    if (config)
        write_config(config);
    EXPECT_EQ(aclInit(config ? config_path : NULL), 0, "aclInit");
    EXPECT_EQ(aclrtSetDevice(0), 0, "aclrtSetDevice");
    EXPECT_EQ(aclrtCreateStream(&stream), 0, "aclrtCreateStream");

    float *bias = values(3, 3);
    void *bias_dev = device_copy_of(bias, shapes[3].elems);
    void *grad_bias_dev = device_copy_of(NULL, shapes[6].elems);
    aclTensor *probes[2] = {tensor_on(3, bias_dev), tensor_on(6, grad_bias_dev)};
    remove_all(dump_root);
    if (c == 0) {
        EXPECT_EQ(mkdir(dump_root, 0700), 0, "mkdir dump_root");
        EXPECT_EQ(aclDumpOpTensors("Op", "in.only", probes, 1, 1, stream), 0, "aclDumpOpTensors, dump_mode input");
        EXPECT_EQ(aclrtSynchronizeStream(stream), 0, "synchronize, dump_mode input");
        check_input_only_dump(bias);
    } else if (c == 6) {
        EXPECT_EQ(aclDumpOpTensors("T", "n", probes, 1, 1, stream), ACLNN_ERR_INNER, "missing dump_path");
        EXPECT(message_has("dump_path"), "missing dump_path: no message naming dump_path");
    } else {
        EXPECT_EQ(aclDumpOpTensors("T", "n", probes, 1, 1, stream), 0, "aclDumpOpTensors with dump off");
        EXPECT_EQ(aclrtSynchronizeStream(stream), 0, "synchronize with dump off");
        EXPECT(access(dump_root, F_OK) != 0, "dump off (config %d): %s was written to", c, dump_root);
    }
    aclDestroyTensor(probes[0]);
    aclDestroyTensor(probes[1]);
    aclrtFree(bias_dev);
    aclrtFree(grad_bias_dev);
    free(bias);
    EXPECT_EQ(aclrtDestroyStream(stream), 0, "aclrtDestroyStream");
    EXPECT_EQ(aclrtResetDevice(0), 0, "aclrtResetDevice");
    EXPECT_EQ(aclFinalize(), 0, "aclFinalize");
    remove_all(config_dir);
    remove_all(dump_root);
    return finish("meta_executor config case");
}

/* ---- the test ---- */

int main(int argc, char **argv)
{
    init_shapes();
    if (argc == 4 && strcmp(argv[1], "--config-case") == 0) {
        snprintf(dump_root, sizeof dump_root, "%s", argv[3]);
        return config_case(atoi(argv[2]));
    }
    const char *self = argv[0];
    snprintf(dump_root, sizeof dump_root, "/tmp/convtbc-dump-XXXXXX");
    if (!mkdtemp(dump_root)) {
        perror("mkdtemp");
        return 1;
    }
    char config_dir[64];
    snprintf(config_dir, sizeof config_dir, "/tmp/convtbc-conf-XXXXXX");
    if (!mkdtemp(config_dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(config_path, sizeof config_path, "%s/acl.json", config_dir);
    FILE *cf = fopen(config_path, "w");
    fprintf(cf, "{\n  \"dump\": {\n    \"dump_path\": \"%s\",\n    \"dump_list\": [],\n    \"dump_mode\": \"all\",\n"
                "    \"dump_data\": \"tensor\"\n  }\n}\n", dump_root);
    fclose(cf);
    EXPECT_EQ(aclInit(config_path), 0, "aclInit(acl.json)");
    EXPECT_EQ(aclrtSetDevice(0), 0, "aclrtSetDevice");
    EXPECT_EQ(aclrtCreateStream(&stream), 0, "aclrtCreateStream");

    float *host[NT];
    void *dev[NT];
    aclTensor *t[NT];
    for (int i = 0; i < NT; ++i) {
        host[i] = i < NIN ? values(i, i) : NULL;
        dev[i] = device_copy_of(host[i], shapes[i].elems);
        if (i >= NIN)
            device_fill(dev[i], shapes[i].elems, -7.0f);
        t[i] = tensor_on(i, dev[i]);
    }

    uint64_t ws_size = 0;
    aclOpExecutor *ex = NULL;
    EXPECT_EQ(aclnnConvTbcBackwardGetWorkspaceSize(t[0], t[1], t[2], t[3], PAD, 0, t[4], t[5], t[6], &ws_size, &ex),
              0, "phase 1");
    EXPECT_EQ(aclSetAclOpExecutorRepeatable(ex), 0, "aclSetAclOpExecutorRepeatable");
    void *ws = NULL;
    if (ws_size)
        EXPECT_EQ(aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST), 0, "workspace");
    run(ex, ws, ws_size, "first run");
    check_gradients(host[0], host[1], host[2], dev[4], dev[5], dev[6], "first run");

    /* aclSetTensorAddr: 1 is input, 4 is gradInput (outputs follow the inputs) */
    float *x2 = values(1, 7), *w2 = values(2, 8);
    void *dx2 = device_copy_of(x2, shapes[1].elems), *dw2 = device_copy_of(w2, shapes[2].elems);
    void *dgi2 = device_copy_of(NULL, shapes[4].elems), *dgw2 = device_copy_of(NULL, shapes[5].elems);
    EXPECT_EQ(aclSetTensorAddr(ex, 1, t[1], dx2), 0, "aclSetTensorAddr(input)");
    EXPECT_EQ(aclSetTensorAddr(ex, 4, t[4], dgi2), 0, "aclSetTensorAddr(gradInput)");
    EXPECT(raw_address(t[1]) == dx2 && raw_address(t[4]) == dgi2, "aclSetTensorAddr did not update the tensors");
    device_fill(dev[4], shapes[4].elems, -7.0f);
    run(ex, ws, ws_size, "after aclSetTensorAddr");
    check_gradients(host[0], x2, host[2], dgi2, dev[5], dev[6], "after aclSetTensorAddr");
    expect_all(dev[4], shapes[4].elems, -7.0f, "old gradInput after aclSetTensorAddr");

    /* the capitalised spellings: weight (2) and gradWeight (5) */
    EXPECT_EQ(AclSetTensorAddr(ex, 2, t[2], dw2), 0, "AclSetTensorAddr(weight)");
    EXPECT_EQ(AclSetOutputTensorAddr(ex, 1, t[5], dgw2), 0, "AclSetOutputTensorAddr(gradWeight)");
    device_fill(dev[5], shapes[5].elems, -7.0f);
    run(ex, ws, ws_size, "after AclSet*");
    check_gradients(host[0], x2, w2, dgi2, dgw2, dev[6], "after AclSet*");
    expect_all(dev[5], shapes[5].elems, -7.0f, "old gradWeight after AclSetOutputTensorAddr");
    EXPECT_EQ(AclSetInputTensorAddr(ex, 2, t[2], dev[2]), 0, "AclSetInputTensorAddr(weight back)");
    EXPECT(raw_address(t[2]) == dev[2], "AclSetInputTensorAddr did not update the tensor");

    /* flat index refusals */
    EXPECT_EQ(aclSetTensorAddr(ex, 7, t[6], dev[6]), ACLNN_ERR_PARAM_INVALID, "aclSetTensorAddr index 7");
    EXPECT(message_has("aclSetTensorAddr"), "index 7: no message naming aclSetTensorAddr");
    EXPECT_EQ(aclSetTensorAddr(NULL, 0, t[0], dev[0]), ACLNN_ERR_INNER_NULLPTR, "aclSetTensorAddr NULL executor");
    EXPECT_EQ(AclSetTensorAddr(ex, 0, NULL, dev[0]), ACLNN_ERR_INNER_NULLPTR, "AclSetTensorAddr NULL tensor");
    EXPECT_EQ(AclSetInputTensorAddr(ex, 4, t[0], dev[0]), ACLNN_ERR_PARAM_INVALID, "AclSetInputTensorAddr index 4");
    EXPECT_EQ(AclSetOutputTensorAddr(NULL, 0, t[4], dev[4]), ACLNN_ERR_INNER_NULLPTR, "AclSetOutputTensorAddr NULL");
    recent_msg();
    EXPECT(raw_address(t[6]) == dev[6] && raw_address(t[0]) == dev[0], "a refused setter changed a tensor");

    /* Dynamic: a one-tensor list holding phase 1's tensor rebinds it. The
     * lists own t[1], t[4] and t[5] from here on. */
    aclTensorList *lx = aclCreateTensorList((const aclTensor *const *)&t[1], 1);
    aclTensorList *lgi = aclCreateTensorList((const aclTensor *const *)&t[4], 1);
    aclTensorList *lgw = aclCreateTensorList((const aclTensor *const *)&t[5], 1);
    EXPECT(lx && lgi && lgw, "aclCreateTensorList: %s", recent_msg());
    float *x3 = values(1, 11);
    void *dx3 = device_copy_of(x3, shapes[1].elems), *dgi3 = device_copy_of(NULL, shapes[4].elems),
         *dgw3 = device_copy_of(NULL, shapes[5].elems), *dgb3 = device_copy_of(NULL, shapes[6].elems);
    EXPECT_EQ(aclSetDynamicInputTensorAddr(ex, 1, 0, lx, dx3), 0, "aclSetDynamicInputTensorAddr(input)");
    EXPECT_EQ(aclSetDynamicOutputTensorAddr(ex, 0, 0, lgi, dgi3), 0, "aclSetDynamicOutputTensorAddr(gradInput)");
    EXPECT_EQ(aclSetDynamicTensorAddr(ex, 5, 0, lgw, dgw3), 0, "aclSetDynamicTensorAddr(gradWeight = 5)");
    EXPECT(raw_address(t[1]) == dx3 && raw_address(t[4]) == dgi3 && raw_address(t[5]) == dgw3,
           "the Dynamic setters did not update the listed tensors");
    run(ex, ws, ws_size, "after the Dynamic setters");
    check_gradients(host[0], x3, host[2], dgi3, dgw3, dev[6], "after the Dynamic setters");

    /* the capitalised Dynamic spellings, back and forth */
    EXPECT_EQ(AclSetDynamicInputTensorAddr(ex, 1, 0, lx, dx2), 0, "AclSetDynamicInputTensorAddr");
    EXPECT_EQ(AclSetDynamicOutputTensorAddr(ex, 1, 0, lgw, dgw2), 0, "AclSetDynamicOutputTensorAddr");
    aclTensorList *lgb = aclCreateTensorList((const aclTensor *const *)&t[6], 1); /* owns t[6] now */
    EXPECT_EQ(AclSetDynamicTensorAddr(ex, 6, 0, lgb, dgb3), 0, "AclSetDynamicTensorAddr(gradBias = 6)");
    run(ex, ws, ws_size, "after the AclSetDynamic* setters");
    check_gradients(host[0], x2, host[2], dgi3, dgw2, dgb3, "after the AclSetDynamic* setters");

    /* Dynamic refusals: CANN's codes, nothing changed */
    EXPECT_EQ(aclSetDynamicInputTensorAddr(ex, 1, 0, NULL, dx3), ACLNN_ERR_INNER_NULLPTR, "NULL list");
    EXPECT_EQ(aclSetDynamicInputTensorAddr(NULL, 1, 0, lx, dx3), ACLNN_ERR_INNER_NULLPTR, "NULL executor");
    EXPECT_EQ(aclSetDynamicInputTensorAddr(ex, 1, 1, lx, dx3), ACLNN_ERR_PARAM_INVALID, "relativeIndex 1 of 1");
    EXPECT(message_has("relativeIndex"), "relativeIndex: no message naming it");
    EXPECT_EQ(aclSetDynamicInputTensorAddr(ex, 4, 0, lx, dx3), ACLNN_ERR_PARAM_INVALID, "input irIndex 4");
    EXPECT(message_has("irIndex"), "irIndex 4: no message naming irIndex");
    EXPECT_EQ(aclSetDynamicOutputTensorAddr(ex, 3, 0, lgi, dgi3), ACLNN_ERR_PARAM_INVALID, "output irIndex 3");
    EXPECT_EQ(aclSetDynamicTensorAddr(ex, 7, 0, lgi, dgi3), ACLNN_ERR_PARAM_INVALID, "irIndex 7 of 7");
    EXPECT_EQ(aclSetDynamicInputTensorAddr(ex, 0, 0, lx, dx3), ACLNN_ERR_PARAM_INVALID, "list of input at self");
    EXPECT(message_has("no dynamic"), "a list at a single-tensor parameter: no 'no dynamic' message");
    EXPECT_EQ(AclSetDynamicTensorAddr(ex, 4, 0, lgw, dgw3), ACLNN_ERR_PARAM_INVALID, "gradWeight's list at 4");
    const aclTensor *absent[1] = {NULL};
    aclTensorList *lnull = aclCreateTensorList(absent, 1);
    EXPECT_EQ(aclSetDynamicTensorAddr(ex, 1, 0, lnull, dx3), ACLNN_ERR_INNER_NULLPTR, "a NULL element");
    aclDestroyTensorList(lnull);
    recent_msg();
    EXPECT(raw_address(t[1]) == dx2 && raw_address(t[4]) == dgi3, "a refused Dynamic setter changed a tensor");
    run(ex, ws, ws_size, "after refused setters");
    check_gradients(host[0], x2, host[2], dgi3, dgw2, dgb3, "after refused setters");

    /* aclDumpOpTensors: the seven tensors, queued after the last run */
    float *expect[NT];
    void *now[NT];
    for (int i = 0; i < NT; ++i) {
        now[i] = raw_address(t[i]);
        expect[i] = malloc((size_t)shapes[i].elems * 4);
        read_back(expect[i], now[i], shapes[i].elems);
    }
    EXPECT(!count_files(), "a dump file before aclDumpOpTensors");
    EXPECT_EQ(aclDumpOpTensors("ConvTbcBackward", "conv tbc.bwd", t, NIN, NT - NIN, stream), 0, "aclDumpOpTensors");
    EXPECT_EQ(aclrtSynchronizeStream(stream), 0, "synchronize after the dump");
    check_dump_file(t, expect);
    for (int i = 0; i < NT; ++i) free(expect[i]);

    aclTensor *with_null[2] = {t[0], NULL};
    EXPECT_EQ(aclDumpOpTensors(NULL, "n", t, 1, 0, stream), ACLNN_ERR_PARAM_NULLPTR, "dump: NULL opType");
    EXPECT_EQ(aclDumpOpTensors("T", NULL, t, 1, 0, stream), ACLNN_ERR_PARAM_NULLPTR, "dump: NULL opName");
    EXPECT_EQ(aclDumpOpTensors("T", "n", NULL, 0, 0, stream), ACLNN_ERR_PARAM_NULLPTR, "dump: NULL tensors");
    EXPECT_EQ(aclDumpOpTensors("T", "n", t, 1, 0, NULL), ACLNN_ERR_PARAM_NULLPTR, "dump: NULL stream");
    EXPECT_EQ(aclDumpOpTensors("T", "n", with_null, 1, 1, stream), ACLNN_ERR_PARAM_NULLPTR, "dump: NULL tensor");
    EXPECT(message_has("tensors[1]"), "dump: NULL tensor: no message naming tensors[1]");
    int not_a_stream;
    EXPECT_EQ(aclDumpOpTensors("T", "n", t, 1, 0, &not_a_stream), ACLNN_ERR_PARAM_INVALID, "dump: made-up stream");
    EXPECT_EQ(aclDumpOpTensors("T", "n", t, SIZE_MAX, 2, stream), ACLNN_ERR_PARAM_INVALID, "dump: counts overflow");
    recent_msg();

    /* destroying the executor; setters then refuse it */
    EXPECT_EQ(aclDestroyAclOpExecutor(ex), 0, "aclDestroyAclOpExecutor");
    EXPECT_EQ(aclDestroyAclOpExecutor(ex), ACLNN_ERR_PARAM_INVALID, "aclDestroyAclOpExecutor twice");
    EXPECT_EQ(aclSetTensorAddr(ex, 0, t[0], dev[0]), ACLNN_ERR_PARAM_INVALID, "aclSetTensorAddr, destroyed");
    EXPECT_EQ(aclSetDynamicTensorAddr(ex, 1, 0, lx, dx3), ACLNN_ERR_PARAM_INVALID, "Dynamic, destroyed");
    recent_msg();

    /* the lists own t[1], t[4], t[5], t[6]: destroy the lists, and the rest */
    aclDestroyTensorList(lx);
    aclDestroyTensorList(lgi);
    aclDestroyTensorList(lgw);
    aclDestroyTensorList(lgb);
    aclDestroyTensor(t[0]);
    aclDestroyTensor(t[2]);
    aclDestroyTensor(t[3]);

    /* Other configurations, each in a process of its own: CANN keeps the
     * first aclInit's configuration for the life of the process and refuses
     * a different one (100000). */
    for (int c = 0; c < CONFIG_CASES; ++c)
        EXPECT(run_config_case(self, c) == 0, "configuration case %d failed", c);

    for (int i = 0; i < NT; ++i) {
        aclrtFree(dev[i]);
        free(host[i]);
    }
    void *more[] = {dx2, dw2, dgi2, dgw2, dx3, dgi3, dgw3, dgb3, ws};
    for (size_t i = 0; i < sizeof more / sizeof *more; ++i)
        if (more[i]) aclrtFree(more[i]);
    free(x2); free(w2); free(x3);
    EXPECT_EQ(aclrtDestroyStream(stream), 0, "aclrtDestroyStream again");
    EXPECT_EQ(aclrtResetDevice(0), 0, "aclrtResetDevice");
    EXPECT_EQ(aclFinalize(), 0, "aclFinalize again");
    remove_all(config_dir);
    remove_all(dump_root);
    return finish("meta_executor");
}
