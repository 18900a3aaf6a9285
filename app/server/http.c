/*
 * http.c — connections: accept, read, parse (reqparse.c), timers, writes and close, on libuv.
 *
 * One request per connection is answered at a time; bytes of pipelined requests wait in
 * conn->in and are parsed when the current answer has been written out. While a request is
 * answered the socket keeps reading (so a client that goes away is noticed and its generation
 * cancelled) until conn->in holds more than a request's worth, then reading pauses. A peer
 * that sends requests but does not read the answers is not answered further while more than
 * HX_SRV_OUT_HIGH bytes of answers wait to be sent (then reading pauses too): the memory a
 * connection holds stays bounded whatever it pipelines.
 *
 * Timers (one per connection): idle keep-alive wait → close; a started request must arrive
 * whole within request_timeout → 408 and close; while an SSE stream is open the timer ticks
 * every second so routes.c can send `: keep-alive` comments.
 *
 * Lifetime: a connection is freed in the close callback of its last handle; closing first
 * detaches its job (routes.c cancels it). Errors close with a lingering read so the client
 * sees the error response instead of a reset. Loop thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "server.h"

#define HX_SRV_IN_PAUSE ((size_t)HX_SRV_MAX_BODY_BYTES + HX_SRV_MAX_HEADER_BYTES + 65536)
/* unsent answer bytes above which a connection's next pipelined request waits */
#define HX_SRV_OUT_HIGH ((size_t)1 << 20)

static struct {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listening;
    struct hx_srv_http_opts o;
    hx_srv_request_cb on_request;
    hx_srv_conn_closed_cb on_closed;
    struct hx_srv_conn *conns;
    int64_t n_conns;
    uint64_t next_req_id;
} hx_srv_h;

struct hx_srv_write {
    uv_write_t req;
    struct hx_srv_conn *c;
    size_t len;
    char data[];
};

static void hx_srv_conn_process(struct hx_srv_conn *c);
static void hx_srv_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void hx_srv_conn_arm_timer(struct hx_srv_conn *c);

static uv_timer_t *hx_srv_timer(struct hx_srv_conn *c) { return c->timer; }

/* ---- close ------------------------------------------------------------------------------------ */

static void hx_srv_conn_free(struct hx_srv_conn *c)
{
    hx__srv_reqp_deinit(&c->rp);
    hx__srv_buf_free(&c->in);
    hx__srv_buf_free(&c->text);
    free(c);
}

static void hx_srv_handle_closed(uv_handle_t *h)
{
    struct hx_srv_conn *c = h->data;
    free(h);
    if (--c->handles_open == 0) hx_srv_conn_free(c);
}

void hx__srv_access_log(const struct hx_srv_access *a)
{
    double end = a->t_end > 0 ? a->t_end : hx__srv_now_s();
    fprintf(stderr,
            "hx-serve: req=%llu %s %s status=%d prompt_tokens=%lld cached_tokens=%lld "
            "gen_tokens=%lld ttft_ms=%.1f total_ms=%.1f%s\n",
            (unsigned long long)a->req_id, a->method, a->route, a->status,
            (long long)a->prompt_tokens, (long long)a->cached_tokens, (long long)a->completion_tokens,
            a->t_first > 0 ? (a->t_first - a->t_start) * 1e3 : -1.0, (end - a->t_start) * 1e3,
            a->truncated ? " truncated" : "");
    hx__srv_metrics_request(a->route, a->status);
}

static void hx_srv_access_of(const struct hx_srv_conn *c, struct hx_srv_access *a)
{
    memset(a, 0, sizeof *a);
    a->req_id = c->req_id;
    snprintf(a->method, sizeof a->method, "%s", c->method);
    snprintf(a->route, sizeof a->route, "%s", c->route);
    a->status = c->status;
    a->truncated = c->truncated;
    a->prompt_tokens = c->prompt_tokens;
    a->cached_tokens = c->cached_tokens;
    a->completion_tokens = c->completion_tokens;
    a->t_start = c->t_start;
    a->t_first = c->t_first;
}

static void hx_srv_access_log(const struct hx_srv_conn *c)
{
    struct hx_srv_access a;
    hx_srv_access_of(c, &a);
    hx__srv_access_log(&a);
}

