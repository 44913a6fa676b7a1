/* cnnrt_mpi.c — libcnnrt_mpi: cnnrt_comm over MPI (cnnrt_mpi.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "cnnrt_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMPI_API __attribute__((visibility("default")))
#define CMPI_CHUNK ((size_t)1 << 30) /* bytes per MPI call of a point-to-point or broadcast */

static MPI_Comm cmpi_comm = MPI_COMM_NULL;
static char cmpi_msg[MPI_MAX_ERROR_STRING + 128];

static int cmpi_check(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return 0;
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
  snprintf(cmpi_msg, sizeof cmpi_msg, "%s: %s", what, s);
  return 1;
}

static const char *cmpi_last_error(void *ctx) {
  (void)ctx;
  return cmpi_msg;
}

/* ---- waiting with a deadline -----------------------------------------------------------
 * Every call is the nonblocking MPI call, then MPI_Test polled (a short spin, then sleeps of
 * at most CMPI_NAP_NS) until it completes or cmpi_timeout seconds pass.  Open MPI's blocking
 * calls have no time limit: a rank that is alive but stuck (SIGSTOP, a hung file system)
 * would hold every other rank forever.  On the deadline the call fails with a message naming
 * the operation and, after a short roll call among the ranks that also time out (cmpi_who),
 * the ranks that did not answer; the caller reports it and ends the job (MPI_Abort). */
#define CMPI_NAP_NS 200000L /* 0.2 ms */
#define CMPI_TAG_DATA 22
#define CMPI_TAG_ROLL 23

static double cmpi_timeout = 300.0;
static long cmpi_calls; /* collective and point-to-point calls so far: the roll call's number */

