/* cg_isa.c — ISA-specific code that kernels emit (cg_isa.h; with cg_target.c the only codegen
 * files that name ISAs): the bf16 dot-product step, vdpbf16ps or its exact emulation. */
#include "codegen/cg_internal.h"
#include "codegen/cg_isa.h"

static LLVMValueRef splat_i32v(cg_ctx *c, uint32_t v, int w) {
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = LLVMConstInt(c->t_i32, v, 0);
  return LLVMConstVector(e, (unsigned)w);
}

/* Integer lanes u (<V x i32> f32 bit patterns) with denormals replaced by a signed zero. */
static LLVMValueRef flush_denormal_bits(cg_ctx *c, LLVMValueRef u, int V) {
  LLVMValueRef e = LLVMBuildAnd(c->b, u, splat_i32v(c, 0x7f800000u, V), "");
  LLVMValueRef den = LLVMBuildICmp(c->b, LLVMIntEQ, e, LLVMConstNull(LLVMTypeOf(u)), "den");
  return LLVMBuildSelect(c->b, den, LLVMBuildAnd(c->b, u, splat_i32v(c, 0x80000000u, V), ""), u, "");
}

LLVMValueRef cg_bf16_dp(cg_ctx *c, int mode, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b, int V) {
  LLVMTypeRef vf = cg_vtype(c, V);
  if (mode == 2) {
    LLVMTypeRef bt = LLVMVectorType(LLVMBFloatTypeInContext(c->llc), (unsigned)(2 * V));
    LLVMValueRef args[3] = {acc, LLVMBuildBitCast(c->b, a, bt, ""), LLVMBuildBitCast(c->b, b, bt, "")};
    const char *name = V == 16 ? "llvm.x86.avx512bf16.dpbf16ps.512"
                       : V == 8 ? "llvm.x86.avx512bf16.dpbf16ps.256"
                                : "llvm.x86.avx512bf16.dpbf16ps.128";
    return cg_intrinsic(c, name, NULL, 0, args, 3);
  }
  /* exact emulation: make_fp32 of each half (the high half masked, the low half shifted up),
   * input denormals as zero (DAZ), two FMAs rounded to nearest even (llvm.fma: one rounding;
   * the bf16 x bf16 product is exact in f32 anyway), odd element first, each result with
   * denormals flushed (FTZ).  acc is zero or an FTZ result, so it needs no DAZ. */
  LLVMValueRef hi = splat_i32v(c, 0xffff0000u, V), sh = splat_i32v(c, 16, V);
  LLVMValueRef ao = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildAnd(c->b, a, hi, ""), V), vf, "a_odd");
  LLVMValueRef ae = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildShl(c->b, a, sh, ""), V), vf, "a_even");
  LLVMValueRef bo = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildAnd(c->b, b, hi, ""), V), vf, "b_odd");
  LLVMValueRef be = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildShl(c->b, b, sh, ""), V), vf, "b_even");
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V);
  LLVMValueRef args[3] = {ao, bo, acc};
  LLVMValueRef t = cg_intrinsic(c, "llvm.fma", &vf, 1, args, 3);
  t = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildBitCast(c->b, t, vi, ""), V), vf, "");
  LLVMValueRef args2[3] = {ae, be, t};
  t = cg_intrinsic(c, "llvm.fma", &vf, 1, args2, 3);
  return LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildBitCast(c->b, t, vi, ""), V), vf, "dp");
}

/* ---- AMX tiles (cg_isa.h) -------------------------------------------------------------- */
#define AMX_TILES 8
#define AMX_ROWS 16

/* The one tile configuration every AMX kernel of the module loads: palette 1, tiles 0-7 of
 * 16 rows x 64 bytes (byte 0 palette, 16 + 2t colsb of tile t, 48 + t its rows). */