static void hx_srv_conn_close(struct hx_srv_conn *c)
{
    if (c->closing) return;
    c->closing = true;
    if (c->busy) {
        c->status = 499; /* closed before the answer was complete (a cut stream too) */
        c->truncated = c->headers_sent;
        struct hx_srv_access a;
        hx_srv_access_of(c, &a);
        a.t_end = hx__srv_now_s();
        if (c->job) hx__srv_route_conn_closed(c, &a); /* logged when the job has stopped */
        else hx__srv_access_log(&a);
        c->busy = false;
    } else if (c->job) {
        hx__srv_route_conn_closed(c, NULL);
    }
    if (c->prev) c->prev->next = c->next;
    else hx_srv_h.conns = c->next;
    if (c->next) c->next->prev = c->prev;
    hx_srv_h.n_conns--;
    uv_close((uv_handle_t *)c->timer, hx_srv_handle_closed);
    uv_close((uv_handle_t *)c->tcp, hx_srv_handle_closed);
}

static void hx_srv_linger_timeout(uv_timer_t *t) { hx_srv_conn_close(t->data); }

/* The answer is all sent (FIN follows it): linger 2 s more from now. */
static void hx_srv_shutdown_cb(uv_shutdown_t *req, int status)
{
    struct hx_srv_conn *c = req->data;
    free(req);
    if (status < 0 || c->closing) hx_srv_conn_close(c);
    else uv_timer_start(hx_srv_timer(c), hx_srv_linger_timeout, 2000, 0);
}

/* Send what is queued, then FIN; keep reading (and dropping) for a moment so the peer reads
 * our answer before the socket goes away. A peer that reads a long answer slowly gets it whole
 * (the 2 s start once it is sent); one that does not read it at all is dropped after the idle
 * timeout. */
static void hx_srv_conn_close_after_flush(struct hx_srv_conn *c)
{
    if (c->closing || c->lingering) return;
    c->lingering = true;
    uv_shutdown_t *req = malloc(sizeof *req);
    if (!req || uv_shutdown(req, (uv_stream_t *)c->tcp, hx_srv_shutdown_cb)) {
        free(req);
        hx_srv_conn_close(c);
        return;
    }
    req->data = c;
    c->timer_mode = 4;
    double wait_s = hx_srv_h.o.idle_timeout_s > 2 ? hx_srv_h.o.idle_timeout_s : 2;
    uv_timer_start(hx_srv_timer(c), hx_srv_linger_timeout, (uint64_t)(wait_s * 1000), 0);
}

/* ---- writes --------------------------------------------------------------------------------- */

/* Whether the next pipelined request must wait for the answers before it to drain. */
static bool hx_srv_backlogged(const struct hx_srv_conn *c)
{
    return c->pending_bytes > HX_SRV_OUT_HIGH;
}

static void hx_srv_write_cb(uv_write_t *req, int status)
{
    struct hx_srv_write *w = (struct hx_srv_write *)req;
    struct hx_srv_conn *c = w->c;
    bool was_backlogged = hx_srv_backlogged(c);
    c->pending_bytes -= w->len;
    free(w);
    c->pending_writes--;
    if (status < 0) { /* the peer is gone (EPIPE, ECONNRESET, ...) */
        hx_srv_conn_close(c);
        return;
    }
    /* the peer has read enough: answer the requests that waited */
    if (was_backlogged && !hx_srv_backlogged(c) && !c->busy && !c->in_process)
        hx_srv_conn_process(c);
}

static void hx_srv_write(struct hx_srv_conn *c, const char *data, size_t len)
{
    if (c->closing || c->lingering || !len) return;
    struct hx_srv_write *w = malloc(sizeof *w + len);
    if (!w) {
        hx_srv_conn_close(c);
        return;
    }
    w->c = c;
    w->len = len;
    memcpy(w->data, data, len);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)c->tcp, &b, 1, hx_srv_write_cb)) {
        free(w);
        hx_srv_conn_close(c);
        return;
    }
    c->pending_writes++;
    c->pending_bytes += len;
    c->last_write_s = hx__srv_now_s();
}

static void hx_srv_head(struct hx_srv_buf *b, struct hx_srv_conn *c, int status,
                        const char *content_type, const char *extra)
{
    hx__srv_buf_printf(b,
                       "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nx-hx-devices: %s\r\n"
                       "x-request-id: %llu\r\nConnection: %s\r\n",
                       status, hx__srv_status_text(status), content_type, hx__srv_worker_devices(),
                       (unsigned long long)c->req_id, c->keep_alive ? "keep-alive" : "close");
    if (extra) hx__srv_buf_puts(b, extra);
}

