/* rt_elf.h — runtime-private: the model file pre-check (rt_elf.c: file, ELF header, program
 * and section headers, checksum note; rt_elf_dyn.c: the dynamic section, symbols, hash
 * tables, relocations, versions, initialisers).  Everything the dynamic loader will read is
 * checked to lie inside the file, so dlopen never faults on a corrupt or truncated copy. */
#ifndef CNNC_RT_ELF_H
#define CNNC_RT_ELF_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>

#include "cnnrt.h"

#define RT_ELF_MAX_PHDRS 64
#define RT_ELF_MAX_SYMS (1 << 22)

/* The image being checked: the whole file in memory (read-only). */
typedef struct rt_elf_img {
  const char *path;        /* for messages */
  const unsigned char *p;  /* the file's bytes */
  size_t n;
  Elf64_Ehdr eh;
  Elf64_Phdr ph[RT_ELF_MAX_PHDRS];
  int nph;
  int sealed;              /* the checksum note is there and matched */
  int has_init;            /* DT_INIT / DT_INIT_ARRAY / DT_PREINIT_ARRAY / DT_FINI*: code dlopen runs */
  int has_needed;          /* DT_NEEDED: other libraries */
  int exports_seal;        /* the dynamic symbol cnnc_seal_v1 */
} rt_elf_img;

/* Checks the image p[0..n) as rt_elf_check checks a file (no I/O; for tests and fuzzing).
 * Fills *img (may be NULL) with what it found. */
cnnrt_status rt_elf_check_image(const char *path, const unsigned char *p, size_t n, rt_elf_img *img);

/* rt_elf_dyn.c: the dynamic section and everything it points to (img: header and program
 * headers checked, sealed set). */
cnnrt_status rt_elf_dynamic(rt_elf_img *img);

/* The file offset of [vaddr, vaddr+len) if a PT_LOAD maps it from the file, else -1. */
int64_t rt_elf_file_off(const rt_elf_img *img, uint64_t vaddr, uint64_t len);
/* The PT_LOAD whose memory [p_vaddr, p_vaddr+p_memsz) holds [vaddr, vaddr+len), or NULL. */
const Elf64_Phdr *rt_elf_load_of(const rt_elf_img *img, uint64_t vaddr, uint64_t len);
/* rt_fail(CNNRT_BAD_MODEL, "<path>: corrupt model file: <fmt>"). */
cnnrt_status rt_elf_bad(const rt_elf_img *img, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
