/* json_util.h — reading JSON model files with jansson, with errors that name
 * the file and the field.
 *
 * The typed getters share one rule: a key that is missing or null leaves *out
 * untouched (the caller sets the default first) unless it is required; a key
 * of the wrong type or outside [lo, hi] is an error. */
#ifndef TRAM_JSON_UTIL_H
#define TRAM_JSON_UTIL_H

#include <jansson.h>

#include "kernels/base.h"
#include "models/model.h"

/* Parses path, which must hold a JSON object; *out is a new reference. */
int tram_json_load_object(json_t **out, const char *path, tram_error *err);

int tram_json_get_int(const json_t *obj, const char *key, int required, long long lo, long long hi,
                      long long *out, const char *file, tram_error *err);
int tram_json_get_number(const json_t *obj, const char *key, int required, double *out,
                         const char *file, tram_error *err);
int tram_json_get_bool(const json_t *obj, const char *key, int required, int *out, const char *file,
                       tram_error *err);
/* *out points into obj and lives as long as it. */
int tram_json_get_string(const json_t *obj, const char *key, int required, const char **out,
                         const char *file, tram_error *err);

/* The rope_scaling object `rope`, whose type (or rope_type) is `type`, into c:
 * llama3's piecewise frequency scaling is the only one tram computes, and any
 * other would silently change the model, so it is an error. */
int tram_json_get_rope_scaling(const json_t *rope, const char *type, tram_model_config *c, const char *file,
                               tram_error *err);

#endif
