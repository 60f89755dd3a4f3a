/*
 * posixop: one POSIX file-system call (or a short fixed sequence) per run, for tests that must
 * make exactly that call as a given user through a mount. The test harness runs it with the
 * user's uid/gid/groups already set (pre_exec) and reads one line:
 *
 *   ok [PAYLOAD]        the call (sequence) succeeded
 *   err ERRNO_NAME      it failed; the name is the errno's symbol (EACCES, ENOENT, ...)
 *
 * Operations (argv[1]):
 *   open PATH FLAG...            open(2) and close; flags: rdonly wronly rdwr nonblock trunc
 *                                append creat
 *   truncate PATH LEN            truncate(2) by path
 *   chmod PATH OCTAL             chmod(2)
 *   chown PATH UID GID           chown(2)
 *   link OLD NEW                 link(2)
 *   symlink TARGET LINK          symlink(2)
 *   mkfifo PATH OCTAL            mkfifo(3)
 *   readlink PATH                payload: the target
 *   lstat PATH                   payload: "mode=OCTAL nlink=N uid=U gid=G size=S"
 *   rename OLD NEW               rename(2)
 *   append-fstat PATH DATA       open(O_WRONLY|O_APPEND), write DATA, fstat on the descriptor,
 *                                close, stat: payload "fd=OCTAL path=OCTAL" (modes)
 *   unlink-fstat PATH            open, unlink, fstat: payload "nlink=N"
 *   rewind-unlink DIR NAME       opendir, read all (NAME must be there), unlink DIR/NAME,
 *                                rewinddir, read all: payload "gone" or "seen"
 *   utime PATH SECONDS           utimensat(mtime = atime = SECONDS), then stat: payload the mtime
 *   handle PATH                  name_to_handle_at: payload "TYPE:HEX" (the file handle)
 *   open-handle DIR TYPE:HEX     open_by_handle_at(DIR's mount, handle, O_RDONLY), read up to 255
 *                                bytes: payload what was read (text), or "dir" for a directory
 *   exec PATH                    fork, execv(PATH) in the child; ok if the program ran and exited
 *                                0, err ERRNO if execv failed, err EXIT_N if it exited N
 *
 * Written in C so that nothing between the test and the system call (a runtime, a shell)
 * changes which calls are made.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fail(void) {
    int e = errno;
    const char *name = strerrorname_np(e);
    printf("err %s\n", name ? name : "EUNKNOWN");
    return 1;
}

static int ok(const char *payload) {
    if (payload && *payload)
        printf("ok %s\n", payload);
    else
        printf("ok\n");
    return 0;
}

static int usage(void) {
    fprintf(stderr, "posixop: bad arguments (see the comment at the top of posixop.c)\n");
    return 2;
}

static int open_flags(int argc, char **argv, int first) {
    int flags = 0;
    for (int i = first; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "rdonly"))
            flags |= O_RDONLY;
        else if (!strcmp(f, "wronly"))
            flags |= O_WRONLY;
        else if (!strcmp(f, "rdwr"))
            flags |= O_RDWR;
        else if (!strcmp(f, "nonblock"))
            flags |= O_NONBLOCK;
        else if (!strcmp(f, "trunc"))
            flags |= O_TRUNC;
        else if (!strcmp(f, "append"))
            flags |= O_APPEND;
        else if (!strcmp(f, "creat"))
            flags |= O_CREAT;
        else
            return -1;
    }
    return flags;
}

/* Reads every entry of `d`; returns 1 if `name` was among them. */
static int dir_has(DIR *d, const char *name) {
    struct dirent *e;
    int seen = 0;
    errno = 0;
    while ((e = readdir(d)) != NULL)
        if (!strcmp(e->d_name, name))
            seen = 1;
    return seen;
}

