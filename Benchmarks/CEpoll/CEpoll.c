#define _GNU_SOURCE
#include <sys/socket.h>
#include "CEpoll.h"

int c_accept_nonblocking(int listener) { return accept4(listener, 0, 0, SOCK_NONBLOCK); }
