/* cmd_chat_template.c — `tram chat-template [-m MODEL] MESSAGES.json`: prints
 * the prompt the model's chat template makes of a conversation. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/cli/cli.h"
#include "tokenizer/chat_template.h"

static void usage(FILE *out)
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

int tram_cmd_chat_template(int argc, char **argv)
{
    const char *model = TRAM_DEFAULT_MODEL, *path = NULL;
    int gen = 1, fallback = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            model = argv[++i];
        } else if (!strcmp(argv[i], "--no-generation-prompt")) {
            gen = 0;
        } else if (!strcmp(argv[i], "--chatml-fallback")) {
            fallback = 1;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "tram chat-template: %s '%s'\n\n", path ? "unexpected argument" : "unknown option", argv[i]);
            usage(stderr);
            return TRAM_EXIT_USAGE;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return TRAM_EXIT_USAGE;
    }
    return render(model, path, gen, fallback);
}
