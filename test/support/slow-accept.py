#!/usr/bin/env python3
# A TCP front for a Modbus TCP endpoint that makes clients' connects slow, as a loaded
# machine does: it listens with the smallest accept queue, fills that queue itself and
# accepts nothing, so the kernel drops a client's SYN (the client retries it after 1 s,
# 3 s, ...). On a line "go" on stdin it accepts everything and relays each connection to
# the target port. Prints its own port once the queue is full.
#   slow-accept.py TARGET_PORT
import select
import socket
import sys
import threading

target = int(sys.argv[1])
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(0)
port = ls.getsockname()[1]

fillers = []
for _ in range(16):
    f = socket.socket()
    f.setblocking(False)
    try:
        f.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    fillers.append(f)
    _, done, _ = select.select([], [f], [], 0.3)
    if not done:
        break  # this SYN was dropped: the accept queue is full
else:
    print("queue never filled", flush=True)
    sys.exit(2)
print(port, flush=True)
sys.stdin.readline()


def pipe(a, b):
    try:
        while True:
            data = a.recv(4096)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


while True:
    c, _ = ls.accept()
    t = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pipe, args=(c, t), daemon=True).start()
    threading.Thread(target=pipe, args=(t, c), daemon=True).start()
