/* metasync: what it costs to make a create durable, by primitive (issue 35).
 *
 * THREADS threads each create (and, with -r, then unlink) files in DIR for SECONDS, making each
 * change durable with PRIMITIVE before counting it:
 *   none       no sync (what an `async` export, or the intent journal, leaves to the background)
 *   fsync-dir  fsync(2) of the directory (ext4: forces a commit of the running journal transaction)
 *   fdatasync-dir  fdatasync(2) of the directory
 *   fsync-file fsync(2) of the new file (create only: a removed file has nothing left to sync)
 *   syncfs     syncfs(2) of the file system
 * With -g, calls share syncs in user space (group commit: a caller that finds a sync running
 * waits for the next one, which one of the waiters then runs for all of them), as the local
 * backend does; without it every caller syncs on its own and only the kernel batches.
 * Prints one line: primitive, threads, group, creates per second, syncs issued.
 *
 * Build: cc -O2 -pthread -o metasync metasync.c
 * Run:   metasync DIR PRIMITIVE THREADS SECONDS [-g] [-r]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum prim { NONE, FSYNC_DIR, FDATASYNC_DIR, FSYNC_FILE, SYNCFS };

static const char *dir;
static enum prim prim;
static int group, removes;
static int dirfd_;
static volatile int stop;
static atomic_long done_ops, syncs;

/* Group commit: `requested` counts callers that want a sync started after their change,
 * `completed` the generation the last finished sync covered. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long next_gen = 1, done_gen = 0;
static int running;

static int do_sync(int filefd) {
    atomic_fetch_add(&syncs, 1);
    switch (prim) {
    case NONE: return 0;
    case FSYNC_DIR: return fsync(dirfd_);
    case FDATASYNC_DIR: return fdatasync(dirfd_);
    case FSYNC_FILE: return fsync(filefd);
    case SYNCFS: return syncfs(dirfd_);
    }
    return -1;
}

static int durable(int filefd) {
    if (!group || prim == FSYNC_FILE || prim == NONE) return do_sync(filefd);
    pthread_mutex_lock(&mu);
    long mine = next_gen; /* a sync that starts after now covers my change */
    for (;;) {
        if (done_gen >= mine) break;
        if (!running) {
            running = 1;
            long covers = next_gen++;
            pthread_mutex_unlock(&mu);
            int r = do_sync(filefd);
            pthread_mutex_lock(&mu);
            running = 0;
            if (r != 0) {
                pthread_mutex_unlock(&mu);
                return r;
            }
            done_gen = covers;
            pthread_cond_broadcast(&cv);
            continue;
        }
        pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

static void *worker(void *arg) {
    long id = (long)arg;
    char name[64];
    for (long i = 0; !stop; i++) {
        snprintf(name, sizeof name, "t%ld-%ld", id, i);
        int fd = openat(dirfd_, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0) { perror("openat"); exit(1); }
        if (durable(fd) != 0) { perror("sync"); exit(1); }
        close(fd);
        atomic_fetch_add(&done_ops, 1);
        if (removes) {
            if (unlinkat(dirfd_, name, 0) != 0) { perror("unlinkat"); exit(1); }
            if (prim != FSYNC_FILE && durable(-1) != 0) { perror("sync"); exit(1); }
            atomic_fetch_add(&done_ops, 1);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s DIR none|fsync-dir|fdatasync-dir|fsync-file|syncfs THREADS SECONDS [-g] [-r]\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    const char *p = argv[2];
    prim = !strcmp(p, "none") ? NONE : !strcmp(p, "fsync-dir") ? FSYNC_DIR
         : !strcmp(p, "fdatasync-dir") ? FDATASYNC_DIR : !strcmp(p, "fsync-file") ? FSYNC_FILE
         : !strcmp(p, "syncfs") ? SYNCFS : -1;
    if ((int)prim < 0) { fprintf(stderr, "unknown primitive %s\n", p); return 2; }
    int threads = atoi(argv[3]);
    double seconds = atof(argv[4]);
    for (int i = 5; i < argc; i++) {
        if (!strcmp(argv[i], "-g")) group = 1;
        else if (!strcmp(argv[i], "-r")) removes = 1;
    }
    if (threads < 1 || threads > 256 || seconds <= 0 || seconds > 600) { fprintf(stderr, "bad THREADS or SECONDS\n"); return 2; }
    dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd_ < 0) { perror(dir); return 1; }
    pthread_t t[256];
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
    nanosleep(&ts, NULL);
    stop = 1;
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    printf("%s threads=%d group=%d ops_per_s=%.0f syncs=%ld\n", p, threads, group,
           atomic_load(&done_ops) / seconds, atomic_load(&syncs));
    return 0;
}
