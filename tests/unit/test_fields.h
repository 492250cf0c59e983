/* What the suites of each endpoint check alike against the field table
 * (server/api_fields.c). */
#ifndef TEST_FIELDS_H
#define TEST_FIELDS_H

#include "server/api_fields.h"
#include "tests/unit/test_util.h"

/* A body parsed as an endpoint's server does: 0, or -1 with e filled. */
typedef int test_body_parser(const char *body, tram_api_error *e);

/* Every nested object of the endpoint's: its example is taken, and one
 * unknown key put into it is a 400 naming the key's whole path.  Returns
 * how many objects it checked. */
static inline int test_unknown_nested_keys_named(unsigned endpoint, test_body_parser *parse)
{
    int objects = 0;
    for (int id = 0; id < TRAM_OBJ_COUNT; id++) {
        const tram_api_object *o = &tram_api_objects[id];
        if (!(o->endpoints & endpoint))
            continue;
        objects++;
        tram_api_error e;
        cr_assert_eq(parse(o->example_body, &e), 0, "%s: %s", o->path, e.message);
        json_t *body = json_loads(o->example_body, 0, NULL);
        json_t *target = test_json_at(body, o->example_path);
        cr_assert(json_is_object(target), "%s: no object at %s", o->path, o->example_path);
        json_object_set_new(target, "zz_unknown", json_true());
        char *text = json_dumps(body, 0), want[160];
        snprintf(want, sizeof(want), "%s.zz_unknown", o->example_path);
        cr_assert_eq(parse(text, &e), -1, "%s: accepted %s", o->path, text);
        cr_assert_eq(e.status, 400);
        cr_assert_str_eq(e.param, want, "%s: %s", o->path, e.message);
        free(text);
        json_decref(body);
    }
    return objects;
}

#endif
