/* rt_elf_dyn.c — the model pre-check, second half: the dynamic section and what it points to,
 * as glibc's loader reads them at dlopen(RTLD_NOW) and dlsym: string and symbol tables, the
 * GNU / SysV hash tables (sizes the loader divides or masks by), relocations (only the types
 * cnnc's .so files contain; targets in writable segments; DT_RELACOUNT, which the loader takes
 * on trust), symbol versions, initialisers.  A file sealed by cnnc (cnnc_seal.h) must have the
 * shape cnnc gives it: R_X86_64_RELATIVE relocations only, no other library, no initialiser,
 * no undefined symbol; hand-made test models (tests/tools/libfake_*.c, linked against libc)
 * may also have symbol relocations, DT_NEEDED, versions and initialisers, all bounds-checked. */
#include <string.h>

#include "cnnc_abi.h"
#include "cnnc_seal.h"
#include "rt_elf.h"
#include "rt_internal.h"

#if defined(__x86_64__)
#define RT_R_NONE R_X86_64_NONE
#define RT_R_RELATIVE R_X86_64_RELATIVE
#define RT_R_ABS64 R_X86_64_64
#define RT_R_GLOB_DAT R_X86_64_GLOB_DAT
#define RT_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#elif defined(__aarch64__)
#define RT_R_NONE R_AARCH64_NONE
#define RT_R_RELATIVE R_AARCH64_RELATIVE
#define RT_R_ABS64 R_AARCH64_ABS64
#define RT_R_GLOB_DAT R_AARCH64_GLOB_DAT
#define RT_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#else
#error "the model pre-check knows the relocations of x86-64 and AArch64 only"
#endif

#define RT_DYN_TABLES 16

typedef struct rt_dyn {
  uint64_t v[DT_NUM];   /* values of tags < DT_NUM */
  int has[DT_NUM];
  uint64_t gnu_hash, versym, verneed, verneednum, verdef, verdefnum, relacount, flags_1;
  int has_gnu_hash, has_versym, has_verneed, has_verdef, has_relacount;
  uint64_t nsyms;
  unsigned max_ver;     /* highest version index VERNEED / VERDEF define */
  /* What the loader and dl_iterate_phdr read after (or while) relocating: no relocation may
   * write there (rt_dyn_relocs), or it would rewrite a table that was checked before. */
  int n_tab;
  uint64_t tab_va[RT_DYN_TABLES], tab_len[RT_DYN_TABLES];
  const char *tab_what[RT_DYN_TABLES];
  uint64_t ver_lo[2], ver_hi[2]; /* RT_DYN_VERNEED, RT_DYN_VERDEF: the span of their entries */
} rt_dyn;

static void rt_dyn_table(rt_dyn *y, uint64_t va, uint64_t len, const char *what) {
  if (y->n_tab < RT_DYN_TABLES && len) y->tab_va[y->n_tab] = va, y->tab_len[y->n_tab] = len, y->tab_what[y->n_tab++] = what;
}

enum { RT_DYN_VERNEED, RT_DYN_VERDEF };
static void rt_dyn_table_grow(rt_dyn *y, int k, uint64_t va, uint64_t len) {
  if (y->ver_hi[k] == y->ver_lo[k] || va < y->ver_lo[k]) y->ver_lo[k] = va;
  if (va + len > y->ver_hi[k]) y->ver_hi[k] = va + len;
}

static uint32_t rd32(const rt_elf_img *img, int64_t off) { return cnnc_seal_le32(img->p + off); }

/* The file offset of the table [vaddr, vaddr + len) (mapped from the file), or -1 after a
 * refusal naming what. */
static int64_t rt_table(const rt_elf_img *img, uint64_t vaddr, uint64_t len, const char *what, cnnrt_status *s) {
  int64_t off = len > img->n ? -1 : rt_elf_file_off(img, vaddr, len);
  if (off < 0)
    *s = rt_elf_bad(img, "%s (vaddr 0x%llx, %llu bytes) is not inside the loaded part of the file", what,
                    (unsigned long long)vaddr, (unsigned long long)len);
  return off;
}

