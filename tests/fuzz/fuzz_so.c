/* fuzz_so.c — the model .so pre-check (runtime/rt_elf.c, rt_elf_dyn.c) on one image, and then
 * the whole cnnrt_open when the pre-check accepts it.  An input that carries cnnc's checksum
 * note is resealed first (runtime/cnnc_seal.h), as if cnnc had written it so: otherwise every
 * mutation would stop at the checksum and the structural checks behind it would go untested.
 * An accepted image shaped as cnnc makes them (sealed: no initialiser, no other library, so
 * dlopen runs none of its code) is written to a file and opened: the dynamic loader and the
 * descriptor checks must then not fault either.  Seeds: tiny models compiled by cnnc and the
 * hand-made tests/libfake_*.so (tests/fuzz/make_seeds.py). */
#include "fuzz_common.h"
#include "cnnc_seal.h"
#include "cnnrt.h"
#include "rt_elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *b = malloc(size ? size : 1);
  if (!b) return 0;
  if (size) memcpy(b, data, size);
  size_t desc = cnnc_seal_find(b, size);
  if (desc && desc + CNNC_SEAL_DESC_BYTES <= size) cnnc_seal_write(b, size, desc);
  rt_elf_img img;
  cnnrt_status s = rt_elf_check_image("m.so", b, size, &img);
  if (s != CNNRT_OK && s != CNNRT_BAD_MODEL && s != CNNRT_IO) abort();
  if (s == CNNRT_OK && img.sealed && !img.has_init && !img.has_needed) {
    char path[512];
    static unsigned k;
    char name[32];
    snprintf(name, sizeof name, "m%u.so", k++ % 4); /* a new name: dlopen keys on the file, not only the path */
    fz_write(name, b, size, path, sizeof path);
    cnnrt_model *m = NULL;
    if (cnnrt_open(path, NULL, &m) == CNNRT_OK) {
      cnnrt_describe_json(m);
      cnnrt_close(m);
    } else if (!strstr(cnnrt_last_error(), name)) {
      fprintf(stderr, "fuzz_so: refusal without the file name: %s\n", cnnrt_last_error());
      abort();
    }
    fz_remove(path);
  }
  free(b);
  return 0;
}
