/* tuning.h — the tuning table (ir/tuning.def): the code-generation knobs as one typed record,
 * parsed from "name=value" items, printed for --help-tune and as JSON for the .so.  Passes
 * and generators read it from the graph with ir_tune(g); nothing reads the environment. */
#ifndef CNNC_IR_TUNING_H
#define CNNC_IR_TUNING_H

#include <stdio.h>

typedef struct ir_diag ir_diag;

typedef struct ir_tuning {
#define TUNE(field, type, def, lo, hi, help) int field;
#include "ir/tuning.def"
} ir_tuning;

enum {
#define TUNE(field, type, def, lo, hi, help) IR_TUNEK_##field,
#include "ir/tuning.def"
  IR_TUNE_COUNT
};

typedef struct ir_tune_info {
  const char *name, *type, *help;
  int def, lo, hi;
} ir_tune_info;
extern const ir_tune_info ir_tune_table[IR_TUNE_COUNT];

/* The defaults (a constant record). */
extern const ir_tuning ir_tune_defaults;
/* Sets t from one "name=value" item or a comma-separated list of them ("" does nothing);
 * later items win.  BOOL takes 0/1 (also true/false, on/off), INT a whole number in its
 * range.  Returns 0, or -1 with d filled naming the item (t may then be partly set). */
int ir_tune_set(ir_tuning *t, const char *items, ir_diag *d);
/* Index of the row called name, or -1. */
int ir_tune_find(const char *name);
/* Writes every row as a JSON object {"name": value, ...} (malloc'd, caller frees). */
char *ir_tune_json(const ir_tuning *t);
/* Prints the table (name, type, default, range, help) for `cnnc --help-tune`. */
void ir_tune_help(FILE *f);

#endif