/* Reads the dynamic entries up to DT_NULL. */
static cnnrt_status rt_dyn_read(const rt_elf_img *img, rt_dyn *y) {
  const Elf64_Phdr *dp = NULL;
  for (int i = 0; i < img->nph; i++)
    if (img->ph[i].p_type == PT_DYNAMIC) dp = &img->ph[i];
  int ended = 0;
  for (uint64_t k = 0; !ended && (k + 1) * sizeof(Elf64_Dyn) <= dp->p_filesz; k++) {
    Elf64_Dyn e;
    memcpy(&e, img->p + dp->p_offset + k * sizeof e, sizeof e);
    Elf64_Sxword t = e.d_tag;
    uint64_t v = e.d_un.d_val;
    if (t == DT_NULL) ended = 1;
    else if (t == DT_REL || t == DT_RELSZ || t == DT_RELENT || t == DT_TEXTREL || t == DT_RELR || t == DT_RELRSZ ||
             t == DT_RELRENT || t == DT_AUXILIARY || t == DT_FILTER || t == DT_AUDIT || t == DT_DEPAUDIT)
      return rt_elf_bad(img, "dynamic tag 0x%llx, which cnnc models do not use", (unsigned long long)t);
    else if (t == DT_FLAGS && (v & (DF_TEXTREL | DF_STATIC_TLS)))
      return rt_elf_bad(img, "dynamic flags 0x%llx (text relocations or static TLS)", (unsigned long long)v);
    else if (t == DT_PLTREL && v != DT_RELA) return rt_elf_bad(img, "PLT relocations of kind %llu, not RELA", (unsigned long long)v);
    else if (t >= 0 && t < DT_NUM) y->v[t] = v, y->has[t] = 1;
    else if (t == DT_GNU_HASH) y->gnu_hash = v, y->has_gnu_hash = 1;
    else if (t == DT_VERSYM) y->versym = v, y->has_versym = 1;
    else if (t == DT_VERNEED) y->verneed = v, y->has_verneed = 1;
    else if (t == DT_VERNEEDNUM) y->verneednum = v;
    else if (t == DT_VERDEF) y->verdef = v, y->has_verdef = 1;
    else if (t == DT_VERDEFNUM) y->verdefnum = v;
    else if (t == DT_RELACOUNT) y->relacount = v, y->has_relacount = 1;
    else if (t == DT_FLAGS_1) y->flags_1 = v;
  }
  if (!ended) return rt_elf_bad(img, "the dynamic section has no end (DT_NULL)");
  return CNNRT_OK;
}

/* String table: mapped, NUL-terminated, every name offset inside. */
static cnnrt_status rt_dyn_strings(rt_elf_img *img, const rt_dyn *y) {
  cnnrt_status s = CNNRT_OK;
  if (!y->has[DT_STRTAB] || !y->has[DT_SYMTAB] || !y->v[DT_STRSZ]) return rt_elf_bad(img, "no dynamic string or symbol table");
  int64_t off = rt_table(img, y->v[DT_STRTAB], y->v[DT_STRSZ], "the dynamic string table", &s);
  if (off < 0) return s;
  if (img->p[off + (int64_t)y->v[DT_STRSZ] - 1] != 0) return rt_elf_bad(img, "the dynamic string table does not end in NUL");
  if (y->has[DT_SYMENT] && y->v[DT_SYMENT] != sizeof(Elf64_Sym)) return rt_elf_bad(img, "symbol entries of %llu bytes", (unsigned long long)y->v[DT_SYMENT]);
  const Elf64_Phdr *dp = NULL;
  for (int i = 0; i < img->nph; i++)
    if (img->ph[i].p_type == PT_DYNAMIC) dp = &img->ph[i];
  for (uint64_t k = 0; (k + 1) * sizeof(Elf64_Dyn) <= dp->p_filesz; k++) {
    Elf64_Dyn e;
    memcpy(&e, img->p + dp->p_offset + k * sizeof e, sizeof e);
    if (e.d_tag == DT_NULL) break;
    if (e.d_tag == DT_NEEDED) img->has_needed = 1;
    if ((e.d_tag == DT_NEEDED || e.d_tag == DT_SONAME || e.d_tag == DT_RPATH || e.d_tag == DT_RUNPATH) &&
        e.d_un.d_val >= y->v[DT_STRSZ])
      return rt_elf_bad(img, "dynamic tag %lld names string %llu of a %llu-byte table", (long long)e.d_tag,
                        (unsigned long long)e.d_un.d_val, (unsigned long long)y->v[DT_STRSZ]);
  }
  return CNNRT_OK;
}

