/*
 * test-chat.c — exact rendered strings of the built-in chat templates (formats.md §5.6):
 * Qwen3 ChatML with thinking on/off and past-turn <think> stripping, Llama 3, Llama 2,
 * BitNet; detection from template sources; unknown names and undetectable templates.
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

TEST_MAIN()
