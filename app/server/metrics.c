/*
 * metrics.c — the server's counters and their Prometheus text form (GET /metrics).
 *
 * Loop thread only (no locks): requests by route and status, prompt/completion token totals,
 * the last request's prompt and generation tokens/s, a time-to-first-token histogram, cancelled
 * generations, prompt-cache hits, misses and reused tokens. Queue depth, active slots and
 * per-device busy time come from the worker at render time, requests in flight from routes.c.
 */
#include <stdlib.h>
#include <string.h>

#include "server.h"

#define HX_SRV_METRIC_ROWS 64

struct hx_srv_req_count {
    char route[32];
    int status;
    int64_t n;
};

static const double hx_srv_ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                            1,     2.5,  5,     10,   30};
#define HX_SRV_TTFT_N (sizeof hx_srv_ttft_bounds / sizeof hx_srv_ttft_bounds[0])

static struct {
    struct hx_srv_req_count rows[HX_SRV_METRIC_ROWS];
    int n_rows;
    int64_t prompt_tokens, completion_tokens;
    double prompt_tps, gen_tps;
    int64_t ttft_buckets[HX_SRV_TTFT_N];
    int64_t ttft_count;
    double ttft_sum;
    int64_t cancelled;
    int64_t cache_hits, cache_misses, cache_tokens;
} hx_srv_m;

void hx__srv_metrics_request(const char *route, int status)
{
    for (int i = 0; i < hx_srv_m.n_rows; i++) {
        struct hx_srv_req_count *r = &hx_srv_m.rows[i];
        if (r->status == status && !strcmp(r->route, route)) {
            r->n++;
            return;
        }
    }
    /* the table is full only if clients invent routes; those share the last row */
    int i = hx_srv_m.n_rows < HX_SRV_METRIC_ROWS ? hx_srv_m.n_rows++ : HX_SRV_METRIC_ROWS - 1;
    struct hx_srv_req_count *r = &hx_srv_m.rows[i];
    strncpy(r->route, route, sizeof r->route - 1);
    r->status = status;
    r->n++;
}

void hx__srv_metrics_tokens(int64_t prompt, int64_t completion, double prompt_tps, double gen_tps)
{
    hx_srv_m.prompt_tokens += prompt;
    hx_srv_m.completion_tokens += completion;
    if (prompt_tps > 0) hx_srv_m.prompt_tps = prompt_tps;
    if (gen_tps > 0) hx_srv_m.gen_tps = gen_tps;
}

void hx__srv_metrics_cancelled(void) { hx_srv_m.cancelled++; }

void hx__srv_metrics_cache(int64_t cached)
{
    if (cached > 0) hx_srv_m.cache_hits++;
    else hx_srv_m.cache_misses++;
    hx_srv_m.cache_tokens += cached;
}

void hx__srv_metrics_ttft(double seconds)
{
    for (size_t i = 0; i < HX_SRV_TTFT_N; i++)
        if (seconds <= hx_srv_ttft_bounds[i]) hx_srv_m.ttft_buckets[i]++;
    hx_srv_m.ttft_count++;
    hx_srv_m.ttft_sum += seconds;
}

