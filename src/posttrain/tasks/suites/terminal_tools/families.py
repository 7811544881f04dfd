"""The `terminal-tools` suite's six task families: each builds one task's files, oracle steps,
solution and verifier checks from a seeded random generator (the suite is suite.py)."""

from __future__ import annotations

import base64
import bz2
import hashlib
import io
import json
import random
import subprocess
import tarfile
from dataclasses import dataclass, field

from posttrain.errors import PosttrainError
from posttrain.tasks.suites.terminal_basics import STEMS, WORDS

# The agent's .git is copied and its config, hooks, grafts and replace refs dropped, so no
# program the agent configured (fsmonitor, filters, gpg, pager) runs in the verifier.
GIT_COPY = ('g=$(mktemp -d)/git && cp -r /app/project/.git "$g" && rm -rf "$g/hooks" "$g/info" '
            '"$g/shallow" "$g/refs/replace" && printf "[core]\\n\\trepositoryformatversion = 0\\n'
            '\\tbare = false\\n" > "$g/config"')
GIT = ('env GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 GIT_PAGER=cat GIT_NO_REPLACE_OBJECTS=1 '
       'git --git-dir="$g" --work-tree=/app/project -c core.hooksPath=/dev/null')
CONFIG = "git config --file /app/project/.git/config"     # reads only; runs nothing
SQLITE = "sqlite3 -init /dev/null -batch -readonly -safe /app/shop.db"


@dataclass
class ToolSpec:
    family: str
    instruction: str
    files: dict[str, str | bytes]          # under environment/app/
    steps: list[str]
    solve: str
    checks: list[str]                      # bash commands; all must succeed
    hidden: dict[str, str] = field(default_factory=dict)   # extra files under tests/


def _sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _git_commits(rng: random.Random) -> ToolSpec:
    name, email = f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()}", f"{rng.choice(WORDS)}@example.org"
    stems = rng.sample([s for s in STEMS if s != "notes"], 3)
    files = {f"project/{s}.txt": "\n".join(rng.sample(WORDS, 4)) + "\n" for s in stems}
    notes = "\n".join(rng.sample(WORDS, 5)) + "\n"
    files["project/notes.txt"] = notes
    first = " ".join(sorted(f"{s}.txt" for s in stems))
    msg = f"add {rng.choice(WORDS)} notes"
    return ToolSpec(
        "git-commits",
        f"Make /app/project a git repository (/app/project/.git) on branch main with exactly "
        f"two commits, both authored by {name} <{email}>, an identity set in the repository's "
        f"own config: the first, with message \"initial\", adds every file except notes.txt; "
        f"the second, with message \"{msg}\", adds notes.txt.",
        files,
        [f"cd /app/project && {c}" for c in (
            "git init -b main", "git add -- . ':!notes.txt' && git commit -m initial",
            f"git config user.name '{name}' && git config user.email '{email}'",
            "git commit -m initial", f"git add notes.txt && git commit -m '{msg}'")],
        # Plumbing, so that git leaves nothing (COMMIT_EDITMSG) that no check could read.
        f"cd /app/project && git init -q -b main && git config user.name '{name}' && "
        f"git config user.email '{email}'\ngit add -- . ':!notes.txt'\n"
        "c=$(git commit-tree -m initial \"$(git write-tree)\")\ngit add notes.txt\n"
        f"git update-ref refs/heads/main \"$(git commit-tree -p \"$c\" -m '{msg}' \"$(git write-tree)\")\"",
        [f'[ "$({CONFIG} --get user.name)|$({CONFIG} --get user.email)|'
         f'$({CONFIG} --get core.repositoryformatversion)" = "{name}|{email}|0" ]',
         GIT_COPY, f'[ "$({GIT} rev-parse --abbrev-ref HEAD)" = main ]',
         f'[ -z "$({GIT} status --porcelain)" ] && {GIT} status >/dev/null',
         f'[ "$({GIT} rev-list --count HEAD)" = 2 ]',
         f'[ "$({GIT} cat-file commit HEAD | sed "1,/^$/d")" = "{msg}" ]',
         f'[ "$({GIT} cat-file commit HEAD~1 | sed "1,/^$/d")" = initial ]',
         f'[ "$({GIT} log --format="%an <%ae>" | sort -u)" = "{name} <{email}>" ]',
         f'[ "$({GIT} ls-tree -r --name-only HEAD~1 | sort | xargs)" = "{first}" ]',
         f'[ "$({GIT} ls-tree -r --name-only HEAD | sort | xargs)" = "{" ".join(sorted(first.split() + ["notes.txt"]))}" ]',
         f'[ "$({GIT} cat-file blob HEAD:notes.txt | sha256sum)" = "{_sha(notes)}  -" ]'])