/* GNU hash table: the loader divides by nbuckets and masks by bloom_size - 1 (asserting it is a
 * power of two); walking every chain bounds the symbol count. */
static cnnrt_status rt_dyn_gnu_hash(const rt_elf_img *img, rt_dyn *y) {
  cnnrt_status s = CNNRT_OK;
  int64_t h = rt_table(img, y->gnu_hash, 16, "the GNU hash table", &s);
  if (h < 0) return s;
  uint32_t nb = rd32(img, h), symoff = rd32(img, h + 4), bloom = rd32(img, h + 8), shift = rd32(img, h + 12);
  if (nb == 0 || bloom == 0 || (bloom & (bloom - 1)) || shift >= 64 || symoff > RT_ELF_MAX_SYMS || nb > RT_ELF_MAX_SYMS ||
      bloom > RT_ELF_MAX_SYMS)
    return rt_elf_bad(img, "GNU hash table header (%u buckets, symbol offset %u, bloom %u, shift %u)", nb, symoff, bloom, shift);
  uint64_t bucket_va = y->gnu_hash + 16 + 8 * (uint64_t)bloom, chain_va = bucket_va + 4 * (uint64_t)nb;
  int64_t b = rt_table(img, y->gnu_hash, 16 + 8 * (uint64_t)bloom + 4 * (uint64_t)nb, "the GNU hash table", &s);
  if (b < 0) return s;
  b += 16 + 8 * (int64_t)bloom;
  uint64_t nsyms = symoff;
  for (uint32_t i = 0; i < nb; i++) {
    uint32_t k = rd32(img, b + 4 * (int64_t)i);
    if (k == 0) continue;
    if (k < symoff) return rt_elf_bad(img, "GNU hash bucket %u starts at symbol %u, below the offset %u", i, k, symoff);
    for (;; k++) {
      if (k >= RT_ELF_MAX_SYMS) return rt_elf_bad(img, "GNU hash chain runs past %d symbols", RT_ELF_MAX_SYMS);
      int64_t c = rt_table(img, chain_va + 4 * (uint64_t)(k - symoff), 4, "a GNU hash chain", &s);
      if (c < 0) return s;
      if (k + 1 > nsyms) nsyms = k + 1;
      if (rd32(img, c) & 1) break;
    }
  }
  y->nsyms = nsyms;
  rt_dyn_table(y, y->gnu_hash, chain_va + 4 * (nsyms > symoff ? nsyms - symoff : 0) - y->gnu_hash, "the GNU hash table");
  return CNNRT_OK;
}

