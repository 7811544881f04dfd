"""The terminal-tools suite: multi-step tasks with git, sqlite3, jq, make, gcc, openssl and tar; its probes."""
