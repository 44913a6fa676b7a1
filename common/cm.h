/* cm.h — helpers every program of cnnc shares (the frontend, cnnc, cnnrun and libcnnrt):
 * strict parsing of numbers (one rule for the command line and the model file), and files
 * handled safely (no blocking on a FIFO, no unbounded read, outputs written to a temporary
 * file and renamed into place, never over an input).  Prefix: cm_.  No dependency on the
 * other modules; built into a static library with hidden symbols (libcnnrt keeps its own
 * copy and exports none of it). */
#ifndef CNNC_CM_H
#define CNNC_CM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- numbers (cm_num.c) ------------------------------------------------------------------ */
typedef enum cm_num_kind {
  CM_NOT_NUMBER,  /* anything but the syntax below */
  CM_INT,         /* [+-]digits */
  CM_REAL,        /* [+-]digits[.digits][(e|E)[+-]digits], or .digits: a finite double */
  CM_INT_RANGE,   /* an integer beyond int64 */
  CM_REAL_RANGE   /* a real that overflows (or underflows to a denormal/0 from non-zero digits) */
} cm_num_kind;
typedef struct cm_num {
  cm_num_kind kind;
  int64_t i;  /* CM_INT */
  double f;   /* CM_INT and CM_REAL */
} cm_num;
/* Classifies s by the strict syntax above: no white space, hex, "inf", "nan" or trailing text. */
cm_num cm_num_scan(const char *s);

enum { CM_NUM_INTEGER = 1, CM_NUM_LO_OPEN = 2, CM_NUM_HI_OPEN = 4 };
/* s as a number in [lo, hi] (an open end with CM_NUM_LO_OPEN / CM_NUM_HI_OPEN; an integer only
 * with CM_NUM_INTEGER, whose bounds should then be whole).  Returns 0 with *v (and *iv for an
 * integer; either may be NULL), or -1 with why = what is wrong, e.g. "must be an integer in
 * 0..9223372036854775807" or "must be a number > 0". */
int cm_num_parse(const char *s, double lo, double hi, int flags, double *v, int64_t *iv, char *why, size_t n);
/* The rule of cm_num_parse as text: "an integer in 0..65536", "a number > 0 and <= 1". */
const char *cm_num_rule(double lo, double hi, int flags, char *buf, size_t n);

/* ---- the layout of a safetensors data section (cm_span.c) -------------------------------- */
typedef struct cm_span { uint64_t begin, end; int id; } cm_span; /* a tensor's bytes; id: the caller's */
typedef enum cm_tile_fault { CM_TILE_OK, CM_TILE_OVERLAP, CM_TILE_GAP, CM_TILE_TRAILING } cm_tile_fault;
/* Sorts s[n] by offset and checks that the spans follow one another from 0 to total.  Returns
 * CM_TILE_OK or the first fault: s[*at] overlaps s[*at - 1] or begins after *end (a gap), or
 * (CM_TILE_TRAILING) the last ends at *end, before total. */
cm_tile_fault cm_spans_tile(cm_span *s, int n, uint64_t total, int *at, uint64_t *end);

/* ---- files (cm_file.c) ------------------------------------------------------------------- */
/* Opens path for reading without blocking on a FIFO or a device and refuses anything but a
 * regular file.  Returns the descriptor (blocking again, O_CLOEXEC) with *size, or -1 with why
 * ("is a directory", "is not a regular file (a FIFO)", "No such file or directory"). */
int cm_open_regular(const char *path, uint64_t *size, char *why, size_t n);
/* Reads the whole regular file into a malloc'd buffer (NUL-terminated) if it has at most max
 * bytes.  Returns the buffer with *len, or NULL with why. */
char *cm_read_regular(const char *path, uint64_t max, size_t *len, char *why, size_t n);

/* 1 if a and b are the same existing file (device and inode: also through another path or a
 * hard link), else 0. */
int cm_same_file(const char *a, const char *b);

/* Checks that an output can be written at path before long work starts: not a directory, not
 * the same file as any of inputs[n_in] (NULL entries skipped), and its directory takes a new
 * file (a probe file is created and removed); stale temporaries of path are removed.  Returns
 * 0, or -1 with why, worded to follow the path: "is a directory", "is the input 'm.yml'
 * (refusing to overwrite it)", "cannot be created: directory d: Permission denied". */
int cm_check_output(const char *path, const char *const *inputs, int n_in, char *why, size_t n);

