/* cnnrun_mpi.c — cnnrun train, infer and benchmark across processes (docs/mpi.md).  Under mpirun (Open MPI sets
 * OMPI_COMM_WORLD_SIZE; PMIx launchers PMIX_RANK) cnnrun dlopens libcnnrt_mpi.so — from
 * $CNNRUN_MPI_LIB, else next to the libcnnrt it runs with, else the loader's path — so cnnrun
 * itself links no MPI.  Then every rank checks that all ranks run the same model file (a hash
 * of its bytes) with the same command line, or every rank stops naming the difference. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cnnrun.h"
#include "runtime/mpi/cnnrt_mpi.h"

static cnnrt_comm dist_comm;
static int dist_on;
static cnnrt_mpi_abort_fn dist_abort_fn;
static cnnrt_mpi_finalize_fn dist_finalize_fn;

const cnnrt_comm *dist_comm_get(void) { return dist_on ? &dist_comm : NULL; }
int dist_rank(void) { return dist_on ? dist_comm.rank : 0; }
int dist_size(void) { return dist_on ? dist_comm.size : 1; }

static int dist_launched(void) { /* more than one rank: mpirun -np 1 runs as a plain process */
  const char *s = getenv("OMPI_COMM_WORLD_SIZE");
  if (s) return atoi(s) > 1;
  s = getenv("PMI_SIZE");
  if (s) return atoi(s) > 1;
  return getenv("PMIX_RANK") != NULL; /* a PMIx launcher that does not give the size: MPI will */
}

void dist_die_prefix(void) {
  if (dist_on) fprintf(stderr, "[rank %d of %d] ", dist_comm.rank, dist_comm.size);
}

/* A rank that dies ends every rank: MPI_Abort, after the message (die). */
void dist_abort(int code) {
  if (!dist_on) return;
  fflush(stdout);
  fflush(stderr);
  dist_abort_fn(code);
}

void dist_finalize(void) {
  if (!dist_on) return;
  fflush(stdout);
  if (dist_comm.barrier(dist_comm.ctx)) { /* MPI_Finalize waits for every rank without a deadline */
    die("at the end: %s", dist_comm.last_error(dist_comm.ctx));
  }
  dist_finalize_fn();
  dist_on = 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Same model file and command line on every rank, else every rank stops. */
static void dist_check_same(const char *model, int argc, char **argv) {
  uint64_t mine[2] = {1469598103934665603ull, 1469598103934665603ull};
  FILE *f = fopen(model, "rb");
  if (!f) die("%s: cannot open it", model); /* every rank's cnnrt_open would say more; this one is early */
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) mine[0] = fnv(mine[0], buf, n);
  fclose(f);
  for (int i = 1; i < argc; i++) mine[1] = fnv(mine[1], argv[i], strlen(argv[i]) + 1);
  uint64_t *all = malloc((size_t)dist_comm.size * sizeof mine);
  if (!all) die("out of memory");
  if (dist_comm.allgather(dist_comm.ctx, mine, sizeof mine, all)) die("checking the ranks' models: %s", dist_comm.last_error(dist_comm.ctx));
  int bad = 0;
  for (int r = 1; r < dist_comm.size; r++) {
    if (all[2 * r] != all[0]) {
      if (dist_comm.rank == 0) fprintf(stderr, "cnnrun: rank %d runs another model file than rank 0 (%s differs)\n", r, model);
      bad = 1;
    }
    if (all[2 * r + 1] != all[1]) {
      if (dist_comm.rank == 0) fprintf(stderr, "cnnrun: rank %d was started with other options than rank 0\n", r);
      bad = 1;
    }
  }
  free(all);
  if (bad) { /* every rank saw it: each ends cleanly */
    if (dist_comm.rank == 0) fprintf(stderr, "cnnrun: every rank must run the same .so with the same options; stopping all ranks\n");
    dist_finalize();
    exit(1);
  }
}

void dist_init(const char *model, double timeout, int *argc, char ***argv) {
  if (!dist_launched()) return;
  const char *path = getenv("CNNRUN_MPI_LIB");
  char here[4096];
  Dl_info di;
  if (!path && dladdr((void *)cnnrt_version, &di) && di.dli_fname) {
    const char *slash = strrchr(di.dli_fname, '/');
    if (slash && (size_t)(slash - di.dli_fname) + 20 < sizeof here) {
      snprintf(here, sizeof here, "%.*s/libcnnrt_mpi.so", (int)(slash - di.dli_fname), di.dli_fname);
      path = here;
    }
  }
  void *h = dlopen(path ? path : "libcnnrt_mpi.so", RTLD_NOW | RTLD_GLOBAL);
  if (!h && path) h = dlopen("libcnnrt_mpi.so", RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    die("started by mpirun, but libcnnrt_mpi cannot be loaded (%s); build cnnc with MPI (libopenmpi-dev) or set "
        "CNNRUN_MPI_LIB",
        dlerror());
  cnnrt_mpi_init_fn init = (cnnrt_mpi_init_fn)dlsym(h, "cnnrt_mpi_init");
  dist_abort_fn = (cnnrt_mpi_abort_fn)dlsym(h, "cnnrt_mpi_abort");
  dist_finalize_fn = (cnnrt_mpi_finalize_fn)dlsym(h, "cnnrt_mpi_finalize");
  cnnrt_mpi_set_timeout_fn set_timeout = (cnnrt_mpi_set_timeout_fn)dlsym(h, "cnnrt_mpi_set_timeout");
  if (!init || !dist_abort_fn || !dist_finalize_fn || !set_timeout) die("%s: not a libcnnrt_mpi (cnnrt_mpi_init missing)", path ? path : "libcnnrt_mpi.so");
  char err[512];
  if (init(argc, argv, &dist_comm, err, sizeof err)) die("MPI: %s", err);
  set_timeout(timeout);
  dist_on = 1;
  dist_check_same(model, *argc, *argv);
}

/* --restore: the checkpoint at path into m (optional: a file that may be absent; 0 then).  Under
 * mpirun only rank 0 reads it (the other ranks may not see its file system) and broadcasts
 * whether it could, its message, then the state; a bad file stops every rank with rank 0's
 * message. */
int dist_restore(cnnrt_model *m, const char *path, int optional) {
  if (!dist_on) {
    if (optional && access(path, F_OK) != 0) return 0;
    if (cnnrt_load_checkpoint(m, path) != CNNRT_OK) die("%s", cnnrt_last_error());
    return 1;
  }
  struct {
    int32_t state; /* 1 loaded, 0 absent (optional), -1 failed: msg */
    char msg[1020];
  } h = {1, ""};
  if (dist_comm.rank == 0) {
    if (optional && access(path, F_OK) != 0) h.state = 0;
    else if (cnnrt_load_checkpoint(m, path) != CNNRT_OK) h.state = -1, snprintf(h.msg, sizeof h.msg, "%s", cnnrt_last_error());
  }
  if (dist_comm.broadcast(dist_comm.ctx, &h, sizeof h, 0)) die("--restore %s: %s", path, dist_comm.last_error(dist_comm.ctx));
  if (h.state < 0) { /* every rank knows: each ends cleanly */
    h.msg[sizeof h.msg - 1] = 0;
    fprintf(stderr, "[rank %d of %d] cnnrun: --restore (read by rank 0): %s\n", dist_comm.rank, dist_comm.size, h.msg); /* one write */
    dist_finalize();
    exit(1);
  }
  if (h.state > 0 && cnnrt_comm_broadcast_state(m, 0) != CNNRT_OK) die("%s", cnnrt_last_error());
  return h.state > 0;
}
