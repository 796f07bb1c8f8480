#ifndef C_EPOLL_H
#define C_EPOLL_H
// epoll, accept4 and a loopback listener for NIOFloor's own loop: Swift's Glibc module leaves
// <sys/epoll.h> out.
#include <sys/epoll.h>
#include <sys/socket.h>

static inline int c_epoll_add_readable(int epoll, int fd) {
    struct epoll_event event = { .events = EPOLLIN, .data = { .fd = fd } };
    return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
}

int c_accept_nonblocking(int listener);
/// A nonblocking socket listening on 127.0.0.1:port, or -1 (errno set).
int c_listen_loopback(int port);
#endif
