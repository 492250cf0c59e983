/* fuzz_jinja.c — libFuzzer on the chat-template interpreter
 * (chat/jinja_*.c): the input is a template, parsed and, when it
 * parses, rendered with a conversation that has tools, calls and results.
 * Either fails with a message or renders; never a crash, a leak, a hang or
 * undefined behaviour (the render limits bound loops, recursion, output and
 * memory, the stack it runs on bounds every depth).  Inputs go up to 4 MiB
 * (-max_len in the Makefile) so that chains and nesting 200,000 deep are
 * reached; the deep shapes are generated as seeds (deep_jinja_seeds.py).
 * `make fuzz-jinja` (FUZZ_SECONDS=600). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

static const char vars_json[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"a1B2c3D4e\", \"type\": \"function\","
    " \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": [true, null]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"a1B2c3D4e\", \"content\": \"ok\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}],"
    " \"documents\": null, \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *vars;
    if (!vars)
        vars = json_loads(vars_json, 0, NULL);
    char *src = malloc(size + 1);
    if (!src)
        return 0;
    memcpy(src, data, size);
    src[size] = 0;
    tram_jinja *t;
    tram_error err;
    if (tram_jinja_parse(&t, src, &err) == 0) {
        char *out = NULL;
        if (tram_jinja_uses(t, "tools") < 0)   /* walks the whole tree, as loading a model's template does */
            abort();
        if (tram_jinja_render(t, vars, 0, &out, &err) == 0 && !out)
            abort();   /* success always hands over a string */
        free(out);
        tram_jinja_free(t);
    } else if (!err.msg[0]) {
        abort();   /* a failure always says why */
    }
    free(src);
    return 0;
}
