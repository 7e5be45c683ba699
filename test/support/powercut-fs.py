#!/usr/bin/python3
"""A FUSE filesystem that loses, at unmount, everything not fsynced: a power cut.

    powercut-fs.py BACKING MOUNTPOINT --trash DIR --stats FILE [--keep-on-exit]

Every operation goes through to BACKING at once (so reads need no overlay), and each one
that is not yet durable keeps what undoes it, in memory, in one log in the order it ran.
When the filesystem is unmounted (fusermount -u, after the processes using it were killed),
the log is undone newest first: BACKING is then what a disk would hold after the power went
at that moment. SIGUSR1 makes everything durable (a clean shutdown; --keep-on-exit does the
same at unmount).

What it models (the model of Jepsen's LazyFS, plus directory entries):
  - File data and size: a write or truncate is durable once fsync or fdatasync ran on the
    same file (any descriptor: the page cache is per inode) after it.
  - Directory entries: a create, mkdir, symlink, link, unlink, rmdir or rename is durable
    once fsync ran on the directory that holds the new name (for a rename, the target's
    directory; for an unlink or rmdir, the directory it was removed from). A file that was
    fsynced but whose directory was not is gone after a cut, as POSIX allows (ext4 is kinder:
    its journal commits every pending name with any fsync).
  - Not modelled: torn writes (a write is lost or kept whole), reordering within the
    unsynced writes (all are lost, none kept), and mode, owner, times and xattrs (kept).

The kernel's page cache cannot hide a drop: writes go through to this process at once
(no writeback cache), and the cut is an unmount, which drops the mount's cache. SQLite's
-shm mapping works (no direct_io); its pages reach this process on munmap or unmount and
are dropped with the rest.
"""

import errno
import json
import os
import shutil
import signal
import stat
import sys

from fusepy import FUSE, Operations


