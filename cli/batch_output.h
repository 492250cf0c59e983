/* batch_output.h — the output of `tram generate --input`: one OpenAI Batch
 * output line per request,
 *   {"id": "batch_req_...", "custom_id": "...",
 *    "response": {"status_code": 200, "request_id": "req_...", "body": {...}},
 *    "error": null}
 * where body is what `tram serve` answers (a 4xx body is its error object,
 * and error is then {"code", "message"}, where vLLM's run-batch puts them).
 *
 * Each line is written whole with its newline and flushed, so that a run
 * killed at any moment leaves whole lines and at most one torn last line.
 * Opening a file an earlier run wrote reads the custom_ids it holds (the
 * run skips them), cuts a torn last line off, and appends after it. */
#ifndef TRAM_CLI_BATCH_OUTPUT_H
#define TRAM_CLI_BATCH_OUTPUT_H

#include <jansson.h>
#include <stdio.h>

#include "kernels/base.h"

typedef struct {
    char *custom_id;
    int status;
} tram_batch_done;

typedef struct {
    FILE *f;
    const char *path;
    tram_batch_done *done;  /* sorted by custom_id: the lines the file held when opened */
    int num_done;
} tram_batch_output;

/* Opens path ("-": stdout, which starts empty) for appending. -1 with err
 * filled when it cannot be read or written, or when a line before the last
 * is not an output line (appending to a file that is not ours would lose
 * data). */
int tram_batch_output_open(tram_batch_output *o, const char *path, tram_error *err);
/* The status of custom_id's line when the file was opened; 0: it had none. */
int tram_batch_output_status(const tram_batch_output *o, const char *custom_id);
/* Writes the line of one request: status and the body `tram serve` would
 * have sent.  -1 with err filled when the write fails. */
int tram_batch_output_write(tram_batch_output *o, const char *custom_id, int status, const json_t *body,
                            tram_error *err);
/* Closes the file; -1 with err filled when the last writes failed. */
int tram_batch_output_close(tram_batch_output *o, tram_error *err);

#endif
