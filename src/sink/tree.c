/*
 * The process tree (tree.h): the root's table of members, its tree thread
 * that takes new members in and drops those that exited, the calls that
 * fan a request out, and a member's agent that answers them.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fork.h"
#include "base/lock.h"
#include "base/mem.h"
#include "base/proc.h"
#include "sink/tree.h"
#include "source/fds.h"
#include "source/threads.h"

#define HELLO_MAGIC 0x63707274u  /* "cprt" */
#define ASK_MAGIC 0x63707261u    /* "cpra" */
#define ANSWER_MAGIC 0x63707277u /* "cprw" */
#define HANDOVER_MAGIC 0x63707268u /* "cprh" */
#define MEMBER_MAGIC 0x6370726du   /* "cprm" */
#define ACK_MAGIC 0x6370726bu      /* "cprk" */
/* How long an exiting root waits for its heir to take the tree over. */
#define HANDOVER_WAIT_MS 1000
/* How long a root that exits right after a fork waits for the child's
 * hello. */
#define HELLO_WAIT_MS 250
/* Requests one member serves at once; more are answered 503 at once.
 * A pusher's window boundary briefly has two of each pushed windowed or
 * delta profile in flight (the one ending, the one starting) and a heap
 * snapshot, beside the HTTP clients' requests. */
#define MEMBER_INFLIGHT 8
/* A member's answer that the root stops reading for this long is
 * abandoned (the member's writer gives up). */
#define ANSWER_SEND_TIMEOUT_S 10

typedef struct hello {
  uint32_t magic;
  int32_t pid, ppid;
  int64_t start_unix_ns;
  char name[16];
} hello;

typedef struct ask {
  uint32_t magic;
  uint32_t flags; /* CPROF__TREE_* */
  uint32_t len;   /* of uri, without its NUL */
  char uri[CPROF__HTTP_MAX_URI + 256];
} ask;

typedef struct answer_head {
  uint32_t magic;
  int32_t status;
  uint32_t type_len;
  uint32_t pad;
  uint64_t body_len;
} answer_head;

typedef struct member {
  cprof__tree_member info;
  int ctl; /* the root's end of its control channel */
} member;

/* A root that exits hands the tree to a member: this, with its listening
 * socket and the root's end of the join channel, then one member_msg per
 * other member, with that member's control channel. */
typedef struct handover {
  uint32_t magic;
  uint32_t nmembers; /* member_msg that follow */
} handover;

typedef struct member_msg {
  uint32_t magic;
  uint32_t pad;
  cprof__tree_member info;
} member_msg;

static CPROF__FORK_LOCK pthread_mutex_t tree_mu = PTHREAD_MUTEX_INITIALIZER;
/* Held by an heir through its whole takeover (the endpoint's start
 * included), and by fork: a daemon that forks its workers while its agent
 * takes the tree over waits for it, so no child starts with the takeover
 * half done, or with an allocator's lock the takeover held (a sanitizer's
 * allocator takes none across fork). Taken before tree_mu. */
static CPROF__FORK_LOCK pthread_mutex_t takeover_mu = PTHREAD_MUTEX_INITIALIZER;
static member members[CPROF__TREE_MAX_MEMBERS]; /* under tree_mu */
static size_t nmembers;
static bool is_root;
static pid_t root_pid; /* the root's pid: a vfork child is not the root */
/* The session of the process that made the first root of this line: a
 * member that left it (setsid) is a daemon's next stage, an heir. */
static pid_t origin_sid = -1;
static bool root_exit_hooked; /* inherited: one exit hook per process line */
static int root_fd = -1; /* the root: hellos arrive here */
static int join_fd = -1; /* every process of the tree: hellos go here */
static cprof__tree_serve_fn serve;
static cprof__tree_heir_ops heir_ops; /* set by the endpoint that hands over */
static CPROF__FORK_DATA _Atomic int64_t last_fork_ns = INT64_MIN / 2; /* this process's last fork */
static _Atomic int member_ctl = -1; /* a member: its agent's control channel */
static atomic_bool took_over; /* this process took the tree over */
static _Atomic int inflight; /* a member: requests being served */
static atomic_bool exiting;  /* a member: the process is exiting */
/* How long a member's exit waits for the windows it ends to be sent. */
#define EXIT_ANSWER_WAIT_MS 1000
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static int64_t unix_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}


/* Set while an exiting root hands the tree over (under tree_mu), maybe in
 * a signal handler: the descriptor registry's lock is then tried, never
 * waited for (the interrupted code may hold it). */
static bool handing_over;

