/* presets.h — hyper-parameters of well-known models, kept in
 * models/presets/NAME.json, for `--load-format dummy --preset NAME`: a real
 * architecture filled with random weights, so that any model size can be
 * benchmarked without its files.  Field names follow tram_model_config. */
#ifndef TRAM_PRESETS_H
#define TRAM_PRESETS_H

#include "kernels/base.h"
#include "models/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Directory searched for NAME.json unless TRAM_PRESET_DIR is set. */
#define TRAM_PRESET_DIR "models/presets"

/* name: a preset name (llama-3.1-8b, ...) or a path to a .json file. */
int tram_preset_load(const char *name, tram_model_config *out, tram_error *err);

#ifdef __cplusplus
}
#endif

#endif
