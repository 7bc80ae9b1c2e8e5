#include "api/dump.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "api/errors.h"
#include "api/json.h"
#include "api/log.h"
#include "api/memory.h"
#include "api/sizes.h"
#include "api/streams.h"
#include "api/tensor.h"

static const char API[] = "aclDumpOpTensors";

enum { CONFIG_MAX_BYTES = 1 << 20, STREAM_IDS = 64, DEVICE_ID = 0 };
/* Data a single dump copies at most; storage beyond it is described, not copied. */
static const size_t DATA_LIMIT = (size_t)256 << 20;

typedef enum { DUMP_OUTPUTS = 1, DUMP_INPUTS = 2, DUMP_ALL = 3 } dump_mode;

/* What aclInit's config said, and the ids handed out since. */
static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool on;
    dump_mode mode;
    char dump_path[PATH_MAX];
    char stamp[16]; /* YYYYMMDDHHMMSS of aclInit: one directory per run */
    const void *streams[STREAM_IDS];
    unsigned stream_count;
    unsigned long long tasks;
} config;

/* ---- configuration ----------------------------------------------------------- */

/* The file's text (free it), or NULL with *why set. */
static char *read_text(const char *path, const char **why)
{
    FILE *file = fopen(path, "rb");
    if (!file) {
        *why = strerror(errno);
        return NULL;
    }
    char *text = malloc((size_t)CONFIG_MAX_BYTES + 1);
    size_t length = text ? fread(text, 1, (size_t)CONFIG_MAX_BYTES + 1, file) : 0;
    bool failed = !text || ferror(file);
    fclose(file);
    if (failed || length > (size_t)CONFIG_MAX_BYTES) {
        *why = failed ? "cannot read it" : "larger than 1 MiB";
        free(text);
        return NULL;
    }
    text[length] = '\0';
    return text;
}

static dump_mode mode_from(const char *config_path, ctbc_json_result found, const char *text)
{
    if (found == CTBC_JSON_FOUND && strcmp(text, "input") == 0)
        return DUMP_INPUTS;
    if (found == CTBC_JSON_FOUND && strcmp(text, "all") == 0)
        return DUMP_ALL;
    if (found != CTBC_JSON_ABSENT && !(found == CTBC_JSON_FOUND && strcmp(text, "output") == 0))
        CTBC_LOG(CTBC_LOG_WARNING, "aclInit: dump.dump_mode in %s is not \"input\", \"output\" or \"all\"; "
                 "\"output\" is used", config_path);
    return DUMP_OUTPUTS;
}

void ctbc_dump_configure(const char *config_path)
{
    pthread_mutex_lock(&config_lock);
    config.on = false;
    config.stream_count = 0;
    pthread_mutex_unlock(&config_lock);
    if (!config_path || !*config_path)
        return;

    const char *why = NULL;
    char *text = read_text(config_path, &why);
    if (!text) {
        CTBC_LOG(CTBC_LOG_WARNING, "aclInit: cannot read the config file %s (%s); operator dump stays off",
                 config_path, why);
        return;
    }
    static const char *const PATH_KEYS[] = {"dump", "dump_path"}, *const MODE_KEYS[] = {"dump", "dump_mode"};
    char dump_path[PATH_MAX], mode_text[16];
    ctbc_json_result path_found = ctbc_json_find_string(text, PATH_KEYS, 2, dump_path, sizeof dump_path);
    ctbc_json_result mode_found = ctbc_json_find_string(text, MODE_KEYS, 2, mode_text, sizeof mode_text);
    free(text);
    if (path_found == CTBC_JSON_ABSENT) {
        CTBC_LOG(CTBC_LOG_INFO, "aclInit: %s names no dump.dump_path; operator dump is off", config_path);
        return;
    }
    if (path_found != CTBC_JSON_FOUND || !dump_path[0]) {
        CTBC_LOG(CTBC_LOG_WARNING,
                 "aclInit: %s: %s; operator dump stays off", config_path,
                 path_found == CTBC_JSON_MALFORMED ? "not one well-formed JSON value (at most 10 levels of {} and "
                                                     "of [])"
                                                   : "dump.dump_path is not a non-empty string shorter than PATH_MAX");
        return;
    }
    dump_mode mode = mode_from(config_path, mode_found, mode_text);

    time_t now = time(NULL);
    struct tm parts;
    localtime_r(&now, &parts);
    pthread_mutex_lock(&config_lock);
    config.on = true;
    config.mode = mode;
    memcpy(config.dump_path, dump_path, sizeof dump_path);
    strftime(config.stamp, sizeof config.stamp, "%Y%m%d%H%M%S", &parts);
    pthread_mutex_unlock(&config_lock);
    CTBC_LOG(CTBC_LOG_INFO, "aclInit: operator dump on, into %s/%s/%d (dump_mode %s)", dump_path, config.stamp,
             DEVICE_ID, mode == DUMP_ALL ? "all" : mode == DUMP_INPUTS ? "input" : "output");
}

