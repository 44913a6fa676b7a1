/* cg_link.c — the last steps of compilation: LLVM verification and the new pass manager
 * ("default<O2>"), writing a module as LLVM IR, assembly or an object, and linking objects
 * into the model .so with lld: in this process when cnnc was built with liblld (cg_lld.cpp),
 * else by running CNNC_LINKER (ld.lld-19). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "cnnc_config.h"
#include "codegen/cg_internal.h"
#include "codegen/cg_link.h"
#include "runtime/cnnc_seal.h"

extern char **environ;

#ifdef CNNC_HAVE_LLD
/* cg_lld.cpp: lld's ELF driver in this process; its exit status, or -2 when lld cannot run
 * again in this process (then the linker program runs).  err gets lld's messages. */
int cg_lld_link(int argc, const char *const *argv, char *err, size_t errn);
#endif

int cg_optimize(LLVMModuleRef m, LLVMTargetMachineRef tm, int opt_level, ir_diag *d) {
  ir_loc loc = {0};
  char *msg = NULL;
  if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
    char *nl = strchr(msg, '\n');
    if (nl) *nl = 0;
    ir_diag_set(d, loc, NULL, "internal error: generated LLVM IR does not verify: %s", msg);
    LLVMDisposeMessage(msg);
    return -1;
  }
  LLVMDisposeMessage(msg);
  char pipeline[32];
  snprintf(pipeline, sizeof pipeline, "default<O%d>", opt_level < 0 ? 0 : opt_level > 3 ? 3 : opt_level);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef err = LLVMRunPasses(m, pipeline, tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (err) {
    char *e = LLVMGetErrorMessage(err);
    ir_diag_set(d, loc, NULL, "internal error: LLVM pass pipeline failed: %s", e);
    LLVMDisposeErrorMessage(e);
    return -1;
  }
  return 0;
}

/* The bytes into path; a short write (a full disk, a file size limit) is an error naming it. */
static int write_bytes(const char *path, const char *p, size_t n, ir_diag *d) {
  FILE *f = fopen(path, "wb");
  int bad = !f || fwrite(p, 1, n, f) != n;
  int e = errno;
  if (f && fclose(f) != 0 && !bad) bad = 1, e = errno;
  if (!bad) return 0;
  if (f) unlink(path);
  return ir_diag_set(d, (ir_loc){0}, NULL, "cannot write %s: %s", path, strerror(e ? e : EIO));
}

/* Through memory, not LLVMTargetMachineEmitToFile / LLVMPrintModuleToFile: LLVM's file stream
 * ends the process ("LLVM ERROR: IO failure on output stream") when a write fails. */
int cg_write_module(LLVMModuleRef m, LLVMTargetMachineRef tm, const char *what, const char *path, ir_diag *d) {
  ir_loc loc = {0};
  if (strcmp(what, "llvm") == 0) {
    char *text = LLVMPrintModuleToString(m);
    int rc = write_bytes(path, text, strlen(text), d);
    LLVMDisposeMessage(text);
    return rc;
  }
  char *err = NULL;
  LLVMMemoryBufferRef buf = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, strcmp(what, "asm") == 0 ? LLVMAssemblyFile : LLVMObjectFile, &err, &buf)) {
    ir_diag_set(d, loc, NULL, "cannot write %s: %s", path, err ? err : "unknown LLVM error");
    LLVMDisposeMessage(err);
    return -1;
  }
  int rc = write_bytes(path, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf), d);
  LLVMDisposeMemoryBuffer(buf);
  return rc;
}

/* Runs argv, returns its exit status (or -1); its stderr goes to errpath. */
static int run_tool(char *const *argv, const char *errpath) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Fills in the checksum note of the linked .so at path (runtime/cnnc_seal.h). */
static int seal_so(const char *path, ir_diag *d) {
  ir_loc loc = {0};
  int fd = open(path, O_RDWR);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 64) {
    if (fd >= 0) close(fd);
    return ir_diag_set(d, loc, NULL, "cannot seal %s: %s", path, strerror(errno));
  }
  size_t n = (size_t)st.st_size;
  unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return ir_diag_set(d, loc, NULL, "cannot seal %s: %s", path, strerror(errno));
  size_t desc = cnnc_seal_find(p, n);
  if (desc) cnnc_seal_write(p, n, desc);
  int bad = msync(p, n, MS_SYNC) != 0;
  int e = errno;
  munmap(p, n);
  if (!desc) return ir_diag_set(d, loc, NULL, "internal error: %s has no %s note to seal", path, CNNC_SEAL_SYMBOL);
  if (bad) return ir_diag_set(d, loc, NULL, "cannot seal %s: %s", path, strerror(e));
  return 0;
}

int cg_link_shared(const char *const *objs, int n, const char *out, const char *tmpdir, ir_diag *d) {
  ir_loc loc = {0};
  /* --no-mmap-output-file: lld writes with write(2), so a full disk is an error it reports, not a
   * SIGBUS inside its mapping of the output ("PLEASE submit a bug report") */
  const char *fixed[] = {CNNC_LINKER, "-shared", "--hash-style=gnu", "-z", "noexecstack", "-z", "relro", "-z", "now",
                         "--build-id", "--no-undefined", "--no-mmap-output-file", "-o", out};
  int nf = (int)(sizeof fixed / sizeof *fixed), rc = -2;
  char **argv = calloc((size_t)(nf + n + 1), sizeof *argv);
  if (!argv) abort();
  for (int i = 0; i < nf; i++) argv[i] = (char *)fixed[i];
  for (int i = 0; i < n; i++) argv[nf + i] = (char *)objs[i];
  char msg[400] = "";
#ifdef CNNC_HAVE_LLD
  argv[0] = "ld.lld"; /* lld picks its GNU driver by this name */
  rc = cg_lld_link(nf + n, (const char *const *)argv, msg, sizeof msg);
  argv[0] = (char *)CNNC_LINKER;
  if (rc == -2) /* an earlier link left lld unusable in this process */
#endif
  {
    char errpath[4096];
    snprintf(errpath, sizeof errpath, "%s/link.err", tmpdir);
    rc = run_tool(argv, errpath);
    FILE *f = rc ? fopen(errpath, "r") : NULL;
    if (f) {
      size_t k = fread(msg, 1, sizeof msg - 1, f);
      msg[k] = 0;
      fclose(f);
    }
  }
  free(argv);
  if (rc == 0) return seal_so(out, d);
  char *nl = strchr(msg, '\n');
  if (nl) *nl = 0;
  const char *io = strstr(msg, "IO failure on output stream: "); /* a full disk, a file size limit */
  if (io) return ir_diag_set(d, loc, NULL, "cannot write %s: %s", out, io + 29);
  return ir_diag_set(d, loc, NULL, "linking %s with %s failed (status %d)%s%s", out, CNNC_LINKER, rc, msg[0] ? ": " : "",
                     msg);
}

int cg_tmpdir(char *buf, size_t n, const char *parent, ir_diag *d) {
  snprintf(buf, n, "%s/cnnc-XXXXXX", parent && *parent ? parent : "/tmp");
  if (mkdtemp(buf)) return 0;
  ir_loc loc = {0};
  return ir_diag_set(d, loc, NULL, "cannot create a temporary directory %s: %s", buf, strerror(errno));
}

void cg_rmtree_flat(const char *dir, const char *const *files, int n) {
  for (int i = 0; i < n; i++) unlink(files[i]);
  char p[4096];
  snprintf(p, sizeof p, "%s/link.err", dir);
  unlink(p);
  rmdir(dir);
}