/* Receives one message without waiting and the up to nfds descriptors
 * it may carry (registered as cprof's, the rest -1); any other descriptor
 * is closed. Returns the message's length, 0 at the end, -1 on error
 * (EAGAIN: none). */
static ssize_t recv_with_fds(int sock, void *data, size_t len, int *fd,
                             size_t nfds) {
  for (size_t i = 0; i < nfds; i++) fd[i] = -1;
  size_t got_n = 0;
  if (handing_over) {
    if (!cprof__fd_trybegin()) {
      errno = EAGAIN;
      return -1;
    }
  } else {
    cprof__fd_begin();
  }
  struct iovec iov = {data, len};
  union {
    char buf[CMSG_SPACE(4 * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
  ssize_t n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n >= 0) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; i++) {
        int got;
        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
        if (got_n < nfds)
          fd[got_n++] = cprof__fd_adopt(got, CPROF__FD_ENDPOINT);
        else
          close(got);
      }
    }
    /* A message cut short is no message. */
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
      for (size_t i = 0; i < got_n; i++) {
        if (fd[i] >= 0) cprof__fd_close(fd[i]);
        fd[i] = -1;
      }
      n = -1;
      errno = EPROTO;
    }
  }
  cprof__fd_end();
  return n;
}

static ssize_t recv_with_fd(int sock, void *data, size_t len, int *fd) {
  return recv_with_fds(sock, data, len, fd, 1);
}

/* Sends len bytes with the n (at most 2) descriptors fds. */
static int send_with_fds(int sock, const void *data, size_t len,
                         const int *fds, size_t n, int flags) {
  struct iovec iov = {(void *)data, len};
  union {
    char buf[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } u;
  if (n > 2) return -1;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (n > 0) {
    memset(&u, 0, sizeof u);
    msg.msg_control = u.buf;
    msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, n * sizeof(int));
  }
  ssize_t r = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
  return r == (ssize_t)len ? 0 : -1;
}

/* Sends len bytes and, when fd >= 0, the descriptor fd with them. */
static int send_with_fd(int sock, const void *data, size_t len, int fd,
                        int flags) {
  return send_with_fds(sock, data, len, &fd, fd >= 0 ? 1 : 0, flags);
}

/* Writes all of len bytes; false when the peer went or stalled. */
static bool write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= (size_t)n;
  }
  return true;
}

/* --- the root ------------------------------------------------------- */

static void drop_member(size_t i) {
  cprof__fd_close(members[i].ctl);
  members[i] = members[--nmembers];
}

/* Takes in the hellos waiting on root_fd. Under tree_mu. */
static void take_hellos(void) {
  for (;;) {
    hello h;
    int fd;
    ssize_t n = recv_with_fd(root_fd, &h, sizeof h, &fd);
    if (n < 0 && errno == EPROTO) continue;
    if (n <= 0) return;
    bool good = n == (ssize_t)sizeof h && h.magic == HELLO_MAGIC &&
                h.pid > 0 && fd >= 0;
    if (good && !is_root) {
      /* The tree was handed over meanwhile: the hello goes on to the heir,
       * which reads the join channel now. */
      send_with_fd(join_fd, &h, sizeof h, fd, MSG_DONTWAIT);
    } else if (good && nmembers < CPROF__TREE_MAX_MEMBERS) {
      member *m = &members[nmembers++];
      m->info.pid = h.pid;
      m->info.ppid = h.ppid;
      m->info.start_unix_ns = h.start_unix_ns;
      memcpy(m->info.name, h.name, sizeof m->info.name);
      m->info.name[sizeof m->info.name - 1] = '\0';
      m->ctl = fd;
      fd = -1;
    }
    if (fd >= 0) cprof__fd_close(fd);
  }
}

/* The root's tree thread: takes members in as they join, drops those whose
 * control channel closed (they exited, or exec'd). */
static void *tree_main(void *arg) {
  (void)arg;
  struct pollfd pfd[CPROF__TREE_MAX_MEMBERS + 1];
  pid_t pids[CPROF__TREE_MAX_MEMBERS];
  for (;;) {
    size_t n = 0;
    cprof__lock(&tree_mu);
    for (size_t i = 0; i < nmembers; i++) {
      pfd[1 + i] = (struct pollfd){.fd = members[i].ctl, .events = 0};
      pids[i] = members[i].info.pid;
      n++;
    }
    cprof__unlock(&tree_mu);
    pfd[0] = (struct pollfd){.fd = root_fd, .events = POLLIN};
    int rc = poll(pfd, n + 1, 1000);
    cprof__lock(&tree_mu);
    bool root = is_root;
    cprof__unlock(&tree_mu);
    if (!root) break; /* handed over: the heir reads the channels now */
    if (rc <= 0) continue;
    if (pfd[0].revents & (POLLERR | POLLNVAL)) break;
    cprof__lock(&tree_mu);
    if (pfd[0].revents & POLLIN) take_hellos();
    for (size_t i = 0; i < n; i++) {
      if (!(pfd[1 + i].revents & (POLLHUP | POLLERR | POLLNVAL))) continue;
      for (size_t j = 0; j < nmembers; j++)
        if (members[j].info.pid == pids[i] && members[j].ctl == pfd[1 + i].fd) {
          drop_member(j);
          break;
        }
    }
    cprof__unlock(&tree_mu);
  }
  return NULL;
}