static LLVMValueRef amx_config(cg_ctx *c) {
  LLVMValueRef g = LLVMGetNamedGlobal(c->mod, "cnnc_amx_tilecfg");
  if (g) return g;
  unsigned char cfg[64] = {1};
  for (int t = 0; t < AMX_TILES; t++) cfg[16 + 2 * t] = 64, cfg[48 + t] = AMX_ROWS;
  LLVMValueRef init = LLVMConstStringInContext2(c->llc, (const char *)cfg, sizeof cfg, 1);
  g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), "cnnc_amx_tilecfg");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetAlignment(g, 64);
  return g;
}

static LLVMValueRef imm8(cg_ctx *c, int v) { return LLVMConstInt(c->t_i8, (unsigned long long)v, 0); }

/* Row i of emulated tile t: <16 x i32>* into the tile file. */
static LLVMValueRef emu_row(cg_ctx *c, const cg_amx *a, int t, LLVMValueRef i) {
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, 16);
  LLVMValueRef idx = LLVMBuildAdd(c->b, cg_i64(c, (int64_t)t * AMX_ROWS), i, "");
  return LLVMBuildGEP2(c->b, vi, a->file, &idx, 1, "trow");
}

void cg_amx_begin(cg_ctx *c, cg_amx *a, int mode, int dp, int int8) {
  a->mode = mode, a->dp = dp, a->int8 = int8, a->file = NULL;
  if (mode == 1) {
    LLVMValueRef args[1] = {amx_config(c)};
    cg_intrinsic(c, "llvm.x86.ldtilecfg", NULL, 0, args, 1);
    return;
  }
  a->file = cg_entry_alloca(c, LLVMArrayType2(LLVMVectorType(c->t_i32, 16), AMX_TILES * AMX_ROWS), "amx_tiles");
  LLVMSetAlignment(a->file, 64);
}

void cg_amx_zero(cg_ctx *c, const cg_amx *a, int tile) {
  if (a->mode == 1) {
    LLVMValueRef args[1] = {imm8(c, tile)};
    cg_intrinsic(c, "llvm.x86.tilezero", NULL, 0, args, 1);
    return;
  }
  for (int i = 0; i < AMX_ROWS; i++) LLVMBuildStore(c->b, LLVMConstNull(LLVMVectorType(c->t_i32, 16)), emu_row(c, a, tile, cg_i64(c, i)));
}

/* Emulated row copies between memory (row i at ptr + i stride bytes) and tile t. */
static void emu_copy(cg_ctx *c, const cg_amx *a, int t, LLVMValueRef ptr, int64_t stride, int store) {
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, 16);
  for (int i = 0; i < AMX_ROWS; i++) {
    LLVMValueRef off = cg_i64(c, i * stride);
    LLVMValueRef p = LLVMBuildGEP2(c->b, c->t_i8, ptr, &off, 1, ""), r = emu_row(c, a, t, cg_i64(c, i));
    LLVMValueRef v = LLVMBuildLoad2(c->b, vi, store ? r : p, "");
    LLVMSetAlignment(v, store ? 64 : 4);
    LLVMSetAlignment(LLVMBuildStore(c->b, v, store ? p : r), store ? 4 : 64);
  }
}

/* tileloadd64 (store 0) / tilestored64 (store 1), or their emulation. */
static void amx_move(cg_ctx *c, const cg_amx *a, int tile, LLVMValueRef ptr, int64_t stride, int store) {
  if (a->mode == 1) {
    LLVMValueRef args[3] = {imm8(c, tile), ptr, cg_i64(c, stride)};
    cg_intrinsic(c, store ? "llvm.x86.tilestored64" : "llvm.x86.tileloadd64", NULL, 0, args, 3);
    return;
  }
  emu_copy(c, a, tile, ptr, stride, store);
}

void cg_amx_load(cg_ctx *c, const cg_amx *a, int tile, LLVMValueRef ptr, int64_t stride) { amx_move(c, a, tile, ptr, stride, 0); }
void cg_amx_store(cg_ctx *c, const cg_amx *a, int tile, LLVMValueRef ptr, int64_t stride) { amx_move(c, a, tile, ptr, stride, 1); }

