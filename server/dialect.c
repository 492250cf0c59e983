/* dialect.c — a dialect's body parsed as the chat request it becomes
 * (dialect.h). */
#include "server/dialect.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/strbuf.h"

int tram_dialect_parse(const tram_dialect *d, const tram_dialect_request *in, const tram_sampling_params *defaults,
                       tram_api_request *r, void **state, tram_api_error *e)
{
    char ignored[sizeof(r->ignored)] = "";
    tram_dialect_request with_list = *in;
    with_list.ignored = ignored;
    with_list.ignored_cap = sizeof(ignored);
    json_t *chat = d->to_chat(&with_list, state, e);
    if (!chat || tram_api_request_parse_json(r, TRAM_API_CHAT, defaults, chat, e))
        return -1;
    if (ignored[0]) {   /* the dialect's fields first, then any of chat's */
        tram_strbuf list = {0};
        tram_strbuf_cat(&list, ignored, r->ignored[0] ? ", " : "", r->ignored, (char *)NULL);
        char *joined = tram_strbuf_take(&list);
        snprintf(r->ignored, sizeof(r->ignored), "%s", joined ? joined : ignored);
        free(joined);
    }
    return 0;
}
