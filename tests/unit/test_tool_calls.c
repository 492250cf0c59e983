/* Tool calls read out of a model's text, per template family
 * (server/tool_calls.c), and what may stream as content before them. */
#include <criterion/criterion.h>
#include <string.h>

#include "server/tool_calls.h"

static tram_api_tools tools;
static json_t *tool_list;

static void setup(void)
{
    tool_list = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}},"
                           " {\"type\": \"function\", \"function\": {\"name\": \"search\"}}]", 0, NULL);
    tools = (tram_api_tools){.tools = tool_list, .choice = TRAM_TOOL_CHOICE_AUTO, .parallel = 1};
}

static void teardown(void)
{
    json_decref(tool_list);
}

TestSuite(tool_calls, .init = setup, .fini = teardown);

/* Parses text (cut short by max_tokens or not); checks the content and the
 * calls' "name:arguments". */
static void expect_cut(tram_tool_format f, const char *text, int cut, const char *content, int n,
                       const char *const *calls)
{
    tram_tool_calls tc;
    cr_assert_eq(tram_tool_calls_parse(f, text, strlen(text), &tools, cut, &tc), 0);
    cr_assert_eq(tc.content_len, strlen(content), "%s: content %zu bytes", text, tc.content_len);
    cr_assert_eq(strncmp(text, content, tc.content_len), 0, "%s", text);
    cr_assert_eq(tc.calls ? (int)json_array_size(tc.calls) : 0, n, "%s", text);
    for (int i = 0; i < n; i++) {
        const json_t *call = json_array_get(tc.calls, (size_t)i), *fn = json_object_get(call, "function");
        char got[256];
        snprintf(got, sizeof(got), "%s:%s", json_string_value(json_object_get(fn, "name")),
                 json_string_value(json_object_get(fn, "arguments")));
        cr_assert_str_eq(got, calls[i], "%s", text);
        cr_assert_str_eq(json_string_value(json_object_get(call, "type")), "function");
    }
    json_decref(tc.calls);
}

static void expect(tram_tool_format f, const char *text, const char *content, int n, const char *const *calls)
{
    expect_cut(f, text, 0, content, n, calls);
}

Test(tool_calls, a_reply_cut_short_keeps_its_finished_calls)
{
    const char *one[] = {"get_weather:{\"city\": \"Paris\"}"};
    const char *done = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n";
    char text[512];
    const char *tails[] = {"", "<tool_", "<tool_call>\n{\"name\": \"sea", "<tool_call>"};
    for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
        snprintf(text, sizeof(text), "%s%s", done, tails[i]);
        expect_cut(TRAM_TOOLS_HERMES, text, 1, "", 1, one);
        if (tails[i][0])   /* not cut: an unfinished call makes it all content */
            expect(TRAM_TOOLS_HERMES, text, text, 0, NULL);
    }
    /* nothing finished: no calls, and the markup is not content either */
    expect_cut(TRAM_TOOLS_GENERIC, "<tool_call>\n{\"name\": \"get_w", 1, "", 0, NULL);
    /* text that is not a call stays content however the reply ended */
    expect_cut(TRAM_TOOLS_HERMES, "<tool_call>{\"name\": \"x\"}</tool_call> <tool_", 1,
               "<tool_call>{\"name\": \"x\"}</tool_call> <tool_", 0, NULL);
}

/* A call cut by max_tokens, at every byte, in every format: the markup is
 * never content, the text before it is, and a finished call still counts. */
Test(tool_calls, a_call_cut_anywhere_leaves_no_markup_in_the_content)
{
    static const struct {
        tram_tool_format f;
        const char *text;
    } cases[] = {
        {TRAM_TOOLS_HERMES, "Sure. <tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": 1}}\n</tool_call>"},
        {TRAM_TOOLS_GENERIC, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": 1}}\n</tool_call>"},
        {TRAM_TOOLS_LLAMA3, "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": 1}}"},
        {TRAM_TOOLS_MISTRAL, "Sure. [TOOL_CALLS] [{\"name\": \"search\", \"arguments\": {\"q\": 1}}]"},
    };
    const char *one[] = {"search:{\"q\": 1}"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *text = cases[i].text;
        size_t before = strcspn(text, "<["), len = strlen(text);
        size_t complete = (size_t)(strstr(text, "}}") - text) + 2;
        char content[64], cut[256];
        snprintf(content, sizeof(content), "%.*s", (int)before, text);
        for (size_t at = before + 1; at <= len; at++) {
            snprintf(cut, sizeof(cut), "%.*s", (int)at, text);
            expect_cut(cases[i].f, cut, 1, content, at >= complete, one);
        }
    }
}

