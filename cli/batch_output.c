#include "cli/batch_output.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "server/api_response.h"

static int compare_done(const void *a, const void *b)
{
    return strcmp(((const tram_batch_done *)a)->custom_id, ((const tram_batch_done *)b)->custom_id);
}

static int add_done(tram_batch_output *o, const char *id, int status, int *cap)
{
    if (o->num_done == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        tram_batch_done *done = realloc(o->done, (size_t)*cap * sizeof(*done));
        if (!done)
            return -1;
        o->done = done;
    }
    tram_batch_done *d = &o->done[o->num_done];
    d->status = status;
    return (d->custom_id = strdup(id)) ? (o->num_done++, 0) : -1;
}

/* The custom_id of a whole output line, or NULL. */
static const char *line_custom_id(json_t *line)
{
    return json_is_integer(json_object_get(json_object_get(line, "response"), "status_code"))
               ? json_string_value(json_object_get(line, "custom_id"))
               : NULL;
}

static int line_status(json_t *line)
{
    return (int)json_integer_value(json_object_get(json_object_get(line, "response"), "status_code"));
}

/* Reads the lines an earlier run wrote; *keep is the length of its whole
 * lines (a torn last line, written without its newline, lies past it). */
static int read_done(tram_batch_output *o, off_t *keep, tram_error *err)
{
    char *text = NULL;
    size_t cap = 0;
    ssize_t len;
    int ids_cap = 0, rc = 0;
    *keep = 0;
    for (int no = 1; rc == 0 && (len = getline(&text, &cap, o->f)) > 0; no++) {
        if (text[len - 1] != '\n' && text[0] == '{')
            break;  /* torn: cut off below */
        json_t *line = json_loadb(text, (size_t)len, 0, NULL);
        const char *id = line_custom_id(line);
        if (!id)
            rc = tram_fail(err, "%s:%d: not a batch output line; give another --output", o->path, no);
        else if (add_done(o, id, line_status(line), &ids_cap))
            rc = tram_fail(err, "out of memory");
        json_decref(line);
        *keep += len;
    }
    free(text);
    if (!rc && ferror(o->f))
        rc = tram_fail(err, "cannot read %s: %s", o->path, strerror(errno));
    qsort(o->done, (size_t)o->num_done, sizeof(*o->done), compare_done);
    return rc;
}

int tram_batch_output_open(tram_batch_output *o, const char *path, tram_error *err)
{
    memset(o, 0, sizeof(*o));
    o->path = path;
    if (!strcmp(path, "-")) {
        o->f = stdout;
        return 0;
    }
    /* a+: reads from the start, writes at the end whatever was read */
    if (!(o->f = fopen(path, "a+")))
        return tram_fail(err, "cannot open %s: %s", path, strerror(errno));
    off_t keep;
    if (read_done(o, &keep, err) || ftruncate(fileno(o->f), keep) || fseek(o->f, 0, SEEK_END)) {
        if (!err->msg[0])
            tram_fail(err, "cannot cut the torn last line of %s: %s", path, strerror(errno));
        tram_batch_output_close(o, NULL);
        return -1;
    }
    return 0;
}

int tram_batch_output_status(const tram_batch_output *o, const char *custom_id)
{
    tram_batch_done key = {.custom_id = (char *)custom_id};
    const tram_batch_done *d =
        o->num_done ? bsearch(&key, o->done, (size_t)o->num_done, sizeof(*o->done), compare_done) : NULL;
    return d ? d->status : 0;
}

/* OpenAI's per-line error, where vLLM's run-batch also puts it: the code
 * (or the type when there is none) and the message of the error body. */
static json_t *line_error(const json_t *body)
{
    const json_t *e = json_object_get(body, "error");
    const json_t *code = json_object_get(e, "code");
    return json_pack("{s:O, s:O}", "code", json_is_string(code) ? code : json_object_get(e, "type"),
                     "message", json_object_get(e, "message"));
}

static json_t *output_line(const char *custom_id, int status, const json_t *body)
{
    char id[48], request_id[48];
    tram_api_random_id("batch_req_", id);
    const char *body_id = json_string_value(json_object_get(body, "id"));
    if (body_id)
        snprintf(request_id, sizeof(request_id), "%s", body_id);
    else
        tram_api_random_id("req_", request_id);
    return json_pack("{s:s, s:s, s:{s:i, s:s, s:O}, s:o}", "id", id, "custom_id", custom_id, "response",
                     "status_code", status, "request_id", request_id, "body", body, "error",
                     status == 200 ? json_null() : line_error(body));
}

int tram_batch_output_write(tram_batch_output *o, const char *custom_id, int status, const json_t *body,
                            tram_error *err)
{
    json_t *line = body ? output_line(custom_id, status, body) : NULL;
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    if (!text)
        return tram_fail(err, "out of memory writing the result of '%s'", custom_id);
    size_t len = strlen(text);
    text[len] = '\n';  /* over the NUL: the line and its end in one write */
    int rc = fwrite(text, 1, len + 1, o->f) == len + 1 && fflush(o->f) == 0 ? 0 : -1;
    free(text);
    return rc ? tram_fail(err, "cannot write %s: %s", o->path, strerror(errno)) : 0;
}

int tram_batch_output_close(tram_batch_output *o, tram_error *err)
{
    int rc = 0;
    if (o->f && o->f != stdout)
        rc = fclose(o->f);
    else if (o->f)
        rc = fflush(o->f);
    if (rc && err)
        tram_fail(err, "cannot write %s: %s", o->path, strerror(errno));
    for (int i = 0; i < o->num_done; i++)
        free(o->done[i].custom_id);
    free(o->done);
    memset(o, 0, sizeof(*o));
    return rc ? -1 : 0;
}
