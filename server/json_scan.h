/* json_scan.h — one JSON object read a byte at a time, as a model writes
 * it, and written out as it is read in the form Python's json.dumps gives
 * the parsed value (chat/pyjson.h): ", " and ": " separators and no
 * other space, strings re-escaped, numbers as their value (1E2 -> 100.0,
 * -0 -> 0).  A byte written is never taken back, so the output so far can
 * be streamed: when the object is done, the output is
 * tram_pyjson_put(json_loads(input)) (a repeated key stays repeated, where
 * json_loads would keep its last value).
 *
 * The input is refused where jansson's parser refuses it: not JSON, a
 * control character or invalid UTF-8 in a string, \u0000 or a lone
 * surrogate, an integer out of range, more than 2048 levels.
 *
 * The outer object's members are marked (offsets into the output) as they
 * pass, which is what a tool-call reader needs: where a key ends, where its
 * value begins and ends. */
#ifndef TRAM_JSON_SCAN_H
#define TRAM_JSON_SCAN_H

#include <stddef.h>

#include "kernels/strbuf.h"

#define TRAM_JSCAN_MAX_DEPTH 2048

/* What one byte did, as bits (several at once: a number ends at the '}'
 * that closes the object). */
enum {
    TRAM_JSCAN_KEY = 1,    /* a key of the outer object ended: out[key_at..len) */
    TRAM_JSCAN_BEGIN = 2,  /* a value of the outer object began at out[value_at] */
    TRAM_JSCAN_END = 4,    /* that value ended: out[value_at..value_end) */
    TRAM_JSCAN_DONE = 8,   /* the object closed */
    TRAM_JSCAN_ERROR = 16, /* not JSON as jansson reads it; nothing more is read */
};

typedef struct {
    int state, depth;
    unsigned char objects[TRAM_JSCAN_MAX_DEPTH / 8];  /* per level: 1 object, 0 array */
    int in_key;                 /* the string being read is a key */
    unsigned code, high;        /* the \uXXXX being read; a high surrogate waiting for its low half */
    int hex_digits;
    unsigned char utf8[4];      /* a multi-byte character being read */
    int utf8_len, utf8_need;
    tram_strbuf num;            /* the number being read, as written */
    int num_state;
    const char *literal;        /* true, false or null being read */
    int literal_pos;
    size_t key_at, value_at, value_end;
} tram_json_scan;

/* A fresh scan: the next byte must be the object's '{'. */
void tram_json_scan_init(tram_json_scan *s);
void tram_json_scan_free(tram_json_scan *s);

/* Reads byte c, appending to out; returns the TRAM_JSCAN_ bits (0: more to
 * read).  Out of memory is out->oom. */
int tram_json_scan_byte(tram_json_scan *s, unsigned char c, tram_strbuf *out);

#endif