static cnnrt_status rt_dyn_sysv_hash(const rt_elf_img *img, rt_dyn *y) {
  cnnrt_status s = CNNRT_OK;
  int64_t h = rt_table(img, y->v[DT_HASH], 8, "the hash table", &s);
  if (h < 0) return s;
  uint32_t nb = rd32(img, h), nc = rd32(img, h + 4);
  if (nb == 0 || nb > RT_ELF_MAX_SYMS || nc > RT_ELF_MAX_SYMS) return rt_elf_bad(img, "hash table of %u buckets, %u chains", nb, nc);
  int64_t t = rt_table(img, y->v[DT_HASH], 8 + 4 * ((uint64_t)nb + nc), "the hash table", &s);
  if (t < 0) return s;
  for (uint64_t i = 0; i < (uint64_t)nb + nc; i++)
    if (rd32(img, t + 8 + 4 * (int64_t)i) >= nc) return rt_elf_bad(img, "hash table entry %llu is past its %u chains", (unsigned long long)i, nc);
  if (!y->has_gnu_hash || nc > y->nsyms) y->nsyms = nc;
  rt_dyn_table(y, y->v[DT_HASH], 8 + 4 * ((uint64_t)nb + nc), "the hash table");
  return CNNRT_OK;
}

/* A descriptor the runtime reads through dlsym must lie whole inside a loaded segment. */
static uint64_t rt_known_size(const char *name) {
  if (!strcmp(name, CNNC_ABI_SYMBOL)) return sizeof(cnnc_abi_model);
  if (!strcmp(name, CNNC_ABI_TRAIN_SYMBOL)) return sizeof(cnnc_abi_train);
  if (!strcmp(name, CNNC_ABI_PROFILE_SYMBOL)) return sizeof(cnnc_abi_profile);
  if (!strcmp(name, "cnnc_isa_v1")) return 1;
  return 0;
}

static cnnrt_status rt_dyn_symbols(rt_elf_img *img, const rt_dyn *y) {
  cnnrt_status s = CNNRT_OK;
  if (y->nsyms > RT_ELF_MAX_SYMS) return rt_elf_bad(img, "%llu symbols", (unsigned long long)y->nsyms);
  int64_t t = rt_table(img, y->v[DT_SYMTAB], y->nsyms * sizeof(Elf64_Sym), "the dynamic symbol table", &s);
  if (t < 0) return s;
  const char *str = (const char *)img->p + rt_elf_file_off(img, y->v[DT_STRTAB], y->v[DT_STRSZ]);
  for (uint64_t i = 1; i < y->nsyms; i++) {
    Elf64_Sym sym;
    memcpy(&sym, img->p + t + (int64_t)(i * sizeof sym), sizeof sym);
    if (sym.st_name >= y->v[DT_STRSZ]) return rt_elf_bad(img, "symbol %llu has no name in the string table", (unsigned long long)i);
    const char *name = str + sym.st_name;
    int type = ELF64_ST_TYPE(sym.st_info);
    if (type == STT_TLS || type == STT_GNU_IFUNC)
      return rt_elf_bad(img, "symbol '%s' is %s", name, type == STT_TLS ? "thread-local" : "an indirect function");
    if (sym.st_shndx == SHN_UNDEF) {
      if (img->sealed && ELF64_ST_BIND(sym.st_info) != STB_LOCAL)
        return rt_elf_bad(img, "symbol '%s' is undefined; cnnc models need no other library", name);
      continue;
    }
    if (!strcmp(name, CNNC_SEAL_SYMBOL)) img->exports_seal = 1;
    if (sym.st_shndx == SHN_ABS) continue;
    uint64_t need = rt_known_size(name), len = sym.st_size > need ? sym.st_size : need;
    if (need > 1 && sym.st_value % 8) /* the runtime reads the descriptor as a struct of pointers */
      return rt_elf_bad(img, "descriptor '%s' at 0x%llx is misaligned", name, (unsigned long long)sym.st_value);
    if (!rt_elf_load_of(img, sym.st_value, len))
      return rt_elf_bad(img, "symbol '%s' (0x%llx, %llu bytes) lies outside the loaded segments", name,
                        (unsigned long long)sym.st_value, (unsigned long long)len);
    if (need == 1) { /* a string: NUL before the end of its segment's file bytes (or zero fill after it) */
      const Elf64_Phdr *ph = rt_elf_load_of(img, sym.st_value, 1);
      uint64_t from = sym.st_value - ph->p_vaddr;
      if (from < ph->p_filesz && ph->p_memsz == ph->p_filesz && !memchr(img->p + ph->p_offset + from, 0, ph->p_filesz - from))
        return rt_elf_bad(img, "string '%s' has no end inside its segment", name);
    }
  }
  return CNNRT_OK;
}