class Log:
    """The operations not yet durable, oldest first, each with what undoes it."""

    def __init__(self, backing, trash):
        self.backing = backing
        self.trash = trash
        self.entries = []
        self.by_file = {}  # inode -> entries of its data
        self.by_dir = {}  # directory inode -> entries of its names
        self.fds = {}  # inode -> a descriptor held for undoing writes (survives renames)
        self.trash_seq = 0
        self.stats = {"ops": 0, "fsyncs": 0, "dropped_writes": 0, "dropped_bytes": 0, "dropped_names": 0}

    def real(self, path):
        return self.backing + path

    def fd_of(self, ino, where):
        fd = self.fds.get(ino)
        if fd is None:
            fd = os.open(where, os.O_RDWR)
            self.fds[ino] = fd
        return fd

    def add(self, key, index, entry):
        entry["durable"] = False
        self.entries.append(entry)
        index.setdefault(key, []).append(entry)
        self.stats["ops"] += 1

    def before_data(self, where, offset, length, new_size=None):
        """Keeps the bytes a write (or a truncate to new_size) is about to replace.

        where: the backing path, or an open descriptor (its file may have been renamed)."""
        if isinstance(where, int):
            st, where = os.fstat(where), "/proc/self/fd/%d" % where
        else:
            st = os.lstat(where)
        fd = self.fd_of(st.st_ino, where)
        if new_size is not None:
            offset, length = new_size, max(0, st.st_size - new_size)
        old = os.pread(fd, length, offset) if offset < st.st_size and length > 0 else b""
        self.add(st.st_ino, self.by_file, {"kind": "data", "ino": st.st_ino, "size": st.st_size, "off": offset, "old": old, "len": length})

    def name(self, dir_path, entry):
        st = os.lstat(self.real(dir_path))
        # Held open so that its inode number is not reused while its entries wait for an fsync.
        if st.st_ino not in self.fds:
            self.fds[st.st_ino] = os.open(self.real(dir_path), os.O_RDONLY | os.O_DIRECTORY)
        entry["kind"] = "name"
        self.add(st.st_ino, self.by_dir, entry)

    def to_trash(self, path):
        self.trash_seq += 1
        t = os.path.join(self.trash, str(self.trash_seq))
        os.rename(self.real(path), t)
        return t

    def synced_file(self, ino):
        self.stats["fsyncs"] += 1
        for e in self.by_file.pop(ino, []):
            e["durable"] = True
        self.compact()

    def synced_dir(self, path):
        self.stats["fsyncs"] += 1
        ino = os.lstat(self.real(path)).st_ino
        for e in self.by_dir.pop(ino, []):
            e["durable"] = True
            if e.get("trash"):
                remove(e["trash"])
        self.compact()

    def compact(self):
        if len(self.entries) > 64 and len(self.entries) > 2 * sum(len(v) for v in self.by_file.values()) + 2 * sum(
            len(v) for v in self.by_dir.values()
        ):
            self.entries = [e for e in self.entries if not e["durable"]]

    def sync_all(self):
        for index in (self.by_file, self.by_dir):
            for es in index.values():
                for e in es:
                    e["durable"] = True
                    if e.get("trash"):
                        remove(e["trash"])
            index.clear()
        self.entries = []

    def cut(self):
        """Undoes every operation not durable, newest first."""
        for e in reversed(self.entries):
            if e["durable"]:
                continue
            if e["kind"] == "data":
                fd = self.fds[e["ino"]]
                if e["old"]:
                    os.pwrite(fd, e["old"], e["off"])
                os.ftruncate(fd, e["size"])
                self.stats["dropped_writes"] += 1
                self.stats["dropped_bytes"] += e["len"]
            else:
                try:
                    self.undo_name(e)
                    self.stats["dropped_names"] += 1
                except FileNotFoundError:
                    # Its directory's own removal was durable: what it held went with it.
                    pass
        self.entries = []
        self.by_file.clear()
        self.by_dir.clear()

    def undo_name(self, e):
        op = e["op"]
        if op == "new":
            # Only if the name still holds what was made (a durable rename may have moved it).
            p = self.real(e["path"])
            if same_inode(p, e["ino"]):
                remove(p)
        elif op == "removed":
            p = self.real(e["path"])
            if not os.path.lexists(p):
                os.rename(e["trash"], p)
        elif op == "rename":
            src, dst = self.real(e["src"]), self.real(e["dst"])
            if same_inode(dst, e["ino"]) and not os.path.lexists(src):
                os.rename(dst, src)
                if e.get("trash"):
                    os.rename(e["trash"], dst)

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def same_inode(path, ino):
    try:
        return os.lstat(path).st_ino == ino
    except FileNotFoundError:
        return False


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def parent(path):
    return os.path.dirname(path) or "/"


