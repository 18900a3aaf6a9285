/*
 * cmd-serve.c — `engine serve`: an OpenAI-compatible HTTP server (docs/server.md).
 *
 * Startup: check the options the engine can judge without the model (policy, backend, fallback,
 * chat template name; the model file can be opened) and refuse bad ones with exit status 2 (1
 * for the file) before anything listens; then listen, then load the model on the worker thread,
 * so /health answers 503 {"status":"loading"} until it is ready. Shutdown (SIGINT/SIGTERM):
 * stop accepting, close idle connections, let in-flight requests finish within the grace
 * period, then cancel the rest (routes.c tells their clients so); once nothing is in flight,
 * join the worker, free the engine and return 0. A second signal cancels at once. Everything
 * here runs on the loop thread.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <uv.h>

#include "app.h"
#include "server.h"

static struct {
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    uv_timer_t grace;
    double grace_s;
    int exit_code;
    bool finished;
    int n_signals;
} hx_srv_main;

static void hx_srv_usage(FILE *f)
{
    fprintf(f,
            "usage: engine serve -m MODEL [options]\n"
            "  --host ADDR           address to bind (default 127.0.0.1)\n"
            "  --port N              port (default 8080; 0 = any free port, printed on stderr)\n"
            "  --backend B           device for the single policy (cpu, vulkan, npu, ...)\n"
            "  --policy P            dispatch policy\n"
            "  --fallback LIST       fallback chain, e.g. npu,vulkan,cpu\n"
            "  --mem DEV=SIZE,...    memory caps per device, e.g. vulkan=2G (docs/policies.md)\n"
            "  --progress            weights' loading progress per device on stderr even when\n"
            "                        it is not a terminal\n"
            "  --parallel N          concurrent sequences (KV slots), default 4\n"
            "  --cache-slots N       more KV sequences that only keep cached prompts, default 0\n"
            "  --queue N             waiting requests beyond --parallel, default 16 (then 503)\n"
            "  --ctx N               context positions per sequence\n"
            "  --batch N             most rows per hx_decode call (default 512): prompts are\n"
            "                        prefilled in chunks of at most min(N, 256) rows\n"
            "  --threads N           CPU threads (0 = all)\n"
            "  --api-key K           require Authorization: Bearer K on /v1/*\n"
            "  --chat-template NAME  built-in chat template instead of detecting it\n"
            "  --timeout S           seconds for a request to arrive whole (default 10; 408)\n"
            "  --idle-timeout S      keep-alive idle seconds (default 30)\n"
            "  --grace S             shutdown grace period (default 10)\n"
            "  --keepalive S         SSE ': keep-alive' comment after S quiet seconds (default 3)\n"
            "  --self-test [-m M]    run the server's unit tests (with M: the structured-output\n"
            "                        grammars built for model M too) and exit\n");
}

static void hx_srv_finish(void)
{
    if (hx_srv_main.finished) return;
    hx_srv_main.finished = true;
    hx__srv_http_stop_listening();
    hx__srv_http_close_all();
    uv_close((uv_handle_t *)&hx_srv_main.sigint, NULL);
    uv_close((uv_handle_t *)&hx_srv_main.sigterm, NULL);
    uv_close((uv_handle_t *)&hx_srv_main.grace, NULL);
    hx__srv_worker_stop(); /* joins the worker; closes the async handle */
}

static void hx_srv_cancel_all(void)
{
    for (struct hx_srv_conn *c = hx__srv_http_first(); c; c = c->next)
        if (c->job) hx__srv_worker_cancel(c->job);
}

static void hx_srv_maybe_finish(void)
{
    if (hx__srv_cfg.draining && hx__srv_cfg.in_flight == 0) hx_srv_finish();
}

static void hx_srv_grace_cb(uv_timer_t *t)
{
    (void)t;
    fprintf(stderr, "engine serve: grace period over; cancelling %lld request(s)\n",
            (long long)hx__srv_cfg.in_flight);
    hx_srv_cancel_all();
}

static void hx_srv_signal_cb(uv_signal_t *s, int signum)
{
    (void)s;
    if (++hx_srv_main.n_signals > 1) {
        hx_srv_cancel_all();
        return;
    }
    fprintf(stderr, "engine serve: signal %d: draining %lld request(s)\n", signum,
            (long long)hx__srv_cfg.in_flight);
    hx__srv_cfg.draining = true;
    hx__srv_http_stop_listening();
    hx__srv_http_close_idle();
    uv_timer_start(&hx_srv_main.grace, hx_srv_grace_cb, (uint64_t)(hx_srv_main.grace_s * 1000), 0);
    hx_srv_maybe_finish();
}