char *hx__srv_metrics_render(int64_t queue_depth, int64_t active_slots, int64_t in_flight,
                             bool loading, const char *device_lines)
{
    struct hx_srv_buf b = {0};
    hx__srv_buf_puts(&b, "# HELP hx_requests_total HTTP requests by route and status.\n"
                         "# TYPE hx_requests_total counter\n");
    for (int i = 0; i < hx_srv_m.n_rows; i++)
        hx__srv_buf_printf(&b, "hx_requests_total{route=\"%s\",status=\"%d\"} %lld\n",
                           hx_srv_m.rows[i].route, hx_srv_m.rows[i].status,
                           (long long)hx_srv_m.rows[i].n);
    hx__srv_buf_printf(&b,
                       "# HELP hx_prompt_tokens_total Prompt tokens run through the model (a "
                       "cached prefix is not).\n"
                       "# TYPE hx_prompt_tokens_total counter\nhx_prompt_tokens_total %lld\n"
                       "# HELP hx_completion_tokens_total Tokens generated (by cancelled and "
                       "failed requests too).\n"
                       "# TYPE hx_completion_tokens_total counter\nhx_completion_tokens_total %lld\n"
                       "# HELP hx_prompt_tokens_per_second Prefill speed of the last request.\n"
                       "# TYPE hx_prompt_tokens_per_second gauge\nhx_prompt_tokens_per_second %.3f\n"
                       "# HELP hx_generation_tokens_per_second Decode speed of the last request.\n"
                       "# TYPE hx_generation_tokens_per_second gauge\n"
                       "hx_generation_tokens_per_second %.3f\n",
                       (long long)hx_srv_m.prompt_tokens, (long long)hx_srv_m.completion_tokens,
                       hx_srv_m.prompt_tps, hx_srv_m.gen_tps);
    hx__srv_buf_puts(&b, "# HELP hx_time_to_first_token_seconds Time from request to first token.\n"
                         "# TYPE hx_time_to_first_token_seconds histogram\n");
    for (size_t i = 0; i < HX_SRV_TTFT_N; i++)
        hx__srv_buf_printf(&b, "hx_time_to_first_token_seconds_bucket{le=\"%g\"} %lld\n",
                           hx_srv_ttft_bounds[i], (long long)hx_srv_m.ttft_buckets[i]);
    hx__srv_buf_printf(&b,
                       "hx_time_to_first_token_seconds_bucket{le=\"+Inf\"} %lld\n"
                       "hx_time_to_first_token_seconds_sum %.6f\n"
                       "hx_time_to_first_token_seconds_count %lld\n",
                       (long long)hx_srv_m.ttft_count, hx_srv_m.ttft_sum,
                       (long long)hx_srv_m.ttft_count);
    hx__srv_buf_printf(&b,
                       "# HELP hx_queue_depth Requests waiting for a slot.\n"
                       "# TYPE hx_queue_depth gauge\nhx_queue_depth %lld\n"
                       "# HELP hx_active_slots Sequences being generated.\n"
                       "# TYPE hx_active_slots gauge\nhx_active_slots %lld\n"
                       "# HELP hx_requests_in_flight Generation requests submitted and not finished.\n"
                       "# TYPE hx_requests_in_flight gauge\nhx_requests_in_flight %lld\n"
                       "# HELP hx_model_loading 1 while the model loads.\n"
                       "# TYPE hx_model_loading gauge\nhx_model_loading %d\n"
                       "# HELP hx_generations_cancelled_total Generations cancelled (client gone, "
                       "shutdown).\n"
                       "# TYPE hx_generations_cancelled_total counter\n"
                       "hx_generations_cancelled_total %lld\n",
                       (long long)queue_depth, (long long)active_slots, (long long)in_flight,
                       loading ? 1 : 0,
                       (long long)hx_srv_m.cancelled);
    hx__srv_buf_printf(&b,
                       "# HELP hx_prompt_cache_hits_total Requests that reused a cached prompt "
                       "prefix.\n"
                       "# TYPE hx_prompt_cache_hits_total counter\n"
                       "hx_prompt_cache_hits_total %lld\n"
                       "# HELP hx_prompt_cache_misses_total Requests with cache_prompt on that "
                       "reused nothing.\n"
                       "# TYPE hx_prompt_cache_misses_total counter\n"
                       "hx_prompt_cache_misses_total %lld\n"
                       "# HELP hx_prompt_cache_tokens_total Prompt tokens taken from the KV cache "
                       "instead of prefilled.\n"
                       "# TYPE hx_prompt_cache_tokens_total counter\n"
                       "hx_prompt_cache_tokens_total %lld\n",
                       (long long)hx_srv_m.cache_hits, (long long)hx_srv_m.cache_misses,
                       (long long)hx_srv_m.cache_tokens);
    hx__srv_buf_puts(&b, "# HELP hx_device_busy_seconds_total Decode time by the devices that ran it.\n"
                         "# TYPE hx_device_busy_seconds_total counter\n");
    if (device_lines) hx__srv_buf_puts(&b, device_lines);
    if (b.failed) {
        hx__srv_buf_free(&b);
        return NULL;
    }
    return b.data;
}
