#!/usr/bin/env python3
"""Stands in for systemd's notification socket in tests: binds a unix datagram socket at
argv[1] and prints each message as one JSON line {"fields": {...}} on stdout. File
descriptors passed along (systemd-notify's BARRIER=1 sends one) are closed at once, which
is what releases the sender's barrier, as systemd does."""
import array, json, os, socket, sys

path = sys.argv[1]
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(path)
print(json.dumps({"listening": path}), flush=True)
fd_size = array.array("i").itemsize
while True:
    data, anc, _flags, _addr = sock.recvmsg(65536, socket.CMSG_SPACE(16 * fd_size))
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds = array.array("i")
            fds.frombytes(payload[: len(payload) - (len(payload) % fd_size)])
            for fd in fds:
                os.close(fd)
    fields = {}
    for line in data.decode("utf-8", "replace").split("\n"):
        if "=" in line:
            k, v = line.split("=", 1)
            fields[k] = v
    print(json.dumps({"fields": fields}), flush=True)
