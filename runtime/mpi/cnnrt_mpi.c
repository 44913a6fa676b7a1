/* cnnrt_mpi.c — libcnnrt_mpi: cnnrt_comm over MPI (cnnrt_mpi.h). */
#include "cnnrt_mpi.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

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

static int cmpi_allgather(void *ctx, const void *send, size_t bytes, void *recv) {
  (void)ctx;
  if (bytes <= INT_MAX) return cmpi_check(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, cmpi_comm), "MPI_Allgather");
  size_t unit = 2; /* larger: blocks of `unit` bytes, the largest power of two dividing bytes */
  while (bytes % (unit * 2) == 0 && bytes / unit > INT_MAX) unit *= 2;
  if (bytes % unit || bytes / unit > INT_MAX) {
    snprintf(cmpi_msg, sizeof cmpi_msg, "MPI_Allgather: %zu bytes is not a multiple of a block size MPI can count", bytes);
    return 1;
  }
  MPI_Datatype t;
  if (cmpi_check(MPI_Type_contiguous((int)unit, MPI_BYTE, &t), "MPI_Type_contiguous") || cmpi_check(MPI_Type_commit(&t), "MPI_Type_commit"))
    return 1;
  int rc = cmpi_check(MPI_Allgather(send, (int)(bytes / unit), t, recv, (int)(bytes / unit), t, cmpi_comm), "MPI_Allgather");
  MPI_Type_free(&t);
  return rc;
}

static int cmpi_broadcast(void *ctx, void *buf, size_t bytes, int root) {
  (void)ctx;
  for (size_t o = 0; o < bytes; o += CMPI_CHUNK) {
    size_t n = bytes - o < CMPI_CHUNK ? bytes - o : CMPI_CHUNK;
    if (cmpi_check(MPI_Bcast((char *)buf + o, (int)n, MPI_BYTE, root, cmpi_comm), "MPI_Bcast")) return 1;
  }
  return 0;
}

static int cmpi_barrier(void *ctx) {
  (void)ctx;
  return cmpi_check(MPI_Barrier(cmpi_comm), "MPI_Barrier");
}

static int cmpi_send(void *ctx, const void *buf, size_t bytes, int dest) {
  (void)ctx;
  for (size_t o = 0; o < bytes; o += CMPI_CHUNK) {
    size_t n = bytes - o < CMPI_CHUNK ? bytes - o : CMPI_CHUNK;
    if (cmpi_check(MPI_Send((const char *)buf + o, (int)n, MPI_BYTE, dest, 22, cmpi_comm), "MPI_Send")) return 1;
  }
  return 0;
}

static int cmpi_recv(void *ctx, void *buf, size_t bytes, int src) {
  (void)ctx;
  for (size_t o = 0; o < bytes; o += CMPI_CHUNK) {
    size_t n = bytes - o < CMPI_CHUNK ? bytes - o : CMPI_CHUNK;
    MPI_Status st;
    if (cmpi_check(MPI_Recv((char *)buf + o, (int)n, MPI_BYTE, src, 22, cmpi_comm, &st), "MPI_Recv")) return 1;
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if ((size_t)got != n) {
      snprintf(cmpi_msg, sizeof cmpi_msg, "MPI_Recv: rank %d sent %d bytes, %zu expected", src, got, n);
      return 1;
    }
  }
  return 0;
}

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