static void hx_srv_on_event(struct hx_srv_event *ev, void *user_data)
{
    (void)user_data;
    if (ev->type == HX_SRV_EV_LOADED) {
        hx__srv_cfg.loading = false;
        fprintf(stderr, "engine serve: model loaded (%s; %s)\n", hx__srv_worker_model_id(),
                ev->text ? ev->text : "?");
        const char *chat = hx__srv_worker_chat_error();
        if (chat)
            fprintf(stderr,
                    "engine serve: /v1/chat/completions will answer 501: %s (start the server "
                    "with --chat-template NAME)\n",
                    chat);
        free(ev->text);
        free(ev);
        hx_srv_maybe_finish();
        return;
    }
    if (ev->type == HX_SRV_EV_LOAD_FAILED) {
        fprintf(stderr, "engine serve: cannot load the model: %s\n", ev->text ? ev->text : "?");
        free(ev->text);
        free(ev);
        hx_srv_main.exit_code = 1;
        hx__srv_cfg.draining = true;
        hx_srv_finish();
        return;
    }
    hx__srv_route_event(ev);
    hx_srv_maybe_finish();
}

struct hx_srv_args {
    struct hx_srv_worker_params worker;
    struct hx_srv_http_opts http;
};

static bool hx_srv_num_arg(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    if (hx_app_parse_i64(v, lo, hi, out)) return true;
    hx_app_error("serve", "%s: expected an integer in [%lld, %lld], got '%s'", flag, (long long)lo,
                 (long long)hi, v ? v : "");
    return false;
}

/* What the engine can judge without the model: the policy, backend and fallback names and the
 * chat template's name. Checked before the listener opens, so a mistyped option is a usage
 * error (exit 2) instead of a server that is up and answers every request wrongly. */
static int hx_srv_check_engine_args(const struct hx_srv_worker_params *p)
{
    if (hx_policy_validate(p->policy, p->backend, p->fallback) != HX_OK ||
        hx_mem_validate(p->mem) != HX_OK) {
        hx_app_error("serve", "%s", hx_last_error());
        return 2;
    }
    if (!p->chat_template) return 0;
    const char *const *names = hx_chat_template_names();
    char known[256] = "";
    size_t used = 0;
    for (size_t i = 0; names && names[i]; i++) {
        if (!strcmp(names[i], p->chat_template)) return 0;
        int n = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", names[i]);
        if (n > 0 && (size_t)n < sizeof known - used) used += (size_t)n;
    }
    hx_app_error("serve", "--chat-template: unknown template '%s' (known: %s)", p->chat_template,
                 known);
    return 2;
}

/* 0 ok, 2 usage error, -1 help printed */
static int hx_srv_parse_args(int argc, char **argv, struct hx_srv_args *a)
{
    int64_t v;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) return -1;
        if (!strcmp(f, "--progress")) {
            a->worker.progress = true;
            continue;
        }
#define HX_SRV_STR(name, dst)                                                                \
    if (!strcmp(f, name)) {                                                                  \
        if (!val) goto missing;                                                              \
        dst = val;                                                                           \
        i++;                                                                                 \
        continue;                                                                            \
    }
#define HX_SRV_INT(name, lo, hi, dst)                                                        \
    if (!strcmp(f, name)) {                                                                  \
        if (!hx_srv_num_arg(name, val, lo, hi, &v)) return 2;                                \
        dst = v;                                                                             \
        i++;                                                                                 \
        continue;                                                                            \
    }
        HX_SRV_STR("-m", a->worker.model_path)
        HX_SRV_STR("--model", a->worker.model_path)
        HX_SRV_STR("--host", a->http.host)
        HX_SRV_STR("--backend", a->worker.backend)
        HX_SRV_STR("--policy", a->worker.policy)
        HX_SRV_STR("--fallback", a->worker.fallback)
        HX_SRV_STR("--mem", a->worker.mem)
        HX_SRV_STR("--api-key", hx__srv_cfg.api_key)
        HX_SRV_STR("--chat-template", a->worker.chat_template)
        HX_SRV_INT("--port", 0, 65535, a->http.port)
        HX_SRV_INT("--parallel", 1, 256, a->worker.n_parallel)
        HX_SRV_INT("--cache-slots", 0, 256, a->worker.n_cache_slots)
        HX_SRV_INT("--queue", 0, 100000, hx__srv_cfg.n_queue)
        HX_SRV_INT("--ctx", 0, INT32_MAX, a->worker.n_ctx)
        HX_SRV_INT("--batch", 1, 65536, a->worker.n_batch)
        HX_SRV_INT("--threads", 0, HX_MAX_THREADS, a->worker.n_threads)
        HX_SRV_INT("--timeout", 1, 3600, a->http.request_timeout_s)
        HX_SRV_INT("--idle-timeout", 1, 86400, a->http.idle_timeout_s)
        HX_SRV_INT("--grace", 0, 3600, hx_srv_main.grace_s)
        HX_SRV_INT("--keepalive", 0, 3600, a->http.keepalive_s)
