/*
 * outfile.c — where an output the user named may be written, and how.
 *
 * Rule: hx writes its outputs (converted models, made models, plots) only as regular files.
 * A name that does not exist is created; an existing regular file is replaced (by the
 * caller, atomically) with its permissions kept; a symbolic link is written through to the
 * regular file it names; a directory, device, FIFO or socket, or a link to a missing file, is
 * refused with a message and left as it was.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h> /* realpath */
#include <string.h>
#include <sys/stat.h>

#include "hx-impl.h"

static const char *hx__file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int hx__outfile_resolve(const char *path, char **target, bool *exists, unsigned *mode)
{
    *target = NULL, *exists = false, *mode = 0;
    if (!path || !*path) return hx__set_error(HX_E_INVAL, "no output path");
    struct stat sb;
    char realbuf[PATH_MAX];
    const char *real = NULL;
    if (lstat(path, &sb) != 0) {
        if (errno != ENOENT)
            return hx__set_error(HX_E_IO, "cannot check '%s': %s", path, strerror(errno));
    } else {
        if (S_ISLNK(sb.st_mode)) {
            /* Follow the link to the file it finally names; a dangling link is refused, since
             * writing through it would create a file somewhere the user may not expect. */
            if (!(real = realpath(path, realbuf)) || stat(real, &sb) != 0) {
                int e = errno;
                return hx__set_error(HX_E_INVAL, "'%s' is a symbolic link to a missing file (%s); "
                                                 "not writing through it", path, strerror(e));
            }
        }
        if (!S_ISREG(sb.st_mode)) {
            return hx__set_error(HX_E_INVAL, "'%s' is %s; outputs are written only as regular "
                                             "files, so it is left as it is", path,
                                 hx__file_kind(sb.st_mode));
        }
        *exists = true;
        *mode = (unsigned)(sb.st_mode & 07777);
    }
    *target = hx_strdup(real ? real : path);
    return *target ? HX_OK : HX_E_NOMEM;
}
