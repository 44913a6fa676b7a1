/* rt_tfrecord.h — the TFRecord shards of an ImageNet-style dataset (rt_tfrecord.c): the shard
 * set of one split, every record indexed at open, then any record read on demand (pread, so
 * any number of threads at once), its tf.train.Example decoded by hand for the encoded image
 * and the class label.  Private to libcnnrt (prefix rt_tfr_).  The input is untrusted: every
 * length is checked against what is there, nothing is read past a buffer, nothing recurses;
 * faults are CNNRT_IO (a file cannot be listed, opened or read), CNNRT_BAD_MODEL (corrupt or
 * malformed content) or CNNRT_OUT_OF_MEMORY, with a message (rt_fail) naming the shard file,
 * the record index in it and its byte offset.  The format: docs/data.md "TFRecord shards". */
#ifndef CNNC_RT_TFRECORD_H
#define CNNC_RT_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "cnnrt.h"

#define RT_TFR_MAX_RECORD ((uint64_t)64 << 20)  /* data bytes of one record */
#define RT_TFR_MAX_SHARDS 100000                /* files of a set (MMMMM has 5 digits) */
#define RT_TFR_MAX_SHARD_RECORDS ((int64_t)1 << 24)
#define RT_TFR_MAX_RECORDS ((int64_t)1 << 28)   /* all shards of a set */

typedef struct rt_tfr rt_tfr;

/* Lists the shards of one split in dir: TensorFlow's ImageNet names, train-NNNNN-of-MMMMM
 * (test = 0) or validation-NNNNN-of-MMMMM (test = 1), exactly 5 digits each; other names are
 * ignored.  Every shard of the set must be present (NNNNN 0..MMMMM-1, one MMMMM); shards are
 * taken in NNNNN order.  Indexes every record (offset, length) by reading the 12-byte headers
 * and seeking; the header CRCs, the length caps above and that each record ends inside its
 * file are checked now, the data CRCs when a record is read.  A shard may hold no records, the
 * set may not.  *n_records = the records of all shards in order.  No descriptor is kept open:
 * rt_tfr_sample opens the shard it reads. */
cnnrt_status rt_tfr_open(const char *dir, int test, rt_tfr **out, int64_t *n_records);

/* Record i (0..n-1): reads it with pread (thread-safe: any number of threads at once; t is
 * not modified), checks its data CRC, parses the tf.train.Example and returns in *image a
 * malloc'd buffer (the caller frees it) holding feature "image/encoded" (a BytesList of one
 * non-empty value; *n its bytes) and in *label the Int64List feature "image/class/label" of
 * one value, as stored (TF's ImageNet labels are 1..1000; 0 is background).  Errors name the
 * shard file, the record index in it and the byte offset. */
cnnrt_status rt_tfr_sample(rt_tfr *t, int64_t i, uint8_t **image, size_t *n, int64_t *label);

/* "DIR/train-00003-of-01024 record 17" for messages (truncated to n; "" for a bad i). */
void rt_tfr_describe(const rt_tfr *t, int64_t i, char *buf, size_t n);

void rt_tfr_close(rt_tfr *t); /* NULL is a no-op */

/* ---- internals, exposed for the tests and the fuzz harness --------------------------------- */
/* CRC32C (Castagnoli) of p[0..n), continuing from crc (0 to start); SSE4.2 when the CPU has
 * it, else a table.  rt_tfr_crc32c_table always uses the table. */
uint32_t rt_tfr_crc32c(uint32_t crc, const void *p, size_t n);
uint32_t rt_tfr_crc32c_table(uint32_t crc, const void *p, size_t n);
/* TFRecord's masked CRC: ((c >> 15) | (c << 17)) + 0xa282ead8. */
uint32_t rt_tfr_mask(uint32_t c);
/* Decodes the serialized tf.train.Example p[0..n): the image bytes are p[*img_off ..
 * *img_off + *img_len), the label in *label.  what prefixes messages ("DIR/train-... record
 * 3 (byte offset 1234)"); a fault names its byte offset in the Example. */
cnnrt_status rt_tfr_parse_example(const uint8_t *p, size_t n, const char *what, size_t *img_off, size_t *img_len,
                                  int64_t *label);

#endif
