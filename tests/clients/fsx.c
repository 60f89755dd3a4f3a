/*
 * fsx: a random-operation checker for one file, in the manner of the classic file-system
 * exerciser: it keeps the file's expected contents in memory, applies random operations to the
 * real file and to the model, and checks every read, and the file's size after every operation,
 * against the model. Written for eagernfs's mount tests; our own code.
 *
 *   fsx [-N OPS] [-S SEED] [-l MAXLEN] [-o MAXOP] [-M] [-D] [-c CLOSEPROB] PATH
 *
 *   -N OPS       operations to run (default 10000)
 *   -S SEED      random seed (default 1); a failure prints the seed and the last operations
 *   -l MAXLEN    largest file size (default 256 KiB)
 *   -o MAXOP     largest read/write/map length (default 64 KiB)
 *   -M           also use mmap: mapped reads and mapped writes (MAP_SHARED + msync)
 *   -D           open with O_DIRECT (reads and writes aligned to 4 KiB)
 *   -c N         close and reopen the file with probability 1/N after an operation (0: never)
 *
 * Operations: read, write (extending or not), truncate (shrink or grow), and with -M mapread
 * and mapwrite (a mapped write past the end first extends the file with ftruncate, as a program
 * that maps a file must). After every operation fstat's size and lseek(SEEK_END) must equal the
 * model's size ("size error"). A SIGBUS during a mapped access is reported as such: it means the
 * kernel believed the file shorter than it is.
 *
 * Exit status: 0 if every check passed, 1 on the first mismatch (with a report on stderr),
 * 2 on a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_LEN 32
#define ALIGN 4096

enum op { OP_READ, OP_WRITE, OP_TRUNCATE, OP_MAPREAD, OP_MAPWRITE, OP_COUNT };

static uint64_t rng_state;
static uint64_t rnd(void) {
    /* SplitMix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

static const char *path;
static int fd = -1;
static int use_direct;
static char *model;       /* expected contents, maxlen bytes */
static uint64_t model_size;
static uint64_t maxlen = 256 * 1024, maxop = 64 * 1024;
static char *buf;         /* I/O buffer, aligned */
static uint64_t seed = 1;
static long opno;
static char oplog[LOG_LEN][96];

static sigjmp_buf bus_jump;
static volatile sig_atomic_t in_map;

static void on_bus(int sig) {
    (void)sig;
    if (in_map)
        siglongjmp(bus_jump, 1);
    _exit(3);
}

static void logop(const char *fmt, uint64_t a, uint64_t b) {
    char *slot = oplog[opno % LOG_LEN];
    int n = snprintf(slot, 96, "%ld ", opno);
    snprintf(slot + n, 96 - n, fmt, (unsigned long long)a, (unsigned long long)b);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "fsx %s seed %llu op %ld: ", path, (unsigned long long)seed, opno);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nlast operations (oldest first):\n");
    for (long i = opno - LOG_LEN + 1; i <= opno; i++)
        if (i >= 0)
            fprintf(stderr, "  %s\n", oplog[i % LOG_LEN]);
    exit(1);
}

static void open_file(void) {
    fd = open(path, O_RDWR | (use_direct ? O_DIRECT : 0));
    if (fd < 0)
        fail("open: %s", strerror(errno));
}

static void check_size(void) {
    struct stat st;
    if (fstat(fd, &st) != 0)
        fail("fstat: %s", strerror(errno));
    off_t end = lseek(fd, 0, SEEK_END);
    if ((uint64_t)st.st_size != model_size || end != (off_t)model_size)
        fail("size error: expected 0x%llx stat 0x%llx seek 0x%llx", (unsigned long long)model_size,
             (unsigned long long)st.st_size, (long long)end);
}

static void check_bytes(const char *what, uint64_t off, const char *got, uint64_t len) {
    for (uint64_t i = 0; i < len; i++)
        if (got[i] != model[off + i])
            fail("%s: wrong byte at 0x%llx (read 0x%llx+0x%llx): got 0x%02x, expected 0x%02x", what,
                 (unsigned long long)(off + i), (unsigned long long)off, (unsigned long long)len,
                 (unsigned char)got[i], (unsigned char)model[off + i]);
}