/* ---- responses ------------------------------------------------------------------------------ */

static void hx_srv_request_end(struct hx_srv_conn *c)
{
    hx_srv_access_log(c);
    c->busy = false;
    c->headers_sent = false;
    c->truncated = false;
    c->job = NULL;
    hx__srv_buf_free(&c->text);
    hx__srv_reqp_reset(&c->rp);
    if (!c->closing) hx_srv_conn_arm_timer(c);
    if (!c->keep_alive) {
        hx_srv_conn_close_after_flush(c);
        return;
    }
    if (!c->in_process) hx_srv_conn_process(c);
}

void hx__srv_respond(struct hx_srv_conn *c, int status, const char *content_type,
                     const char *body, size_t len, const char *extra_headers)
{
    if (c->closing || !c->busy) return;
    c->status = status;
    if (hx__srv_cfg.draining) c->keep_alive = false;
    struct hx_srv_buf b = {0};
    hx_srv_head(&b, c, status, content_type, extra_headers);
    hx__srv_buf_printf(&b, "Content-Length: %zu\r\n\r\n", len);
    hx__srv_buf_append(&b, body, len);
    if (b.failed) hx_srv_conn_close(c);
    else hx_srv_write(c, b.data, b.len);
    hx__srv_buf_free(&b);
    if (!c->closing) hx_srv_request_end(c);
}

void hx__srv_respond_error(struct hx_srv_conn *c, int status, const char *msg,
                           const char *param, const char *code, const char *extra_headers)
{
    char *body = hx__srv_error_json(status, msg, param, code);
    if (!body) {
        hx_srv_conn_close(c);
        return;
    }
    hx__srv_respond(c, status, "application/json", body, strlen(body), extra_headers);
    free(body);
}

/* A stream is chunked for HTTP/1.1. An HTTP/1.0 client does not know chunked coding (a
 * server must not send it one, RFC 9112 7.1): its stream is the bare events, ended by closing
 * the connection. */
void hx__srv_stream_begin(struct hx_srv_conn *c)
{
    if (c->closing || c->headers_sent) return;
    c->status = 200;
    c->headers_sent = true;
    if (c->http10) c->keep_alive = false;
    struct hx_srv_buf b = {0};
    hx_srv_head(&b, c, 200, "text/event-stream", "Cache-Control: no-cache\r\n");
    hx__srv_buf_puts(&b, c->http10 ? "\r\n" : "Transfer-Encoding: chunked\r\n\r\n");
    hx_srv_write(c, b.data, b.len);
    hx__srv_buf_free(&b);
    hx_srv_conn_arm_timer(c);
}

/* data is whole chunks ("<hex>\r\n<bytes>\r\n"...), as sse.c frames them; for HTTP/1.0 only
 * their bytes are sent. */
void hx__srv_stream_send(struct hx_srv_conn *c, const char *data, size_t len)
{
    if (!c->http10) {
        hx_srv_write(c, data, len);
        return;
    }
    size_t i = 0;
    while (i < len) {
        char *end;
        unsigned long long n = strtoull(data + i, &end, 16);
        size_t at = (size_t)(end - data) + 2; /* past the size's CRLF */
        if (end == data + i || at > len || n > len - at) break; /* not ours: never happens */
        hx_srv_write(c, data + at, (size_t)n);
        i = at + (size_t)n + 2;
    }
}

void hx__srv_stream_end(struct hx_srv_conn *c)
{
    if (c->closing || !c->busy) return;
    if (!c->http10) hx_srv_write(c, "0\r\n\r\n", 5);
    if (hx__srv_cfg.draining) c->keep_alive = false;
    if (!c->closing) hx_srv_request_end(c);
}

/* ---- timers --------------------------------------------------------------------------------- */