bool cprof__tree_has_members(void) {
  cprof__lock(&tree_mu);
  bool any = is_root && nmembers > 0;
  cprof__unlock(&tree_mu);
  return any;
}

size_t cprof__tree_members(cprof__tree_member *out, size_t max) {
  cprof__lock(&tree_mu);
  size_t n = is_root ? nmembers : 0;
  for (size_t i = 0; i < n && i < max; i++) out[i] = members[i].info;
  cprof__unlock(&tree_mu);
  return n;
}

struct cprof__tree_call {
  unsigned flags; /* sent with every ask */
  size_t n;
  cprof__tree_reply *replies;
  int *fds;             /* the answer sockets, -1 once read or failed */
  answer_head *heads;   /* the heads as they come */
  size_t *head_got;     /* bytes of the head read */
  uint64_t *body_want;  /* body bytes still to read */
  uint32_t *type_want;  /* Content-Type bytes still to read */
};

void cprof__tree_free(cprof__tree_call *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n; i++) {
    if (c->fds[i] >= 0) cprof__fd_close(c->fds[i]);
    cprof_buf_free(&c->replies[i].body);
  }
  cprof__free(c->replies);
  cprof__free(c->fds);
  cprof__free(c->heads);
  cprof__free(c->head_got);
  cprof__free(c->body_want);
  cprof__free(c->type_want);
  cprof__free(c);
}

/* Makes the request message for uri; NULL when it is too long or there is
 * no memory. */
static ask *make_ask(const char *uri, unsigned flags, size_t *msg_len) {
  size_t len = strlen(uri);
  ask *a = cprof__calloc(1, sizeof *a);
  if (!a || len >= sizeof a->uri) {
    cprof__free(a);
    return NULL;
  }
  a->magic = ASK_MAGIC;
  a->flags = flags;
  a->len = (uint32_t)len;
  memcpy(a->uri, uri, len + 1);
  *msg_len = offsetof(ask, uri) + len + 1;
  return a;
}

/* Sends a to member m, adding a reply to c for it. Under tree_mu. */
static void send_one(cprof__tree_call *c, const member *m, const ask *a,
                     size_t msg_len) {
  cprof__tree_reply *r = &c->replies[c->n];
  r->who = m->info;
  c->fds[c->n] = -1;
  int sv[2];
  cprof__fd_begin();
  int rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
  if (rc == 0) c->fds[c->n] = cprof__fd_adopt(sv[0], CPROF__FD_ENDPOINT);
  cprof__fd_end();
  if (rc == 0) {
    /* A member whose control channel is full (it hangs) is not waited
     * for: its reply stays unanswered. */
    if (send_with_fd(m->ctl, a, msg_len, sv[1], MSG_DONTWAIT) != 0) {
      cprof__fd_close(c->fds[c->n]);
      c->fds[c->n] = -1;
    }
    close(sv[1]);
  }
  c->n++;
}

size_t cprof__tree_send_new(cprof__tree_call *c, const char *uri) {
  size_t msg_len;
  ask *a = make_ask(uri, c->flags, &msg_len);
  if (!a) return 0;
  size_t added = 0;
  cprof__lock(&tree_mu);
  for (size_t i = 0; is_root && i < nmembers && c->n < CPROF__TREE_MAX_MEMBERS;
       i++) {
    bool known = false;
    for (size_t j = 0; j < c->n && !known; j++)
      known = c->replies[j].who.pid == members[i].info.pid &&
              c->replies[j].who.start_unix_ns == members[i].info.start_unix_ns;
    if (known) continue;
    send_one(c, &members[i], a, msg_len);
    added++;
  }
  cprof__unlock(&tree_mu);
  cprof__free(a);
  return added;
}

