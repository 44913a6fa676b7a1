/* rt_elf.c — checks a model file before dlopen sees it: a regular file, an ELF shared object
 * for this machine, program and section headers inside the file, every segment the loader
 * maps inside the file, and cnnc's checksum note (runtime/cnnc_seal.h) if the file has one;
 * then the dynamic section (rt_elf_dyn.c).  dlopen trusts all of this: a truncated or
 * corrupted copy would otherwise fault or abort inside the dynamic loader.  This catches
 * accidents, not malice: a model .so is code (docs/runtime.md, "Trust"). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnnc_seal.h"
#include "rt_elf.h"
#include "rt_internal.h"

#if UINTPTR_MAX != 0xffffffffffffffffu
#error "the model pre-check reads ELF64 files only"
#endif
#if defined(__x86_64__)
#define RT_EM EM_X86_64
#elif defined(__aarch64__)
#define RT_EM EM_AARCH64
#else
#define RT_EM EM_NONE /* not checked */
#endif

cnnrt_status rt_elf_bad(const rt_elf_img *img, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return rt_fail(CNNRT_BAD_MODEL, "%s: corrupt model file: %s", img->path, msg);
}

const Elf64_Phdr *rt_elf_load_of(const rt_elf_img *img, uint64_t vaddr, uint64_t len) {
  for (int i = 0; i < img->nph; i++) {
    const Elf64_Phdr *ph = &img->ph[i];
    if (ph->p_type == PT_LOAD && vaddr >= ph->p_vaddr && vaddr - ph->p_vaddr <= ph->p_memsz &&
        len <= ph->p_memsz - (vaddr - ph->p_vaddr))
      return ph;
  }
  return NULL;
}

int64_t rt_elf_file_off(const rt_elf_img *img, uint64_t vaddr, uint64_t len) {
  for (int i = 0; i < img->nph; i++) {
    const Elf64_Phdr *ph = &img->ph[i];
    if (ph->p_type == PT_LOAD && vaddr >= ph->p_vaddr && vaddr - ph->p_vaddr <= ph->p_filesz &&
        len <= ph->p_filesz - (vaddr - ph->p_vaddr))
      return (int64_t)(ph->p_offset + (vaddr - ph->p_vaddr)); /* inside the file: checked in rt_elf_segments */
  }
  return -1;
}

