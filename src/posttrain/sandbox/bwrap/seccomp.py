"""A seccomp-BPF deny list for sandboxed code, built as raw classic-BPF bytes for `bwrap --seccomp`.

Blocked with EPERM: system calls an agent never needs and that widen the kernel's
attack surface: ptrace and cross-process memory access, mount and new-mount API, kernel
modules, kexec, keyrings, bpf, perf, userfaultfd, io_uring, namespaces (unshare, setns,
clone with CLONE_NEW* flags), handle-based opens, clock and host settings, TIOCSTI.
clone3 gets ENOSYS so libc falls back to clone, whose flags we can inspect (as Docker's
default profile does). Any other architecture or the x32 ABI is killed. x86_64 only:
elsewhere `build_filter` returns None and the sandbox reports seccomp as not in force.
"""

from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000
# classic BPF opcodes
LD_W_ABS, JEQ_K, JSET_K, JGE_K, RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
# struct seccomp_data offsets: nr, arch, instruction_pointer, args[6]
OFF_NR, OFF_ARCH, OFF_ARG0, OFF_ARG1 = 0, 4, 16, 24

BLOCKED_X86_64 = {
    "ptrace": 101, "syslog": 103, "uselib": 134, "vhangup": 153, "pivot_root": 155,
    "_sysctl": 156, "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173,
    "create_module": 174, "init_module": 175, "delete_module": 176, "get_kernel_syms": 177,
    "query_module": 178, "quotactl": 179, "nfsservctl": 180, "lookup_dcookie": 212,
    "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
}
NR_IOCTL, NR_CLONE, NR_CLONE3 = 16, 56, 435
TIOCSTI = 0x5412
# CLONE_NEWTIME | CLONE_NEWNS | CLONE_NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
CLONE_NS_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 \
    | 0x10000000 | 0x20000000 | 0x40000000


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _program(blocked: list[int]) -> list[tuple[int, int, int, int]]:
    """(code, k, jt, jf) rows; jumps are relative. Labels resolved by counting rows."""
    eperm = RET_ERRNO | errno.EPERM
    rows: list[tuple[int, int, int, int]] = [
        (LD_W_ABS, OFF_ARCH, 0, 0),
        (JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        (RET_K, RET_KILL_PROCESS, 0, 0),
        (LD_W_ABS, OFF_NR, 0, 0),
        (JGE_K, X32_BIT, 0, 1),
        (RET_K, RET_KILL_PROCESS, 0, 0),
    ]
    for nr in blocked:                              # nr == blocked -> EPERM, else next test
        rows += [(JEQ_K, nr, 0, 1), (RET_K, eperm, 0, 0)]
    rows += [(JEQ_K, NR_CLONE3, 0, 1), (RET_K, RET_ERRNO | errno.ENOSYS, 0, 0)]
    rows += [                                       # clone(flags & CLONE_NEW*) -> EPERM
        (JEQ_K, NR_CLONE, 0, 3),
        (LD_W_ABS, OFF_ARG0, 0, 0),
        (JSET_K, CLONE_NS_FLAGS, 0, 5),
        (RET_K, eperm, 0, 0),
        (JEQ_K, NR_IOCTL, 0, 3),                    # ioctl(fd, TIOCSTI) -> EPERM
        (LD_W_ABS, OFF_ARG1, 0, 0),
        (JEQ_K, TIOCSTI, 0, 1),
        (RET_K, eperm, 0, 0),
        (RET_K, RET_ALLOW, 0, 0),
    ]
    return rows


def build_filter() -> bytes | None:
    """The filter as bytes for `bwrap --seccomp FD`, or None off x86_64."""
    if platform.machine() != "x86_64":
        return None
    return b"".join(_ins(code, k, jt, jf) for code, k, jt, jf in _program(
        sorted(BLOCKED_X86_64.values())))


def blocked_names() -> list[str]:
    """What the filter refuses, for the docs and `posttrain sandbox run --json`."""
    return sorted(BLOCKED_X86_64) + ["clone(CLONE_NEW*)", "clone3 (ENOSYS)", "ioctl(TIOCSTI)"]