/* Symbol versions: the loader indexes its version array by versym & 0x7fff. */
static cnnrt_status rt_dyn_versions(rt_elf_img *img, rt_dyn *y) {
  cnnrt_status s = CNNRT_OK;
  if (!y->has_versym && !y->has_verneed && !y->has_verdef) return CNNRT_OK;
  if (img->sealed) return rt_elf_bad(img, "symbol versions, which cnnc models do not have");
  y->max_ver = 1;
  uint64_t va = y->verneed;
  for (uint64_t k = 0; y->has_verneed && k < y->verneednum; k++) {
    if (k > 256) return rt_elf_bad(img, "%llu needed-version entries", (unsigned long long)y->verneednum);
    int64_t o = rt_table(img, va, sizeof(Elf64_Verneed), "a needed-version entry", &s);
    if (o < 0) return s;
    Elf64_Verneed vn;
    memcpy(&vn, img->p + o, sizeof vn);
    rt_dyn_table_grow(y, RT_DYN_VERNEED, va, sizeof vn);
    if (vn.vn_version != 1 || vn.vn_file >= y->v[DT_STRSZ] || vn.vn_cnt > 256)
      return rt_elf_bad(img, "needed-version entry %llu", (unsigned long long)k);
    uint64_t aux = va + vn.vn_aux;
    for (unsigned j = 0; j < vn.vn_cnt; j++) {
      int64_t a = rt_table(img, aux, sizeof(Elf64_Vernaux), "a needed-version entry", &s);
      if (a < 0) return s;
      Elf64_Vernaux x;
      memcpy(&x, img->p + a, sizeof x);
      rt_dyn_table_grow(y, RT_DYN_VERNEED, aux, sizeof x);
      if (x.vna_name >= y->v[DT_STRSZ]) return rt_elf_bad(img, "needed version without a name");
      if ((x.vna_other & 0x7fff) > y->max_ver) y->max_ver = x.vna_other & 0x7fff;
      aux += x.vna_next;
    }
    va += vn.vn_next;
  }
  va = y->verdef;
  for (uint64_t k = 0; y->has_verdef && k < y->verdefnum; k++) {
    if (k > 256) return rt_elf_bad(img, "%llu version definitions", (unsigned long long)y->verdefnum);
    int64_t o = rt_table(img, va, sizeof(Elf64_Verdef), "a version definition", &s);
    if (o < 0) return s;
    Elf64_Verdef vd;
    memcpy(&vd, img->p + o, sizeof vd);
    rt_dyn_table_grow(y, RT_DYN_VERDEF, va, sizeof vd);
    if (vd.vd_version != 1 || vd.vd_cnt == 0) return rt_elf_bad(img, "version definition %llu", (unsigned long long)k);
    int64_t a = rt_table(img, va + vd.vd_aux, sizeof(Elf64_Verdaux), "a version definition", &s);
    if (a < 0) return s;
    Elf64_Verdaux x;
    memcpy(&x, img->p + a, sizeof x);
    rt_dyn_table_grow(y, RT_DYN_VERDEF, va + vd.vd_aux, sizeof x);
    if (x.vda_name >= y->v[DT_STRSZ]) return rt_elf_bad(img, "version definition without a name");
    if ((vd.vd_ndx & 0x7fff) > y->max_ver) y->max_ver = vd.vd_ndx & 0x7fff;
    va += vd.vd_next;
  }
  for (int k = 0; k < 2; k++) /* the version entries: from the lowest to the highest address read */
    if (y->ver_hi[k] > y->ver_lo[k]) rt_dyn_table(y, y->ver_lo[k], y->ver_hi[k] - y->ver_lo[k], k ? "a version definition" : "a needed-version entry");
  if (!y->has_versym) return CNNRT_OK;
  int64_t o = rt_table(img, y->versym, 2 * y->nsyms, "the symbol version table", &s);
  if (o < 0) return s;
  rt_dyn_table(y, y->versym, 2 * y->nsyms, "the symbol version table");
  for (uint64_t i = 0; i < y->nsyms; i++) {
    unsigned v = (img->p[o + 2 * (int64_t)i] | (unsigned)img->p[o + 2 * (int64_t)i + 1] << 8) & 0x7fff;
    if (v > y->max_ver) return rt_elf_bad(img, "symbol %llu has version %u, the file defines %u", (unsigned long long)i, v, y->max_ver);
  }
  return CNNRT_OK;
}