def _sqlite_report(rng: random.Random) -> ToolSpec:
    customers = rng.sample(WORDS, 4)
    rows = [(i + 1, rng.choice(customers), rng.randint(1, 500)) for i in range(rng.randint(8, 20))]
    who = rows[0][1]
    total = sum(a for _, c, a in rows if c == who)
    dump = ("CREATE TABLE order (id INTEGER PRIMARY KEY, customer TEXT, amount INTEGER);\n"
            + "".join(f"INSERT INTO order VALUES ({i}, '{c}', {a});\n" for i, c, a in rows))
    q = f"SELECT sum(amount) FROM \\\"order\\\" WHERE customer = '{who}'"
    return ToolSpec(
        "sqlite-report",
        f"Load the SQL dump /app/shop.sql into a new SQLite database /app/shop.db (if it does not "
        f"load, fix it; keep the table name `order`), then write the total amount of the orders "
        f"of customer {who} to /app/answer.txt.",
        {"shop.sql": dump},
        ["sqlite3 /app/shop.db < /app/shop.sql", "rm -f /app/shop.db && sed 's/ order / \"order\" /' "
         "/app/shop.sql | sqlite3 /app/shop.db", f"sqlite3 /app/shop.db \"{q}\" > /app/answer.txt"],
        "rm -f /app/shop.db\nsed 's/ order / \"order\" /' /app/shop.sql | sqlite3 /app/shop.db\n"
        f"sqlite3 /app/shop.db \"{q}\" > /app/answer.txt",
        [f'[ "$(tr -d "[:space:]" < /app/answer.txt)" = "{total}" ]',
         f'[ "$({SQLITE} \'SELECT count(*), sum(amount) FROM "order"\')" = '
         f'"{len(rows)}|{sum(a for *_, a in rows)}" ]'])


def _jq_select(rng: random.Random) -> ToolSpec:
    tags = rng.sample(WORDS, 3)
    names = rng.sample([f"{w}-{s}" for w in WORDS for s in STEMS], rng.randint(8, 14))
    prices = rng.sample(range(5, 500), len(names))
    items = []
    for name, price in zip(names, prices):
        item = {"name": name, "price": price, "tags": rng.sample(tags, rng.randint(1, 2))}
        if rng.random() < 0.8:
            item["stock"] = rng.choice([0, 0, 1, 3, 12])
        items.append(item)
    tag = tags[0]
    want = [i["name"] for i in sorted(items, key=lambda i: -i["price"])
            if tag in i["tags"] and i.get("stock", 0) > 0]
    doc = {"meta": {"source": rng.choice(STEMS), "count": len(items)}, "data": {"items": items}}
    expr = (f'[.data.items[] | select(any(.tags[]; . == "{tag}") and (.stock // 0) > 0)] '
            "| sort_by(-.price) | map(.name)")
    return ToolSpec(
        "jq-select",
        f"Write to /app/answer.json a JSON array with the names of the items in "
        f"/app/inventory.json that are tagged {tag} and in stock (stock above 0; an item "
        "without a stock field has none), most expensive first.",
        {"inventory.json": json.dumps(doc, indent=2) + "\n"},
        ["jq 'keys' /app/inventory.json", "jq '.data.items[0]' /app/inventory.json",
         f"jq -c '{expr}' /app/inventory.json > /app/answer.json"],
        f"jq -c '{expr}' /app/inventory.json > /app/answer.json",
        [f"[ \"$(jq -c . /app/answer.json)\" = '{json.dumps(want, separators=(',', ':'))}' ]"])