/* A random range of at most maxop bytes; aligned under O_DIRECT. */
static void pick(uint64_t limit, uint64_t *off, uint64_t *len) {
    *off = below(limit);
    *len = 1 + below(maxop);
    if (use_direct) {
        *off &= ~(uint64_t)(ALIGN - 1);
        *len = (*len + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
    }
    if (*off + *len > maxlen)
        *len = maxlen - *off;
}

static void do_read(void) {
    uint64_t off, len;
    if (model_size == 0) {
        logop("read skipped (empty)%.0llu%.0llu", 0, 0);
        return;
    }
    pick(model_size, &off, &len);
    logop("read 0x%llx len 0x%llx", off, len);
    ssize_t n = pread(fd, buf, len, off);
    if (n < 0)
        fail("read: %s", strerror(errno));
    uint64_t want = off + len > model_size ? model_size - off : len;
    if ((uint64_t)n != want)
        fail("short read: 0x%zx of 0x%llx at 0x%llx", n, (unsigned long long)want, (unsigned long long)off);
    check_bytes("read", off, buf, want);
}

static void fill(uint64_t off, uint64_t len) {
    /* Bytes that say where they belong and when they were written. */
    for (uint64_t i = 0; i < len; i++)
        buf[i] = (char)(((off + i) % 251) ^ (opno & 0xff));
}

static void do_write(void) {
    uint64_t off, len;
    pick(maxlen, &off, &len);
    if (len == 0)
        return;
    logop("write 0x%llx len 0x%llx", off, len);
    fill(off, len);
    ssize_t n = pwrite(fd, buf, len, off);
    if (n < 0)
        fail("write: %s", strerror(errno));
    if ((uint64_t)n != len)
        fail("short write: 0x%zx of 0x%llx", n, (unsigned long long)len);
    if (off > model_size)
        memset(model + model_size, 0, off - model_size);
    memcpy(model + off, buf, len);
    if (off + len > model_size)
        model_size = off + len;
}

static void set_size(uint64_t size) {
    if (size > model_size)
        memset(model + model_size, 0, size - model_size);
    model_size = size;
}

static void do_truncate(void) {
    uint64_t size = below(maxlen + 1);
    if (use_direct)
        size &= ~(uint64_t)(ALIGN - 1);
    logop("truncate to 0x%llx (from 0x%llx)", size, model_size);
    if (ftruncate(fd, size) != 0)
        fail("ftruncate: %s", strerror(errno));
    set_size(size);
}

static void do_mapread(void) {
    uint64_t off, len;
    if (model_size == 0)
        return;
    pick(model_size, &off, &len);
    if (off + len > model_size)
        len = model_size - off;
    if (len == 0)
        return;
    logop("mapread 0x%llx len 0x%llx", off, len);
    long page = sysconf(_SC_PAGESIZE);
    uint64_t pg = off & ~(uint64_t)(page - 1);
    size_t maplen = off - pg + len;
    char *p = mmap(NULL, maplen, PROT_READ, MAP_SHARED, fd, pg);
    if (p == MAP_FAILED)
        fail("mmap (read): %s", strerror(errno));
    if (sigsetjmp(bus_jump, 1)) {
        in_map = 0;
        fail("SIGBUS reading the mapping at 0x%llx len 0x%llx: the kernel thinks the file is shorter",
             (unsigned long long)off, (unsigned long long)len);
    }
    in_map = 1;
    memcpy(buf, p + (off - pg), len);
    in_map = 0;
    munmap(p, maplen);
    check_bytes("mapread", off, buf, len);
}

static void do_mapwrite(void) {
    uint64_t off, len;
    pick(maxlen, &off, &len);
    if (len == 0)
        return;
    logop("mapwrite 0x%llx len 0x%llx", off, len);
    if (off + len > model_size) {
        if (ftruncate(fd, off + len) != 0)
            fail("ftruncate (extending for mapwrite): %s", strerror(errno));
        set_size(off + len);
    }
    long page = sysconf(_SC_PAGESIZE);
    uint64_t pg = off & ~(uint64_t)(page - 1);
    size_t maplen = off - pg + len;
    char *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, pg);
    if (p == MAP_FAILED)
        fail("mmap (write): %s", strerror(errno));
    fill(off, len);
    if (sigsetjmp(bus_jump, 1)) {
        in_map = 0;
        fail("SIGBUS writing the mapping at 0x%llx len 0x%llx: the kernel thinks the file is shorter",
             (unsigned long long)off, (unsigned long long)len);
    }
    in_map = 1;
    memcpy(p + (off - pg), buf, len);
    in_map = 0;
    if (msync(p, maplen, MS_SYNC) != 0)
        fail("msync: %s", strerror(errno));
    munmap(p, maplen);
    memcpy(model + off, buf, len);
}

