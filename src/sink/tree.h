/*
 * The process tree (docs/processes.md). The process that serves HTTP is
 * the tree's root; every process it forks that does not exec, and theirs
 * in turn, joins it: the root's endpoint answers for all of them.
 *
 * How they talk. The root makes a socketpair: it reads one end, and every
 * descendant inherits the other (the join end). A descendant, right after
 * its fork, makes a control socketpair of its own and sends one end to the
 * root through the join end, with its pid, parent, name and start time.
 * For each request the root makes a fresh socketpair per member, sends one
 * end with the request over the member's control channel, and reads the
 * answer from the other; the member's agent thread serves each request on
 * a short-lived thread of its own. Nothing is in the file system and no
 * other process can reach any of it: the descriptors are inherited only by
 * the tree's own processes, are cprof's (source/fds.h: above the program's
 * numbers, safe from its close loops), and close on exec. A member that
 * exits closes its control channel, and the root's tree thread drops it.
 */
#ifndef CPROF_TREE_H
#define CPROF_TREE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sink/http.h"

/* What the root sends its members for a dump of their own (dump.c);
 * their endpoint's handler answers it by dumping. */
#define CPROF__TREE_DUMP_URI "/debug/pprof/processes?dump=1"

/* The members one root keeps; more are turned away. */
#define CPROF__TREE_MAX_MEMBERS 256
/* The largest answer a member may send. */
#define CPROF__TREE_MAX_BODY ((uint64_t)64 << 20)

typedef struct cprof__tree_member {
  pid_t pid, ppid;
  int64_t start_unix_ns; /* when it forked (CLOCK_REALTIME) */
  char name[16];         /* its comm at the fork */
} cprof__tree_member;

/* A request's flags. PUSH: the root's pusher's; its window runs beside
 * any other of the same profile instead of being refused as in use. */
#define CPROF__TREE_PUSH 1u

/* What a member's agent runs for a request: answers uri as this process
 * alone, into resp (whose body the agent frees). A window sleeps through
 * wait(wait_ctx, ms), whose false ends it early, answered with what it
 * holds: the member is exiting. flags are the request's (CPROF__TREE_*). */
typedef void (*cprof__tree_serve_fn)(const char *uri, unsigned flags,
                                     bool (*wait)(void *ctx, int ms),
                                     void *wait_ctx, cprof__http_resp *resp);

/* Makes this process a root: its descendants forked from now on join it,
 * and serve answers their requests. Idempotent; returns 0 or a cprof
 * error code. Normal context. */
CPROF__HIDDEN int cprof__tree_root(cprof__tree_serve_fn serve);

/* A root that exits while it has members hands the tree to one of them
 * (a child of its own, the youngest, as a daemonizing server forks the
 * process that lives on): the endpoint's listening socket, the join
 * channel and the other members' channels go to the heir, which serves
 * from then on. The endpoint says how: listener gives the listening
 * socket to hand over (or -1: nothing to hand over), handed_over tells
 * the root's endpoint that it is the heir's now (it stops accepting and
 * leaves its socket file), adopt starts the heir's endpoint on the
 * socket. */
typedef struct cprof__tree_heir_ops {
  int (*listener)(void);
  void (*handed_over)(void);
  void (*adopt)(int listen_fd);
} cprof__tree_heir_ops;
CPROF__HIDDEN void cprof__tree_set_heir_ops(const cprof__tree_heir_ops *ops);

/* The handover, from exit (an exit hook the root registers) and _exit: it
 * waits at most 1 s for the heir to take over, and not at all for a lock
 * another thread holds. Returns at once in a process that is not a root
 * with members. */
CPROF__HIDDEN void cprof__tree_hand_over(void);

/* True in a root that has at least one member now. */
CPROF__HIDDEN bool cprof__tree_has_members(void);

/* Copies up to max of the live members into out; returns how many there
 * are. */
CPROF__HIDDEN size_t cprof__tree_members(cprof__tree_member *out, size_t max);

/* One member's answer to a call. */
typedef struct cprof__tree_reply {
  cprof__tree_member who;
  int status;       /* 0: no complete answer in time */
  char type[64];    /* its Content-Type */
  cprof_buf body;
} cprof__tree_reply;

typedef struct cprof__tree_call cprof__tree_call;

/* Sends uri with flags (CPROF__TREE_*) to every member, or to the one
 * whose pid is only (> 0). Returns NULL when there is nobody to send to
 * (or no memory). */
CPROF__HIDDEN cprof__tree_call *cprof__tree_send(const char *uri, pid_t only,
                                                 unsigned flags);

/* Sends uri, with c's flags, to the members that joined since c was sent
 * (a window's late joiners, with the time left of it); returns how
 * many. */
CPROF__HIDDEN size_t cprof__tree_send_new(cprof__tree_call *c,
                                          const char *uri);

/* Reads the answers until all are in or deadline_ns (CLOCK_MONOTONIC)
 * passes; *replies (n of them, one per member sent to) stay valid until
 * cprof__tree_free. */
CPROF__HIDDEN void cprof__tree_collect(cprof__tree_call *c, int64_t deadline_ns,
                                       cprof__tree_reply **replies,
                                       size_t *n);
CPROF__HIDDEN void cprof__tree_free(cprof__tree_call *c);

#endif