static void cmpi_nap(long ns) {
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

/* After a timeout: every rank that also timed out tells the others (tag CMPI_TAG_ROLL, its
 * call number); whoever sends nothing within the grace period is named in cmpi_msg. */
static void cmpi_who(const char *what) {
  int rank = 0, size = 1;
  MPI_Comm_rank(cmpi_comm, &rank);
  MPI_Comm_size(cmpi_comm, &size);
  long mine = cmpi_calls, *got = calloc((size_t)size, sizeof *got);
  MPI_Request *rq = calloc(2 * (size_t)size, sizeof *rq);
  if (!got || !rq) {
    free(got), free(rq);
    return;
  }
  for (int r = 0; r < size; r++) {
    rq[r] = rq[size + r] = MPI_REQUEST_NULL;
    if (r == rank) continue;
    MPI_Isend(&mine, 1, MPI_LONG, r, CMPI_TAG_ROLL, cmpi_comm, &rq[size + r]);
    MPI_Irecv(&got[r], 1, MPI_LONG, r, CMPI_TAG_ROLL, cmpi_comm, &rq[r]);
  }
  double grace = cmpi_timeout < 5 ? cmpi_timeout : 5, t0 = MPI_Wtime();
  int left = size - 1;
  while (left > 0 && MPI_Wtime() - t0 < grace) {
    for (int r = 0; r < size; r++) {
      int done = 0;
      if (rq[r] != MPI_REQUEST_NULL && MPI_Test(&rq[r], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) left--;
    }
    cmpi_nap(CMPI_NAP_NS);
  }
  char list[96] = "";
  size_t o = 0;
  int n = 0;
  for (int r = 0; r < size; r++)
    if (r != rank && rq[r] != MPI_REQUEST_NULL && o + 16 < sizeof list) { /* still waiting: no answer */
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", n++ ? ", " : "", r);
    }
  /* the requests of the silent ranks stay posted: the job ends right after this */
  free(got);
  free(rq);
  snprintf(cmpi_msg, sizeof cmpi_msg,
           "%s: no answer within %g s (--comm-timeout); %s%s%s; stopping every rank", what, cmpi_timeout,
           n ? (n > 1 ? "ranks " : "rank ") : "", n ? list : "every other rank answered the roll call (the stall is elsewhere)",
           n ? " did not answer (stuck or gone)" : "");
}

/* Waits for rq until the deadline: 0 done, 1 failed (cmpi_msg says why). */
static int cmpi_wait(MPI_Request *rq, MPI_Status *st, const char *what) {
  cmpi_calls++;
  double t0 = MPI_Wtime();
  for (long k = 0;; k++) {
    int done = 0;
    if (cmpi_check(MPI_Test(rq, &done, st), what)) return 1;
    if (done) return 0;
    if (cmpi_timeout > 0 && MPI_Wtime() - t0 > cmpi_timeout) {
      cmpi_who(what);
      return 1;
    }
    if (k > 1000) cmpi_nap(k < 4000 ? CMPI_NAP_NS / 10 : CMPI_NAP_NS);
  }
}

static int cmpi_allgather(void *ctx, const void *send, size_t bytes, void *recv) {
  (void)ctx;
  MPI_Request rq;
  if (bytes <= INT_MAX)
    return cmpi_check(MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, cmpi_comm, &rq), "MPI_Iallgather") ||
           cmpi_wait(&rq, MPI_STATUS_IGNORE, "MPI_Allgather");
  size_t unit = 2; /* larger: blocks of `unit` bytes, the largest power of two dividing bytes */
  while (bytes % (unit * 2) == 0 && bytes / unit > INT_MAX) unit *= 2;
  if (bytes % unit || bytes / unit > INT_MAX) {
    snprintf(cmpi_msg, sizeof cmpi_msg, "MPI_Allgather: %zu bytes is not a multiple of a block size MPI can count", bytes);
    return 1;
  }
  MPI_Datatype t;
  if (cmpi_check(MPI_Type_contiguous((int)unit, MPI_BYTE, &t), "MPI_Type_contiguous") || cmpi_check(MPI_Type_commit(&t), "MPI_Type_commit"))
    return 1;
  int rc = cmpi_check(MPI_Iallgather(send, (int)(bytes / unit), t, recv, (int)(bytes / unit), t, cmpi_comm, &rq), "MPI_Iallgather") ||
           cmpi_wait(&rq, MPI_STATUS_IGNORE, "MPI_Allgather");
  MPI_Type_free(&t);
  return rc;
}

static int cmpi_broadcast(void *ctx, void *buf, size_t bytes, int root) {
  (void)ctx;
  for (size_t o = 0; o < bytes; o += CMPI_CHUNK) {
    size_t n = bytes - o < CMPI_CHUNK ? bytes - o : CMPI_CHUNK;
    MPI_Request rq;
    if (cmpi_check(MPI_Ibcast((char *)buf + o, (int)n, MPI_BYTE, root, cmpi_comm, &rq), "MPI_Ibcast") ||
        cmpi_wait(&rq, MPI_STATUS_IGNORE, "MPI_Bcast"))
      return 1;
  }
  return 0;
}

static int cmpi_barrier(void *ctx) {
  (void)ctx;
  MPI_Request rq;
  return cmpi_check(MPI_Ibarrier(cmpi_comm, &rq), "MPI_Ibarrier") || cmpi_wait(&rq, MPI_STATUS_IGNORE, "MPI_Barrier");
}

static int cmpi_send(void *ctx, const void *buf, size_t bytes, int dest) {
  (void)ctx;
  char what[48];
  snprintf(what, sizeof what, "MPI_Send to rank %d", dest);
  for (size_t o = 0; o < bytes; o += CMPI_CHUNK) {
    size_t n = bytes - o < CMPI_CHUNK ? bytes - o : CMPI_CHUNK;
    MPI_Request rq;
    if (cmpi_check(MPI_Isend((const char *)buf + o, (int)n, MPI_BYTE, dest, CMPI_TAG_DATA, cmpi_comm, &rq), what) ||
        cmpi_wait(&rq, MPI_STATUS_IGNORE, what))
      return 1;
  }
  return 0;
}

static int cmpi_recv(void *ctx, void *buf, size_t bytes, int src) {
  (void)ctx;
  char what[48];
  snprintf(what, sizeof what, "MPI_Recv from rank %d", src);
  for (size_t o = 0; o < bytes; o += CMPI_CHUNK) {
    size_t n = bytes - o < CMPI_CHUNK ? bytes - o : CMPI_CHUNK;
    MPI_Status st;
    MPI_Request rq;
    if (cmpi_check(MPI_Irecv((char *)buf + o, (int)n, MPI_BYTE, src, CMPI_TAG_DATA, cmpi_comm, &rq), what) || cmpi_wait(&rq, &st, what))
      return 1;
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if ((size_t)got != n) {
      snprintf(cmpi_msg, sizeof cmpi_msg, "MPI_Recv: rank %d sent %d bytes, %zu expected", src, got, n);
      return 1;
    }
  }
  return 0;
}

CMPI_API void cnnrt_mpi_set_timeout(double seconds) { cmpi_timeout = seconds > 0 ? seconds : 0; }

CMPI_API int cnnrt_mpi_init(int *argc, char ***argv, cnnrt_comm *out, char *err, size_t err_size) {
  int provided = 0, rank = 0, size = 1;
  if (cmpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread") ||
      cmpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &cmpi_comm), "MPI_Comm_dup") ||
      cmpi_check(MPI_Comm_set_errhandler(cmpi_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler") ||
      cmpi_check(MPI_Comm_rank(cmpi_comm, &rank), "MPI_Comm_rank") || cmpi_check(MPI_Comm_size(cmpi_comm, &size), "MPI_Comm_size")) {
    snprintf(err, err_size, "%s", cmpi_msg);
    return 1;
  }
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->rank = rank, out->size = size;
  out->allgather = cmpi_allgather;
  out->broadcast = cmpi_broadcast;
  out->barrier = cmpi_barrier;
  out->send = cmpi_send;
  out->recv = cmpi_recv;
  out->last_error = cmpi_last_error;
  return 0;
}

CMPI_API void cnnrt_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

CMPI_API void cnnrt_mpi_finalize(void) {
  if (cmpi_comm != MPI_COMM_NULL) MPI_Comm_free(&cmpi_comm);
  MPI_Finalize();
}