cprof__tree_call *cprof__tree_send(const char *uri, pid_t only,
                                   unsigned flags) {
  size_t msg_len;
  ask *a = make_ask(uri, flags, &msg_len);
  if (!a) return NULL;

  cprof__tree_call *c = cprof__calloc(1, sizeof *c);
  size_t cap = CPROF__TREE_MAX_MEMBERS;
  if (c) {
    c->replies = cprof__calloc(cap, sizeof *c->replies);
    c->fds = cprof__calloc(cap, sizeof *c->fds);
    c->heads = cprof__calloc(cap, sizeof *c->heads);
    c->head_got = cprof__calloc(cap, sizeof *c->head_got);
    c->body_want = cprof__calloc(cap, sizeof *c->body_want);
    c->type_want = cprof__calloc(cap, sizeof *c->type_want);
  }
  if (!c || !c->replies || !c->fds || !c->heads || !c->head_got ||
      !c->body_want || !c->type_want) {
    cprof__tree_free(c);
    cprof__free(a);
    return NULL;
  }
  c->flags = flags;
  cprof__lock(&tree_mu);
  for (size_t i = 0; is_root && i < nmembers; i++) {
    if (only > 0 && members[i].info.pid != only) continue;
    send_one(c, &members[i], a, msg_len);
  }
  cprof__unlock(&tree_mu);
  cprof__free(a);
  if (c->n == 0) {
    cprof__tree_free(c);
    return NULL;
  }
  return c;
}

/* Reads what is there of answer i; false when it is over (done or
 * failed). */
static bool read_some(cprof__tree_call *c, size_t i) {
  int fd = c->fds[i];
  cprof__tree_reply *r = &c->replies[i];
  answer_head *h = &c->heads[i];
  if (c->head_got[i] < sizeof *h) {
    ssize_t n = recv(fd, (char *)h + c->head_got[i],
                     sizeof *h - c->head_got[i], MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) return false;
    c->head_got[i] += (size_t)n;
    if (c->head_got[i] < sizeof *h) return true;
    if (h->magic != ANSWER_MAGIC || h->status < 100 || h->status > 599 ||
        h->type_len >= sizeof r->type || h->body_len > CPROF__TREE_MAX_BODY)
      return false;
    c->type_want[i] = h->type_len;
    c->body_want[i] = h->body_len;
  }
  while (c->type_want[i]) {
    size_t at = h->type_len - c->type_want[i];
    ssize_t n = recv(fd, r->type + at, c->type_want[i], MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) return false;
    c->type_want[i] -= (uint32_t)n;
  }
  while (c->body_want[i]) {
    char chunk[16384];
    size_t want = c->body_want[i] < sizeof chunk ? (size_t)c->body_want[i]
                                                 : sizeof chunk;
    ssize_t n = recv(fd, chunk, want, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) return false;
    if (cprof__buf_append(&r->body, chunk, (size_t)n) != 0) return false;
    c->body_want[i] -= (uint64_t)n;
  }
  r->type[h->type_len] = '\0';
  r->status = h->status;
  return false;
}

void cprof__tree_collect(cprof__tree_call *c, int64_t deadline_ns,
                         cprof__tree_reply **replies, size_t *n) {
  struct pollfd pfd[CPROF__TREE_MAX_MEMBERS];
  size_t idx[CPROF__TREE_MAX_MEMBERS];
  for (;;) {
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
      if (c->fds[i] >= 0) {
        pfd[k] = (struct pollfd){.fd = c->fds[i], .events = POLLIN};
        idx[k++] = i;
      }
    int64_t left = deadline_ns - cprof__mono_ns();
    if (k == 0 || left <= 0) break;
    int ms = left > 100000000 ? 100 : (int)((left + 999999) / 1000000);
    if (poll(pfd, k, ms) <= 0) continue;
    for (size_t j = 0; j < k; j++) {
      if (!pfd[j].revents) continue;
      size_t i = idx[j];
      if (!read_some(c, i)) {
        if (c->replies[i].status == 0) cprof_buf_free(&c->replies[i].body);
        cprof__fd_close(c->fds[i]);
        c->fds[i] = -1;
      }
    }
  }
  *replies = c->replies;
  *n = c->n;
}

/* --- a root that exits: the tree handed over --------------------------- */

void cprof__tree_set_heir_ops(const cprof__tree_heir_ops *ops) {
  cprof__lock(&tree_mu);
  heir_ops = *ops;
  cprof__unlock(&tree_mu);
}

