/*
 * reqparse.c — one HTTP/1.1 request at a time from a byte stream, on nodejs http-parser.
 *
 * Owns: the request head (method, URL, the few headers the server reads), the body
 * (Content-Length only; chunked bodies are refused with 411) and the limits (head 16 KiB → 431,
 * body 4 MiB → 413). After a complete request the parser is paused so the bytes of a
 * pipelined next request stay with the caller until it resets the parser. No I/O here: the
 * connection code (http.c) and the fuzz target drive it the same way.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server.h"

static struct hx_srv_reqp *hx_srv_rp(http_parser *p) { return p->data; }

static int hx_srv_rp_fail(struct hx_srv_reqp *rp, int status, const char *msg)
{
    if (!rp->error_status) {
        rp->error_status = status;
        rp->error_msg = msg;
    }
    return 3; /* any value but 0/1/2 makes http-parser stop with a callback error */
}

static int hx_srv_rp_count(struct hx_srv_reqp *rp, size_t n)
{
    rp->head_bytes += n;
    if (rp->head_bytes > HX_SRV_MAX_HEADER_BYTES)
        return hx_srv_rp_fail(rp, 431, "request header fields too large");
    return 0;
}

static int hx_srv_on_begin(http_parser *p)
{
    hx_srv_rp(p)->head_bytes += 1; /* marks the request as started (for the 408 timer) */
    return 0;
}

static int hx_srv_on_url(http_parser *p, const char *at, size_t n)
{
    struct hx_srv_reqp *rp = hx_srv_rp(p);
    if (hx_srv_rp_count(rp, n)) return 3;
    hx__srv_buf_append(&rp->url, at, n);
    return 0;
}

/* A header is complete when the next field starts or the head ends. */
static void hx_srv_header_done(struct hx_srv_reqp *rp)
{
    if (!rp->field.len) return;
    const char *name = rp->field.data, *val = rp->value.data ? rp->value.data : "";
    if (!strcasecmp(name, "authorization")) {
        free(rp->req.authorization);
        rp->req.authorization = strdup(val);
    } else if (!strcasecmp(name, "expect") && !strcasecmp(val, "100-continue")) {
        rp->req.expect_continue = true;
    }
    rp->field.len = rp->value.len = 0;
    if (rp->field.data) rp->field.data[0] = '\0';
    if (rp->value.data) rp->value.data[0] = '\0';
}

static int hx_srv_on_field(http_parser *p, const char *at, size_t n)
{
    struct hx_srv_reqp *rp = hx_srv_rp(p);
    if (hx_srv_rp_count(rp, n + 4)) return 3;
    if (rp->in_value) hx_srv_header_done(rp);
    rp->in_value = false;
    if (rp->field.len < 64) hx__srv_buf_append(&rp->field, at, n); /* we read short names only */
    return 0;
}

static int hx_srv_on_value(http_parser *p, const char *at, size_t n)
{
    struct hx_srv_reqp *rp = hx_srv_rp(p);
    if (hx_srv_rp_count(rp, n)) return 3;
    rp->in_value = true;
    hx__srv_buf_append(&rp->value, at, n);
    return 0;
}

static int hx_srv_on_headers(http_parser *p)
{
    struct hx_srv_reqp *rp = hx_srv_rp(p);
    hx_srv_header_done(rp);
    rp->headers_done = true;
    rp->req.method = (enum http_method)p->method;
    rp->req.keep_alive = http_should_keep_alive(p) != 0;
    rp->req.http10 = p->http_major == 1 && p->http_minor == 0;
    rp->req.url = rp->url.data ? rp->url.data : (char *)"";
    if (rp->url.failed || rp->value.failed) return hx_srv_rp_fail(rp, 500, "out of memory");
    /* 400, not 505: anything a client sends gets a 4xx */
    if (p->http_major != 1 || p->http_minor > 1)
        return hx_srv_rp_fail(rp, 400, "unsupported HTTP version (HTTP/1.0 and HTTP/1.1 only)");
    if (p->flags & F_CHUNKED)
        return hx_srv_rp_fail(rp, 411, "chunked request bodies are not supported; send Content-Length");
    if (p->content_length != ULLONG_MAX && p->content_length > HX_SRV_MAX_BODY_BYTES)
        return hx_srv_rp_fail(rp, 413, "request body too large (limit 4 MiB)");
    return 0;
}