#undef HX_SRV_STR
#undef HX_SRV_INT
        hx_app_error("serve", "unknown option '%s' (see --help)", f);
        return 2;
    missing:
        hx_app_error("serve", "%s needs a value", f);
        return 2;
    }
    if (!a->worker.model_path) {
        hx_app_error("serve", "-m MODEL is required");
        return 2;
    }
    if (hx__srv_cfg.api_key && !*hx__srv_cfg.api_key) {
        hx_app_error("serve", "--api-key must not be empty");
        return 2;
    }
    return hx_srv_check_engine_args(&a->worker);
}

static int hx_srv_run(struct hx_srv_args *a)
{
    uv_loop_t *loop = &hx_srv_main.loop;
    if (uv_loop_init(loop)) {
        hx_app_error("serve", "cannot create the event loop");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    int port = 0;
    int rc = hx__srv_http_listen(loop, &a->http, hx__srv_route, NULL, &port);
    if (rc) {
        hx_app_error("serve", "cannot listen on %s:%d: %s", a->http.host, a->http.port, uv_strerror(rc));
        hx__srv_http_stop_listening();
        uv_run(loop, UV_RUN_DEFAULT);
        uv_loop_close(loop);
        return 1;
    }
    fprintf(stderr, "engine serve: listening on http://%s:%d (loading %s)\n", a->http.host, port,
            a->worker.model_path);
    uv_signal_init(loop, &hx_srv_main.sigint);
    uv_signal_init(loop, &hx_srv_main.sigterm);
    uv_timer_init(loop, &hx_srv_main.grace);
    uv_signal_start(&hx_srv_main.sigint, hx_srv_signal_cb, SIGINT);
    uv_signal_start(&hx_srv_main.sigterm, hx_srv_signal_cb, SIGTERM);
    hx__srv_cfg.loading = true;
    if (hx__srv_worker_start(loop, &a->worker, hx_srv_on_event, NULL) != HX_OK) {
        hx_app_error("serve", "cannot start the worker thread");
        hx_srv_main.exit_code = 1;
        hx_srv_finish();
    }
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    if (hx_srv_main.exit_code == 0) fprintf(stderr, "engine serve: stopped\n");
    return hx_srv_main.exit_code;
}

int hx_cmd_serve(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--self-test")) { /* [-m MODEL]: grammar tests on it */
        const char *m = argc >= 4 && !strcmp(argv[2], "-m") ? argv[3] : NULL;
        if (argc != 2 && !m) {
            hx_app_error("serve", "usage: engine serve --self-test [-m MODEL]");
            return 2;
        }
        return hx__srv_selftest(m) ? 1 : 0;
    }
    struct hx_srv_args a = {
        .worker = {.n_parallel = 4},
        .http = {.host = "127.0.0.1", .port = 8080, .request_timeout_s = 10, .idle_timeout_s = 30,
                 .keepalive_s = 3},
    };
    hx__srv_cfg.n_queue = 16;
    hx_srv_main.grace_s = 10;
    int st = hx_srv_parse_args(argc, argv, &a);
    if (st == -1) {
        hx_srv_usage(stdout);
        return 0;
    }
    if (st) return st;
    struct stat sb;
    FILE *mf = fopen(a.worker.model_path, "rb");
    if (!mf || (stat(a.worker.model_path, &sb) == 0 && S_ISDIR(sb.st_mode))) {
        hx_app_error("serve", "cannot open the model '%s': %s", a.worker.model_path,
                     mf ? "it is a directory" : strerror(errno));
        if (mf) fclose(mf);
        return 1;
    }
    fclose(mf);
    hx__srv_cfg.n_parallel = (int)a.worker.n_parallel;
    hx__srv_cfg.keepalive_s = a.http.keepalive_s;
    return hx_srv_run(&a);
}
