/* cmd_chat_template.c — `tram chat-template [-m MODEL] MESSAGES.json`: prints
 * the prompt the model's chat template makes of a conversation. */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/cli/commands.h"
#include "server/cli/defaults.h"
#include "server/cli/flags.h"
#include "tokenizer/chat_template.h"

void tram_cmd_chat_template_usage(FILE *out)
{
    fprintf(out, "usage: tram chat-template [-m MODEL] [--no-generation-prompt] [--chatml-fallback] MESSAGES.json\n\n"
                 "MESSAGES.json holds [{\"role\": ..., \"content\": ...}, ...] (or {\"messages\": [...]}).\n\n"
                 "  -m MODEL                 a .gguf file or a Hugging Face directory (default %s)\n"
                 "  --no-generation-prompt   do not open an assistant turn at the end\n"
                 "  --chatml-fallback        use ChatML when the template is not a known family\n",
                 TRAM_DEFAULT_MODEL);
}

static int render(const char *model, const char *path, int gen, int fallback)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        fprintf(stderr, "tram chat-template: %s:%d: %s\n", path, je.line, je.text);
        return 1;
    }
    json_t *arr = json_is_array(root) ? root : json_object_get(root, "messages");
    size_t n = json_array_size(arr);
    tram_chat_msg *msgs = calloc(n + 1, sizeof(*msgs));
    for (size_t i = 0; msgs && i < n; i++)
        msgs[i] = (tram_chat_msg){json_string_value(json_object_get(json_array_get(arr, i), "role")),
                                  json_string_value(json_object_get(json_array_get(arr, i), "content"))};
    tram_tokenizer *t = NULL;
    tram_chat_template *ct = NULL;
    tram_error err;
    char *out = NULL;
    int rc = !msgs || !json_is_array(arr);
    if (rc)
        snprintf(err.msg, sizeof(err.msg), "%s: expected an array of messages", path);
    if (!rc)
        rc = tram_tokenizer_load(&t, model, &err) || tram_chat_template_for(&ct, t, fallback, &err) ||
             tram_chat_template_render(ct, msgs, (int)n, gen, &out, &err);
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
    free(msgs);
    json_decref(root);
    return rc ? 1 : 0;
}

typedef struct {
    const char *model;
    int no_generation_prompt, chatml_fallback;
} chat_template_opts;

static const tram_flag chat_template_flags[] = {
    {.name = "-m", .kind = TRAM_FLAG_STRING, .field = offsetof(chat_template_opts, model)},
    {.name = "--no-generation-prompt", .kind = TRAM_FLAG_SET, .field = offsetof(chat_template_opts, no_generation_prompt)},
    {.name = "--chatml-fallback", .kind = TRAM_FLAG_SET, .field = offsetof(chat_template_opts, chatml_fallback)},
};

int tram_cmd_chat_template(int argc, char **argv)
{
    chat_template_opts o = {.model = TRAM_DEFAULT_MODEL};
    const char *path;
    const tram_flag_table table = TRAM_FLAG_TABLE(chat_template_flags, &o);
    if (tram_flags_parse(&table, 1, argc, argv, &path, 1) != 1)
        return TRAM_EXIT_USAGE;
    return render(o.model, path, !o.no_generation_prompt, o.chatml_fallback);
}
