/*
 * progress.c — what the commands say on stderr, all in one form: errors and status lines
 * ("engine bench: loading m.gguf", "engine quantize: note: ...") as "engine CMD: ...", the
 * counted bar of quantize and mkmodel ("tensor i/n, MB, elapsed"), and the weights being
 * prepared for each device while a context is set up (hx_context_params.load_progress).
 * stdout stays for results.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app.h"
#include "hx-internal.h"

static void hx_app_vline(const char *cmd, const char *fmt, va_list ap)
{
    fprintf(stderr, "engine %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void hx_app_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hx_app_vline(cmd, fmt, ap);
    va_end(ap);
}

void hx_app_progress_note(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hx_app_vline(cmd, fmt, ap);
    va_end(ap);
}

void hx_app_progress_init(struct hx_app_progress *p, const char *what, bool force, uint64_t total_bytes)
{
    memset(p, 0, sizeof *p);
    p->what = what;
    p->tty = isatty(STDERR_FILENO) == 1;
    p->enabled = p->tty || force;
    p->total_bytes = total_bytes;
    p->t0_us = hx__time_us();
}

void hx_app_progress_step(struct hx_app_progress *p, uint64_t done, uint64_t total, uint64_t step_bytes)
{
    p->done_bytes += step_bytes;
    if (!p->enabled) return;
    double now = hx__time_us();
    /* A tty redraws at most 10 times a second; a log gets a line per tenth of the tensors
     * or every 5 s. Both always show the end. */
    bool decile = total && (done * 10 / total) != ((done - 1) * 10 / total);
    if (done < total && (p->tty ? now - p->last_us < 1e5 : !decile && now - p->last_us < 5e6)) return;
    p->last_us = now;
    const int width = 30;
    int fill = total ? (int)(width * done / total) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "%s%s [%s] tensor %llu/%llu  %.1f/%.1f MB  %.1f s%s", p->tty ? "\r" : "", p->what, bar,
            (unsigned long long)done, (unsigned long long)total, p->done_bytes / 1e6, p->total_bytes / 1e6,
            (now - p->t0_us) / 1e6, p->tty ? "" : "\n");
    if (p->tty && done == total) fputc('\n', stderr);
    fflush(stderr);
}

void hx_app_progress_end(struct hx_app_progress *p)
{
    (void)p;
    fflush(stderr);
}

/* ---- weights prepared for the devices ---------------------------------------------------- */

void hx_app_load_init(struct hx_app_load *p, const char *cmd, bool force)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->tty = isatty(STDERR_FILENO) == 1;
    p->enabled = p->tty || force;
}

void hx_app_load_params(struct hx_app_load *p, struct hx_context_params *cp)
{
    cp->load_progress = p->enabled ? hx_app_load_progress : NULL;
    cp->load_progress_data = p->enabled ? p : NULL;
}

/* One line per device: "engine CMD: loading weights: vulkan:0 312.0/604.2 MiB  51%". A tty
 * redraws it in place (at most 10 times a second) and starts a new line when another device
 * reports; a log gets a line per tenth of each device's bytes. Each device's last line is its
 * 100% (the core reports done == total once the device is ready); repeats are not printed. */
void hx_app_load_progress(void *user_data, const char *device, uint64_t done, uint64_t total)
{
    struct hx_app_load *p = user_data;
    int d = 0;
    while (d < p->n_dev && strcmp(p->dev[d], device)) d++;
    if (d == p->n_dev) {
        if (d == HX_APP_LOAD_DEVICES) return;
        snprintf(p->dev[d], sizeof p->dev[d], "%s", device);
        p->pct[d] = -1;
        p->n_dev++;
    }
    const int pct = total ? (int)(HX_MIN(done, total) * 100 / total) : 100;
    const double now = hx__time_us();
    const bool same = p->cur == d && p->open;
    if (pct == p->pct[d]) return;
    if (p->tty ? pct < 100 && same && now - p->last_us < 1e5
               : pct < 100 && p->pct[d] >= 0 && pct / 10 == p->pct[d] / 10)
        return;
    if (p->tty && p->open && !same) fputc('\n', stderr); /* another device's line stays */
    fprintf(stderr, "%sengine %s: loading weights: %s %.1f/%.1f MiB %3d%%%s", p->tty ? "\r" : "",
            p->cmd, device, (double)done / 1048576.0, (double)total / 1048576.0, pct,
            p->tty && pct < 100 ? "" : "\n");
    fflush(stderr);
    p->open = p->tty && pct < 100;
    p->cur = d, p->pct[d] = pct, p->last_us = now;
}
