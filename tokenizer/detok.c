/* detok.c — incremental detokenizer for streaming.
 *
 * Token bytes go through the same lossy UTF-8 step as tram_tokenizer_decode,
 * except that an incomplete sequence at the end waits for the next token, so
 * the pieces add up to decode(all ids).  Decoded text then waits in `hold`
 * while it could still be the beginning of a stop string. */
#include <stdlib.h>
#include <string.h>

#include "kernels/utf8.h"
#include "tokenizer/vocab.h"

struct tram_detok {
    const tram_tokenizer *t;
    int skip_special, first, stopped;
    int stops_paused;     /* tram_detok_check_stops(d, 0) */
    char **stops;
    size_t *stop_len;
    int n_stops;
    char pending[4];      /* an incomplete UTF-8 sequence (at most 3 bytes) */
    size_t n_pending;
    char *hold;           /* decoded text not yet returned */
    size_t n_hold, cap_hold;
    char *out;            /* what the last call returned */
    size_t cap_out;
};

void tram_detok_free(tram_detok *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->n_stops; i++)
        free(d->stops[i]);
    TRAM_FREE_ALL(d->stops, d->stop_len, d->hold, d->out, d);
}

int tram_detok_create(tram_detok **out, const tram_tokenizer *t, int skip_special, const char *const *stops,
                      int n_stops, tram_error *err)
{
    tram_detok *d = tram_calloc(1, sizeof(*d), err);
    *out = NULL;
    if (!d)
        return -1;
    *d = (tram_detok){
        .t = t,
        .skip_special = skip_special,
        .first = 1,
        .stops = tram_calloc((size_t)TRAM_MAX(n_stops, 1), sizeof(char *), err),
        .stop_len = tram_calloc((size_t)TRAM_MAX(n_stops, 1), sizeof(size_t), err),
    };
    if (!d->stops || !d->stop_len) {
        tram_detok_free(d);
        return -1;
    }
    for (int i = 0; i < n_stops; i++) {
        if (!stops[i] || !stops[i][0]) {
            tram_detok_free(d);
            return tram_fail(err, "detokenizer: stop string %d is empty", i);
        }
        if (!(d->stops[d->n_stops] = strdup(stops[i]))) {
            tram_detok_free(d);
            return tram_fail(err, "detokenizer: out of memory");
        }
        d->stop_len[d->n_stops++] = strlen(stops[i]);
    }
    *out = d;
    return 0;
}

static int reserve(char **buf, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    size_t c = TRAM_MAX(n, 2 * *cap);
    char *b = realloc(*buf, c);
    if (!b)
        return -1;
    *buf = b;
    *cap = c;
    return 0;
}

/* Earliest stop string in hold: its offset, or -1. */
static long find_stop(const tram_detok *d, int *which)
{
    long best = -1;
    for (int i = 0; i < d->n_stops; i++) {
        const char *p = memmem(d->hold, d->n_hold, d->stops[i], d->stop_len[i]);
        if (p && (best < 0 || p - d->hold < best)) {
            best = p - d->hold;
            *which = i;
        }
    }
    return best;
}

/* Length of the longest end of hold that is a proper start of a stop string. */
static size_t stop_prefix_len(const tram_detok *d)
{
    size_t best = 0;
    for (int i = 0; i < d->n_stops; i++)
        for (size_t k = TRAM_MIN(d->n_hold, d->stop_len[i] - 1); k > best; k--)
            if (!memcmp(d->hold + d->n_hold - k, d->stops[i], k)) {
                best = k;
                break;
            }
    return best;
}

/* Moves the first n bytes of hold to out. */
static void release(tram_detok *d, size_t n, const char **text, size_t *len)
{
    memcpy(d->out, d->hold, n);
    memmove(d->hold, d->hold + n, d->n_hold - n);
    d->n_hold -= n;
    *text = d->out;
    *len = n;
}

/* Decodes raw[0..n) into hold; keeps an incomplete tail unless final. */
static int take_bytes(tram_detok *d, const char *raw, size_t n, int final)
{
    if (reserve(&d->hold, &d->cap_hold, d->n_hold + 3 * n + 1) || reserve(&d->out, &d->cap_out, d->cap_hold))
        return -1;
    size_t used;
    d->n_hold += tram_utf8_lossy(raw, n, final, d->hold + d->n_hold, &used);
    d->n_pending = n - used;
    memmove(d->pending, raw + used, d->n_pending);
    return 0;
}

static int emit(tram_detok *d, int final, const char **text, size_t *len, int *stop_index)
{
    if (d->stops_paused) {
        release(d, d->n_hold, text, len);
        return 0;
    }
    int which = -1;
    long at = find_stop(d, &which);
    if (at >= 0) {
        release(d, (size_t)at, text, len);
        d->stopped = 1;
        d->n_hold = 0;
        if (stop_index)
            *stop_index = which;
        return 1;
    }
    release(d, d->n_hold - (final ? 0 : stop_prefix_len(d)), text, len);
    return 0;
}

void tram_detok_check_stops(tram_detok *d, int on) { d->stops_paused = !on; }

int tram_detok_push(tram_detok *d, int32_t id, const char **text, size_t *len, int *stop_index, tram_error *err)
{
    *text = "";
    *len = 0;
    if (d->stopped)
        return 1;
    if (id < 0 || id >= d->t->n_vocab)
        return tram_fail(err, "detokenizer: token id %d outside the vocabulary of %d", id, d->t->n_vocab);
    if (d->skip_special && d->t->attr[id] == TRAM_ATTR_CONTROL)
        return 0;
    size_t k;
    const char *bytes = tram_tok_token_text(d->t, id, d->first, &k);
    d->first = 0;
    char small[64], *raw = k + d->n_pending <= sizeof(small) ? small : malloc(k + d->n_pending);
    if (!raw)
        return tram_fail(err, "detokenizer: out of memory");
    memcpy(raw, d->pending, d->n_pending);
    memcpy(raw + d->n_pending, bytes, k);
    int rc = take_bytes(d, raw, d->n_pending + k, 0);
    if (raw != small)
        free(raw);
    if (rc)
        return tram_fail(err, "detokenizer: out of memory");
    return emit(d, 0, text, len, stop_index);
}

void tram_detok_finish(tram_detok *d, const char **text, size_t *len)
{
    *text = "";
    *len = 0;
    if (d->stopped)
        return;
    char tail[4];
    size_t n = d->n_pending;
    memcpy(tail, d->pending, n);
    if (take_bytes(d, tail, n, 1))
        d->n_hold = 0;   /* out of memory for at most 3 replacement characters: drop them */
    emit(d, 1, text, len, NULL);
}
