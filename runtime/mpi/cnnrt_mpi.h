/* cnnrt_mpi.h — libcnnrt_mpi: a cnnrt_comm (cnnrt.h) over MPI (Open MPI on Debian: openmpi-bin,
 * libopenmpi-dev), the only part of cnnc that links MPI.  cnnrun dlopens it when it runs
 * under mpirun (docs/mpi.md), so cnnrun and libcnnrt need no MPI to build or run.
 *
 * The communicator works on a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN: a failing
 * call returns nonzero and last_error gives MPI's message.  allgather is MPI_Allgather (each
 * rank's bytes land in rank order; the summation order is the caller's), never MPI_Allreduce,
 * whose order is the implementation's.  Every call has a deadline (cnnrt_mpi_set_timeout,
 * default 300 s): a peer that is alive but stuck makes the call fail with a message naming
 * the operation and the ranks that did not answer, never a hang.  Call everything from one
 * thread. */
#ifndef CNNRT_MPI_H
#define CNNRT_MPI_H

#include <stddef.h>

#include "cnnrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Initialises MPI (MPI_Init_thread, MPI_THREAD_FUNNELED) and fills *out.  0 on success, else
 * nonzero with a message in err (err_size bytes). */
int cnnrt_mpi_init(int *argc, char ***argv, cnnrt_comm *out, char *err, size_t err_size);
/* Ends every rank of the job (MPI_Abort on MPI_COMM_WORLD with code): for a rank that fails
 * alone, so that the others do not wait for it. */
void cnnrt_mpi_abort(int code);
/* Seconds a call may wait for the other ranks before it fails (0: no limit; default 300). */
void cnnrt_mpi_set_timeout(double seconds);
/* MPI_Finalize, once every rank is done. */
void cnnrt_mpi_finalize(void);

typedef int (*cnnrt_mpi_init_fn)(int *, char ***, cnnrt_comm *, char *, size_t);
typedef void (*cnnrt_mpi_abort_fn)(int);
typedef void (*cnnrt_mpi_finalize_fn)(void);
typedef void (*cnnrt_mpi_set_timeout_fn)(double);

#ifdef __cplusplus
}
#endif
#endif