/* One relocation table: allowed types, symbol in range, target inside a writable segment. */
static cnnrt_status rt_dyn_relocs(const rt_elf_img *img, const rt_dyn *y, uint64_t va, uint64_t bytes, const char *what,
                                  uint64_t n_relative) {
  cnnrt_status s = CNNRT_OK;
  if (bytes % sizeof(Elf64_Rela)) return rt_elf_bad(img, "%s: %llu bytes", what, (unsigned long long)bytes);
  int64_t t = rt_table(img, va, bytes, what, &s);
  if (t < 0) return s;
  uint64_t n = bytes / sizeof(Elf64_Rela);
  if (n_relative > n) return rt_elf_bad(img, "%llu relative relocations announced, %llu present", (unsigned long long)n_relative, (unsigned long long)n);
  for (uint64_t i = 0; i < n; i++) {
    Elf64_Rela r;
    memcpy(&r, img->p + t + (int64_t)(i * sizeof r), sizeof r);
    uint64_t type = ELF64_R_TYPE(r.r_info), sym = ELF64_R_SYM(r.r_info);
    int ok = type == RT_R_RELATIVE ||
             (!img->sealed && (type == RT_R_NONE || type == RT_R_ABS64 || type == RT_R_GLOB_DAT || type == RT_R_JUMP_SLOT));
    if (!ok || (i < n_relative && type != RT_R_RELATIVE))
      return rt_elf_bad(img, "%s %llu has type %llu, which cnnc models do not use", what, (unsigned long long)i,
                        (unsigned long long)type);
    if (sym >= y->nsyms) return rt_elf_bad(img, "%s %llu names symbol %llu of %llu", what, (unsigned long long)i,
                                           (unsigned long long)sym, (unsigned long long)y->nsyms);
    const Elf64_Phdr *ph = type == RT_R_NONE ? NULL : rt_elf_load_of(img, r.r_offset, 8);
    if (type != RT_R_NONE && (!ph || !(ph->p_flags & PF_W)))
      return rt_elf_bad(img, "%s %llu writes 0x%llx, outside the writable segments", what, (unsigned long long)i,
                        (unsigned long long)r.r_offset);
    for (int k = 0; k < img->nph && type != RT_R_NONE; k++) /* the loader reads .dynamic again after relocating */
      if (img->ph[k].p_type == PT_DYNAMIC && r.r_offset + 8 > img->ph[k].p_vaddr &&
          r.r_offset < img->ph[k].p_vaddr + img->ph[k].p_memsz)
        return rt_elf_bad(img, "%s %llu writes 0x%llx, inside the dynamic section", what, (unsigned long long)i,
                          (unsigned long long)r.r_offset);
    for (int k = 0; k < y->n_tab && type != RT_R_NONE; k++)
      if (r.r_offset + 8 > y->tab_va[k] && r.r_offset < y->tab_va[k] + y->tab_len[k])
        return rt_elf_bad(img, "%s %llu writes 0x%llx, inside %s", what, (unsigned long long)i, (unsigned long long)r.r_offset,
                          y->tab_what[k]);
    if (img->sealed && type == RT_R_RELATIVE && !rt_elf_load_of(img, (uint64_t)r.r_addend, 1))
      return rt_elf_bad(img, "%s %llu points at 0x%llx, outside the loaded segments", what, (unsigned long long)i,
                        (unsigned long long)r.r_addend);
  }
  return CNNRT_OK;
}

