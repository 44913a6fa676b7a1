/* rt_image.h — one image file to one training or validation sample (rt_image.c): JPEG
 * (libjpeg-turbo, scaled DCT decoding where the crop allows) or PNG (libspng) by signature,
 * then the torchvision recipes' transforms, deterministic in a 64-bit seed.  Private to
 * libcnnrt (prefix rt_image_).  Every fault names `name`: CNNRT_BAD_MODEL (a corrupt or
 * unsupported image), CNNRT_OUT_OF_MEMORY, CNNRT_INVALID_ARGUMENT (a bad transform or a NULL
 * buffer) or CNNRT_UNSUPPORTED (a resampling with absurdly many filter taps); nothing is read
 * past n. */
#ifndef CNNC_RT_IMAGE_H
#define CNNC_RT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "cnnrt.h"

/* Images larger than this (either side) or with more pixels than RT_IMAGE_MAX_PIXELS are
 * refused before anything is allocated. */
#define RT_IMAGE_MAX_SIDE 32768
#define RT_IMAGE_MAX_PIXELS ((int64_t)1 << 28)

typedef enum rt_xform_kind {
  RT_XFORM_RESIZE = 0,   /* the whole image resized to out_h x out_w (no aspect kept) */
  RT_XFORM_TRAIN = 1,    /* RandomResizedCrop(scale, ratio) + RandomHorizontalFlip(0.5) */
  RT_XFORM_CENTER = 2,   /* Resize(shorter side -> resize_short) + CenterCrop(out_h, out_w) */
} rt_xform_kind;

typedef struct rt_xform {
  rt_xform_kind kind;
  int out_c, out_h, out_w;      /* out_c 1 (grey: ITU-R 601 luma) or 3 (RGB) */
  double scale_lo, scale_hi;    /* TRAIN: crop area as a fraction of the image (0.08, 1) */
  double ratio_lo, ratio_hi;    /* TRAIN: crop aspect w/h, drawn log-uniform (3/4, 4/3) */
  int flip;                     /* TRAIN: nonzero = mirror with probability 1/2 */
  int resize_short;             /* CENTER: the shorter side's length before the crop */
} rt_xform;

/* Fills x with the recipe defaults for kind and an out_c x out_h x out_w sample (TRAIN:
 * scale 0.08-1, ratio 3/4-4/3, flip; CENTER: resize_short = round(out * 256/224)). */
void rt_xform_default(rt_xform *x, rt_xform_kind kind, int out_c, int out_h, int out_w);

/* Decodes the image file held in data[0..n) and writes the transformed sample into out
 * (u8, planar CHW: out_c * out_h * out_w bytes; the caller's).  The random choices (crop
 * rectangle, flip) come from seed alone, so a sample is the same on every run, thread and
 * rank.  Resampling is separable with a triangle filter widened when shrinking (as PIL's
 * bilinear resize, which torchvision uses), rounded to nearest. */
cnnrt_status rt_image_load(const uint8_t *data, size_t n, const char *name, const rt_xform *x, uint64_t seed,
                           uint8_t *out);

/* The crop rectangle (x0, y0, cw x ch in the stored w x h image) and the flip that
 * rt_image_load draws for a TRAIN transform with this seed: torchvision 0.14's
 * RandomResizedCrop.get_params (10 tries, then the centre crop clamped to the ratio range)
 * on splitmix64 draws (draw 0: the flip; try t: draws 4t+1..4t+4 for area, log-ratio, top,
 * left).  For tests and statistics. */
void rt_xform_train_crop(const rt_xform *x, int w, int h, uint64_t seed, int *x0, int *y0, int *cw, int *ch, int *flip);

/* The stored size of the image without decoding it (for listing a folder quickly):
 * width, height and channels (1 grey, 3 colour, 4 with alpha). */
cnnrt_status rt_image_probe(const uint8_t *data, size_t n, const char *name, int *w, int *h, int *c);

#endif
