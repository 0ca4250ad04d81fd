/* A sharded Hugging Face checkpoint (model.safetensors.index.json naming the
 * shard that holds each tensor) joined into one safetensors file. §12.1
 * binds a run to the SHA-256 of one weights file, so a sharded checkpoint is
 * joined once and the engine loads, hashes and receipts the joined file. */
#ifndef CIS2_SHARDS_H
#define CIS2_SHARDS_H
#include "core/core.h"

#define CIS2_SHARD_INDEX     "model.safetensors.index.json"
#define CIS2_SHARD_INDEX_MAX ((size_t)64 << 20)

typedef struct {
    int n_shards, n_tensors;
    uint64_t out_bytes;
    uint8_t out_sha256[32]; /* of the bytes written */
} cis2_join_report;

/* Reads DIR's index and shards and writes `out` atomically: the tensors
 * sorted by name (bytewise), each one's bytes as in its shard, and the
 * metadata {"format":"pt"} (st_write.c's layout). The file depends only on
 * the tensors, never on how they were split into shards. Every tensor the
 * index names must be in its shard, and every shard tensor in the index
 * under that shard; `out` may not be the index or a shard. */
int cis2_shards_join(const char *dir, const char *out, cis2_join_report *rep, char *err);
#endif