/* ---- one dump -------------------------------------------------------------- */

typedef struct {
    bool input;
    size_t index;   /* among the inputs or the outputs */
    aclTensor meta; /* a copy: the caller may destroy its tensor once the call returns */
} dumped_tensor;

typedef struct {
    char path[PATH_MAX];
    char *op_type, *op_name;
    unsigned long long task_id, stream_id, timestamp;
    size_t count;
    dumped_tensor tensors[];
} dump_job;

static void free_job(dump_job *job)
{
    free(job->op_type);
    free(job->op_name);
    free(job);
}

/* Reads a tensor's storage into *data (free it) when it lies in aclrtMalloc
 * memory and fits the remaining *budget; otherwise returns why not (NULL
 * for empty storage, which has nothing to read). */
static const char *read_storage(const aclTensor *t, size_t *budget, void **data, size_t *bytes)
{
    *data = NULL;
    *bytes = 0;
    size_t item = aclDataTypeSize(t->dtype);
    if (item == 0)
        return "the dtype has no whole-byte element size";
    uint64_t elements = 1;
    for (uint64_t d = 0; d < t->storage_rank; d++)
        if (__builtin_mul_overflow(elements, (uint64_t)t->storage_dims[d], &elements))
            return "the storage is too large";
    size_t size;
    if (!ctbc_bytes_for(elements, item, 0, &size))
        return "the storage is too large";
    if (size == 0)
        return NULL;
    if (!t->data)
        return "the tensor has no data address";
    if (size > *budget)
        return "over convtbc's limit of 256 MiB of data per dump";
    if (!ctbc_is_device_memory(t->data, size))
        return "not aclrtMalloc memory: convtbc reads device memory only";
    void *copy = malloc(size);
    if (!copy)
        return "out of host memory for a copy";
    /* Through the runtime's own copy: the one path that may read device memory. */
    if (aclrtMemcpy(copy, size, t->data, size, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS) {
        free(copy);
        return "the storage runs outside its aclrtMalloc block, or the block was freed";
    }
    *budget -= size;
    *data = copy;
    *bytes = size;
    return NULL;
}

static void print_dims(FILE *file, const char *name, const int64_t *dims, uint64_t count)
{
    fprintf(file, " %s [", name);
    for (uint64_t i = 0; i < count; i++)
        fprintf(file, "%s%lld", i ? "," : "", (long long)dims[i]);
    fputc(']', file);
}

static aclError write_file(const dump_job *job)
{
    void **data = calloc(job->count ? job->count : 1, sizeof *data);
    size_t *bytes = calloc(job->count ? job->count : 1, sizeof *bytes);
    const char **notes = calloc(job->count ? job->count : 1, sizeof *notes);
    FILE *file = data && bytes && notes ? fopen(job->path, "wb") : NULL;
    aclError status = ACL_SUCCESS;
    if (!file) {
        status = ctbc_fail(ACL_ERROR_RT_INTERNAL_ERROR, CTBC_EE_INNER, API, "cannot create the dump file %s: %s",
                           job->path, data && bytes && notes ? strerror(errno) : "out of memory");
    } else {
        size_t budget = DATA_LIMIT;
        for (size_t i = 0; i < job->count; i++)
            notes[i] = read_storage(&job->tensors[i].meta, &budget, &data[i], &bytes[i]);
        fprintf(file, "convtbc-dump 1\nop_type %s\nop_name %s\ntask_id %llu\nstream_id %llu\ntimestamp %llu\n"
                      "tensors %zu\n",
                job->op_type, job->op_name, job->task_id, job->stream_id, job->timestamp, job->count);
        for (size_t i = 0; i < job->count; i++) {
            const dumped_tensor *d = &job->tensors[i];
            const aclTensor *t = &d->meta;
            fprintf(file, "tensor %zu %s %zu dtype %s(%d) format %s(%d)", i, d->input ? "input" : "output",
                    d->index, ctbc_dtype_name(t->dtype), (int)t->dtype, ctbc_format_name(t->format), (int)t->format);
            print_dims(file, "view_shape", t->view_dims, t->rank);
            print_dims(file, "view_strides", t->strides, t->rank);
            fprintf(file, " view_offset %lld", (long long)t->offset);
            print_dims(file, "storage_shape", t->storage_dims, t->storage_rank);
            fprintf(file, " address %p data_bytes %zu", t->data, bytes[i]);
            if (notes[i])
                fprintf(file, " note %s", notes[i]);
            fputc('\n', file);
        }
        fputs("end\n", file);
        for (size_t i = 0; i < job->count; i++)
            if (bytes[i])
                fwrite(data[i], 1, bytes[i], file);
        bool failed = ferror(file) != 0;
        if (fclose(file) != 0 || failed)
            status = ctbc_fail(ACL_ERROR_RT_INTERNAL_ERROR, CTBC_EE_INNER, API, "cannot write the dump file %s",
                               job->path);
        else
            CTBC_LOG(CTBC_LOG_INFO, "%s: wrote %s", API, job->path);
    }
    for (size_t i = 0; data && i < job->count; i++)
        free(data[i]);
    free(data);
    free(bytes);
    free(notes);
    return status;
}

/* The queued part: runs after the work queued on the stream before it. */
static aclError run_dump(void *payload)
{
    dump_job *job;
    memcpy(&job, payload, sizeof job);
    aclError status = write_file(job);
    free_job(job);
    return status;
}

/* CANN's rule for names in dump paths: '.', '/', '\' and ' ' become '_'. */
static char *path_safe_copy(const char *name)
{
    char *copy = strdup(name);
    for (char *c = copy; c && *c; c++)
        if (*c == '.' || *c == '/' || *c == '\\' || *c == ' ')
            *c = '_';
    return copy;
}

static aclnnStatus make_directory(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return ACLNN_SUCCESS;
    return ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, API,
                     "cannot create the dump directory %s: %s (dump_path from aclInit's config must exist and be "
                     "writable)",
                     path, strerror(errno));
}

