/*
 * test-chat.c — exact rendered strings of the built-in chat templates (formats.md §5.6):
 * Qwen3 ChatML with thinking on/off and past-turn <think> stripping, Llama 3, Llama 2,
 * BitNet; detection from template sources; unknown names and undetectable templates. Tools
 * (hx__chat_apply_tools): Qwen3's and Llama 3.1's official tool formats (docs/server.md
 * "Tool calls"), JSON written as the templates' tojson writes it, and what they refuse.
 */
#include <string.h>

#include "chat.h"
#include "harness.h"
#include "hx.h"

static char *render(const char *src, const char *name, const struct hx_chat_msg *m, size_t n,
                    bool gen, bool think)
{
    char *out = NULL;
    int st = hx__chat_apply(src, name, m, n, gen, think, &out);
    if (st != HX_OK) fprintf(stderr, "  chat_apply: %s\n", hx_last_error());
    return out;
}

TEST(qwen3_thinking_on_off)
{
    struct hx_chat_msg m[] = {{"system", "You are terse."}, {"user", "Hi"}};
    char *a = render(NULL, "qwen3", m, 2, true, true);
    ASSERT_STREQ(a, "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n");
    hx_free(a);
    a = render(NULL, "chatml", m, 2, true, false);
    ASSERT_STREQ(a, "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    hx_free(a);
    a = render(NULL, "qwen3", m, 2, false, true);
    ASSERT_STREQ(a, "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    hx_free(a);
}

TEST(qwen3_multi_turn_strips_old_thinking)
{
    struct hx_chat_msg m[] = {
        {"user", "2+2?"},
        {"assistant", "<think>\nadd them\n</think>\n\n4"},
        {"user", "and 3+3?"},
        {"assistant", "<think>\nagain\n</think>\n\n6"},
    };
    char *a = render(NULL, "qwen3", m, 4, false, true);
    ASSERT_STREQ(a, "<|im_start|>user\n2+2?<|im_end|>\n"
                    "<|im_start|>assistant\n4<|im_end|>\n"
                    "<|im_start|>user\nand 3+3?<|im_end|>\n"
                    "<|im_start|>assistant\n<think>\nagain\n</think>\n\n6<|im_end|>\n");
    hx_free(a);
    /* a last assistant turn without reasoning gets an empty think block */
    struct hx_chat_msg m2[] = {{"user", "hi"}, {"assistant", "hello"}};
    a = render(NULL, "qwen3", m2, 2, false, true);
    ASSERT_STREQ(a, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                    "hello<|im_end|>\n");
    hx_free(a);
}

TEST(llama3)
{
    struct hx_chat_msg m[] = {{"system", " Be brief. "}, {"user", "Hi\n"}, {"assistant", "Hello!"},
                              {"user", "Bye"}};
    char *a = render(NULL, "llama3", m, 4, true, true);
    ASSERT_STREQ(a, "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                    "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n");
    hx_free(a);
}

TEST(llama2)
{
    struct hx_chat_msg m[] = {{"system", "Be nice."}, {"user", "Hi"}, {"assistant", "Hello"},
                              {"user", "Bye"}};
    char *a = render(NULL, "llama2", m, 4, true, true);
    ASSERT_STREQ(a, "[INST] <<SYS>>\nBe nice.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]");
    hx_free(a);
    struct hx_chat_msg u[] = {{"user", "Hi"}};
    a = render(NULL, "llama2", u, 1, true, true);
    ASSERT_STREQ(a, "[INST] Hi [/INST]");
    hx_free(a);
}

TEST(bitnet)
{
    struct hx_chat_msg m[] = {{"system", "Be nice."}, {"user", "Hey, are you conscious?"},
                              {"assistant", "No."}, {"user", "Ok"}};
    char *a = render(NULL, "bitnet", m, 4, true, true);
    ASSERT_STREQ(a, "System: Be nice.<|eot_id|>User: Hey, are you conscious?<|eot_id|>"
                    "Assistant: No.<|eot_id|>User: Ok<|eot_id|>Assistant: ");
    hx_free(a);
}

TEST(detection_and_errors)
{
    ASSERT_STREQ(hx__chat_detect("{% for m in messages %}<|im_start|>{{m.role}}"), "qwen3");
    ASSERT_STREQ(hx__chat_detect("{{ '<|start_header_id|>' + m.role }}"), "llama3");
    ASSERT_STREQ(hx__chat_detect("{{ bos_token + '[INST] ' }}"), "llama2");
    ASSERT_STREQ(hx__chat_detect("{{ m.role|capitalize + ': ' + m.content + '<|eot_id|>' }}"
                                 "{% if add_generation_prompt %}Assistant: {% endif %}"), "bitnet");
    ASSERT_TRUE(hx__chat_detect("{{ something else }}") == NULL);
    struct hx_chat_msg u[] = {{"user", "x"}};
    char *out = NULL;
    ASSERT_OK(hx__chat_apply("<|im_start|>", NULL, u, 1, true, true, &out));
    ASSERT_STREQ(out, "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
    hx_free(out);
    ASSERT_EQ(hx__chat_apply(NULL, NULL, u, 1, true, true, &out), HX_E_NOTFOUND);
    ASSERT_TRUE(strstr(hx_last_error(), "llama3") != NULL);
    ASSERT_EQ(hx__chat_apply("{{ x }}", NULL, u, 1, true, true, &out), HX_E_NOTFOUND);
    ASSERT_EQ(hx__chat_apply(NULL, "vicuna", u, 1, true, true, &out), HX_E_NOTFOUND);
    ASSERT_TRUE(strstr(hx_last_error(), "qwen3") != NULL && strstr(hx_last_error(), "bitnet") != NULL);
    ASSERT_TRUE(out == NULL);
    struct hx_chat_msg bad[] = {{"wizard", "x"}};
    ASSERT_EQ(hx__chat_apply(NULL, "qwen3", bad, 1, true, true, &out), HX_E_INVAL);
    const char *const *names = hx_chat_template_names();
    int k = 0;
    while (names[k]) k++;
    ASSERT_EQ(k, 5);
}

static char *render_tools(const char *name, const struct hx_chat_message *m, size_t n,
                          const char *tools, bool gen, bool think)
{
    char *out = NULL;
    int st = hx__chat_apply_tools(NULL, name, m, n, tools, gen, think, &out);
    if (st != HX_OK) fprintf(stderr, "  chat_apply_tools: %s\n", hx_last_error());
    return out;
}

/* One tool, sent compactly as a client would; the templates write it as tojson does. */
static const char weather_tools[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get the "
    "weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
    "\"required\":[\"city\"]}}}]";

static const struct hx_chat_tool_call paris_call[] = {{"get_weather", "{\"city\":\"Paris\"}"}};

TEST(qwen3_tools)
{
    struct hx_chat_message m[] = {
        {"system", "Be brief.", NULL, 0},
        {"user", "Weather in Paris?", NULL, 0},
        {"assistant", "", paris_call, 1},
        {"tool", "{\"temp\": 20}", NULL, 0},
        {"tool", "sunny", NULL, 0},
    };
    char *a = render_tools("qwen3", m, 5, weather_tools, true, true);
    ASSERT_STREQ(a,
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist "
        "with the user query.\n\nYou are provided with function signatures within <tools></tools> "
        "XML tags:\n<tools>\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
        "\"description\": \"Get the weather\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n"
        "</tools>\n\nFor each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
        "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
        "\"Paris\"}}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response>\n<tool_response>\n"
        "sunny\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n");
    hx_free(a);
    /* no system message: the tools block alone; content before two calls; the last assistant
     * turn (after the query) gets its think block, then the calls */
    static const struct hx_chat_tool_call two[] = {{"a", "{}"}, {"b", "{\"x\": [1, 2.5e3, -0.5]}"}};
    struct hx_chat_message m2[] = {
        {"user", "go", NULL, 0},
        {"assistant", "<think>\nplan\n</think>\n\nCalling.", two, 2},
    };
    a = render_tools("chatml", m2, 2, "[{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]",
                     false, true);
    ASSERT_STREQ(a,
        "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
        "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"a\"}}\n</tools>\n\nFor each "
        "function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
        "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\ngo<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nplan\n</think>\n\nCalling.\n<tool_call>\n"
        "{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", "
        "\"arguments\": {\"x\": [1, 2.5e3, -0.5]}}\n</tool_call><|im_end|>\n");
    hx_free(a);
}

TEST(qwen3_tool_history_without_tools)
{
    /* tool_choice "none": no tools block, the history still in the tool format; an assistant
     * turn before the last query keeps no think block; the answer after the tool results is
     * after the query, so it gets one */
    struct hx_chat_message m[] = {
        {"system", "S", NULL, 0},
        {"user", "q", NULL, 0},
        {"assistant", "<think>x</think>Let me look.", paris_call, 1},
        {"tool", "20", NULL, 0},
        {"assistant", "It is 20.", NULL, 0},
    };
    char *a = render_tools("qwen3", m, 5, NULL, false, true);
    ASSERT_STREQ(a, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nq<|im_end|>\n"
                    "<|im_start|>assistant\n<think>\nx\n</think>\n\nLet me look.\n<tool_call>\n"
                    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                    "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n20\n"
                    "</tool_response><|im_end|>\n"
                    "<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 20.<|im_end|>\n");
    hx_free(a);
    /* without a user query no assistant turn keeps a think block (last_query_index = n - 1) */
    struct hx_chat_message m2[] = {{"system", "S", NULL, 0}, {"assistant", "hello", NULL, 0}};
    a = render_tools("qwen3", m2, 2, NULL, false, true);
    ASSERT_STREQ(a, "<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n");
    hx_free(a);
    /* with neither tools nor tool parts the text is hx_chat_apply's */
    struct hx_chat_msg p[] = {{"system", "S"}, {"user", "hi"}, {"assistant", "<think>t</think>yo"}};
    struct hx_chat_message q[] = {{"system", "S", NULL, 0}, {"user", "hi", NULL, 0},
                                  {"assistant", "<think>t</think>yo", NULL, 0}};
    const char *names[] = {"qwen3", "llama3", "llama2", "bitnet"};
    for (int i = 0; i < 4; i++) {
        char *x = render(NULL, names[i], p, 3, true, false);
        char *y = render_tools(names[i], q, 3, NULL, true, false);
        ASSERT_STREQ(x, y);
        hx_free(x);
        hx_free(y);
    }
}

TEST(llama3_tools)
{
    struct hx_chat_message m[] = {
        {"system", " Be brief. ", NULL, 0},
        {"user", "Weather in Paris?\n", NULL, 0},
        {"assistant", "", paris_call, 1},
        {"tool", "{\"temp\": 20}", NULL, 0},
        {"tool", "sunny", NULL, 0},
    };
    char *a = render_tools("llama3", m, 5, weather_tools, true, true);
    ASSERT_STREQ(a,
        "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge "
        "Date: December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond "
        "with a JSON for a function call with its proper arguments that best answers the given "
        "prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
        "argument name and its value}.Do not use variables.\n\n"
        "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
        "        \"description\": \"Get the weather\",\n        \"parameters\": {\n"
        "            \"type\": \"object\",\n            \"properties\": {\n"
        "                \"city\": {\n                    \"type\": \"string\"\n"
        "                }\n            },\n            \"required\": [\n"
        "                \"city\"\n            ]\n        }\n    }\n}\n\n"
        "Weather in Paris?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", "
        "\"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
        "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": 20}\"<|eot_id|>"
        "<|start_header_id|>ipython<|end_header_id|>\n\n\"sunny\"<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    hx_free(a);
    /* no system message: an empty one; the first message (whatever its role) carries the tools */
    struct hx_chat_message u[] = {{"user", "hi", NULL, 0}};
    a = render_tools("llama3", u, 1, "[{\"a\":{},\"b\":[],\"c\":[{}]}]", false, true);
    ASSERT_STREQ(a,
        "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge "
        "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond "
        "with a JSON for a function call with its proper arguments that best answers the given "
        "prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
        "argument name and its value}.Do not use variables.\n\n"
        "{\n    \"a\": {},\n    \"b\": [],\n    \"c\": [\n        {}\n    ]\n}\n\nhi<|eot_id|>");
    hx_free(a);
}

TEST(tool_json_as_tojson_writes_it)
{
    /* escapes decoded and written again as json.dumps(ensure_ascii=False) does */
    static const struct hx_chat_tool_call c[] = {
        {"f", " { \"s\" : \"\\u00e9\\/\\ud83d\\ude00\\u0001\\t\\\"\\\\\" , "
              "\"n\":null,\"t\":true } "}};
    struct hx_chat_message m[] = {{"assistant", "", c, 1}};
    char *a = render_tools("qwen3", m, 1, NULL, false, true);
    ASSERT_STREQ(a, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"s\": "
                    "\"\xC3\xA9/\xF0\x9F\x98\x80\\u0001\\t\\\"\\\\\", \"n\": null, \"t\": true}}\n"
                    "</tool_call><|im_end|>\n");
    hx_free(a);
    struct hx_chat_message t[] = {{"user", "q", NULL, 0},
                                  {"tool", "a\"b\\c\nd\x01\xC3\xA9", NULL, 0}};
    a = render_tools("llama3", t, 2, NULL, false, true);
    ASSERT_STREQ(a, "<|start_header_id|>user<|end_header_id|>\n\nq<|eot_id|>"
                    "<|start_header_id|>ipython<|end_header_id|>\n\n"
                    "\"a\\\"b\\\\c\\nd\\u0001\xC3\xA9\"<|eot_id|>");
    hx_free(a);
}

TEST(tool_errors)
{
    char *out = NULL;
    struct hx_chat_message u[] = {{"user", "hi", NULL, 0}};
    const char *bad[] = {"", "{}", "[", "[{]", "[1,]", "[\"\\x\"]", "[01]", "[1] x", "[\"a\x01\"]",
                         "[1.]", "[-]", "[1e]", "[tru]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(hx__chat_apply_tools(NULL, "qwen3", u, 1, bad[i], true, true, &out), HX_E_INVAL);
        ASSERT_EQ(hx__chat_apply_tools(NULL, "llama3", u, 1, bad[i], true, true, &out), HX_E_INVAL);
        ASSERT_TRUE(out == NULL);
    }
    /* nesting deeper than 128 is refused, not a stack overflow */
    char deep[600];
    memset(deep, '[', 300);
    memset(deep + 300, ']', 299);
    deep[599] = '\0';
    ASSERT_EQ(hx__chat_apply_tools(NULL, "qwen3", u, 1, deep, true, true, &out), HX_E_INVAL);
    static const struct hx_chat_tool_call badargs[] = {{"f", "{\"a\":}"}};
    struct hx_chat_message m[] = {{"user", "q", NULL, 0}, {"assistant", "", badargs, 1}};
    ASSERT_EQ(hx__chat_apply_tools(NULL, "qwen3", m, 2, NULL, true, true, &out), HX_E_INVAL);
    /* Llama 3: one call per message; tools need a message after the system one */
    static const struct hx_chat_tool_call two[] = {{"a", "{}"}, {"b", "{}"}};
    struct hx_chat_message m2[] = {{"user", "q", NULL, 0}, {"assistant", "", two, 2}};
    ASSERT_EQ(hx__chat_apply_tools(NULL, "llama3", m2, 2, NULL, true, true, &out), HX_E_INVAL);
    ASSERT_TRUE(strstr(hx_last_error(), "one tool call") != NULL);
    struct hx_chat_message s[] = {{"system", "S", NULL, 0}};
    ASSERT_EQ(hx__chat_apply_tools(NULL, "llama3", s, 1, "[]", true, true, &out), HX_E_INVAL);
    /* templates without a tool format */
    ASSERT_EQ(hx__chat_apply_tools(NULL, "llama2", u, 1, "[]", true, true, &out), HX_E_INVAL);
    ASSERT_EQ(hx__chat_apply_tools(NULL, "bitnet", m2, 2, NULL, true, true, &out), HX_E_INVAL);
    ASSERT_TRUE(strstr(hx_last_error(), "no tool-call format") != NULL);
    /* calls only on assistant messages, with names and arguments */
    struct hx_chat_message w[] = {{"user", "q", two, 2}};
    ASSERT_EQ(hx__chat_apply_tools(NULL, "qwen3", w, 1, NULL, true, true, &out), HX_E_INVAL);
    static const struct hx_chat_tool_call noname[] = {{NULL, "{}"}};
    struct hx_chat_message x[] = {{"assistant", "", noname, 1}};
    ASSERT_EQ(hx__chat_apply_tools(NULL, "qwen3", x, 1, NULL, true, true, &out), HX_E_INVAL);
    ASSERT_TRUE(out == NULL);
    /* an empty tools array renders no tools block with Qwen3 (the template's `if tools`) */
    out = render_tools("qwen3", u, 1, " [ ] ", true, true);
    ASSERT_STREQ(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    hx_free(out);
}

TEST_MAIN()