static cnnrt_status rt_elf_header(rt_elf_img *img) {
  const char *path = img->path;
  if (img->n < EI_NIDENT || memcmp(img->p, ELFMAG, SELFMAG) != 0)
    return rt_fail(CNNRT_BAD_MODEL, "%s: not a shared object (no ELF header)", path);
  if (img->n < sizeof img->eh) return rt_fail(CNNRT_BAD_MODEL, "%s: truncated ELF header (%zu bytes)", path, img->n);
  memcpy(&img->eh, img->p, sizeof img->eh);
  const Elf64_Ehdr *h = &img->eh;
  if (h->e_ident[EI_CLASS] != ELFCLASS64)
    return rt_fail(CNNRT_BAD_MODEL, "%s: ELF class %d does not match this runtime", path, h->e_ident[EI_CLASS]);
  if (h->e_ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
    return rt_fail(CNNRT_BAD_MODEL, "%s: ELF byte order %d does not match this machine", path, h->e_ident[EI_DATA]);
  if (RT_EM != EM_NONE && h->e_machine != RT_EM)
    return rt_fail(CNNRT_BAD_MODEL, "%s: built for another machine (ELF e_machine %u)", path, (unsigned)h->e_machine);
  if (h->e_type != ET_DYN)
    return rt_fail(CNNRT_BAD_MODEL, "%s: not a shared object (ELF type %u)", path, (unsigned)h->e_type);
  if (h->e_phentsize != sizeof(Elf64_Phdr) || h->e_phnum == 0 || h->e_phnum > RT_ELF_MAX_PHDRS)
    return rt_fail(CNNRT_BAD_MODEL, "%s: corrupt ELF program header table (%u entries of %u bytes)", path,
                   (unsigned)h->e_phnum, (unsigned)h->e_phentsize);
  uint64_t end = h->e_phoff + (uint64_t)h->e_phnum * sizeof(Elf64_Phdr);
  if (h->e_phoff == 0 || h->e_phoff > img->n || end > img->n)
    return rt_fail(CNNRT_BAD_MODEL, "%s: truncated (program headers end at %llu, file has %zu bytes)", path,
                   (unsigned long long)end, img->n);
  img->nph = h->e_phnum;
  memcpy(img->ph, img->p + h->e_phoff, (size_t)img->nph * sizeof(Elf64_Phdr));
  return CNNRT_OK;
}

/* A segment the loader reads: inside the file, and inside a PT_LOAD's file part. */
static cnnrt_status rt_elf_mapped(const rt_elf_img *img, const Elf64_Phdr *p, int i, const char *what) {
  if (rt_elf_file_off(img, p->p_vaddr, p->p_filesz) != (int64_t)p->p_offset)
    return rt_elf_bad(img, "%s segment %d (vaddr 0x%llx, %llu bytes) is not loaded from its file offset", what, i,
                      (unsigned long long)p->p_vaddr, (unsigned long long)p->p_filesz);
  return CNNRT_OK;
}

/* Every program header the loader uses: PT_LOAD inside the file, ascending and disjoint,
 * aligned as the loader needs; PT_DYNAMIC (exactly one), PT_GNU_RELRO, notes inside them. */
static cnnrt_status rt_elf_segments(rt_elf_img *img) {
  int nload = 0, ndyn = 0;
  uint64_t prev_end = 0;
  const Elf64_Ehdr *h = &img->eh;
  if (h->e_shoff || h->e_shnum) { /* the loader does not read them, but a table past the end means a cut file */
    uint64_t send = h->e_shoff + (uint64_t)h->e_shnum * sizeof(Elf64_Shdr);
    if (h->e_shentsize != sizeof(Elf64_Shdr) || h->e_shoff > img->n || send > img->n)
      return rt_fail(CNNRT_BAD_MODEL, "%s: truncated (section headers end at %llu, file has %zu bytes)", img->path,
                     (unsigned long long)send, img->n);
  }
  for (int i = 0; i < img->nph; i++) {
    const Elf64_Phdr *p = &img->ph[i];
    if (p->p_type == PT_LOAD || p->p_type == PT_DYNAMIC || p->p_type == PT_NOTE || p->p_type == PT_GNU_RELRO ||
        p->p_type == PT_GNU_PROPERTY || p->p_type == PT_INTERP) {
      uint64_t seg_end = p->p_offset + p->p_filesz;
      if (seg_end < p->p_offset || seg_end > img->n)
        return rt_fail(CNNRT_BAD_MODEL, "%s: truncated (segment %d ends at byte %llu, file has %zu bytes)", img->path, i,
                       (unsigned long long)seg_end, img->n);
    }
    if (p->p_type == PT_TLS) return rt_elf_bad(img, "segment %d is thread-local storage, which cnnc models have not", i);
    if (p->p_type != PT_LOAD) continue;
    if (!(p->p_flags & PF_R)) /* the loader reads its tables, the runtime its descriptor, through the mapping */
      return rt_elf_bad(img, "load segment %d is not readable (flags 0x%x)", i, (unsigned)p->p_flags);
    if (p->p_filesz > p->p_memsz || p->p_memsz > ((uint64_t)1 << 40) || p->p_vaddr > ((uint64_t)1 << 46))
      return rt_elf_bad(img, "load segment %d: %llu bytes in the file, %llu in memory at 0x%llx", i,
                        (unsigned long long)p->p_filesz, (unsigned long long)p->p_memsz, (unsigned long long)p->p_vaddr);
    if (p->p_align > 1 && ((p->p_align & (p->p_align - 1)) || p->p_align > ((uint64_t)1 << 30) ||
                           p->p_offset % p->p_align != p->p_vaddr % p->p_align))
      return rt_elf_bad(img, "load segment %d: alignment 0x%llx does not fit offset 0x%llx, vaddr 0x%llx", i,
                        (unsigned long long)p->p_align, (unsigned long long)p->p_offset, (unsigned long long)p->p_vaddr);
    if (nload && p->p_vaddr < prev_end) return rt_elf_bad(img, "load segment %d overlaps or precedes the one before", i);
    prev_end = p->p_vaddr + p->p_memsz;
    nload++;
  }
  if (!nload) return rt_elf_bad(img, "no loadable segment");
  for (int i = 0; i < img->nph; i++) {
    const Elf64_Phdr *p = &img->ph[i];
    cnnrt_status s = CNNRT_OK;
    if (p->p_type == PT_DYNAMIC) {
      s = ndyn++ ? rt_elf_bad(img, "two dynamic segments") : rt_elf_mapped(img, p, i, "dynamic");
      const Elf64_Phdr *lp = rt_elf_load_of(img, p->p_vaddr, p->p_filesz);
      if (s == CNNRT_OK && (p->p_flags & PF_W) && !(lp->p_flags & PF_W)) /* the loader relocates it in place */
        s = rt_elf_bad(img, "the dynamic segment is writable, the segment holding it is not");
    }
    else if (p->p_type == PT_NOTE || p->p_type == PT_GNU_PROPERTY) { /* the loader reads p_memsz bytes of notes */
      s = rt_elf_mapped(img, p, i, "note");
      if (s == CNNRT_OK && p->p_memsz != p->p_filesz) s = rt_elf_bad(img, "note segment %d: %llu bytes in memory, %llu in the file", i,
                                                                     (unsigned long long)p->p_memsz, (unsigned long long)p->p_filesz);
    } else if (p->p_type == PT_PHDR && /* the loader reads the program headers at this address */
               rt_elf_file_off(img, p->p_vaddr, (uint64_t)img->nph * sizeof(Elf64_Phdr)) != (int64_t)img->eh.e_phoff)
      s = rt_elf_bad(img, "the program header segment (vaddr 0x%llx) does not map the program headers", (unsigned long long)p->p_vaddr);
    else if (p->p_type == PT_GNU_RELRO && !rt_elf_load_of(img, p->p_vaddr, p->p_memsz))
      s = rt_elf_bad(img, "read-only-after-relocation segment %d is outside the loaded segments", i);
    if (s != CNNRT_OK) return s;
  }
  if (!ndyn) return rt_elf_bad(img, "no dynamic segment");
  return CNNRT_OK;
}

/* cnnc's checksum note, if the file has one: the whole file as cnnc wrote it. */
static cnnrt_status rt_elf_seal(rt_elf_img *img) {
  size_t desc = cnnc_seal_find(img->p, img->n);
  if (!desc) return CNNRT_OK; /* hand-made .so (tests/tools) or damaged note: rt_elf_dynamic decides */
  const unsigned char *d = img->p + desc;
  uint32_t version = cnnc_seal_le32(d);
  uint64_t bytes = cnnc_seal_le64(d + 8), want = cnnc_seal_le64(d + CNNC_SEAL_HASH_AT);
  if (version != CNNC_SEAL_VERSION)
    return rt_elf_bad(img, "checksum note version %u, this runtime reads version %u", version, CNNC_SEAL_VERSION);
  if (bytes != img->n)
    return rt_fail(CNNRT_BAD_MODEL, "%s: %s: the file has %zu bytes, cnnc wrote %llu (%s copy?)", img->path,
                   bytes > img->n ? "truncated" : "corrupt model file", img->n, (unsigned long long)bytes,
                   bytes > img->n ? "an incomplete" : "a damaged or appended-to");
  uint64_t got = cnnc_seal_hash(img->p, img->n, desc + CNNC_SEAL_HASH_AT);
  if (got != want)
    return rt_fail(CNNRT_BAD_MODEL,
                   "%s: corrupt model file: checksum mismatch (XXH64 %016llx, cnnc wrote %016llx): the file changed "
                   "after cnnc wrote it; recompile or copy it again", img->path, (unsigned long long)got,
                   (unsigned long long)want);
  img->sealed = 1;
  return CNNRT_OK;
}

cnnrt_status rt_elf_check_image(const char *path, const unsigned char *p, size_t n, rt_elf_img *out) {
  rt_elf_img local, *img = out ? out : &local;
  memset(img, 0, sizeof *img);
  img->path = path, img->p = p, img->n = n;
  cnnrt_status s = rt_elf_header(img);
  if (s == CNNRT_OK) s = rt_elf_seal(img); /* first: its message says most about a cut or changed file */
  if (s == CNNRT_OK) s = rt_elf_segments(img);
  if (s == CNNRT_OK) s = rt_elf_dynamic(img);
  return s;
}

cnnrt_status rt_elf_check(const char *path) {
  struct stat st;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* O_NONBLOCK: a FIFO must not block */
  if (fd < 0) return rt_fail(CNNRT_IO, "%s: cannot open: %s", path, strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return rt_fail(CNNRT_IO, "%s: not a regular file", path);
  }
  size_t n = (size_t)st.st_size;
  if (n < sizeof(Elf64_Ehdr)) { /* nothing to map: the header check names what is missing */
    unsigned char head[sizeof(Elf64_Ehdr)];
    ssize_t got = n ? pread(fd, head, n, 0) : 0;
    close(fd);
    if (got < 0) return rt_fail(CNNRT_IO, "%s: cannot read: %s", path, strerror(errno));
    return rt_elf_check_image(path, head, (size_t)got, NULL);
  }
  const unsigned char *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) return rt_fail(CNNRT_IO, "%s: cannot map: %s", path, strerror(e));
  madvise((void *)p, n, MADV_SEQUENTIAL);
  cnnrt_status s = rt_elf_check_image(path, p, n, NULL);
  munmap((void *)p, n);
  return s;
}
