/* cm_file.c — files handled safely: inputs opened without blocking and refused unless regular,
 * read with a bound; outputs checked before the work starts (never over an input, the
 * directory writable) and written to PATH.tmp.PID, fsynced, renamed into place, with the
 * directory fsynced; the temporary files of processes killed on the way removed later. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cm.h"

static int fail(char *why, size_t n, const char *fmt, const char *arg) {
  if (why && n) snprintf(why, n, fmt, arg);
  return -1;
}

static const char *kind_of(mode_t m) {
  return S_ISDIR(m) ? "is a directory" : S_ISFIFO(m) ? "is not a regular file (a FIFO)"
         : S_ISCHR(m) ? "is not a regular file (a character device)" : S_ISBLK(m) ? "is not a regular file (a block device)"
         : S_ISSOCK(m) ? "is not a regular file (a socket)" : "is not a regular file";
}

int cm_open_regular(const char *path, uint64_t *size, char *why, size_t n) {
  if (!path || !*path) return fail(why, n, "%s", "no file name given");
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return fail(why, n, "%s", strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int e = errno;
    close(fd);
    return fail(why, n, "%s", S_ISREG(st.st_mode) ? strerror(e) : kind_of(st.st_mode));
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (size) *size = (uint64_t)st.st_size;
  return fd;
}

char *cm_read_regular(const char *path, uint64_t max, size_t *len, char *why, size_t n) {
  uint64_t size;
  int fd = cm_open_regular(path, &size, why, n);
  if (fd < 0) return NULL;
  if (size > max) {
    char m[96];
    snprintf(m, sizeof m, "%llu bytes, more than the %llu this reader takes", (unsigned long long)size,
             (unsigned long long)max);
    close(fd);
    return fail(why, n, "%s", m), NULL;
  }
  char *buf = malloc((size_t)size + 1);
  if (!buf) {
    close(fd);
    return fail(why, n, "%s", "out of memory"), NULL;
  }
  size_t got = 0;
  while (got < size) { /* the file may grow meanwhile: read what the size said */
    ssize_t k = read(fd, buf + got, (size_t)size - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      fail(why, n, "read error: %s", k < 0 ? strerror(errno) : "the file shrank while being read");
      free(buf);
      close(fd);
      return NULL;
    }
    got += (size_t)k;
  }
  close(fd);
  buf[got] = 0;
  *len = got;
  return buf;
}

