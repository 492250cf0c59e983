/* cmd_chat_template.c — `tram chat-template [-m MODEL] MESSAGES.json`: prints
 * the prompt the model's chat template makes of a conversation. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/defaults.h"
#include "cli/flags.h"
#include "cli/text_file.h"
#include "server/api_tools.h"
#include "chat/chat_template.h"

typedef struct {
    const char *model;
    const char *chat_template;  /* Jinja source instead of the model's, or NULL */
    int generation_prompt;  /* open an assistant turn at the end */
    int continue_last;      /* leave the last message open instead */
    int chatml_fallback;
} chat_template_opts;

#define FIELD(name) offsetof(chat_template_opts, name)

static const tram_flag chat_template_flags[] = {
    {.name = "-m", .kind = TRAM_FLAG_STRING, .field = FIELD(model)},
    {.name = "--no-generation-prompt", .kind = TRAM_FLAG_CLEAR, .field = FIELD(generation_prompt)},
    {.name = "--continue-final-message", .kind = TRAM_FLAG_SET, .field = FIELD(continue_last)},
    {.name = "--chatml-fallback", .kind = TRAM_FLAG_SET, .field = FIELD(chatml_fallback)},
    {.name = "--chat-template", .kind = TRAM_FLAG_CUSTOM, .field = FIELD(chat_template),
     .parse = tram_chat_template_flag},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: tram chat-template [-m MODEL] [--chat-template FILE] [--no-generation-prompt]\n"
                 "                         [--continue-final-message] [--chatml-fallback] MESSAGES.json\n\n"
                 "MESSAGES.json holds [{\"role\": ..., \"content\": ...}, ...] (or {\"messages\": [...], \"tools\": [...],\n"
                 "\"chat_template_kwargs\": {...}}, with tool calls and results as the OpenAI API sends them).\n\n"
                 "  -m MODEL                 a .gguf file or a Hugging Face directory (default %s)\n"
                 "  --chat-template FILE     a Jinja chat template to use instead of the model's\n"
                 "  --no-generation-prompt   do not open an assistant turn at the end\n"
                 "  --continue-final-message end inside the last message, for the model to continue it\n"
                 "  --chatml-fallback        use ChatML when the model has no template or one tram cannot parse\n",
                 TRAM_DEFAULT_MODEL);
}

static int render(const chat_template_opts *o, const char *path)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        fprintf(stderr, "tram chat-template: %s:%d: %s\n", path, je.line, je.text);
        return 1;
    }
    json_t *arr = json_is_array(root) ? root : json_object_get(root, "messages");
    const json_t *tools = json_is_object(root) ? json_object_get(root, "tools") : NULL;
    const json_t *kwargs = json_is_object(root) ? json_object_get(root, "chat_template_kwargs") : NULL;
    size_t n = json_array_size(arr);
    tram_chat_msg *msgs = calloc(n + 1, sizeof(*msgs));
    tram_api_error api_err = {0};
    int rc = !msgs || !json_is_array(arr) || (tools && !json_is_array(tools)) || (kwargs && !json_is_object(kwargs));
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *m = json_array_get(arr, i);
        const char *content = json_string_value(json_object_get(m, "content"));
        msgs[i] = (tram_chat_msg){.role = json_string_value(json_object_get(m, "role")),
                                  .content = content ? content : ""};
        tram_chat_tool_call *calls = NULL;
        rc = msgs[i].role && tram_api_parse_message_tools(m, (int)i, &calls, &msgs[i].num_tool_calls,
                                                          &msgs[i].tool_call_id, NULL, 0, &api_err);
        msgs[i].tool_calls = calls;
    }
    const tram_chat_conversation conversation = {
        .msgs = msgs, .n = (int)n, .tools = tools, .kwargs = kwargs,
        .ending = o->continue_last ? TRAM_CHAT_CONTINUE_LAST : (tram_chat_ending)o->generation_prompt};
    tram_tokenizer *t = NULL;
    tram_chat_template *ct = NULL;
    tram_error err;
    char *out = NULL;
    if (rc)
        snprintf(err.msg, sizeof(err.msg), "%.200s: %.300s", path,
                 api_err.status ? api_err.message : "expected an array of messages (and of tools, and an object of chat_template_kwargs)");
    if (!rc)
        rc = tram_tokenizer_load(&t, o->model, &err) || tram_chat_template_for(&ct, t, o->chat_template, o->chatml_fallback, &err) ||
             tram_chat_template_render(ct, &conversation, &out, &err);
    if (rc)
        fprintf(stderr, "tram chat-template: %s\n", err.msg);
    else {
        if (tram_chat_template_warning(ct))
            fprintf(stderr, "tram: warning: %s\n", tram_chat_template_warning(ct));
        fputs(out, stdout);
    }
    free(out);
    tram_chat_template_free(ct);
    tram_tokenizer_free(t);
    for (size_t i = 0; msgs && i < n; i++)
        tram_api_free_tool_calls((tram_chat_tool_call *)msgs[i].tool_calls, msgs[i].num_tool_calls);
    free(msgs);
    json_decref(root);
    return rc ? 1 : 0;
}

static int chat_template(int argc, char **argv)
{
    chat_template_opts o = {.model = TRAM_DEFAULT_MODEL, .generation_prompt = 1};
    const char *path;
    const tram_flag_table table = TRAM_FLAG_TABLE(chat_template_flags, &o);
    if (tram_flags_parse(&table, 1, argc, argv, &path, 1) != 1)
        return TRAM_EXIT_USAGE;
    return render(&o, path);
}

const tram_command tram_cmd_chat_template = {
    .name = "chat-template", .run = chat_template, .usage = usage,
    .summary = "print the prompt a model's chat template makes of messages"};