/* Waits up to ms for the ack on the heir's channel. */
static bool heir_acked(int ctl, int ms) {
  int64_t end = cprof__mono_ns() + (int64_t)ms * 1000000;
  for (;;) {
    int64_t left = end - cprof__mono_ns();
    if (left <= 0) return false;
    struct pollfd p = {.fd = ctl, .events = POLLIN};
    int rc = poll(&p, 1, (int)((left + 999999) / 1000000));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    uint32_t ack = 0;
    ssize_t n = recv(ctl, &ack, sizeof ack, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    return n == (ssize_t)sizeof ack && ack == ACK_MAGIC;
  }
}

/* The heir: a member that left the session the tree started in (setsid,
 * as every daemonizing server does: daemon(3), nginx), a child of this
 * process rather than another, the youngest; or -1. With children_only,
 * only a child of this process: a daemon's workers may join before the
 * daemon itself does. A child that stayed in the session is a helper, not
 * the service: the endpoint ends with its root then. Under tree_mu. */
static ssize_t pick_heir(bool children_only) {
  pid_t me = getpid();
  ssize_t h = -1;
  bool child = false;
  for (size_t i = 0; i < nmembers; i++) {
    pid_t sid = getsid(members[i].info.pid);
    if (sid < 0 || sid == origin_sid) continue;
    bool c = members[i].info.ppid == me;
    if (children_only && !c) continue;
    if (h < 0 || (c && !child) ||
        (c == child && members[i].info.start_unix_ns >
                           members[(size_t)h].info.start_unix_ns)) {
      h = (ssize_t)i;
      child = c;
    }
  }
  return h;
}

/* A member that exits while the tree is being handed to it (a double
 * fork's first child exits right after forking the daemon): the takeover
 * its agent has under way, or the handover waiting in its channel, is
 * waited for, at most HANDOVER_WAIT_MS, so that this process, root then,
 * hands the tree on. Locks are only tried. */
static void await_takeover(void) {
  /* A child of the root that made a session of its own (setsid: a double
   * fork's first child) may be the heir its root is about to choose,
   * before it has even joined: it waits up to HELLO_WAIT_MS for a
   * handover to arrive. Any other member (a daemon's workers, in the
   * daemon's session but not leading it) waits only for one already
   * there. */
  pid_t sid = getsid(0);
  bool maybe_heir = root_pid > 0 && getppid() == root_pid &&
                    sid == getpid() && sid != origin_sid;
  int64_t start = cprof__mono_ns();
  int64_t end = start + HANDOVER_WAIT_MS * 1000000LL;
  while (cprof__mono_ns() < end) {
    int ctl = atomic_load(&member_ctl);
    bool busy = maybe_heir &&
                cprof__mono_ns() - start < HELLO_WAIT_MS * 1000000LL;
    if (ctl >= 0 && cprof__trylock(&takeover_mu) == 0) {
      handover peek;
      ssize_t n = recv(ctl, &peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT);
      bool pending = n == (ssize_t)sizeof peek && peek.magic == HANDOVER_MAGIC;
      cprof__unlock(&takeover_mu);
      if (pending) {
        busy = true;
      } else if (atomic_load(&took_over)) {
        return; /* this process is the root now */
      }
    } else if (ctl >= 0) {
      busy = true; /* the agent reads its channel, or takes over */
    }
    if (!busy) return;
    struct timespec ts = {0, 2 * 1000000};
    nanosleep(&ts, NULL);
  }
}

void cprof__tree_hand_over(void) {
  /* From exit or _exit, maybe in a signal handler: a lock someone holds
   * is not waited for (no handover then), and only system calls follow. */
  await_takeover();
  if (cprof__trylock(&tree_mu) != 0) return;
  if (!is_root || root_pid != getpid() || root_fd < 0 || !heir_ops.listener ||
      !heir_ops.handed_over) {
    cprof__unlock(&tree_mu);
    return;
  }
  int lfd = heir_ops.listener();
  if (lfd < 0) {
    cprof__unlock(&tree_mu);
    return;
  }
  /* A daemon's parent leaves right after its fork, before the child's
   * hello has been taken in, or even sent, and before the child has left
   * the session: after a fork less than a second ago, an heir is waited
   * for, briefly. */
  handing_over = true;
  int64_t now = cprof__mono_ns(), until = now + HELLO_WAIT_MS * 1000000LL;
  /* Only while a child is alive: a shell whose commands have ended (and
   * been reaped) exits at once. waitid with WNOWAIT reaps nothing. */
  siginfo_t si;
  bool recent = now - atomic_load(&last_fork_ns) < 1000000000LL &&
                waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
  bool sent = false;
  int ctl = -1;
  for (;;) {
    take_hellos();
    /* A daemon's worker in already says the daemon exists: it is waited
     * for longer (a slow machine's fork and thread start). */
    if (pick_heir(false) >= 0) until = now + HANDOVER_WAIT_MS * 1000000LL;
    bool waiting = recent && cprof__mono_ns() < until;
    ssize_t h = pick_heir(waiting);
    if (h < 0 && waiting) {
      struct pollfd p = {.fd = root_fd, .events = POLLIN};
      (void)poll(&p, 1, 5);
      continue;
    }
    if (h < 0) break;
    handover msg = {.magic = HANDOVER_MAGIC,
                    .nmembers = (uint32_t)nmembers - 1};
    int fds[2] = {lfd, root_fd};
    ctl = members[(size_t)h].ctl;
    sent = send_with_fds(ctl, &msg, sizeof msg, fds, 2, MSG_DONTWAIT) == 0;
    for (size_t i = 0; sent && i < nmembers; i++) {
      if (i == (size_t)h) continue;
      member_msg m = {.magic = MEMBER_MAGIC, .info = members[i].info};
      sent = send_with_fds(ctl, &m, sizeof m, &members[i].ctl, 1,
                           MSG_DONTWAIT) == 0;
    }
    if (sent) break;
    /* The heir exited meanwhile (a double fork's first child): the next
     * one, its daemon, is looked for. */
    drop_member((size_t)h);
  }
  if (sent) {
    /* The descriptors are in the heir's channel, alive whatever becomes
     * of this process: the heir reads the join channel and the members'
     * channels from now on, and hellos that reach this one go on to it. */
    heir_ops.handed_over();
    is_root = false;
    nmembers = 0;
  }
  handing_over = false;
  cprof__unlock(&tree_mu);
  /* Briefly, so that the heir serves before this process is gone; no
   * harm when it is slower (connections wait in the listening queue). */
  if (sent) (void)heir_acked(ctl, HANDOVER_WAIT_MS);
}

static void root_at_exit(void) { cprof__tree_hand_over(); }

/* The heir's side: the rest of the handover after its first message (the
 * listening socket and the join channel's root end in fds), then this
 * process is the root and serves on the listening socket. */
static void take_over_locked(int ctl, const handover *msg,
                             const int fds[2]);

static void take_over_locked(int ctl, const handover *msg,
                             const int fds[2]) {
  member *got = cprof__calloc(CPROF__TREE_MAX_MEMBERS, sizeof *got);
  size_t n = 0;
  bool whole = got != NULL && msg->nmembers < CPROF__TREE_MAX_MEMBERS;
  for (uint32_t i = 0; whole && i < msg->nmembers; i++) {
    struct pollfd p = {.fd = ctl, .events = POLLIN};
    if (poll(&p, 1, HANDOVER_WAIT_MS) <= 0) {
      whole = false;
      break;
    }
    member_msg m;
    int fd;
    ssize_t k = recv_with_fd(ctl, &m, sizeof m, &fd);
    if (k != (ssize_t)sizeof m || m.magic != MEMBER_MAGIC || fd < 0) {
      if (fd >= 0) cprof__fd_close(fd);
      whole = false;
      break;
    }
    got[n].info = m.info;
    got[n].info.name[sizeof got[n].info.name - 1] = '\0';
    got[n++].ctl = fd;
  }
  if (!whole) {
    for (size_t i = 0; i < n; i++) cprof__fd_close(got[i].ctl);
    cprof__free(got);
    cprof__fd_close(fds[0]);
    cprof__fd_close(fds[1]);
    return;
  }
  cprof__lock(&tree_mu);
  is_root = true;
  root_pid = getpid();
  atomic_store(&took_over, true);
  root_fd = fds[1];
  memcpy(members, got, n * sizeof *got);
  nmembers = n;
  cprof__tree_heir_ops ops = heir_ops;
  cprof__unlock(&tree_mu);
  cprof__free(got);
  if (!root_exit_hooked) root_exit_hooked = atexit(root_at_exit) == 0;
  pthread_t t;
  if (cprof__thread_spawn(&t, tree_main, NULL, "cprof-tree") == 0)
    pthread_detach(t);
  uint32_t ack = ACK_MAGIC;
  (void)!send(ctl, &ack, sizeof ack, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (ops.adopt)
    ops.adopt(fds[0]);
  else
    cprof__fd_close(fds[0]);
}

/* --- a member --------------------------------------------------------- */

typedef struct job {
  int fd;
  unsigned flags;
  char uri[sizeof(((ask *)0)->uri)];
} job;

static void answer(int fd, int status, const char *type, const cprof_buf *body) {
  /* A root that stops reading does not hold this thread for ever. */
  struct timeval tv = {ANSWER_SEND_TIMEOUT_S, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  answer_head h = {.magic = ANSWER_MAGIC,
                   .status = status,
                   .type_len = type ? (uint32_t)strlen(type) : 0,
                   .body_len = body ? body->len : 0};
  if (h.type_len >= 64) h.type_len = 0;
  if (h.body_len > CPROF__TREE_MAX_BODY) {
    h.status = 500;
    h.body_len = 0;
  }
  if (write_all(fd, &h, sizeof h) && h.type_len)
    write_all(fd, type, h.type_len);
  if (h.body_len) write_all(fd, body->data, (size_t)h.body_len);
}

/* A request's sleep: false once the process is exiting, which ends a
 * window with what it holds. */
static bool job_wait(void *ctx, int ms) {
  (void)ctx;
  if (atomic_load(&exiting)) return false;
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
  return !atomic_load(&exiting);
}

/* A member that exits (exit, return from main) while it serves a window:
 * the window ends now and its answer is sent, at most
 * EXIT_ANSWER_WAIT_MS later, so that the root's profile has the time the
 * member lived. */
static void member_at_exit(void) {
  if (is_root || join_fd < 0 || atomic_load(&inflight) == 0) return;
  atomic_store(&exiting, true);
  int64_t end = cprof__mono_ns() + EXIT_ANSWER_WAIT_MS * 1000000LL;
  while (atomic_load(&inflight) > 0 && cprof__mono_ns() < end) {
    struct timespec ts = {0, 5 * 1000000};
    nanosleep(&ts, NULL);
  }
}

static void *job_main(void *arg) {
  job *j = arg;
  cprof__http_resp resp;
  memset(&resp, 0, sizeof resp);
  serve(j->uri, j->flags, job_wait, NULL, &resp);
  if (resp.drop) resp.status = 500;
  answer(j->fd, resp.status ? resp.status : 500, resp.content_type,
         &resp.body);
  cprof_buf_free(&resp.body);
  cprof__fd_close(j->fd);
  cprof__free(j);
  atomic_fetch_sub(&inflight, 1);
  return NULL;
}

/* Joins the tree: a control channel of its own, its far end sent to the
 * root with who this process is. Returns the near end, or -1. */
static int join_tree(void) {
  int sv[2];
  cprof__fd_begin();
  int rc = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
  int ctl = rc == 0 ? cprof__fd_adopt(sv[0], CPROF__FD_ENDPOINT) : -1;
  cprof__fd_end();
  if (rc != 0) return -1;
  hello h;
  memset(&h, 0, sizeof h);
  h.magic = HELLO_MAGIC;
  h.pid = getpid();
  h.ppid = getppid();
  h.start_unix_ns = unix_ns();
  /* The main thread's name (this thread's is cprof's). */
  if (!cprof__proc_thread_name(h.pid, h.name, sizeof h.name)) h.name[0] = '\0';
  /* Known before the root can know this process: an exit right after the
   * hello still finds the channel a handover may come through. */
  atomic_store(&member_ctl, ctl);
  int sent = send_with_fd(join_fd, &h, sizeof h, sv[1], MSG_DONTWAIT);
  close(sv[1]);
  if (sent != 0) {
    atomic_store(&member_ctl, -1);
    cprof__fd_close(ctl);
    return -1;
  }
  return ctl;
}

/* A member's agent: joins, then starts a thread for each request the root
 * sends, until the root closes the channel. */
static void *agent_main(void *arg) {
  (void)arg;
  int ctl = join_tree();
  if (ctl < 0) return NULL;
  ask *a = cprof__malloc(sizeof *a);
  while (a) {
    struct pollfd p = {.fd = ctl, .events = POLLIN};
    if (poll(&p, 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int fds[2];
    /* takeover_mu from the read of a handover to the end of the takeover,
     * for an exit that waits for it (await_takeover). */
    cprof__lock(&takeover_mu);
    ssize_t n = recv_with_fds(ctl, a, sizeof *a, fds, 2);
    if (n == (ssize_t)sizeof(handover) &&
        ((const handover *)(const void *)a)->magic == HANDOVER_MAGIC &&
        fds[0] >= 0 && fds[1] >= 0) {
      handover msg;
      memcpy(&msg, a, sizeof msg);
      take_over_locked(ctl, &msg, fds);
      cprof__unlock(&takeover_mu);
      break; /* a member no more */
    }
    cprof__unlock(&takeover_mu);
    if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == EPROTO))
      continue;
    if (n <= 0) break; /* the root is gone */
    if (fds[1] >= 0) cprof__fd_close(fds[1]);
    int fd = fds[0];
    if (fd < 0) continue;
    bool good = (size_t)n > offsetof(ask, uri) && a->magic == ASK_MAGIC &&
                a->len < sizeof a->uri &&
                (size_t)n == offsetof(ask, uri) + a->len + 1 &&
                a->uri[a->len] == '\0';
    job *j = good ? cprof__malloc(sizeof *j) : NULL;
    if (!j || atomic_fetch_add(&inflight, 1) >= MEMBER_INFLIGHT) {
      if (j) atomic_fetch_sub(&inflight, 1);
      answer(fd, good ? 503 : 400, NULL, NULL);
      cprof__fd_close(fd);
      cprof__free(j);
      continue;
    }
    j->fd = fd;
    j->flags = a->flags & CPROF__TREE_PUSH;
    memcpy(j->uri, a->uri, (size_t)a->len + 1);
    pthread_t t;
    if (cprof__thread_spawn(&t, job_main, j, "cprof-tree-req") != 0) {
      answer(fd, 503, NULL, NULL);
      cprof__fd_close(fd);
      cprof__free(j);
      atomic_fetch_sub(&inflight, 1);
      continue;
    }
    pthread_detach(t);
  }
  atomic_store(&member_ctl, -1);
  cprof__free(a);
  cprof__fd_close(ctl);
  return NULL;
}

static void before_fork(void) {
  cprof__lock(&takeover_mu);
  cprof__lock(&tree_mu);
}
static void parent_after_fork(void) {
  atomic_store(&last_fork_ns, cprof__mono_ns());
  cprof__unlock(&tree_mu);
  cprof__unlock(&takeover_mu);
}

static void child_after_fork(void) {
  /* The root's descriptors and the members' channels are the endpoint's
   * kind: the descriptor registry's own fork handler, which ran before
   * this one, closed them here. What is left is the join end. */
  pthread_mutex_init(&tree_mu, NULL);
  pthread_mutex_init(&takeover_mu, NULL);
  /* The parent's channel was closed at the fork: this process joins with
   * its own. */
  atomic_store(&member_ctl, -1);
  atomic_store(&took_over, false);
  atomic_store(&last_fork_ns, INT64_MIN / 2);
  is_root = false;
  root_fd = -1;
  nmembers = 0;
  atomic_store(&inflight, 0);
  atomic_store(&exiting, false);
  if (join_fd < 0 || !serve) return;
  static bool exit_hooked; /* inherited: one hook per process line */
  if (!exit_hooked) exit_hooked = atexit(member_at_exit) == 0;
  pthread_t t;
  if (cprof__thread_spawn(&t, agent_main, NULL, "cprof-tree") == 0)
    pthread_detach(t);
}

static void fork_init(void) {
  /* After the registry's: its child handler must run before this one. */
  cprof__fd_init();
  cprof__atfork(CPROF__FORK_TREE, before_fork, parent_after_fork,
                child_after_fork);
}

int cprof__tree_root(cprof__tree_serve_fn fn) {
  pthread_once(&fork_once, fork_init);
  cprof__lock(&tree_mu);
  if (is_root) {
    cprof__unlock(&tree_mu);
    return 0;
  }
  int sv[2];
  cprof__fd_begin();
  int rc = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv);
  int rfd = -1, jfd = -1;
  if (rc == 0) {
    rfd = cprof__fd_adopt(sv[0], CPROF__FD_ENDPOINT);
    jfd = cprof__fd_adopt(sv[1], CPROF__FD_KEEP);
  }
  cprof__fd_end();
  if (rc != 0) {
    cprof__unlock(&tree_mu);
    return CPROF_ESYS;
  }
  /* A member that becomes a root of its own: its descendants join it. */
  if (join_fd >= 0) cprof__fd_close(join_fd);
  root_fd = rfd;
  join_fd = jfd;
  serve = fn;
  is_root = true;
  root_pid = getpid();
  if (origin_sid < 0) origin_sid = getsid(0);
  cprof__unlock(&tree_mu);
  /* After the dump sink's exit hook, so it runs before it: the endpoint
   * moves on before this process spends time on its exit dump. */
  if (!root_exit_hooked) root_exit_hooked = atexit(root_at_exit) == 0;
  pthread_t t;
  if (cprof__thread_spawn(&t, tree_main, NULL, "cprof-tree") != 0) {
    cprof__lock(&tree_mu);
    is_root = false;
    cprof__fd_close(root_fd);
    cprof__fd_close(join_fd);
    root_fd = join_fd = -1;
    cprof__unlock(&tree_mu);
    return CPROF_ESYS;
  }
  pthread_detach(t);
  return 0;
}
