/* /v1/embeddings bodies (server/embed_request.c): every row of api_fields.c's
 * table for the endpoint does what the row says, and the input forms parse. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "server/api_fields.h"
#include "server/embed_request.h"

static int parse(const char *body, tram_embed_request *r, tram_api_error *e)
{
    memset(e, 0, sizeof(*e));
    return tram_embed_request_parse(r, body, strlen(body), e);
}

/* {"input": "a", NAME: VALUE} */
static int parse_with(const char *name, const char *value, tram_embed_request *r, tram_api_error *e)
{
    char body[512];
    snprintf(body, sizeof(body), strcmp(name, "input") ? "{\"input\": \"a\", \"%s\": %s}" : "{\"%s\": %s}", name,
             value);
    return parse(body, r, e);
}

Test(server_embed, every_row_does_what_it_says)
{
    int rows = 0;
    for (size_t i = 0; i < tram_api_num_fields; i++) {
        const tram_api_field *f = &tram_api_fields[i];
        if (!(f->endpoints & TRAM_FIELD_EMBEDDINGS))
            continue;
        rows++;
        tram_embed_request r;
        tram_api_error e;
        int rc = parse_with(f->name, f->example, &r, &e);
        if (f->kind == TRAM_FIELD_IGNORED) {
            cr_assert_eq(rc, 0, "%s: %s", f->name, e.message);
            cr_assert(strstr(r.ignored, f->name), "%s is not reported as ignored", f->name);
            tram_embed_request_free(&r);
            continue;
        }
        cr_assert_eq(rc, -1, "%s = %s was accepted", f->name, f->example);
        cr_assert_eq(e.status, 400);
        cr_assert_str_eq(e.param, f->name, "%s: %s", f->name, e.message);
    }
    cr_assert_geq(rows, 8);
}

Test(server_embed, input_forms)
{
    tram_embed_request r;
    tram_api_error e;
    cr_assert_eq(parse("{\"input\": \"hello\", \"encoding_format\": \"base64\", \"dimensions\": 8}", &r, &e), 0, "%s",
                 e.message);
    cr_assert_eq(r.num_inputs, 1);
    cr_assert_str_eq(r.inputs[0].text, "hello");
    cr_assert(r.base64);
    cr_assert_eq(r.params.dimensions, 8);
    tram_embed_request_free(&r);
    cr_assert_eq(parse("{\"input\": [\"a\", \"b\", \"c\"]}", &r, &e), 0, "%s", e.message);
    cr_assert_eq(r.num_inputs, 3);
    cr_assert(!r.base64);
    tram_embed_request_free(&r);
    cr_assert_eq(parse("{\"input\": [5, 6, 7]}", &r, &e), 0, "%s", e.message);
    cr_assert_eq(r.num_inputs, 1);
    cr_assert_eq(r.inputs[0].num_tokens, 3);
    cr_assert_eq(r.inputs[0].token_ids[2], 7);
    tram_embed_request_free(&r);
    cr_assert_eq(parse("{\"input\": [[5], [6, 7]], \"add_special_tokens\": false}", &r, &e), 0, "%s", e.message);
    cr_assert_eq(r.num_inputs, 2);
    cr_assert_eq(r.inputs[1].num_tokens, 2);
    cr_assert(!r.add_special_tokens);
    tram_embed_request_free(&r);
    cr_assert_eq(parse("{\"input\": [[5], []]}", &r, &e), -1);
    cr_assert_str_eq(e.param, "input[1]");
    cr_assert_eq(parse("{\"input\": [[5], \"a\"]}", &r, &e), -1);
    cr_assert_str_eq(e.param, "input[1]");
}