int cm_same_file(const char *a, const char *b) {
  struct stat x, y;
  if (!a || !b || stat(a, &x) != 0 || stat(b, &y) != 0) return 0;
  return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

const char *cm_dirname(const char *path, char *buf, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(buf, n, ".");
  else if (slash == path) snprintf(buf, n, "/");
  else snprintf(buf, n, "%.*s", (int)(slash - path), path);
  return buf;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

const char *cm_tmp_name(const char *path, char *buf, size_t n) {
  snprintf(buf, n, "%s.tmp.%ld", path, (long)getpid());
  return buf;
}

int cm_out_direct(const char *path) {
  struct stat st;
  return path && stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

const char *cm_out_target(const char *path, char *buf, size_t n) {
  struct stat st;
  char *real;
  if (!path || lstat(path, &st) != 0 || !S_ISLNK(st.st_mode) || !(real = realpath(path, NULL))) return path;
  snprintf(buf, n, "%s", real);
  free(real);
  return buf;
}

int cm_check_output(const char *path, const char *const *inputs, int n_in, char *why, size_t n) {
  if (!path || !*path) return fail(why, n, "%s", "no file name given");
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return fail(why, n, "%s", "is a directory");
  for (int i = 0; i < n_in; i++)
    if (inputs[i] && cm_same_file(path, inputs[i]))
      return fail(why, n, "is the input '%s' (refusing to overwrite it)", inputs[i]);
  if (cm_out_direct(path)) return 0; /* /dev/null, a FIFO: written in place */
  char dir[4096], probe[4200], target[4096];
  path = cm_out_target(path, target, sizeof target);
  cm_dirname(path, dir, sizeof dir);
  cm_clear_stale(dir, base_name(path));
  cm_tmp_name(path, probe, sizeof probe);
  int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    char m[4300];
    snprintf(m, sizeof m, "cannot be created: directory %s: %s", dir, strerror(errno));
    return fail(why, n, "%s", m);
  }
  close(fd);
  unlink(probe);
  return 0;
}

/* NAME ends in ".tmp.PID" with PID a process that no longer exists. */
static int stale_name(const char *name) {
  const char *t = strstr(name, ".tmp.");
  if (!t) return 0;
  for (const char *next; (next = strstr(t + 1, ".tmp."));) t = next;
  const char *d = t + 5;
  if (!*d || d[strspn(d, "0123456789")] || strlen(d) > 9) return 0;
  long pid = strtol(d, NULL, 10);
  return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int cm_clear_stale(const char *dir, const char *prefix) {
  DIR *d = opendir(dir && *dir ? dir : ".");
  if (!d) return 0;
  int removed = 0, dfd = dirfd(d);
  size_t pl = prefix ? strlen(prefix) : 0;
  for (struct dirent *e; (e = readdir(d));) {
    struct stat st;
    if (strncmp(e->d_name, prefix ? prefix : "", pl) || !stale_name(e->d_name)) continue;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    removed += unlinkat(dfd, e->d_name, 0) == 0;
  }
  closedir(d);
  return removed;
}

static int fsync_dir_of(const char *path) {
  char dir[4096];
  int fd = open(cm_dirname(path, dir, sizeof dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

int cm_out_open(cm_out *o, const char *path, int mode, char *why, size_t n) {
  memset(o, 0, sizeof *o);
  if (!path || !*path) return fail(why, n, "%s", "no file name given");
  if (strlen(path) >= sizeof o->path) return fail(why, n, "%s", "the path is too long");
  char target[4096];
  path = cm_out_target(path, target, sizeof target);
  snprintf(o->path, sizeof o->path, "%s", path);
  if (cm_out_direct(path)) { /* in place: never a rename over a device or a FIFO */
    if (!(o->f = fopen(path, "wb"))) return fail(why, n, "%s", strerror(errno));
    return 0;
  }
  char dir[4096];
  cm_clear_stale(cm_dirname(path, dir, sizeof dir), base_name(path));
  cm_tmp_name(path, o->tmp, sizeof o->tmp);
  unlink(o->tmp); /* ours (same PID) from an earlier call that did not finish */
  int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    char m[4400];
    snprintf(m, sizeof m, "cannot create %s: %s", o->tmp, strerror(errno));
    o->tmp[0] = 0;
    return fail(why, n, "%s", m);
  }
  if (!(o->f = fdopen(fd, "wb"))) {
    close(fd);
    cm_out_abort(o);
    return fail(why, n, "%s", "out of memory");
  }
  return 0;
}

void cm_out_abort(cm_out *o) {
  if (o->f) fclose(o->f);
  o->f = NULL;
  if (o->tmp[0]) unlink(o->tmp);
  o->tmp[0] = 0;
}

int cm_out_commit(cm_out *o, char *why, size_t n) {
  if (!o->f) return fail(why, n, "%s", "not open");
  if (!o->tmp[0]) { /* written in place (cm_out_direct) */
    int bad = ferror(o->f) || fflush(o->f) != 0;
    int e = errno ? errno : EIO;
    if (fclose(o->f) != 0 && !bad) bad = 1, e = errno;
    o->f = NULL;
    return bad ? fail(why, n, "write error: %s", strerror(e)) : 0;
  }
  int bad = ferror(o->f) || fflush(o->f) != 0 || fsync(fileno(o->f)) != 0;
  int e = errno ? errno : EIO;
  if (fclose(o->f) != 0 && !bad) bad = 1, e = errno;
  o->f = NULL;
  if (bad) {
    cm_out_abort(o);
    return fail(why, n, "write error: %s (nothing was written)", strerror(e));
  }
  if (rename(o->tmp, o->path) != 0) {
    e = errno;
    cm_out_abort(o);
    return fail(why, n, "cannot rename the temporary file over it: %s", strerror(e));
  }
  o->tmp[0] = 0;
  fsync_dir_of(o->path);
  return 0;
}

int cm_commit_file(const char *tmp, const char *path, char *why, size_t n) {
  int fd = open(tmp, O_RDONLY | O_CLOEXEC);
  int bad = fd < 0 || fsync(fd) != 0;
  int e = errno;
  if (fd >= 0) close(fd);
  if (!bad && rename(tmp, path) != 0) bad = 1, e = errno;
  if (bad) {
    unlink(tmp);
    return fail(why, n, "%s (nothing was written)", strerror(e));
  }
  fsync_dir_of(path);
  return 0;
}