Test(tool_calls, hermes_and_generic)
{
    const char *one[] = {"get_weather:{\"city\": \"Paris\", \"days\": 2}"};
    const char *two[] = {"get_weather:{\"city\": \"Zürich\"}", "search:{\"q\": [1.5, null, true]}"};
    for (tram_tool_format f = TRAM_TOOLS_GENERIC; f <= TRAM_TOOLS_HERMES; f++) {
        expect(f, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\",\"days\":2}}\n</tool_call>",
               "", 1, one);
        expect(f, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n</tool_call>\n"
                  "<tool_call>{\"arguments\": {\"q\": [1.5, null, true]}, \"name\": \"search\"}</tool_call>\n",
               "Sure.\n", 2, two);
        /* the model stopped before the closing tag */
        expect(f, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}", "", 1, one);
        /* not calls: all content */
        const char *content[] = {
            "No tools needed.",
            "<tool_call>\n{\"name\": \"launch\", \"arguments\": {}}\n</tool_call>",          /* unknown function */
            "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": }\n</tool_call>",     /* bad JSON */
            "<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call> and then text",
            "<tool_call>{\"name\": \"search\", \"arguments\": \"q\"}</tool_call>",            /* not an object */
            "<tool_call>{\"name\": \"search\"}</tool_call>",
        };
        for (size_t i = 0; i < sizeof(content) / sizeof(content[0]); i++)
            expect(f, content[i], content[i], 0, NULL);
    }
}

Test(tool_calls, llama3_json)
{
    const char *one[] = {"get_weather:{\"city\": \"Paris\"}"};
    const char *two[] = {"get_weather:{\"city\": \"Paris\"}", "search:{\"q\": \"x\"}"};
    expect(TRAM_TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", 1, one);
    expect(TRAM_TOOLS_LLAMA3, " <|python_tag|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n", "", 1, one);
    expect(TRAM_TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
                              "{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}", "", 2, two);
    const char *content[] = {"Paris is sunny.", "{\"city\": \"Paris\"}", "{\"name\": \"get_weather\"",
                             "{\"name\": \"get_weather\", \"parameters\": {}} trailing words", "<b>bold</b>"};
    for (size_t i = 0; i < sizeof(content) / sizeof(content[0]); i++)
        expect(TRAM_TOOLS_LLAMA3, content[i], content[i], 0, NULL);
}

Test(tool_calls, mistral)
{
    const char *two[] = {"get_weather:{\"city\": \"Paris\"}", "search:{}"};
    expect(TRAM_TOOLS_MISTRAL, "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, "
                               "{\"name\": \"search\", \"arguments\": {}, \"id\": \"abcdefghi\"}]", "", 2, two);
    expect(TRAM_TOOLS_MISTRAL, "Let me check. [TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</s>",
           "Let me check. ", 1, two);
    const char *content[] = {"[TOOL_CALLS] {\"name\": \"search\", \"arguments\": {}}", "[TOOL_CALLS] []", "plain",
                             "[TOOL_CALLS] [{\"name\": \"search\", \"arguments\": {}}] and more",
                             "[TOOL_CALLS] [{\"name\": \"nope\", \"arguments\": {}}]"};
    for (size_t i = 0; i < sizeof(content) / sizeof(content[0]); i++)
        expect(TRAM_TOOLS_MISTRAL, content[i], content[i], 0, NULL);
}

/* What streams as content of text fed whole: the bytes no call can begin in. */
static size_t prefix(tram_tool_format f, const char *text)
{
    tram_tool_reader r;
    tram_tool_reader_init(&r, f, &tools);
    tram_tool_reader_feed(&r, text, strlen(text));
    size_t n = r.content_end;
    tram_tool_reader_free(&r);
    return n;
}

Test(tool_calls, what_streams_as_content)
{
    cr_assert_eq(prefix(TRAM_TOOLS_HERMES, "Hello"), 5);
    cr_assert_eq(prefix(TRAM_TOOLS_HERMES, "Hello <tool"), 6, "a marker may be starting");
    cr_assert_eq(prefix(TRAM_TOOLS_GENERIC, "Hello <tool_call>{\"na"), 6);
    cr_assert_eq(prefix(TRAM_TOOLS_HERMES, "a < b"), 5);
    cr_assert_eq(prefix(TRAM_TOOLS_MISTRAL, "abc [TOOL"), 4);
    cr_assert_eq(prefix(TRAM_TOOLS_MISTRAL, "abc [TOOL_CALLS] [{"), 4);
    cr_assert_eq(prefix(TRAM_TOOLS_LLAMA3, "  "), 0, "undecided until a character that is not space");
    cr_assert_eq(prefix(TRAM_TOOLS_LLAMA3, "  {\"name\""), 0);
    cr_assert_eq(prefix(TRAM_TOOLS_LLAMA3, "  Hi {"), 6);
    cr_assert_eq(prefix(TRAM_TOOLS_LLAMA3, "<|python"), 0);
    cr_assert_eq(prefix(TRAM_TOOLS_LLAMA3, "<b>"), 3, "not the tag: content");
    cr_assert_eq(prefix(TRAM_TOOLS_HERMES, "<tool_call>{\"name\": [1"), 22, "a name that is not a string: content");
}

Test(tool_calls, ids)
{
    char a[32], b[32];
    tram_tool_call_id(TRAM_TOOLS_HERMES, a);
    tram_tool_call_id(TRAM_TOOLS_HERMES, b);
    cr_assert_eq(strncmp(a, "call_", 5), 0);
    cr_assert_eq(strlen(a), 29);
    cr_assert_str_neq(a, b);
    tram_tool_call_id(TRAM_TOOLS_MISTRAL, a);
    cr_assert_eq(strlen(a), 9, "Mistral's templates want 9 characters");
    cr_assert_eq(strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"), 9);
}