static aclnnStatus check_arguments(const char *op_type, const char *op_name, aclTensor **tensors, size_t inputs,
                                   size_t outputs, aclrtStream stream)
{
    const char *null_argument = !op_type ? "opType" : !op_name ? "opName" : !tensors ? "tensors"
                                : !stream  ? "stream" : NULL;
    if (null_argument)
        return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, API,
                         "Expected a proper pointer but got null for argument %s.", null_argument);
    if (!ctbc_stream_is_live(stream))
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API,
                         "stream %p is not a live stream made by aclrtCreateStream", stream);
    size_t total;
    if (__builtin_add_overflow(inputs, outputs, &total))
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API,
                         "inputTensorNum %zu + outputTensorNum %zu overflows", inputs, outputs);
    for (size_t i = 0; i < total; i++)
        if (!tensors[i])
            return ctbc_fail(ACLNN_ERR_PARAM_NULLPTR, CTBC_EZ_PARAM, API,
                             "tensors[%zu] (%s %zu) is null", i, i < inputs ? "input" : "output",
                             i < inputs ? i : i - inputs);
    return ACLNN_SUCCESS;
}

aclnnStatus aclDumpOpTensors(const char *opType, const char *opName, aclTensor **tensors, size_t inputTensorNum,
                             size_t outputTensorNum, aclrtStream stream)
{
    CTBC_RETURN_IF_FAILED(check_arguments(opType, opName, tensors, inputTensorNum, outputTensorNum, stream));

    pthread_mutex_lock(&config_lock);
    bool on = config.on;
    dump_mode mode = config.mode;
    char dump_path[PATH_MAX], stamp[sizeof config.stamp];
    memcpy(dump_path, config.dump_path, sizeof dump_path);
    memcpy(stamp, config.stamp, sizeof stamp);
    unsigned long long task_id = on ? config.tasks++ : 0, stream_id = 0;
    while (on && stream_id < config.stream_count && config.streams[stream_id] != stream)
        stream_id++;
    if (on && stream_id == config.stream_count && config.stream_count < STREAM_IDS)
        config.streams[config.stream_count++] = stream;
    pthread_mutex_unlock(&config_lock);

    size_t inputs = mode & DUMP_INPUTS ? inputTensorNum : 0, outputs = mode & DUMP_OUTPUTS ? outputTensorNum : 0;
    if (!on || inputs + outputs == 0) {
        CTBC_LOG(CTBC_LOG_INFO, "%s: nothing written for %s %s: %s", API, opType, opName,
                 !on ? "operator dump is off (aclInit's config names no dump.dump_path)"
                     : "dump_mode selects none of the tensors given");
        return ACLNN_SUCCESS;
    }

    size_t job_bytes;
    if (!ctbc_bytes_for(inputs + outputs, sizeof(dumped_tensor), offsetof(dump_job, tensors), &job_bytes))
        return ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API, "%zu tensors are too many to dump",
                         inputs + outputs);
    dump_job *job = calloc(1, job_bytes);
    if (job) {
        job->op_type = path_safe_copy(opType);
        job->op_name = path_safe_copy(opName);
    }
    if (!job || !job->op_type || !job->op_name) {
        if (job)
            free_job(job);
        return ctbc_fail(ACLNN_ERR_INNER, CTBC_EE_INNER, API, "out of memory");
    }
    struct timeval now;
    gettimeofday(&now, NULL);
    job->timestamp = (unsigned long long)now.tv_sec * 1000000ULL + (unsigned long long)now.tv_usec;
    job->task_id = task_id;
    job->stream_id = stream_id;
    for (size_t i = 0; i < inputs + outputs; i++) {
        bool input = i < inputs;
        size_t given = input ? i : inputTensorNum + (i - inputs); /* position in the caller's array */
        job->tensors[i] = (dumped_tensor){input, input ? i : i - inputs, *tensors[given]};
    }
    job->count = inputs + outputs;

    char directory[PATH_MAX];
    aclnnStatus status = ACLNN_SUCCESS;
    int length = snprintf(directory, sizeof directory, "%s/%s", dump_path, stamp);
    if (length > 0 && (size_t)length < sizeof directory)
        status = make_directory(directory);
    if (status == ACLNN_SUCCESS && length > 0 && (size_t)length < sizeof directory) {
        length = snprintf(directory, sizeof directory, "%s/%s/%d", dump_path, stamp, DEVICE_ID);
        if (length > 0 && (size_t)length < sizeof directory)
            status = make_directory(directory);
    }
    if (status == ACLNN_SUCCESS && length > 0 && (size_t)length < sizeof directory)
        length = snprintf(job->path, sizeof job->path, "%s/%s.%s.%llu.%llu.%llu", directory, job->op_type,
                          job->op_name, job->task_id, job->stream_id, job->timestamp);
    if (status == ACLNN_SUCCESS && (length < 0 || (size_t)length >= sizeof job->path))
        status = ctbc_fail(ACLNN_ERR_PARAM_INVALID, CTBC_EZ_PARAM, API,
                           "the dump file path for opType %s, opName %s under %s is longer than PATH_MAX", opType,
                           opName, dump_path);
    if (status == ACLNN_SUCCESS) {
        status = ctbc_stream_submit(API, stream, run_dump, &job, sizeof job);
        if (status == ACL_SUCCESS)
            return ACLNN_SUCCESS;
        status = ACLNN_ERR_INNER;
    }
    free_job(job);
    return status;
}