int main(int argc, char **argv) {
    char buf[8192];
    if (argc < 3)
        return usage();
    const char *op = argv[1];
    const char *path = argv[2];

    if (!strcmp(op, "open")) {
        int flags = open_flags(argc, argv, 3);
        if (flags < 0)
            return usage();
        int fd = open(path, flags, 0644);
        if (fd < 0)
            return fail();
        close(fd);
        return ok(NULL);
    }
    if (!strcmp(op, "truncate") && argc == 4)
        return truncate(path, atoll(argv[3])) ? fail() : ok(NULL);
    if (!strcmp(op, "chmod") && argc == 4)
        return chmod(path, (mode_t)strtoul(argv[3], NULL, 8)) ? fail() : ok(NULL);
    if (!strcmp(op, "chown") && argc == 5)
        return chown(path, (uid_t)atol(argv[3]), (gid_t)atol(argv[4])) ? fail() : ok(NULL);
    if (!strcmp(op, "link") && argc == 4)
        return link(path, argv[3]) ? fail() : ok(NULL);
    if (!strcmp(op, "symlink") && argc == 4)
        return symlink(path, argv[3]) ? fail() : ok(NULL);
    if (!strcmp(op, "mkfifo") && argc == 4)
        return mkfifo(path, (mode_t)strtoul(argv[3], NULL, 8)) ? fail() : ok(NULL);
    if (!strcmp(op, "rename") && argc == 4)
        return rename(path, argv[3]) ? fail() : ok(NULL);
    if (!strcmp(op, "readlink")) {
        ssize_t n = readlink(path, buf, sizeof buf - 1);
        if (n < 0)
            return fail();
        buf[n] = 0;
        return ok(buf);
    }
    if (!strcmp(op, "lstat")) {
        struct stat st;
        if (lstat(path, &st))
            return fail();
        snprintf(buf, sizeof buf, "mode=%o nlink=%lu uid=%u gid=%u size=%lld", st.st_mode & 07777,
                 (unsigned long)st.st_nlink, st.st_uid, st.st_gid, (long long)st.st_size);
        return ok(buf);
    }
    if (!strcmp(op, "append-fstat") && argc == 4) {
        struct stat by_fd, by_path;
        int fd = open(path, O_WRONLY | O_APPEND);
        if (fd < 0)
            return fail();
        size_t len = strlen(argv[3]);
        if (write(fd, argv[3], len) != (ssize_t)len || fstat(fd, &by_fd))
            return fail();
        if (close(fd) || stat(path, &by_path))
            return fail();
        snprintf(buf, sizeof buf, "fd=%o path=%o", by_fd.st_mode & 07777, by_path.st_mode & 07777);
        return ok(buf);
    }
    if (!strcmp(op, "unlink-fstat")) {
        struct stat st;
        int fd = open(path, O_RDONLY | O_NONBLOCK);
        if (fd < 0 || unlink(path) || fstat(fd, &st))
            return fail();
        close(fd);
        snprintf(buf, sizeof buf, "nlink=%lu", (unsigned long)st.st_nlink);
        return ok(buf);
    }
    if (!strcmp(op, "rewind-unlink") && argc == 4) {
        DIR *d = opendir(path);
        if (!d)
            return fail();
        if (!dir_has(d, argv[3])) {
            if (errno)
                return fail();
            errno = ENOENT;
            return fail();
        }
        snprintf(buf, sizeof buf, "%s/%s", path, argv[3]);
        if (unlink(buf))
            return fail();
        rewinddir(d);
        int seen = dir_has(d, argv[3]);
        if (errno)
            return fail();
        closedir(d);
        return ok(seen ? "seen" : "gone");
    }
    if (!strcmp(op, "utime") && argc == 4) {
        struct timespec ts[2];
        struct stat st;
        ts[0].tv_sec = ts[1].tv_sec = (time_t)atoll(argv[3]);
        ts[0].tv_nsec = ts[1].tv_nsec = 0;
        if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) || lstat(path, &st))
            return fail();
        snprintf(buf, sizeof buf, "%lld", (long long)st.st_mtim.tv_sec);
        return ok(buf);
    }
    if (!strcmp(op, "handle") && argc == 3) {
        char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        struct file_handle *fh = (struct file_handle *)space;
        int mount_id;
        fh->handle_bytes = MAX_HANDLE_SZ;
        if (name_to_handle_at(AT_FDCWD, path, fh, &mount_id, 0))
            return fail();
        int n = snprintf(buf, sizeof buf, "%d:", fh->handle_type);
        for (unsigned i = 0; i < fh->handle_bytes && n + 3 < (int)sizeof buf; i++)
            n += snprintf(buf + n, sizeof buf - n, "%02x", fh->f_handle[i]);
        return ok(buf);
    }
    if (!strcmp(op, "open-handle") && argc == 4) {
        char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        struct file_handle *fh = (struct file_handle *)space;
        const char *hex = strchr(argv[3], ':');
        if (!hex)
            return usage();
        fh->handle_type = atoi(argv[3]);
        hex++;
        size_t len = strlen(hex) / 2;
        if (len > MAX_HANDLE_SZ)
            return usage();
        for (size_t i = 0; i < len; i++) {
            unsigned v;
            if (sscanf(hex + 2 * i, "%2x", &v) != 1)
                return usage();
            fh->f_handle[i] = (unsigned char)v;
        }
        fh->handle_bytes = (unsigned)len;
        int mount_fd = open(path, O_RDONLY | O_DIRECTORY);
        if (mount_fd < 0)
            return fail();
        int fd = open_by_handle_at(mount_fd, fh, O_RDONLY);
        if (fd < 0)
            return fail();
        struct stat st;
        if (fstat(fd, &st))
            return fail();
        if (S_ISDIR(st.st_mode))
            return ok("dir");
        ssize_t got = read(fd, buf, 255);
        if (got < 0)
            return fail();
        buf[got] = 0;
        return ok(buf);
    }
    if (!strcmp(op, "exec") && argc == 3) {
        int report[2];
        if (pipe2(report, O_CLOEXEC))
            return fail();
        fflush(stdout);
        pid_t child = fork();
        if (child < 0)
            return fail();
        if (child == 0) {
            char *args[] = {(char *)path, NULL};
            execv(path, args);
            int e = errno;
            (void)!write(report[1], &e, sizeof e);
            _exit(127);
        }
        close(report[1]);
        int e = 0, status = 0;
        ssize_t n = read(report[0], &e, sizeof e);
        if (waitpid(child, &status, 0) < 0)
            return fail();
        if (n == (ssize_t)sizeof e) {
            errno = e;
            return fail();
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            printf("err EXIT_%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
            return 1;
        }
        return ok(NULL);
    }
    return usage();
}