void cg_amx_dot(cg_ctx *c, const cg_amx *a, int tc, int ta, int tb) {
  if (a->mode == 1) {
    LLVMValueRef args[3] = {imm8(c, tc), imm8(c, ta), imm8(c, tb)};
    cg_intrinsic(c, a->int8 ? "llvm.x86.tdpbsud" : "llvm.x86.tdpbf16ps", NULL, 0, args, 3);
    return;
  }
  /* per row m of C (a run-time loop): the 16 pairs of A's row m in order */
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, 16), vf = cg_vtype(c, 16);
  cg_loop M;
  LLVMValueRef m = cg_loop_begin(c, &M, cg_i64(c, 0), cg_i64(c, AMX_ROWS), cg_i64(c, 1), "amx_m");
  LLVMValueRef crow = emu_row(c, a, tc, m);
  LLVMValueRef acc = LLVMBuildBitCast(c->b, LLVMBuildLoad2(c->b, vi, crow, ""), vf, "");
  LLVMValueRef arow = LLVMBuildLoad2(c->b, vi, emu_row(c, a, ta, m), "arow");
  for (int k = 0; k < AMX_ROWS; k++) {
    LLVMValueRef b = LLVMBuildLoad2(c->b, vi, emu_row(c, a, tb, cg_i64(c, k)), "brow");
    LLVMValueRef w = LLVMBuildShuffleVector(c->b, arow, LLVMGetUndef(vi), splat_i32v(c, (uint32_t)k, 16), "abc");
    if (a->int8) /* i32 sums in the f32-typed rows' bits */
      acc = LLVMBuildBitCast(c->b, cg_int8_dp(c, a->dp, LLVMBuildBitCast(c->b, acc, vi, ""), b, w, 16), vf, "");
    else acc = cg_bf16_dp(c, a->dp, acc, b, w, 16);
  }
  LLVMBuildStore(c->b, LLVMBuildBitCast(c->b, acc, vi, ""), crow);
  cg_loop_end(c, &M);
}

void cg_amx_end(cg_ctx *c, const cg_amx *a) {
  if (a->mode == 1) cg_intrinsic(c, "llvm.x86.tilerelease", NULL, 0, NULL, 0);
}

/* ---- int8 dot products (cg_isa.h) ---------------------------------------------------------- */
LLVMValueRef cg_int8_dp(cg_ctx *c, int mode, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b, int V) {
  if (mode == 2) {
    LLVMValueRef args[3] = {acc, a, b};
    return cg_intrinsic(c, "llvm.x86.avx512.vpdpbusd.512", NULL, 0, args, 3);
  }
  if (mode == 3) {
    LLVMTypeRef vh = LLVMVectorType(LLVMInt16TypeInContext(c->llc), (unsigned)(2 * V));
    LLVMValueRef args[2] = {LLVMBuildBitCast(c->b, a, vh, ""), LLVMBuildBitCast(c->b, b, vh, "")};
    const char *name = V == 16 ? "llvm.x86.avx512.pmaddw.d.512" : V == 8 ? "llvm.x86.avx2.pmadd.wd" : "llvm.x86.sse2.pmadd.wd";
    return LLVMBuildAdd(c->b, acc, cg_intrinsic(c, name, NULL, 0, args, 2), "");
  }
  /* byte i: (a >> 8i) & 0xff times (b << (24 - 8i)) >> 24 (arithmetic), i = 3 .. 0 */
  LLVMValueRef s = acc;
  for (int i = 3; i >= 0; i--) {
    LLVMValueRef ua = LLVMBuildAnd(c->b, i ? LLVMBuildLShr(c->b, a, splat_i32v(c, (uint32_t)(8 * i), V), "") : a,
                                   splat_i32v(c, 0xffu, V), "");
    LLVMValueRef sb = LLVMBuildAShr(c->b, i < 3 ? LLVMBuildShl(c->b, b, splat_i32v(c, (uint32_t)(24 - 8 * i), V), "") : b,
                                    splat_i32v(c, 24, V), "");
    s = LLVMBuildAdd(c->b, s, LLVMBuildMul(c->b, ua, sb, ""), "");
  }
  return s;
}