static void usage(void) {
    fprintf(stderr, "usage: fsx [-N OPS] [-S SEED] [-l MAXLEN] [-o MAXOP] [-M] [-D] [-c N] PATH\n");
    exit(2);
}

int main(int argc, char **argv) {
    long ops = 10000, closeprob = 0;
    int use_mmap = 0, c;
    while ((c = getopt(argc, argv, "N:S:l:o:MDc:")) != -1) {
        switch (c) {
        case 'N': ops = strtol(optarg, NULL, 0); break;
        case 'S': seed = strtoull(optarg, NULL, 0); break;
        case 'l': maxlen = strtoull(optarg, NULL, 0); break;
        case 'o': maxop = strtoull(optarg, NULL, 0); break;
        case 'M': use_mmap = 1; break;
        case 'D': use_direct = 1; break;
        case 'c': closeprob = strtol(optarg, NULL, 0); break;
        default: usage();
        }
    }
    if (optind != argc - 1 || maxlen == 0 || maxop == 0 || ops < 0)
        usage();
    if (use_direct && use_mmap) {
        fprintf(stderr, "fsx: -D and -M do not mix\n");
        exit(2);
    }
    if (use_direct) {
        maxlen &= ~(uint64_t)(ALIGN - 1);
        maxop = (maxop + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
    }
    path = argv[optind];
    rng_state = seed;
    model = calloc(1, maxlen + ALIGN);
    if (posix_memalign((void **)&buf, ALIGN, maxop + 2 * ALIGN) != 0 || !model) {
        fprintf(stderr, "fsx: out of memory\n");
        exit(2);
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_bus;
    sigaction(SIGBUS, &sa, NULL);

    int create = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (create < 0) {
        fprintf(stderr, "fsx: create %s: %s\n", path, strerror(errno));
        exit(1);
    }
    close(create);
    open_file();
    int kinds = use_mmap ? OP_COUNT : OP_MAPREAD;
    for (opno = 0; opno < ops; opno++) {
        enum op op = (enum op)below(kinds);
        /* Truncates are rarer than data operations, as in the classic exerciser. */
        if (op == OP_TRUNCATE && below(4) != 0)
            op = OP_WRITE;
        switch (op) {
        case OP_READ: do_read(); break;
        case OP_WRITE: do_write(); break;
        case OP_TRUNCATE: do_truncate(); break;
        case OP_MAPREAD: do_mapread(); break;
        case OP_MAPWRITE: do_mapwrite(); break;
        default: break;
        }
        check_size();
        if (closeprob && below(closeprob) == 0) {
            logop("close/open%.0llu%.0llu", 0, 0);
            if (close(fd) != 0)
                fail("close: %s", strerror(errno));
            open_file();
        }
    }
    /* A last full read through a fresh descriptor. */
    close(fd);
    open_file();
    opno = ops;
    logop("final check of 0x%llx bytes%.0llu", model_size, 0);
    for (uint64_t off = 0; off < model_size; off += maxop) {
        uint64_t len = model_size - off < maxop ? model_size - off : maxop;
        uint64_t alen = use_direct ? (len + ALIGN - 1) & ~(uint64_t)(ALIGN - 1) : len;
        ssize_t n = pread(fd, buf, alen, off);
        if (n < 0 || (uint64_t)n < len)
            fail("final read at 0x%llx: %s", (unsigned long long)off, n < 0 ? strerror(errno) : "short");
        check_bytes("final read", off, buf, len);
    }
    close(fd);
    printf("fsx %s: %ld operations passed (seed %llu, size 0x%llx)\n", path, ops, (unsigned long long)seed,
           (unsigned long long)model_size);
    return 0;
}