CALC_C = ("#include <math.h>\n#include <stdio.h>\n#define MOD {mod}\n\nint main(void) {{\n"
          "    long x, total = 0;\n    while (scanf(\"%ld\", &x) == 1)\n"
          "        total = (total * 31 + lround(pow((double)x, 2.0))) % MOD;\n"
          "    printf(\"%ld\\n\", total);\n    return 0;\n}}\n")
BROKEN_MAKEFILE = "CC = gcc\nCFLAGS = -Wall\n\ncalc: calc.c\n        $(CC) $(CFLAGS) -o calc calc.c\n"
FIXED_MAKEFILE = "CC = gcc\nCFLAGS = -Wall\n\ncalc: calc.c\n\t$(CC) $(CFLAGS) -o calc calc.c -lm\n"


def _calc(numbers: list[int], mod: int) -> int:
    total = 0
    for x in numbers:
        total = (total * 31 + x * x) % mod
    return total


def _make_build(rng: random.Random) -> ToolSpec:
    mod = rng.choice([1000003, 999983, 1000033, 998244353])
    given = [rng.randint(-999, 999) for _ in range(rng.randint(20, 60))]
    hidden = [rng.randint(-999, 999) for _ in range(40)]
    build = ('d=$(mktemp -d) && cp -r /app/calc/. "$d" && cd "$d" && rm -f calc && '
             'timeout 120 make >/dev/null 2>&1')
    return ToolSpec(
        "make-build",
        "/app/calc holds a small C program. Build it with `make` in /app/calc so that "
        "/app/calc/calc exists (if the build fails, fix the build, not the program), then write "
        "the output of `./calc < input.txt` to /app/answer.txt.",
        {"calc/calc.c": CALC_C.format(mod=mod), "calc/Makefile": BROKEN_MAKEFILE,
         "calc/input.txt": " ".join(map(str, given)) + "\n"},
        [f"cd /app/calc && {c}" for c in (
            "make", "sed -i 's/^        /\\t/' Makefile && make",
            "sed -i 's/calc.c$/calc.c -lm/' Makefile && make", "./calc < input.txt > /app/answer.txt")],
        f"cd /app/calc\nprintf '{FIXED_MAKEFILE.replace(chr(10), chr(92) + 'n').replace(chr(9), chr(92) + 't')}' > Makefile\n"
        "make\n./calc < input.txt > /app/answer.txt",
        [f'[ "$(tr -d "[:space:]" < /app/answer.txt)" = "{_calc(given, mod)}" ]',
         f'[ "$(timeout 10 /app/calc/calc < /tests/hidden.txt)" = "{_calc(hidden, mod)}" ]',
         f'{build} && [ "$(timeout 10 ./calc < /tests/hidden.txt)" = "{_calc(hidden, mod)}" ]'],
        {"hidden.txt": " ".join(map(str, hidden)) + "\n"})


