#!/usr/bin/env python3
"""Runs a command under the kernel-side sandbox of a systemd unit, without systemd as PID 1.

usage: unit-sandbox.py UNIT_FILE -- COMMAND [ARGS...]

It applies what systemd 252 (Debian 12, Raspberry Pi OS bookworm) would apply for these
[Service] settings, and then execs COMMAND:
  SystemCallFilter= (allow list, then ~deny lists; groups expanded by `systemd-analyze
      syscall-filter`, @default implied as systemd does), SystemCallErrorNumber=
  MemoryDenyWriteExecute=yes (systemd's seccomp rules: no mmap with PROT_WRITE|PROT_EXEC,
      no mprotect/pkey_mprotect with PROT_EXEC, no shmat with SHM_EXEC)
  ProcSubset=pid and ProtectProc= (a fresh /proc with subset=pid,hidepid=...; run this
      inside `unshare --mount --pid --fork` so the mount is private)
  CapabilityBoundingSet= (every capability not listed leaves the bounding set, so a root
      COMMAND keeps only those), UMask=
Both seccomp filters go through libseccomp (ctypes), as systemd's do. Other settings
(namespaces of the filesystem, devices, users) are not emulated.
"""
import ctypes
import ctypes.util
import errno
import os
import re
import subprocess
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
PROT_WRITE, PROT_EXEC = 0x2, 0x4
SHM_EXEC = 0o100000


def act_errno(n):
    return 0x00050000 | (n & 0xFFFF)


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def service_settings(path):
    out, section = [], None
    for raw in open(path, encoding="utf-8"):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]" and "=" in line:
            k, v = line.split("=", 1)
            out.append((k.strip(), v.strip()))
    return out


CAPABILITIES = [
    "chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid", "setuid", "setpcap",
    "linux_immutable", "net_bind_service", "net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
    "sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
    "sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write", "audit_control", "setfcap",
    "mac_override", "mac_admin", "syslog", "wake_alarm", "block_suspend", "audit_read", "perfmon", "bpf",
    "checkpoint_restore",
]
PR_CAPBSET_DROP = 24


def bound_capabilities(settings, libc):
    """CapabilityBoundingSet=: lines add up; "~" drops the listed ones instead; empty keeps none."""
    lines = [v for k, v in settings if k == "CapabilityBoundingSet"]
    if not lines:
        return
    keep = set(range(len(CAPABILITIES)))
    first = True
    for v in lines:
        names = {CAPABILITIES.index(n.lower().removeprefix("cap_")) for n in v.lstrip("~").split()}
        if v.startswith("~"):
            keep -= names
        else:
            keep = names if first else keep | names
        first = False
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        if cap not in keep and libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            sys.exit(f"unit-sandbox: cannot drop capability {cap}: {os.strerror(ctypes.get_errno())}")


def syscall_groups():
    text = subprocess.run(["systemd-analyze", "syscall-filter"], check=True, capture_output=True, text=True).stdout
    groups, cur = {}, None
    for line in text.splitlines():
        if line.startswith("@"):
            cur = groups.setdefault(line.strip(), [])
        elif cur is not None and line.strip() and not line.strip().startswith("#"):
            cur.append(line.strip())
    return groups


def expand(names, groups, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        if n.startswith("@"):
            if n in seen:
                continue
            seen.add(n)
            if n not in groups:
                sys.exit(f"unit-sandbox: unknown syscall group {n}")
            out |= expand(groups[n], groups, seen)
        else:
            out.add(n.split(":")[0])  # name:errno
    return out


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    settings = service_settings(sys.argv[1])
    command = sys.argv[3:]
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    # before /proc is replaced (cap_last_cap is not a process file); the bounding set limits
    # what COMMAND gets at exec, not this process, which still mounts /proc below
    bound_capabilities(settings, libc)
    proc_subset = next((v for k, v in settings if k == "ProcSubset"), "all")
    protect_proc = next((v for k, v in settings if k == "ProtectProc"), "default")
    if proc_subset != "all" or protect_proc != "default":
        opts = [f"subset={proc_subset}"] if proc_subset == "pid" else []
        if protect_proc != "default":
            opts.append(f"hidepid={protect_proc}")
        if libc.mount(b"proc", b"/proc", b"proc", 0, ",".join(opts).encode()) != 0:
            e = ctypes.get_errno()
            sys.exit(f"unit-sandbox: mount /proc ({','.join(opts)}): {os.strerror(e)} (run inside unshare --mount --pid --fork)")

    umask = next((v for k, v in settings if k == "UMask"), None)
    if umask is not None:
        os.umask(int(umask, 8))

    seccomp = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    seccomp.seccomp_init.restype = ctypes.c_void_p
    seccomp.seccomp_init.argtypes = [ctypes.c_uint32]
    seccomp.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    seccomp.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ArgCmp)]
    seccomp.seccomp_load.argtypes = [ctypes.c_void_p]
    seccomp.seccomp_release.argtypes = [ctypes.c_void_p]

    def rule(ctx, action, name, cmps=()):
        nr = seccomp.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return  # not a syscall of this architecture
        arr = (ArgCmp * max(1, len(cmps)))(*cmps)
        r = seccomp.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if r < 0 and r != -errno.EEXIST:
            sys.exit(f"unit-sandbox: seccomp rule for {name}: {os.strerror(-r)}")

    def load(ctx):
        if seccomp.seccomp_load(ctx) != 0:
            sys.exit("unit-sandbox: seccomp_load failed")
        seccomp.seccomp_release(ctx)

    # MemoryDenyWriteExecute first: the allow list below may not allow seccomp() itself.
    if any(k == "MemoryDenyWriteExecute" and v in ("yes", "true", "1") for k, v in settings):
        ctx = seccomp.seccomp_init(SCMP_ACT_ALLOW)
        eperm = act_errno(errno.EPERM)
        rule(ctx, eperm, "mmap", [ArgCmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC | PROT_WRITE, PROT_EXEC | PROT_WRITE)])
        rule(ctx, eperm, "mmap2", [ArgCmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC | PROT_WRITE, PROT_EXEC | PROT_WRITE)])
        rule(ctx, eperm, "mprotect", [ArgCmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)])
        rule(ctx, eperm, "pkey_mprotect", [ArgCmp(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)])
        rule(ctx, eperm, "shmat", [ArgCmp(2, SCMP_CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC)])
        load(ctx)

    errno_name = next((v for k, v in settings if k == "SystemCallErrorNumber"), None)
    deny_action = act_errno(getattr(errno, errno_name)) if errno_name else 0x80000000  # SCMP_ACT_KILL_PROCESS
    filters = [v for k, v in settings if k == "SystemCallFilter"]
    if filters:
        groups = syscall_groups()
        allow_list = not filters[0].startswith("~")
        names = set()
        if allow_list:
            names = expand(["@default"], groups)  # systemd implies @default in an allow list
        for f in filters:
            deny = f.startswith("~")
            items = expand(re.split(r"\s+", f.lstrip("~").strip()), groups)
            if deny == (not allow_list):
                names |= items
            else:
                names -= items
        ctx = seccomp.seccomp_init(SCMP_ACT_ALLOW if not allow_list else deny_action)
        for n in sorted(names):
            rule(ctx, SCMP_ACT_ALLOW if allow_list else deny_action, n)
        load(ctx)

    sys.stdout.flush()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
