/* output_copy.h — a deep copy of one tram_output into a caller's buffer, so
 * it outlives the engine step that made it: the worker's events and the
 * response cache's records both hold outputs this way. */
#ifndef TRAM_OUTPUT_COPY_H
#define TRAM_OUTPUT_COPY_H

#include <stddef.h>

#include "engine/tram.h"

/* Bytes tram_output_copy needs after the struct for o's arrays and text. */
size_t tram_output_copy_size(const tram_output *o);
/* Copies o into *dst, its arrays and text into buf (tram_output_copy_size(o)
 * bytes, 8-byte aligned); the copy's pointers point into buf, the
 * stop string's too (Anthropic's stop_sequence names it). */
void tram_output_copy(tram_output *dst, const tram_output *o, void *buf);

#endif
