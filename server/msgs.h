/* msgs.h — Anthropic's Messages API, POST /v1/messages and
 * /v1/messages/count_tokens, run over the chat completion path as dialects
 * (dialect.h): the request is msgs_request.h's translation, the replies
 * msgs_response.h's. */
#ifndef TRAM_MSGS_H
#define TRAM_MSGS_H

#include "server/dialect.h"

extern const tram_dialect tram_msgs_dialect;
extern const tram_dialect tram_msgs_count_dialect;   /* count_tokens: prepared and counted */

#endif
