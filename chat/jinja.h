/* jinja.h — a Jinja interpreter for chat templates: it renders a template
 * exactly as transformers' apply_chat_template does (jinja2's
 * ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
 * loopcontrols; tojson as Python's json.dumps(ensure_ascii=False);
 * raise_exception, strftime_now, namespace, range, dict).  Values print as
 * Python's str() prints them.  Templates and renders are bounded (nesting
 * depth, loop iterations, output and memory), and every failure, a
 * template's raise_exception included, is an error with its message. */
#ifndef TRAM_JINJA_H
#define TRAM_JINJA_H

#include <jansson.h>

#include "kernels/base.h"

typedef struct tram_jinja tram_jinja;

/* Parses src; a syntax error names its line. */
int tram_jinja_parse(tram_jinja **out, const char *src, tram_error *err);
void tram_jinja_free(tram_jinja *t);
/* Whether the template reads the variable `name` anywhere (e.g. "tools"). */
int tram_jinja_uses(const tram_jinja *t, const char *name);
/* Renders with the variables of the JSON object vars (messages, tools,
 * bos_token, ...) into a new malloc'd string.  now: the time strftime_now
 * formats (seconds since the epoch, local time). */
int tram_jinja_render(const tram_jinja *t, const json_t *vars, long long now, char **out, tram_error *err);

#endif