/* The tables not registered on the way (rt_dyn_table): strings, symbols, the relocation tables
 * themselves (a relocation must not rewrite one the loader has yet to apply), and the ELF and
 * program headers where a load segment maps them (dl_iterate_phdr hands them to its callers). */
static void rt_dyn_tables(const rt_elf_img *img, rt_dyn *y) {
  rt_dyn_table(y, y->v[DT_STRTAB], y->v[DT_STRSZ], "the dynamic string table");
  rt_dyn_table(y, y->v[DT_SYMTAB], y->nsyms * sizeof(Elf64_Sym), "the dynamic symbol table");
  if (y->has[DT_RELA]) rt_dyn_table(y, y->v[DT_RELA], y->v[DT_RELASZ], "the relocation table");
  if (y->has[DT_JMPREL]) rt_dyn_table(y, y->v[DT_JMPREL], y->v[DT_PLTRELSZ], "the PLT relocation table");
  uint64_t hdr[2][2] = {{0, sizeof(Elf64_Ehdr)}, {img->eh.e_phoff, (uint64_t)img->nph * sizeof(Elf64_Phdr)}};
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < img->nph; i++) {
      const Elf64_Phdr *p = &img->ph[i];
      if (p->p_type == PT_LOAD && hdr[h][0] >= p->p_offset && hdr[h][0] - p->p_offset < p->p_filesz)
        rt_dyn_table(y, p->p_vaddr + (hdr[h][0] - p->p_offset), hdr[h][1], h ? "the program headers" : "the ELF header");
    }
}

/* The code an initialiser slot calls: the addend of the RELATIVE relocation that fills it. */
static int rt_slot_code(const rt_elf_img *img, const rt_dyn *y, uint64_t slot) {
  int64_t t = rt_elf_file_off(img, y->v[DT_RELA], y->v[DT_RELASZ]);
  for (uint64_t i = 0; t >= 0 && i < y->v[DT_RELASZ] / sizeof(Elf64_Rela); i++) {
    Elf64_Rela r;
    memcpy(&r, img->p + t + (int64_t)(i * sizeof r), sizeof r);
    if (r.r_offset != slot) continue;
    const Elf64_Phdr *ph = ELF64_R_TYPE(r.r_info) == RT_R_RELATIVE ? rt_elf_load_of(img, (uint64_t)r.r_addend, 1) : NULL;
    return ph && (ph->p_flags & PF_X);
  }
  return 0;
}

static cnnrt_status rt_dyn_init(rt_elf_img *img, const rt_dyn *y) {
  static const int fn[] = {DT_INIT, DT_FINI}, arr[][2] = {{DT_INIT_ARRAY, DT_INIT_ARRAYSZ},
                                                          {DT_FINI_ARRAY, DT_FINI_ARRAYSZ},
                                                          {DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ}};
  if (img->sealed && (y->has[DT_INIT] || y->has[DT_FINI] || y->has[DT_INIT_ARRAY] || y->has[DT_FINI_ARRAY] ||
                      y->has[DT_PREINIT_ARRAY]))
    return rt_elf_bad(img, "initialisers, which cnnc models do not have");
  for (int k = 0; k < 2; k++) {
    if (!y->has[fn[k]]) continue;
    img->has_init = 1;
    const Elf64_Phdr *ph = rt_elf_load_of(img, y->v[fn[k]], 1);
    if (!ph || !(ph->p_flags & PF_X)) return rt_elf_bad(img, "the %s function is outside the code", k ? "fini" : "init");
  }
  for (int k = 0; k < 3; k++) {
    if (!y->has[arr[k][0]]) continue;
    img->has_init = 1;
    uint64_t va = y->v[arr[k][0]], bytes = y->v[arr[k][1]];
    if (bytes % 8 || bytes > 8 * 4096 || !rt_elf_load_of(img, va, bytes))
      return rt_elf_bad(img, "initialiser array at 0x%llx (%llu bytes)", (unsigned long long)va, (unsigned long long)bytes);
    for (uint64_t j = 0; j < bytes / 8; j++)
      if (!rt_slot_code(img, y, va + 8 * j)) return rt_elf_bad(img, "initialiser %llu at 0x%llx does not point into the code", (unsigned long long)j, (unsigned long long)(va + 8 * j));
  }
  return CNNRT_OK;
}

