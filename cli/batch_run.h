/* batch_run.h — `tram generate --input IN --output OUT`: a JSONL file of
 * requests (server/batch_line.h's forms) run through the server's own
 * request path, without HTTP (server.h's job mode), each answer written to
 * OUT as an OpenAI Batch output line (cli/batch_output.h) as soon as it is
 * ready.  A line's id is its custom_id, or "line-N" (its line number) when
 * it has none.
 *
 * Before anything runs: two lines with one custom_id are an error (exit 2,
 * naming both lines); the ids OUT already holds are skipped, so a run that
 * was killed finishes when run again.  A line the server refuses gets its
 * error line (the server's status and message) and the others run; a line
 * asking for a stream is a 400 (a batch answer is one body), as vLLM's
 * run-batch refuses it.  A 5xx (the engine failed, the run was stopped) is
 * not written, so that a rerun retries the line.
 *
 * Exit status: 0 every line of IN has a 200 in OUT; 1 some have an error
 * line (the summary counts them); 2 nothing ran (usage, unreadable IN,
 * duplicate custom_ids, an OUT this did not write); 3 the run did not
 * finish (a signal, the engine, a failed write): run it again to resume. */
#ifndef TRAM_CLI_BATCH_RUN_H
#define TRAM_CLI_BATCH_RUN_H

#include "server/server.h"

#define TRAM_EXIT_BATCH_FAILED_LINES 1
#define TRAM_EXIT_BATCH_UNFINISHED 3

typedef struct {
    const char *input, *output;  /* paths; "-" is stdin / stdout */
    int progress;                /* draw the progress line even when stderr is not a terminal */
    tram_server_config server;   /* the model, the engine, the chat template */
} tram_batch_opts;

/* Runs the batch; returns the exit status above. */
int tram_batch_run(tram_batch_opts *o);

#endif
