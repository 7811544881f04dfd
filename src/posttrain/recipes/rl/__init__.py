"""The `posttrain rl` recipe: asynchronous RL on tasks. Read run.py first; config.py is its
`[section]`s, engines.py, env.py, domains.py and cluster.py build what run.py composes."""
