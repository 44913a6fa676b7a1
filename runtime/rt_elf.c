/* rt_elf.c — checks a model file before dlopen sees it: readable, an ELF shared object for
 * this machine, every loadable segment inside the file.  dlopen maps segments without
 * checking the file size, so a truncated .so would otherwise fault (SIGBUS) inside it. */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "rt_internal.h"

#if UINTPTR_MAX == 0xffffffffffffffffu
typedef Elf64_Ehdr rt_ehdr;
typedef Elf64_Phdr rt_phdr;
#define RT_ELFCLASS ELFCLASS64
#else
typedef Elf32_Ehdr rt_ehdr;
typedef Elf32_Phdr rt_phdr;
#define RT_ELFCLASS ELFCLASS32
#endif

#if defined(__x86_64__)
#define RT_EM EM_X86_64
#elif defined(__aarch64__)
#define RT_EM EM_AARCH64
#elif defined(__i386__)
#define RT_EM EM_386
#else
#define RT_EM EM_NONE /* not checked */
#endif

static cnnrt_status rt_elf_header(const char *path, const rt_ehdr *h, size_t got) {
  if (got < EI_NIDENT || memcmp(h->e_ident, ELFMAG, SELFMAG) != 0)
    return rt_fail(CNNRT_BAD_MODEL, "%s: not a shared object (no ELF header)", path);
  if (got < sizeof *h)
    return rt_fail(CNNRT_BAD_MODEL, "%s: truncated ELF header (%zu bytes)", path, got);
  if (h->e_ident[EI_CLASS] != RT_ELFCLASS)
    return rt_fail(CNNRT_BAD_MODEL, "%s: ELF class %d does not match this runtime", path, h->e_ident[EI_CLASS]);
  if (RT_EM != EM_NONE && h->e_machine != RT_EM)
    return rt_fail(CNNRT_BAD_MODEL, "%s: built for another machine (ELF e_machine %u)", path, (unsigned)h->e_machine);
  if (h->e_type != ET_DYN)
    return rt_fail(CNNRT_BAD_MODEL, "%s: not a shared object (ELF type %u)", path, (unsigned)h->e_type);
  if (h->e_phentsize != sizeof(rt_phdr) || h->e_phnum == 0)
    return rt_fail(CNNRT_BAD_MODEL, "%s: corrupt ELF program header table", path);
  return CNNRT_OK;
}

/* Every program header must be readable and every PT_LOAD/PT_DYNAMIC inside the file. */
static cnnrt_status rt_elf_segments(const char *path, FILE *f, const rt_ehdr *h, uint64_t fsize) {
  uint64_t end = (uint64_t)h->e_phoff + (uint64_t)h->e_phnum * sizeof(rt_phdr);
  if (h->e_phoff == 0 || end > fsize)
    return rt_fail(CNNRT_BAD_MODEL, "%s: truncated (program headers end at %llu, file has %llu bytes)", path,
                   (unsigned long long)end, (unsigned long long)fsize);
  if (fseek(f, (long)h->e_phoff, SEEK_SET) != 0)
    return rt_fail(CNNRT_IO, "%s: cannot seek: %s", path, strerror(errno));
  for (unsigned i = 0; i < h->e_phnum; i++) {
    rt_phdr p;
    if (fread(&p, sizeof p, 1, f) != 1) return rt_fail(CNNRT_IO, "%s: cannot read program header %u", path, i);
    if (p.p_type != PT_LOAD && p.p_type != PT_DYNAMIC) continue;
    uint64_t seg_end = (uint64_t)p.p_offset + (uint64_t)p.p_filesz;
    if (seg_end < p.p_offset || seg_end > fsize)
      return rt_fail(CNNRT_BAD_MODEL, "%s: truncated (segment %u ends at byte %llu, file has %llu bytes)", path, i,
                     (unsigned long long)seg_end, (unsigned long long)fsize);
  }
  return CNNRT_OK;
}

cnnrt_status rt_elf_check(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return rt_fail(CNNRT_IO, "%s: cannot open: %s", path, strerror(errno));
  if (!S_ISREG(st.st_mode)) return rt_fail(CNNRT_IO, "%s: not a regular file", path);
  FILE *f = fopen(path, "rb");
  if (!f) return rt_fail(CNNRT_IO, "%s: cannot open: %s", path, strerror(errno));
  rt_ehdr h;
  memset(&h, 0, sizeof h);
  size_t got = fread(&h, 1, sizeof h, f);
  cnnrt_status s = rt_elf_header(path, &h, got);
  if (s == CNNRT_OK) s = rt_elf_segments(path, f, &h, (uint64_t)st.st_size);
  fclose(f);
  return s;
}