def _openssl_decrypt(rng: random.Random) -> ToolSpec:
    plain = "\n".join(" ".join(rng.sample(WORDS, 5)) for _ in range(rng.randint(2, 5))) + "\n"
    password = f"{rng.choice(WORDS)}-{rng.randint(1000, 9999)}"
    salt = "".join(rng.choice("0123456789abcdef") for _ in range(16))
    cmd = ["openssl", "enc", "-aes-256-cbc", "-pbkdf2", "-iter", "10000", "-S", salt,
           "-pass", f"pass:{password}"]
    try:
        raw = subprocess.run(cmd, input=plain.encode(), capture_output=True, check=True,
                             timeout=30).stdout
        if not raw.startswith(b"Salted__"):      # OpenSSL 3 leaves the header out with -S
            raw = b"Salted__" + bytes.fromhex(salt) + raw
        text = base64.b64encode(raw).decode()
        enc = "".join(text[i:i + 64] + "\n" for i in range(0, len(text), 64))
    except (OSError, subprocess.CalledProcessError) as e:
        raise PosttrainError(f"suite terminal-tools: openssl is needed to generate openssl-decrypt: {e}")
    dec = ("openssl enc -d -aes-256-cbc -pbkdf2 -iter 10000 -a -pass file:/app/password.txt "
           "-in /app/secret.enc -out /app/secret.txt")
    return ToolSpec(
        "openssl-decrypt",
        "/app/secret.enc was encrypted with `openssl enc` using AES-256-CBC and a key derived "
        "with PBKDF2 (10000 iterations) from the password in /app/password.txt. Decrypt it "
        "and write the plain text to /app/secret.txt.",
        {"secret.enc": enc, "password.txt": password + "\n"},
        ["head -c 64 /app/secret.enc; file /app/secret.enc", dec.replace(" -a ", " "), dec],
        dec, [f'[ "$(sha256sum < /app/secret.txt)" = "{_sha(plain)}  -" ]'])


def _bz2_tar(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in sorted(members.items()):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
            tar.addfile(info, io.BytesIO(data))
    return bz2.compress(buf.getvalue(), 9)


def _tar_repack(rng: random.Random) -> ToolSpec:
    dirs = rng.sample(["etc/app", "etc/db", "srv/web", "opt/tool", "var/conf"], 3)
    names = rng.sample(STEMS, 6)
    members, confs = {}, {}
    for i, name in enumerate(names):
        ext = ".conf" if i % 2 == 0 else rng.choice([".txt", ".log", ".conf.bak"])
        text = f"{rng.choice(WORDS)} = {rng.randint(1, 99)}\n"
        members[f"backup/{dirs[i % 3]}/{name}{ext}"] = text
        if ext == ".conf":
            confs[f"{name}.conf"] = text
    listing = " ".join(sorted(confs))
    checks = [f'[ "$(tar -tzf /app/configs.tar.gz | sed "s|^\\./||" | sort | xargs)" = "{listing}" ]',
              'x=$(mktemp -d) && tar -xzf /app/configs.tar.gz -C "$x"']
    checks += [f'[ "$(sha256sum < "$x/{n}")" = "{_sha(t)}  -" ]' for n, t in sorted(confs.items())]
    solve = ("x=$(mktemp -d) && tar -xf /app/backup.tar.gz -C \"$x\"\ny=$(mktemp -d)\n"
             "find \"$x\" -name '*.conf' -exec cp {} \"$y\"/ \\;\n"
             "tar -czf /app/configs.tar.gz -C \"$y\" $(cd \"$y\" && ls)")
    return ToolSpec(
        "tar-repack",
        "Take every file whose name ends in .conf out of the archive /app/backup.tar.gz and "
        "pack them into a new gzip-compressed tar archive /app/configs.tar.gz, with the files "
        "at its top level (no directories).",
        {"backup.tar.gz": _bz2_tar(members)},
        ["mkdir -p /tmp/x && tar -xzf /app/backup.tar.gz -C /tmp/x", "file /app/backup.tar.gz",
         "tar -xjf /app/backup.tar.gz -C /tmp/x && find /tmp/x -name '*.conf'",
         "mkdir -p /tmp/y && find /tmp/x -name '*.conf' -exec cp {} /tmp/y/ \\;",
         "tar -czf /app/configs.tar.gz -C /tmp/y $(ls /tmp/y)"],
        solve, checks)


FAMILIES = {f.__name__.strip("_").replace("_", "-"): f for f in
            (_git_commits, _sqlite_report, _jq_select, _make_build, _openssl_decrypt, _tar_repack)}