static void hx_srv_timeout_cb(uv_timer_t *t)
{
    struct hx_srv_conn *c = t->data;
    if (c->busy) {
        if (c->headers_sent) hx__srv_route_keepalive(c);
        return;
    }
    if (!hx__srv_reqp_started(&c->rp)) { /* idle keep-alive connection */
        hx_srv_conn_close(c);
        return;
    }
    /* a request that has not arrived whole in time */
    c->busy = true;
    c->keep_alive = false;
    c->t_start = hx__srv_now_s();
    c->req_id = ++hx_srv_h.next_req_id;
    snprintf(c->method, sizeof c->method, "-");
    snprintf(c->route, sizeof c->route, "-");
    hx__srv_respond_error(c, 408, "the request did not arrive in time", NULL, "request_timeout", NULL);
}

/* The timer follows the connection's state and is re-armed only when the state changes, so
 * the request timeout runs from a request's first byte, however slowly the rest trickles in. */
static void hx_srv_conn_arm_timer(struct hx_srv_conn *c)
{
    if (c->closing || c->lingering) return;
    uv_timer_t *t = hx_srv_timer(c);
    int mode = c->busy ? (c->headers_sent ? 3 : 0) : hx__srv_reqp_started(&c->rp) ? 2 : 1;
    if (mode == c->timer_mode) return;
    c->timer_mode = mode;
    double s = mode == 1 ? hx_srv_h.o.idle_timeout_s : hx_srv_h.o.request_timeout_s;
    if (mode == 0) uv_timer_stop(t);
    else if (mode == 3) uv_timer_start(t, hx_srv_timeout_cb, 1000, 1000);
    else uv_timer_start(t, hx_srv_timeout_cb, (uint64_t)(s * 1000), 0);
}

/* ---- reading and parsing ---------------------------------------------------------------------- */

static void hx_srv_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    static char slab[65536]; /* loop thread only; consumed before the next read */
    (void)suggested;
    *buf = uv_buf_init(slab, sizeof slab);
}

static void hx_srv_begin_request(struct hx_srv_conn *c)
{
    struct hx_srv_req *r = &c->rp.req;
    c->busy = true;
    c->req_id = ++hx_srv_h.next_req_id;
    c->t_start = hx__srv_now_s();
    c->t_first = 0;
    c->status = 0;
    c->prompt_tokens = c->completion_tokens = c->cached_tokens = 0;
    c->keep_alive = r->keep_alive && !hx__srv_cfg.draining;
    c->http10 = r->http10;
    snprintf(c->method, sizeof c->method, "%s", http_method_str(r->method));
    snprintf(c->route, sizeof c->route, "%s", "other");
}

static void hx_srv_parse_error(struct hx_srv_conn *c)
{
    bool started = c->rp.headers_done;
    c->busy = true;
    c->req_id = ++hx_srv_h.next_req_id;
    c->t_start = hx__srv_now_s();
    c->keep_alive = false;
    snprintf(c->method, sizeof c->method, "%s",
             started ? http_method_str((enum http_method)c->rp.parser.method) : "-");
    snprintf(c->route, sizeof c->route, "-");
    hx__srv_respond_error(c, c->rp.error_status, c->rp.error_msg ? c->rp.error_msg : "bad request",
                          NULL, NULL, NULL);
}

static void hx_srv_conn_process(struct hx_srv_conn *c)
{
    c->in_process = true;
    while (!c->busy && !c->closing && !c->lingering && !hx_srv_backlogged(c)) {
        size_t used = c->in.len ? hx__srv_reqp_feed(&c->rp, c->in.data, c->in.len) : 0;
        hx__srv_buf_consume(&c->in, used);
        if (c->rp.error_status) {
            hx_srv_parse_error(c);
            break;
        }
        if (c->rp.headers_done && c->rp.req.expect_continue && !c->rp.req.http10 &&
            !c->sent_continue && !c->rp.complete) {
            c->sent_continue = true;
            hx_srv_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        }
        if (!c->rp.complete) {
            hx_srv_conn_arm_timer(c);
            break;
        }
        c->sent_continue = false;
        hx_srv_begin_request(c);
        hx_srv_conn_arm_timer(c);
        hx_srv_h.on_request(c);
    }
    c->in_process = false;
    if (!c->closing && !c->reading && c->in.len < HX_SRV_IN_PAUSE / 2) {
        /* libuv refuses a NULL read callback (UV_EINVAL): reading would never resume */
        if (!uv_read_start((uv_stream_t *)c->tcp, hx_srv_alloc_cb, hx_srv_read_cb)) c->reading = true;
    }
}