static int hx_srv_on_body(http_parser *p, const char *at, size_t n)
{
    struct hx_srv_reqp *rp = hx_srv_rp(p);
    if (rp->body.len + n > HX_SRV_MAX_BODY_BYTES)
        return hx_srv_rp_fail(rp, 413, "request body too large (limit 4 MiB)");
    hx__srv_buf_append(&rp->body, at, n);
    if (rp->body.failed) return hx_srv_rp_fail(rp, 500, "out of memory");
    return 0;
}

static int hx_srv_on_complete(http_parser *p)
{
    struct hx_srv_reqp *rp = hx_srv_rp(p);
    if (!rp->body.data) hx__srv_buf_append(&rp->body, "", 0);
    if (rp->body.failed) return hx_srv_rp_fail(rp, 500, "out of memory");
    rp->req.body = rp->body.data;
    rp->req.body_len = rp->body.len;
    /* path = url up to '?' or '#' (a copy, so the url stays whole) */
    free(rp->req.path);
    size_t plen = strcspn(rp->req.url, "?#");
    rp->req.path = strndup(rp->req.url, plen);
    if (!rp->req.path) return hx_srv_rp_fail(rp, 500, "out of memory");
    rp->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings hx_srv_settings = {
    .on_message_begin = hx_srv_on_begin,
    .on_url = hx_srv_on_url,
    .on_header_field = hx_srv_on_field,
    .on_header_value = hx_srv_on_value,
    .on_headers_complete = hx_srv_on_headers,
    .on_body = hx_srv_on_body,
    .on_message_complete = hx_srv_on_complete,
};

void hx__srv_reqp_init(struct hx_srv_reqp *rp)
{
    memset(rp, 0, sizeof *rp);
    http_parser_init(&rp->parser, HTTP_REQUEST);
    rp->parser.data = rp;
}

static void hx_srv_buf_clear(struct hx_srv_buf *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void hx__srv_reqp_reset(struct hx_srv_reqp *rp)
{
    free(rp->req.authorization);
    free(rp->req.path);
    memset(&rp->req, 0, sizeof rp->req);
    hx_srv_buf_clear(&rp->url);
    hx_srv_buf_clear(&rp->field);
    hx_srv_buf_clear(&rp->value);
    /* a big body's memory is not kept around for the connection's life */
    if (rp->body.cap > 65536) hx__srv_buf_free(&rp->body);
    hx_srv_buf_clear(&rp->body);
    rp->head_bytes = 0;
    rp->in_value = rp->headers_done = rp->complete = false;
    enum http_errno e = HTTP_PARSER_ERRNO(&rp->parser);
    if (e == HPE_PAUSED) {
        http_parser_pause(&rp->parser, 0);
    } else if (e != HPE_OK) { /* after an error the connection closes; start clean anyway */
        http_parser_init(&rp->parser, HTTP_REQUEST);
        rp->parser.data = rp;
    }
    rp->error_status = 0;
    rp->error_msg = NULL;
}

void hx__srv_reqp_deinit(struct hx_srv_reqp *rp)
{
    hx__srv_reqp_reset(rp);
    hx__srv_buf_free(&rp->url);
    hx__srv_buf_free(&rp->field);
    hx__srv_buf_free(&rp->value);
    hx__srv_buf_free(&rp->body);
}

bool hx__srv_reqp_started(const struct hx_srv_reqp *rp)
{
    return rp->head_bytes > 0 || rp->headers_done;
}

size_t hx__srv_reqp_feed(struct hx_srv_reqp *rp, const char *data, size_t n)
{
    if (rp->complete || rp->error_status || n == 0) return 0;
    size_t used = http_parser_execute(&rp->parser, &hx_srv_settings, data, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&rp->parser);
    if (e == HPE_OK || e == HPE_PAUSED) {
        if (rp->complete) return used;
        if (used < n && !rp->error_status) hx_srv_rp_fail(rp, 400, "malformed request");
        return used;
    }
    if (!rp->error_status) {
        if (e == HPE_HEADER_OVERFLOW)
            hx_srv_rp_fail(rp, 431, "request header fields too large");
        else
            hx_srv_rp_fail(rp, 400, http_errno_description(e));
    }
    return used;
}