/* Removes the stale temporary files of dead processes from dir: regular files named
 * PREFIX...".tmp."PID whose PID no longer runs.  Returns how many were removed. */
int cm_clear_stale(const char *dir, const char *prefix);
/* The directory part of path into buf ("." if none). */
const char *cm_dirname(const char *path, char *buf, size_t n);

/* An output written atomically: PATH.tmp.PID beside it, fsynced, renamed over PATH, then the
 * directory fsynced.  A crash leaves PATH as it was (old or absent) and at most a temporary
 * file that cm_clear_stale removes at the next run.  An existing PATH that is not a regular
 * file (/dev/null, a FIFO: cm_out_direct) is written in place instead: a rename would replace
 * the device; a symbolic link is followed (cm_out_target), so the file it names is replaced. */
int cm_out_direct(const char *path);
const char *cm_out_target(const char *path, char *buf, size_t n); /* a link's target, else path */
typedef struct cm_out {
  char path[4096], tmp[4160];
  FILE *f;
} cm_out;
/* The temporary name of path for this process, into buf (PATH.tmp.PID). */
const char *cm_tmp_name(const char *path, char *buf, size_t n);
/* Clears stale temporaries of path, creates its temporary file (mode & ~umask) and opens o->f
 * on it.  0, or -1 with why. */
int cm_out_open(cm_out *o, const char *path, int mode, char *why, size_t n);
/* Flushes, fsyncs and closes o->f, renames the temporary file over the path and fsyncs the
 * directory.  On any failure the temporary file is removed and the path left as it was.  0, or
 * -1 with why ("No space left on device"). */
int cm_out_commit(cm_out *o, char *why, size_t n);
void cm_out_abort(cm_out *o); /* closes and removes the temporary file */
/* The commit of a temporary file another program wrote (a linker): fsync tmp, rename it to
 * path, fsync the directory; removes tmp on failure.  0 or -1 with why. */
int cm_commit_file(const char *tmp, const char *path, char *why, size_t n);

/* ---- pipelined training: job lists and frames (cm_pipe.c) -------------------------------
 * One weight update of a training model: R replicas x N accumulated micro-batches, each
 * through P stages (the first F forward, F = 0: unknown), stage k on shard group[k] of S.
 * Micro-batch mb = r * N + a.  A frame (one set of train tensors) holds one micro-batch from
 * its first stage to its last and is then reused: a pool of B frames serves the micro-batches
 * of one stream (replica after replica; with par every replica has its own pool and thread
 * groups), micro-batch i of a stream on frame i % B, and its stage k runs once the frame has
 * completed seq = (i / B) * P + k stages.  The schedules (docs/training.md "Pipelined
 * training"): sequential (B = 1), grouped (per shard the forwards of a chunk of min(N, 2S)
 * micro-batches, then their backwards), interleaved (1F1B; B = min(N, 2S)).  libcnnrt builds
 * its job lists with these, cnnc's report simulates them. */
typedef struct cm_pipe {
  int P, F, S, N, R;
  const int *group;  /* [P] the shard of each stage of one replica (the same for every replica) */
  int schedule;      /* 0 sequential, 1 grouped, 2 interleaved (cnnc_abi.h CNNC_ABI_SCHED_*) */
  int par;           /* replicas on their own thread groups and frame pools */
} cm_pipe;
typedef struct cm_pjob {
  int group;  /* thread group: (par ? r : 0) * S + shard */
  int stage;  /* index into one replica's P stages */
  int mb;     /* micro-batch of the update, r * N + a */
  int frame;  /* (par ? r * B : 0) + stream index % B */
  int seq;    /* stages the frame has completed before this job */
} cm_pjob;
/* Frames per pool: the schedule's bound, doubled (never above the stream's micro-batches,
 * where every list order runs) until the job lists cannot deadlock on a frame; 0 if p is
 * malformed, -1 out of memory. */
int cm_pipe_frames(const cm_pipe *p);
/* Pools of frames: R with par, else 1. */
int cm_pipe_pools(const cm_pipe *p);
/* The R * N * P jobs of one update with B frames per pool, into out (NULL: count only), in
 * list order: the jobs of one group appear in the order that group runs them.  Returns the
 * count. */
long cm_pipe_jobs(const cm_pipe *p, int B, cm_pjob *out);
/* 1 if every group can run its list to the end with B frames per pool, 0 if not, -1 out of
 * memory. */
int cm_pipe_runs(const cm_pipe *p, int B);

#endif