static void hx_srv_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct hx_srv_conn *c = s->data;
    if (nread < 0) { /* EOF or error: the client is gone */
        hx_srv_conn_close(c);
        return;
    }
    if (nread == 0 || c->closing || c->lingering) return;
    hx__srv_buf_append(&c->in, buf->base, (size_t)nread);
    if (c->in.failed) {
        hx_srv_conn_close(c);
        return;
    }
    if (c->busy || hx_srv_backlogged(c)) {
        if (c->in.len > HX_SRV_IN_PAUSE) {
            uv_read_stop(s);
            c->reading = false;
        }
        return;
    }
    hx_srv_conn_process(c);
}

/* ---- accept ----------------------------------------------------------------------------------- */

static void hx_srv_accept_cb(uv_stream_t *server, int status)
{
    if (status < 0) return;
    struct hx_srv_conn *c = calloc(1, sizeof *c);
    uv_tcp_t *tcp = malloc(sizeof *tcp);
    uv_timer_t *timer = malloc(sizeof *timer);
    if (!c || !tcp || !timer || uv_tcp_init(hx_srv_h.loop, tcp)) {
        free(c);
        free(tcp);
        free(timer);
        return;
    }
    tcp->data = c;
    c->tcp = tcp;
    c->handles_open = 1;
    if (uv_accept(server, (uv_stream_t *)tcp) || uv_timer_init(hx_srv_h.loop, timer)) {
        free(timer);
        uv_close((uv_handle_t *)tcp, hx_srv_handle_closed);
        return;
    }
    timer->data = c;
    c->timer = timer;
    c->handles_open = 2;
    uv_tcp_nodelay(tcp, 1);
    hx__srv_reqp_init(&c->rp);
    c->next = hx_srv_h.conns;
    if (c->next) c->next->prev = c;
    hx_srv_h.conns = c;
    hx_srv_h.n_conns++;
    if (uv_read_start((uv_stream_t *)tcp, hx_srv_alloc_cb, hx_srv_read_cb)) {
        hx_srv_conn_close(c);
        return;
    }
    c->reading = true;
    hx_srv_conn_arm_timer(c);
}

int hx__srv_http_listen(uv_loop_t *loop, const struct hx_srv_http_opts *o,
                        hx_srv_request_cb on_request, hx_srv_conn_closed_cb on_closed,
                        int *bound_port)
{
    hx_srv_h.loop = loop;
    hx_srv_h.o = *o;
    hx_srv_h.on_request = on_request;
    hx_srv_h.on_closed = on_closed;
    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(o->host, o->port, (struct sockaddr_in *)&addr);
    if (rc) rc = uv_ip6_addr(o->host, o->port, (struct sockaddr_in6 *)&addr);
    if (rc) return rc;
    if ((rc = uv_tcp_init(loop, &hx_srv_h.listener))) return rc;
    hx_srv_h.listening = true;
    if ((rc = uv_tcp_bind(&hx_srv_h.listener, (struct sockaddr *)&addr, 0)) ||
        (rc = uv_listen((uv_stream_t *)&hx_srv_h.listener, 512, hx_srv_accept_cb)))
        return rc;
    struct sockaddr_storage got;
    int len = sizeof got;
    *bound_port = o->port;
    if (!uv_tcp_getsockname(&hx_srv_h.listener, (struct sockaddr *)&got, &len))
        *bound_port = got.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&got)->sin6_port)
                                                : ntohs(((struct sockaddr_in *)&got)->sin_port);
    return 0;
}

void hx__srv_http_stop_listening(void)
{
    if (!hx_srv_h.listening) return;
    hx_srv_h.listening = false;
    uv_close((uv_handle_t *)&hx_srv_h.listener, NULL);
}

void hx__srv_http_close_idle(void)
{
    for (struct hx_srv_conn *c = hx_srv_h.conns, *next; c; c = next) {
        next = c->next;
        if (!c->busy) hx_srv_conn_close(c);
    }
}

void hx__srv_http_close_all(void)
{
    while (hx_srv_h.conns) hx_srv_conn_close(hx_srv_h.conns);
}

int64_t hx__srv_http_n_conns(void) { return hx_srv_h.n_conns; }
struct hx_srv_conn *hx__srv_http_first(void) { return hx_srv_h.conns; }