cnnrt_status rt_elf_dynamic(rt_elf_img *img) {
  rt_dyn y;
  memset(&y, 0, sizeof y);
  cnnrt_status s = rt_dyn_read(img, &y);
  if (s == CNNRT_OK) s = rt_dyn_strings(img, &y);
  if (s == CNNRT_OK && img->sealed && img->has_needed) s = rt_elf_bad(img, "it needs another library (DT_NEEDED)");
  if (s == CNNRT_OK && !y.has_gnu_hash && !y.has[DT_HASH]) s = rt_elf_bad(img, "no symbol hash table");
  if (s == CNNRT_OK && y.has_gnu_hash) s = rt_dyn_gnu_hash(img, &y);
  if (s == CNNRT_OK && y.has[DT_HASH]) s = rt_dyn_sysv_hash(img, &y);
  if (s == CNNRT_OK) s = rt_dyn_symbols(img, &y);
  if (s == CNNRT_OK) s = rt_dyn_versions(img, &y);
  if (s == CNNRT_OK) rt_dyn_tables(img, &y);
  if (s == CNNRT_OK && (y.has[DT_RELA] || y.v[DT_RELASZ]))
    s = !y.has[DT_RELA] || !y.has[DT_RELASZ] /* glibc reads DT_RELASZ through a pointer it does not check */
            ? rt_elf_bad(img, "relocations without DT_RELA or DT_RELASZ")
        : !y.has[DT_RELAENT] || y.v[DT_RELAENT] != sizeof(Elf64_Rela) /* glibc asserts through DT_RELAENT */
            ? rt_elf_bad(img, "relocation entries of %llu bytes", (unsigned long long)y.v[DT_RELAENT])
            : rt_dyn_relocs(img, &y, y.v[DT_RELA], y.v[DT_RELASZ], "relocation", y.relacount);
  else if (s == CNNRT_OK && y.relacount) s = rt_elf_bad(img, "relative relocations announced without a table");
  if (s == CNNRT_OK && (y.has[DT_JMPREL] || y.v[DT_PLTRELSZ]))
    s = img->sealed ? rt_elf_bad(img, "PLT relocations, which cnnc models do not have")
        : !y.has[DT_JMPREL] || !y.has[DT_PLTRELSZ] || !y.has[DT_PLTREL] ? rt_elf_bad(img, "PLT relocations without their size or kind")
                    : rt_dyn_relocs(img, &y, y.v[DT_JMPREL], y.v[DT_PLTRELSZ], "PLT relocation", 0);
  if (s == CNNRT_OK && y.has[DT_PLTGOT]) {
    const Elf64_Phdr *ph = rt_elf_load_of(img, y.v[DT_PLTGOT], 24);
    if (!ph || !(ph->p_flags & PF_W)) s = rt_elf_bad(img, "the global offset table is outside the writable segments");
  }
  if (s == CNNRT_OK) s = rt_dyn_init(img, &y);
  if (s == CNNRT_OK && img->exports_seal && !img->sealed)
    s = rt_elf_bad(img, "it exports %s but its checksum note is missing (damaged note header?)", CNNC_SEAL_SYMBOL);
  return s;
}