class PowercutFS(Operations):
    """A passthrough to the backing directory that tells the log what each operation undoes."""

    def __init__(self, log):
        self.log = log

    def r(self, path):
        return self.log.real(path)

    def made(self, path):
        self.log.name(parent(path), {"op": "new", "path": path, "ino": os.lstat(self.r(path)).st_ino})

    # Files ---------------------------------------------------------------------------------
    def create(self, path, mode, fi=None):
        # fusepy does not pass the caller's flags here: read and write (a -shm file is mapped).
        fd = os.open(self.r(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        self.made(path)
        return fd

    def open(self, path, flags):
        if flags & os.O_TRUNC and flags & (os.O_WRONLY | os.O_RDWR):
            self.log.before_data(self.r(path), 0, 0, new_size=0)
        # The kernel gives every write its offset (O_APPEND included); pwrite on an O_APPEND
        # descriptor would ignore it.
        return os.open(self.r(path), flags & ~os.O_APPEND)

    def read(self, path, size, offset, fh):
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        self.log.before_data(fh, offset, len(data))
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        if fh is not None:
            self.log.before_data(fh, 0, 0, new_size=length)
            os.ftruncate(fh, length)
        else:
            self.log.before_data(self.r(path), 0, 0, new_size=length)
            os.truncate(self.r(path), length)

    def fsync(self, path, datasync, fh):
        # By the descriptor: the file may have been renamed since it was opened.
        self.log.synced_file(os.fstat(fh).st_ino)
        return 0

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0

    def getattr(self, path, fh=None):
        st = os.fstat(fh) if fh is not None else os.lstat(self.r(path))
        keys = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid", "st_ino", "st_blocks")
        return {k: getattr(st, k) for k in keys}

    # Names ---------------------------------------------------------------------------------
    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self.r(path))

    def readlink(self, path):
        return os.readlink(self.r(path))

    def mknod(self, path, mode, dev):
        os.mknod(self.r(path), mode, dev)
        self.made(path)

    def mkdir(self, path, mode):
        os.mkdir(self.r(path), mode)
        self.made(path)

    def symlink(self, target, source):
        # fusepy's order: the new name first, then what it points to.
        os.symlink(source, self.r(target))
        self.made(target)

    def link(self, target, source):
        os.link(self.r(source), self.r(target))
        self.made(target)

    def unlink(self, path):
        self.log.name(parent(path), {"op": "removed", "path": path, "trash": self.log.to_trash(path)})

    def rmdir(self, path):
        if os.listdir(self.r(path)):
            raise OSError(errno.ENOTEMPTY, path)
        self.log.name(parent(path), {"op": "removed", "path": path, "trash": self.log.to_trash(path)})

    def rename(self, old, new):
        ino = os.lstat(self.r(old)).st_ino
        replaced = None
        if os.path.lexists(self.r(new)):
            if stat.S_ISDIR(os.lstat(self.r(new)).st_mode) and os.listdir(self.r(new)):
                raise OSError(errno.ENOTEMPTY, new)
            replaced = self.log.to_trash(new)
        os.rename(self.r(old), self.r(new))
        self.log.name(parent(new), {"op": "rename", "src": old, "dst": new, "ino": ino, "trash": replaced})

    def fsyncdir(self, path, datasync, fh):
        self.log.synced_dir(path)
        return 0

    # Kept as they are (not modelled) -------------------------------------------------------
    def chmod(self, path, mode):
        os.chmod(self.r(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self.r(path), uid, gid, follow_symlinks=False)

    def utimens(self, path, times=None):
        os.utime(self.r(path), times, follow_symlinks=False)

    def access(self, path, amode):
        if not os.access(self.r(path), amode):
            raise OSError(errno.EACCES, path)

    def statfs(self, path):
        sv = os.statvfs(self.log.backing)
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(sv, k) for k in keys}


def main():
    args = sys.argv[1:]
    opts = {"--trash": None, "--stats": None}
    keep = "--keep-on-exit" in args
    args = [a for a in args if a != "--keep-on-exit"]
    pos = []
    i = 0
    while i < len(args):
        if args[i] in opts:
            opts[args[i]] = args[i + 1]
            i += 2
        else:
            pos.append(args[i])
            i += 1
    if len(pos) != 2 or not opts["--trash"]:
        sys.exit("usage: powercut-fs.py BACKING MOUNTPOINT --trash DIR [--stats FILE] [--keep-on-exit]")
    backing, mountpoint = os.path.abspath(pos[0]), os.path.abspath(pos[1])
    trash = os.path.abspath(opts["--trash"])
    if os.stat(trash).st_dev != os.stat(backing).st_dev:
        sys.exit("the trash directory must be on the backing directory's filesystem (it is renamed into)")
    log = Log(backing, trash)
    signal.signal(signal.SIGUSR1, lambda *_: log.sync_all())
    # foreground: the harness waits for this process to end after the unmount, then reads
    # the stats; nothreads: the log's order is the order of the operations. No direct_io
    # (SQLite maps its -shm file), no writeback cache (fusepy's libfuse 2 has none).
    FUSE(PowercutFS(log), mountpoint, foreground=True, nothreads=True, fsname="powercut", subtype="powercut", use_ino=True)
    if keep:
        log.sync_all()
    else:
        log.cut()
    log.close()
    if opts["--stats"]:
        with open(opts["--stats"], "w") as f:
            json.dump(log.stats, f)


if __name__ == "__main__":
    main()
