#include "cli/flags.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tram_flag_invalid(const char *flag, const char *value, const char *expected)
{
    fprintf(stderr, "tram: invalid value for %s: '%s' (expected %s)\n", flag, value, expected);
    return -1;
}

/* Appends value's comma-separated items to the NULL-terminated list, at most
 * cap in all, each one valid (NULL: any); `what` says what value must hold. */
int tram_flag_append_list(const char *flag, const char *value, const char **list, int cap, const char *what,
                        int (*valid)(const char *))
{
    char *copy = strdup(value), *save = NULL, limit[64];
    int n = 0;
    while (n < cap && list[n])
        n++;
    snprintf(limit, sizeof(limit), "at most %d in all", cap);
    for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item; item = strtok_r(NULL, ",", &save)) {
        if (n == cap)
            return tram_flag_invalid(flag, value, limit);
        if (valid && !valid(item))
            return tram_flag_invalid(flag, value, what);
        list[n++] = item;  /* lives as long as the process */
    }
    return n ? 0 : tram_flag_invalid(flag, value, what);
}

static int integer(const char *flag, const char *value, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (end == value || *end || errno || v < lo || v > hi) {
        char expected[80];
        snprintf(expected, sizeof(expected), "an integer in [%ld, %ld]", lo, hi);
        return tram_flag_invalid(flag, value, expected);
    }
    *out = v;
    return 0;
}

int tram_flag_number(const char *flag, const char *value, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || *end || errno || !isfinite(v) || v < lo || v > hi) {
        char expected[80];
        snprintf(expected, sizeof(expected), "a number in [%g, %g]", lo, hi);
        return tram_flag_invalid(flag, value, expected);
    }
    *out = v;
    return 0;
}

int tram_flag_choice(const char *flag, const char *value, const char *const *choices)
{
    char expected[160] = "";
    for (int i = 0; choices[i]; i++)
        if (!strcmp(value, choices[i]))
            return i;
    for (int i = 0; choices[i]; i++)  /* "a, b or c" */
        snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), "%s%s",
                 i == 0 ? "" : choices[i + 1] ? ", " : " or ", choices[i]);
    return tram_flag_invalid(flag, value, expected);
}

/* One of the flag's choices, when it has them. */
static int allowed(const tram_flag *f, const char *flag, const char *value)
{
    return !f->choices || tram_flag_choice(flag, value, f->choices) >= 0;
}

static int size_value(const tram_flag *f, const char *flag, const char *value, size_t *out)
{
    if (tram_parse_size(value, out) || *out == 0 || (f->hi > 0 && *out > (size_t)f->hi))
        return tram_flag_invalid(flag, value, f->expected);
    return 0;
}

static int buffer_value(const tram_flag *f, const char *flag, const char *value, char *out)
{
    if (!allowed(f, flag, value))
        return -1;
    if (!*value || strlen(value) >= f->cap) {
        fprintf(stderr, "tram: invalid value for %s: '%s' (empty, or longer than %zu)\n", flag, value, f->cap - 1);
        return -1;
    }
    memcpy(out, value, strlen(value) + 1);
    return 0;
}

/* INT into an int, SEED into a uint64_t. */
static int integer_value(const tram_flag *f, const char *flag, const char *value, void *field)
{
    int seed = f->kind == TRAM_FLAG_SEED;
    long v;
    if (integer(flag, value, seed ? 0 : (long)f->lo, seed ? LONG_MAX : (long)f->hi, &v))
        return -1;
    if (seed)
        *(uint64_t *)field = (uint64_t)v;
    else
        *(int *)field = (int)v;
    return 0;
}

/* FLOAT into a float, DOUBLE into a double. */
static int real_value(const tram_flag *f, const char *flag, const char *value, void *field)
{
    double v;
    if (tram_flag_number(flag, value, f->lo, f->hi, &v))
        return -1;
    if (f->kind == TRAM_FLAG_FLOAT)
        *(float *)field = (float)v;
    else
        *(double *)field = v;
    return 0;
}

/* The value (NULL for SET and CLEAR) into the flag's field. */
static int set_field(const tram_flag *f, const char *flag, const char *value, void *field)
{
    int i;
    switch (f->kind) {
    case TRAM_FLAG_SET: case TRAM_FLAG_CLEAR:
        *(int *)field = f->kind == TRAM_FLAG_SET;
        return 0;
    case TRAM_FLAG_STRING:
        if (!allowed(f, flag, value))
            return -1;
        *(const char **)field = value;
        return 0;
    case TRAM_FLAG_CHOICE:
        if ((i = tram_flag_choice(flag, value, f->choices)) < 0)
            return -1;
        *(int *)field = i;
        return 0;
    case TRAM_FLAG_BUFFER: return buffer_value(f, flag, value, field);
    case TRAM_FLAG_INT: case TRAM_FLAG_SEED: return integer_value(f, flag, value, field);
    case TRAM_FLAG_FLOAT: case TRAM_FLAG_DOUBLE: return real_value(f, flag, value, field);
    case TRAM_FLAG_SIZE: return size_value(f, flag, value, field);
    case TRAM_FLAG_CUSTOM: return f->parse(flag, value, field);
    }
    return -1;
}

/* The flag named arg in the first table that has it, and that table. */
static const tram_flag *find(const tram_flag_table *tables, int n_tables, const char *arg,
                             const tram_flag_table **table)
{
    for (int t = 0; t < n_tables; t++)
        for (size_t k = 0; k < tables[t].n_flags; k++) {
            const tram_flag *f = &tables[t].flags[k];
            if (!strcmp(arg, f->name) || (f->alias && !strcmp(arg, f->alias))) {
                *table = &tables[t];
                return f;
            }
        }
    return NULL;
}

static int check_required(const tram_flag_table *tables, int n_tables)
{
    for (int t = 0; t < n_tables; t++)
        for (size_t k = 0; k < tables[t].n_flags; k++) {
            const tram_flag *f = &tables[t].flags[k];
            if (f->required && !*(const char **)((char *)tables[t].opts + f->field)) {
                fprintf(stderr, "tram: %s is required\n", f->alias ? f->alias : f->name);
                return -1;
            }
        }
    return 0;
}

int tram_flags_parse(const tram_flag_table *tables, int n_tables, int argc, char **argv, const char **args,
                     int max_args)
{
    int n_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || !arg[1]) {  /* not a flag */
            if (n_args == max_args) {
                fprintf(stderr, "tram: unexpected argument '%s'\n", arg);
                return -1;
            }
            args[n_args++] = arg;
            continue;
        }
        const tram_flag_table *table;
        const tram_flag *f = find(tables, n_tables, arg, &table);
        if (!f) {
            fprintf(stderr, "tram: unknown option '%s'\n", arg);
            return -1;
        }
        int has_value = f->kind != TRAM_FLAG_SET && f->kind != TRAM_FLAG_CLEAR;
        if (has_value && i + 1 >= argc) {
            fprintf(stderr, "tram: %s needs a value\n", arg);
            return -1;
        }
        if (set_field(f, arg, has_value ? argv[++i] : NULL, (char *)table->opts + f->field))
            return -1;
    }
    return check_required(tables, n_tables) ? -1 : n_args;
}
