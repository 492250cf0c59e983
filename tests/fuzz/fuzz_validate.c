/* fuzz_validate.c — libFuzzer on the JSON Schema validator
 * (grammar/json_validate.c): the input is a schema, a NUL byte, and an
 * instance (without the NUL, the input is both).  A schema either compiles
 * or fails with a message; a compiled one checks the instance with formats
 * asserted and not, and the two verdicts are 0, 1 or -1, each but 0 with a
 * message.  Never a crash, a leak, a hang or undefined behaviour.
 * `make fuzz-validate` (FUZZ_SECONDS=600). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_validate.h"

static void check(tram_jv_schema *s, const char *inst, size_t n)
{
    tram_jv_failure f;
    int r = tram_jv_check(s, inst, n, &f);
    if (r < -1 || r > 1 || (r != 0 && !f.message[0]))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t schema_len = nul ? (size_t)(nul - data) : size;
    const char *inst = nul ? (const char *)nul + 1 : (const char *)data;
    size_t inst_len = nul ? size - schema_len - 1 : size;
    tram_jv_schema *s;
    tram_error err = {{0}};
    if (tram_jv_compile((const char *)data, schema_len, &s, &err)) {
        if (!err.msg[0])
            abort();
        return 0;
    }
    check(s, inst, inst_len);
    tram_jv_set_format_assertion(s, 0);
    check(s, inst, inst_len);
    tram_jv_free(s);
    return 0;
}
