/* flags.h — the one flag parser of every subcommand.
 *
 * A command describes its flags in a table: each flag names the field of the
 * command's options struct (by offsetof) its value goes to, and how the value
 * is read and checked.  tram_flags_parse walks argv once against one or more
 * tables (a command's own, then the engine's: cli/engine_flags.h), so
 * every command reads `-m MODEL`, `--seed 3` or a bad value the same way and
 * says the same thing about it. */
#ifndef TRAM_CLI_FLAGS_H
#define TRAM_CLI_FLAGS_H

#include <stddef.h>

#include "kernels/base.h"

typedef enum {
    TRAM_FLAG_SET,      /* no value: the int becomes 1 */
    TRAM_FLAG_CLEAR,    /* no value: the int becomes 0 */
    TRAM_FLAG_STRING,   /* const char *: the argument itself (one of .choices when given) */
    TRAM_FLAG_BUFFER,   /* char[.cap]: a copy of the argument (one of .choices when given, else non-empty) */
    TRAM_FLAG_CHOICE,   /* int: the argument's index in .choices */
    TRAM_FLAG_INT,      /* int in [lo, hi] */
    TRAM_FLAG_SEED,     /* uint64_t in [0, 2^63 - 1] */
    TRAM_FLAG_FLOAT,    /* float in [lo, hi] */
    TRAM_FLAG_DOUBLE,   /* double in [lo, hi] */
    TRAM_FLAG_SIZE,     /* size_t: a size like 2GiB, > 0, and at most hi when hi > 0 */
    TRAM_FLAG_CUSTOM,   /* .parse reads it */
} tram_flag_kind;

typedef struct {
    const char *name, *alias;       /* "--model", "-m" (alias may be NULL) */
    tram_flag_kind kind;
    size_t field;                   /* offsetof(the options struct, the field) */
    double lo, hi;                  /* INT, FLOAT, DOUBLE: the range; SIZE: hi */
    const char *const *choices;     /* NULL-terminated */
    size_t cap;                     /* BUFFER: sizeof the field */
    const char *expected;           /* SIZE: what a bad value's message says is expected */
    int required;                   /* STRING: must be given (the field starts NULL) */
    /* CUSTOM: reads value into field; -1 after printing why it is wrong */
    int (*parse)(const char *flag, const char *value, void *field);
} tram_flag;

/* Flags and the options struct their fields are in. */
typedef struct {
    const tram_flag *flags;
    size_t n_flags;
    void *opts;
} tram_flag_table;

#define TRAM_FLAG_TABLE(array, target) \
    ((tram_flag_table){.flags = (array), .n_flags = TRAM_ARRAY_LEN(array), .opts = (target)})

/* Reads argv[1..argc-1]: each flag (with its value) into its field, the first
 * table that knows it winning; every other argument ("-" included) into
 * args[max_args], in order.  Returns how many arguments it kept, or -1 after
 * printing what is wrong: an unknown flag, a missing or bad value, a required
 * flag not given, or one argument too many. */
int tram_flags_parse(const tram_flag_table *tables, int n_tables, int argc, char **argv, const char **args,
                     int max_args);

/* For CUSTOM flags.  Each prints "tram: invalid value for FLAG: 'VALUE'
 * (expected ...)" and returns -1 when the value is bad. */
int tram_flag_invalid(const char *flag, const char *value, const char *expected);
/* Appends value's comma-separated items to the NULL-terminated list (at most
 * cap in all, each one passing valid, NULL: any); `what` says what value
 * must hold.  The items live as long as the process. */
int tram_flag_append_list(const char *flag, const char *value, const char **list, int cap, const char *what,
                          int (*valid)(const char *));
/* The index of value in choices (NULL-terminated). */
int tram_flag_choice(const char *flag, const char *value, const char *const *choices);
/* A number in [lo, hi]. */
int tram_flag_number(const char *flag, const char *value, double lo, double hi, double *out);

#endif
