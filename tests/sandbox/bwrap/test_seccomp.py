"""The seccomp program is well formed, and what it promises holds inside a sandbox."""

import struct

from posttrain.sandbox.bwrap import seccomp


def _rows(program: bytes):
    return [struct.unpack("<HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]


def test_program_jumps_stay_inside_and_end_in_allow():
    program = seccomp.build_filter()
    assert program is not None and len(program) % 8 == 0
    rows = _rows(program)
    for i, (code, jt, jf, _) in enumerate(rows):
        if code & 0x07 == 0x05:                          # BPF_JMP: both targets inside
            assert i + 1 + max(jt, jf) < len(rows)
    assert rows[-1] == (seccomp.RET_K, 0, 0, seccomp.RET_ALLOW)
    assert rows[2][3] == seccomp.RET_KILL_PROCESS        # foreign architecture


def test_everyday_syscalls_still_work(sandbox):
    script = ("import subprocess, threading, socket, os\n"
              "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
              "print(subprocess.run(['true']).returncode)\n"
              "socket.socketpair()\n"
              "pid = os.fork()\n"
              "if pid == 0: os._exit(0)\n"
              "print(os.waitpid(pid, 0)[1])\n")
    sandbox.host_path("/app/probe.py").write_text(script)
    r = sandbox.exec("python3 /app/probe.py")
    assert r.exit_code == 0 and r.stdout.split() == ["0", "0"]


def test_nested_namespaces_refused(sandbox):
    r = sandbox.exec("unshare -U true; echo $?; unshare -n true; echo $?")
    assert r.stdout.split() == ["1", "1"]
