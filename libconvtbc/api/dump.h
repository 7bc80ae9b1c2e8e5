/*
 * Operator dump (aclDumpOpTensors). As in CANN it writes only when the
 * acl.json given to aclInit turns dumping on with a "dump" object naming a
 * "dump_path" ("dump_mode": "input", "output" (the default) or "all").
 * Each call then queues, on its stream, the writing of one file
 *   {dump_path}/{YYYYMMDDHHMMSS of aclInit}/{device id}/
 *       {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp in us}
 * in CANN's path and name scheme ('.', '/', '\' and ' ' in the names become
 * '_'). CANN's files are protobuf records for its comparison tools; convtbc
 * writes its own plain format instead: text lines
 *   convtbc-dump 1
 *   op_type <t>, op_name <n>, task_id, stream_id, timestamp, tensors <count>
 *   tensor <i> <input|output> <index> dtype <name>(<value>) format <name>(<value>)
 *     view_shape [..] view_strides [..] view_offset <n> storage_shape [..]
 *     address <p> data_bytes <n> [note <why no data>]
 *   end
 * (one line per tensor), then each tensor's storage bytes in that order.
 * Storage is read when it lies in aclrtMalloc memory, as of the point in
 * the stream where the dump was queued.
 */
#ifndef CONVTBC_API_DUMP_H
#define CONVTBC_API_DUMP_H

/* aclInit's configPath (NULL, or aclFinalize: dumping off). A config that
 * cannot be read leaves dumping off with a WARNING log line. */
void ctbc_dump_configure(const char *config_path);

#endif /* CONVTBC_API_DUMP_H */
